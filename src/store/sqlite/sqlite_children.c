/* Child tasks on SQLite (DESIGN §18, 0019_child_tasks.sql): starting a
 * step's child in the transaction that parks the step, storing a child's
 * end, and reading a task's family. A child's end is a signal bound to
 * the parent's claim, which wait_take delivers, so the parent's attempt
 * ends through the ordinary outcome path. Off the hot path: statements
 * are prepared per call, not cached. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/rules.h"

/* sql prepared on q's connection, NULL with err set. */
static sqlite3_stmt *prep(tk__sqlite *q, const char *sql, tk_err *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) {
    tk__sq_fail(q, "child task", err);
    return NULL;
  }
  return st;
}

/* Run st (no rows wanted) and finalize it. */
static int run(tk__sqlite *q, sqlite3_stmt *st, tk_err *err) {
  if (st == NULL) return TK_ESTORE;
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "child task", err);
  sqlite3_finalize(st);
  return rc;
}

/* The signal of a child's end, as PostgreSQL's trigger tasks_child_end
 * stores it (0021_child_tasks.sql, 0022_child_end_once.sql): complete
 * brings the results of the child's leaf steps (steps no other step
 * depends on, by name; null for one without results), error and cancelled
 * fail the parent's attempt. Only its first end is the claim's signal: a
 * child an operator retried after it ended ends again, outcome of no
 * attempt (as after the parent step's timeout). */
static const char CHILD_END_SQL[] =
    "INSERT INTO signals (step_id, data, error, created_at, for_claim)"
    " SELECT t.parent_step_id,"
    " CASE WHEN t.state = 'complete' THEN"
    " (SELECT COALESCE(json_group_object(l.name, json(l.results)), '{}') FROM"
    " (SELECT s.name, s.results FROM steps s WHERE s.task_id = t.id AND s.map_idx IS NULL"
    " AND NOT EXISTS (SELECT 1 FROM template_edges e WHERE e.template_id = t.template_id"
    " AND e.parent_idx = s.idx) ORDER BY s.idx) l) END,"
    " CASE t.state"
    " WHEN 'error' THEN 'child task ' || t.id || ' ended in error' ||"
    " COALESCE((SELECT ': step ' || s.name || ': ' || COALESCE(s.last_error, 'failed')"
    " FROM steps s WHERE s.task_id = t.id AND s.state = 'error'"
    " ORDER BY s.idx LIMIT 1), '')"
    " WHEN 'cancelled' THEN 'child task ' || t.id || ' was cancelled' END,"
    " t.updated_at, t.parent_claim_id"
    " FROM tasks t WHERE t.id = ?1 AND t.parent_claim_id IS NOT NULL"
    " AND t.state IN ('complete', 'error', 'cancelled')"
    " AND NOT EXISTS (SELECT 1 FROM signals g WHERE g.for_claim = t.parent_claim_id)";

int tk__sq_child_end(tk__sqlite *q, int64_t task_id, int maybe_child, const char *from,
                     const char *to, tk_err *err) {
  if (!maybe_child || strcmp(from, to) == 0 || !tk__task_state_terminal(to)) return 0;
  sqlite3_stmt *st = prep(q, CHILD_END_SQL, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  return run(q, st, err);
}

/* child_start inside the caller's transaction. */
static int start_in(tk__sqlite *q, tk__child_req *c, tk_err *err) {
  sqlite3_stmt *st = prep(q,
                          "SELECT 1 FROM steps WHERE id = ?1 AND state = 'in_progress'"
                          " AND claim_id = ?2",
                          err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, c->step_id);
  sqlite3_bind_int64(st, 2, c->claim_id);
  int held, rc = tk__sq_row(q, st, "child task", &held, err);
  sqlite3_finalize(st);
  if (rc) return rc;
  if (!held) return tk__heartbeat_refused(err, c->step_id, c->claim_id);
  if ((rc = tk__sq_task_insert(q, c->task, &c->child_id, &c->existed, err))) return rc;
  if (!c->existed) {
    st = prep(q,
              "UPDATE tasks SET parent_task_id = ?1, parent_step_id = ?2, parent_attempt = ?3,"
              " parent_claim_id = ?4 WHERE id = ?5",
              err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, c->task_id);
    sqlite3_bind_int64(st, 2, c->step_id);
    sqlite3_bind_int(st, 3, c->attempt);
    sqlite3_bind_int64(st, 4, c->claim_id);
    sqlite3_bind_int64(st, 5, c->child_id);
    if ((rc = run(q, st, err))) return rc;
  }
  st = prep(q,
            "UPDATE steps SET state = 'waiting', lease_owner = NULL, lease_expires_at = NULL,"
            " run_at = ?1 WHERE id = ?2",
            err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, c->timeout_at);
  sqlite3_bind_int64(st, 2, c->step_id);
  if ((rc = run(q, st, err))) return rc;
  return tk__sq_transition(q, c->task_id, c->step_id, TK__STEP_IN_PROGRESS, TK__STEP_WAITING,
                           c->now, TK__REASON_CHILD_WAITING, c->attempt, err);
}

int tk__sq_child_start(tk_store *s, tk__child_req *c, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  c->child_id = 0;
  c->existed = 0;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  rc = start_in(q, c, err);
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  return rc;
}

/* The links of rows of st (columns: child, state, created, finished,
 * parent task, parent step id, its name, attempt) into a new array. */
static int links(tk__sqlite *q, sqlite3_stmt *st, tk__child_rec **out, int *n, tk_err *err) {
  int cap = 0, rc, oom = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)out, &cap, *n + 1, sizeof **out)) {
      oom = 1;
      break;
    }
    tk__child_rec *r = &(*out)[(*n)++];
    r->task_id = sqlite3_column_int64(st, 0);
    snprintf(r->state, sizeof r->state, "%s", tk__sq_text(st, 1));
    r->created_at = tk__sq_col_i64(st, 2);
    r->finished_at = tk__sq_col_i64(st, 3);
    r->parent_task_id = sqlite3_column_int64(st, 4);
    r->parent_step_id = sqlite3_column_int64(st, 5);
    r->parent_step = tk__sq_col_dup(st, 6, &oom);
    r->attempt = sqlite3_column_int(st, 7);
  }
  if (oom) return tk_err_set(err, TK_ENOMEM, "out of memory reading child tasks");
  return tk__sq_rows_end(q, rc, "child tasks", err);
}

#define LINK_SQL                                                                        \
  "SELECT c.id, c.state, c.created_at, c.finished_at, c.parent_task_id, c.parent_step_id," \
  " s.name, c.parent_attempt FROM tasks c JOIN steps s ON s.id = c.parent_step_id WHERE "

int tk__sq_task_family(tk_store *s, int64_t task_id, tk__child_rec *parent,
                       tk__child_rec **children, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(parent, 0, sizeof *parent);
  *children = NULL;
  *n = 0;
  tk__child_rec *up = NULL;
  int nup = 0, rc = TK_ESTORE;
  sqlite3_stmt *st = prep(q, LINK_SQL "c.id = ?1", err);
  if (st != NULL) {
    sqlite3_bind_int64(st, 1, task_id);
    rc = links(q, st, &up, &nup, err);
    sqlite3_finalize(st);
  }
  if (rc == 0 && nup == 1) {
    *parent = up[0];
    up[0].parent_step = NULL;
  }
  tk__child_recs_free(up, nup);
  if (rc) return rc;
  if ((st = prep(q, LINK_SQL "c.parent_task_id = ?1 ORDER BY c.id", err)) == NULL)
    return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  rc = links(q, st, children, n, err);
  sqlite3_finalize(st);
  if (rc) {
    tk__child_recs_free(*children, *n);
    *children = NULL;
    *n = 0;
    free(parent->parent_step);
    memset(parent, 0, sizeof *parent);
  }
  return rc;
}

/* Most unfinished children cancelled with a parent at once; more are
 * found by another look. */
#define CASCADE_BATCH 64

int tk__sq_children_cancel(tk__sqlite *q, int64_t task_id, int64_t now, tk_err *err) {
  tk__op_plan plan = {.action = TK__OP_CANCEL, .cancel_task = 1, .task_to = TK__TASK_CANCELLED,
                      .reason = TK__REASON_PARENT_ENDED,
                      .step_reason = TK__REASON_PARENT_ENDED};
  for (;;) {
    sqlite3_stmt *st = prep(q,
                            "SELECT id, state FROM tasks WHERE parent_task_id = ?1"
                            " AND state IN ('pending', 'in_progress') ORDER BY id LIMIT ?2",
                            err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, task_id);
    sqlite3_bind_int(st, 2, CASCADE_BATCH);
    int64_t ids[CASCADE_BATCH];
    char states[CASCADE_BATCH][TK__STATE_MAX];
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      ids[n] = sqlite3_column_int64(st, 0);
      snprintf(states[n++], TK__STATE_MAX, "%s", tk__sq_text(st, 1));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return tk__sq_fail(q, "cancel child tasks", err);
    /* Each child's own children too: tk__sq_cancel_task comes back here. */
    for (int i = 0; i < n; i++) {
      tk__effects fx;
      if ((rc = tk__sq_cancel_task(q, &plan, ids[i], states[i], now, &fx, err))) return rc;
    }
    if (n < CASCADE_BATCH) return 0;
  }
}
