/* Transition rows (the audit trail of DESIGN §2) wait in memory until their
 * transaction commits and are then written by multi-row INSERTs. A group of
 * outcomes writes two per step, and a statement per row was a fifth of what
 * recording an outcome cost. The rows are part of the same transaction as
 * the state change they describe: tk__sq_commit writes them before COMMIT,
 * tk__sq_rollback drops them with everything else. */
#include "store/sqlite/sqlite_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLUMNS 7

struct tk__sq_transition_row {
  int64_t task_id, step_id, at; /* step_id 0: a task transition */
  int attempt;                  /* 0: none */
  char from[24], to[24], reason[160]; /* from "": none (a new task) */
};

int tk__sq_transition(tk__sqlite *q, int64_t task_id, int64_t step_id, const char *from,
                      const char *to, int64_t at, const char *reason, int attempt, tk_err *err) {
  if (q->ntrans == q->trans_cap) {
    int cap = q->trans_cap ? 2 * q->trans_cap : 256;
    tk__sq_transition_row *grown = realloc(q->trans, (size_t)cap * sizeof *grown);
    if (grown == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory for transition rows");
    q->trans = grown;
    q->trans_cap = cap;
  }
  /* States and reasons are the store's own short names. */
  assert(strlen(to) < sizeof q->trans->to && strlen(reason) < sizeof q->trans->reason);
  assert(from == NULL || strlen(from) < sizeof q->trans->from);
  tk__sq_transition_row *r = &q->trans[q->ntrans++];
  r->task_id = task_id;
  r->step_id = step_id;
  r->at = at;
  r->attempt = attempt;
  /* Copied as they are (the lengths are asserted above): two of these per
   * step made snprintf a visible cost. */
  if (from == NULL) from = "";
  memcpy(r->from, from, strlen(from) + 1);
  memcpy(r->to, to, strlen(to) + 1);
  memcpy(r->reason, reason, strlen(reason) + 1);
  return 0;
}

/* Bind row r to parameters first.. of st. */
static void bind_row(sqlite3_stmt *st, int first, const tk__sq_transition_row *r) {
  sqlite3_bind_int64(st, first, r->task_id);
  if (r->step_id > 0) sqlite3_bind_int64(st, first + 1, r->step_id);
  if (r->from[0]) sqlite3_bind_text(st, first + 2, r->from, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, first + 3, r->to, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, first + 4, r->at);
  sqlite3_bind_text(st, first + 5, r->reason, -1, SQLITE_STATIC);
  if (r->attempt > 0) sqlite3_bind_int(st, first + 6, r->attempt);
}

int tk__sq_transitions_flush(tk__sqlite *q, tk_err *err) {
  int done = 0, rc = 0;
  while (rc == 0 && done < q->ntrans) {
    /* Groups of TK__SQ_ROWS_PER_INSERT, the rest one by one. */
    int rows = q->ntrans - done >= TK__SQ_ROWS_PER_INSERT ? TK__SQ_ROWS_PER_INSERT : 1;
    sqlite3_stmt *st = tk__sq_insert_rows(q, SQ_TRANSITION, SQ_TRANSITIONS_MANY,
                                          "INSERT INTO transitions (task_id, step_id, from_state,"
                                          " to_state, at, reason, attempt)",
                                          COLUMNS, rows, err);
    if (st == NULL) {
      rc = TK_ESTORE;
      break;
    }
    for (int i = 0; i < rows; i++) bind_row(st, 1 + i * COLUMNS, &q->trans[done + i]);
    rc = tk__sq_done(q, st, err);
    done += rows;
  }
  q->ntrans = 0;
  return rc;
}

void tk__sq_transitions_drop(tk__sqlite *q) { q->ntrans = 0; }

void tk__sq_transitions_free(tk__sqlite *q) {
  free(q->trans);
  q->trans = NULL;
  q->ntrans = q->trans_cap = 0;
}
