/* Deadlines on SQLite (DESIGN §3, 0017_deadlines.sql): a task's deadline
 * stored with it, and the deadlines that came looked at, each once: its
 * row goes, and a task still pending or in progress ends in error under
 * tk__deadline_plan's rule, its unfinished steps cancelled. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "store/rules.h"

int tk__sq_deadline_put(tk__sqlite *q, int64_t task_id, int64_t deadline_at, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_DEADLINE_SET,
                                 "UPDATE tasks SET deadline_at = ?1 WHERE id = ?2", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, deadline_at);
  sqlite3_bind_int64(st, 2, task_id);
  int rc = tk__sq_done(q, st, err);
  if (rc) return rc;
  st = tk__sq_stmt(q, SQ_DEADLINE_PUT,
                   "INSERT INTO deadlines (task_id, deadline_at) VALUES (?2, ?1)", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, deadline_at);
  sqlite3_bind_int64(st, 2, task_id);
  return tk__sq_done(q, st, err);
}

int tk__sq_deadline_first(tk__sqlite *q, int64_t *at, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_DEADLINE_FIRST,
                                 "SELECT min(deadline_at) FROM deadlines", err);
  if (st == NULL) return TK_ESTORE;
  int found, rc = tk__sq_row(q, st, "next deadline", &found, err);
  *at = rc == 0 && found && sqlite3_column_type(st, 0) != SQLITE_NULL
            ? sqlite3_column_int64(st, 0)
            : INT64_MAX;
  sqlite3_reset(st);
  return rc;
}

/* One due deadline as read: its task (state "" when the task is gone). */
typedef struct due {
  int64_t task_id, deadline_at;
  char state[TK__STATE_MAX];
} due;

/* The deadlines due by now, at most limit, into v; inside the caller's
 * transaction. */
static int due_read(tk__sqlite *q, int64_t now, int limit, due *v, int *n, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_DEADLINE_DUE,
                                 "SELECT d.task_id, d.deadline_at, t.state FROM deadlines d"
                                 " LEFT JOIN tasks t ON t.id = d.task_id"
                                 " WHERE d.deadline_at <= ?1 ORDER BY d.deadline_at, d.task_id"
                                 " LIMIT ?2",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int(st, 2, limit);
  int rc;
  *n = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < limit) {
    due *d = &v[(*n)++];
    d->task_id = sqlite3_column_int64(st, 0);
    d->deadline_at = sqlite3_column_int64(st, 1);
    const unsigned char *state = sqlite3_column_text(st, 2);
    snprintf(d->state, sizeof d->state, "%s", state ? (const char *)state : "");
  }
  sqlite3_reset(st);
  return tk__sq_rows_end(q, rc == SQLITE_ROW ? SQLITE_DONE : rc, "deadlines due", err);
}

/* Look at deadline d: its row goes; its task ends if the rule says so
 * (*ended). Inside the caller's transaction. */
static int look(tk__sqlite *q, const due *d, int64_t now, int *ended, tk_err *err) {
  tk__op_plan plan;
  tk__effects fx = {0};
  *ended = tk__deadline_plan(d->state, d->deadline_at, now, &plan);
  int rc = *ended ? tk__sq_cancel_task(q, &plan, d->task_id, d->state, now, &fx, err) : 0;
  if (rc) return rc;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_DEADLINE_DROP,
                                 "DELETE FROM deadlines WHERE task_id = ?1", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, d->task_id);
  return tk__sq_done(q, st, err);
}

int tk__sq_deadline_apply(tk_store *s, int64_t now, int limit, int64_t *out, int *n,
                          int64_t *next_at, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *n = 0;
  *next_at = INT64_MAX;
  /* Most looks find nothing due: a read, no write lock. */
  int rc = tk__sq_deadline_first(q, next_at, err);
  if (rc || *next_at > now || limit <= 0) return rc;
  due *v = calloc((size_t)limit, sizeof *v);
  if (v == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory looking at deadlines");
  int found = 0;
  if ((rc = tk__sq_begin(q, err)) == 0) {
    rc = due_read(q, now, limit, v, &found, err);
    for (int i = 0; rc == 0 && i < found; i++) {
      int ended;
      rc = look(q, &v[i], now, &ended, err);
      if (rc == 0 && ended) out[(*n)++] = v[i].task_id;
    }
    if (rc == 0) rc = tk__sq_deadline_first(q, next_at, err);
    if (rc == 0) rc = tk__sq_commit(q, err);
    else tk__sq_rollback(q);
  }
  if (rc) *n = 0;
  free(v);
  return rc;
}
