/* Wait steps and signals on SQLite (DESIGN §18, 0016_waits_and_signals.sql):
 * storing a signal, parking a claimed wait step, and taking the waiting
 * steps whose signal came or whose timeout passed back to in progress.
 * None of them records an outcome: the taker records it through `record`,
 * fenced by the claim that parked the step, so a wait ends through the
 * same path as any attempt (children, counters, settling, retries). */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

/* The columns of tk__sq_claim_columns for a waiting step s (its attempt
 * row a: the claim that parked it). */
#define CLAIM_COLUMNS                                                                       \
  "s.id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), s.attempts, s.max_attempts," \
  " s.retryable, s.run_at, s.last_delay_ms, s.backoff, a.owner, s.lease_expires_at,"        \
  " s.claim_id, COALESCE(s.item_index, -1)"

/* A signal that attempt (claim) ?2 of step ?1 may take: never delivered,
 * or delivered to an attempt that ended without applying it; one bound to
 * a claim (for_claim, 0018: a callback, a child's end) only by that claim. */
#define DELIVERABLE_SQL                                                                  \
  "SELECT " TK__SIGNAL_COLUMNS_SQL " FROM signals g"                                        \
  " LEFT JOIN attempts a ON a.id = g.claim_id WHERE g.step_id = ?1 AND (g.claim_id IS NULL" \
  " OR a.outcome IN ('lease_expired', 'fenced_out'))"                                     \
  " AND (g.for_claim IS NULL OR g.for_claim = ?2) ORDER BY g.id LIMIT 1"

int tk__sq_signal_columns(sqlite3_stmt *st, int col, tk__signal_rec *r, tk_err *err) {
  int oom = 0;
  r->id = sqlite3_column_int64(st, col);
  r->data = tk__sq_col_dup(st, col + 1, &oom);
  r->error = tk__sq_col_dup(st, col + 2, &oom);
  r->key = tk__sq_col_dup(st, col + 3, &oom);
  r->created_at = sqlite3_column_int64(st, col + 4);
  r->final = sqlite3_column_int(st, col + 5);
  r->retry_after_ms = sqlite3_column_int64(st, col + 6);
  tk__signal_source(r, sqlite3_column_int(st, col + 7));
  if (!oom) return 0;
  tk__signal_rec_free(r);
  return tk_err_set(err, TK_ENOMEM, "out of memory reading a signal");
}

/* The signal step_id may take now into *sig (id 0: none), delivered to
 * claim_id at now. Inside the caller's transaction. */
static int deliver(tk__sqlite *q, int64_t step_id, int64_t claim_id, int64_t now,
                   tk__signal_rec *sig, tk_err *err) {
  memset(sig, 0, sizeof *sig);
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_DELIVERABLE, DELIVERABLE_SQL, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  sqlite3_bind_int64(st, 2, claim_id);
  int found, rc = tk__sq_row(q, st, "signal", &found, err);
  if (rc == 0 && found) rc = tk__sq_signal_columns(st, 0, sig, err);
  sqlite3_reset(st);
  if (rc || !found) return rc;
  st = tk__sq_stmt(q, SQ_WAIT_DELIVER,
                   "UPDATE signals SET claim_id = ?1, delivered_at = ?2 WHERE id = ?3", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, claim_id);
  sqlite3_bind_int64(st, 2, now);
  sqlite3_bind_int64(st, 3, sig->id);
  if ((rc = tk__sq_done(q, st, err))) tk__signal_rec_free(sig);
  return rc;
}

/* The task's state, and its step `name` (not an instance): id, state;
 * TK_ENOENT naming what is missing. */
static int find_step(tk__sqlite *q, int64_t task_id, const char *name, char *task_state,
                     int64_t *step_id, char *step_state, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_TASK, "SELECT state FROM tasks WHERE id = ?1", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  int found, rc = tk__sq_row(q, st, "signal", &found, err);
  if (rc == 0 && found) snprintf(task_state, TK__STATE_MAX, "%s", tk__sq_text(st, 0));
  sqlite3_reset(st);
  if (rc) return rc;
  if (!found) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  st = tk__sq_stmt(q, SQ_WAIT_STEP,
                   "SELECT id, state FROM steps WHERE task_id = ?1 AND name = ?2"
                   " AND map_idx IS NULL",
                   err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  rc = tk__sq_row(q, st, "signal", &found, err);
  if (rc == 0 && found) {
    *step_id = sqlite3_column_int64(st, 0);
    snprintf(step_state, TK__STATE_MAX, "%s", tk__sq_text(st, 1));
  }
  sqlite3_reset(st);
  if (rc == 0 && !found)
    rc = tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)task_id, name);
  return rc;
}

/* One integer of statement id over step_id (TK__NONE for no row or NULL). */
static int step_scalar(tk__sqlite *q, int id, const char *sql, int64_t step_id, int64_t *out,
                       tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  int found, rc = tk__sq_row(q, st, "signal", &found, err);
  *out = rc == 0 && found && sqlite3_column_type(st, 0) != SQLITE_NULL
             ? sqlite3_column_int64(st, 0)
             : TK__NONE;
  sqlite3_reset(st);
  return rc;
}

/* signal_put inside the caller's transaction. */
static int signal_in(tk__sqlite *q, const tk__signal_req *r, tk__signal_ans *out, tk_err *err) {
  char task_state[TK__STATE_MAX];
  int64_t step_id = 0, pending_at, finished_at;
  int rc = find_step(q, r->task_id, r->step, task_state, &step_id, out->step_state, err);
  if (rc) return rc;
  if (r->key != NULL) {
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_BY_KEY,
                                   "SELECT id, created_at, claim_id IS NOT NULL FROM signals"
                                   " WHERE step_id = ?1 AND idem_key = ?2",
                                   err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, step_id);
    sqlite3_bind_text(st, 2, r->key, -1, SQLITE_STATIC);
    int found;
    rc = tk__sq_row(q, st, "signal", &found, err);
    if (rc == 0 && found) {
      out->duplicate = 1;
      out->signal_id = sqlite3_column_int64(st, 0);
      out->created_at = sqlite3_column_int64(st, 1);
      out->delivered = sqlite3_column_int(st, 2);
    }
    sqlite3_reset(st);
    if (rc || found) return rc;
  }
  if ((rc = step_scalar(q, SQ_WAIT_PENDING,
                        "SELECT min(created_at) FROM signals WHERE step_id = ?1"
                        " AND claim_id IS NULL",
                        step_id, &pending_at, err)) ||
      (rc = step_scalar(q, SQ_WAIT_FINISHED,
                        "SELECT max(at) FROM transitions WHERE step_id = ?1", step_id,
                        &finished_at, err)))
    return rc;
  if ((rc = tk__signal_plan(r->task_id, task_state, r->step, out->step_state, finished_at,
                            pending_at, err)))
    return rc;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_SIGNAL_PUT,
                                 "INSERT INTO signals (step_id, idem_key, data, error, created_at)"
                                 " VALUES (?1, ?2, ?3, ?4, ?5)",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  if (r->key) sqlite3_bind_text(st, 2, r->key, -1, SQLITE_STATIC);
  if (r->data) sqlite3_bind_text(st, 3, r->data, -1, SQLITE_STATIC);
  if (r->error) sqlite3_bind_text(st, 4, r->error, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, r->now);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  out->signal_id = sqlite3_last_insert_rowid(q->db);
  out->created_at = r->now;
  return 0;
}

int tk__sq_signal_put(tk_store *s, const tk__signal_req *r, tk__signal_ans *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  int rc = tk__signal_body_check(r->data, r->error, r->key, err);
  if (rc) return rc;
  if ((rc = tk__sq_begin(q, err))) return rc;
  rc = signal_in(q, r, out, err);
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  return rc;
}

/* step_wait inside the caller's transaction. */
static int wait_in(tk__sqlite *q, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_HELD,
                                 "SELECT 1 FROM steps WHERE id = ?1 AND state = 'in_progress'"
                                 " AND claim_id = ?2",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, w->step_id);
  sqlite3_bind_int64(st, 2, w->claim_id);
  int held, rc = tk__sq_row(q, st, "wait", &held, err);
  sqlite3_reset(st);
  if (rc) return rc;
  if (!held) return tk__heartbeat_refused(err, w->step_id, w->claim_id);
  if ((rc = deliver(q, w->step_id, w->claim_id, w->now, sig, err)) || sig->id > 0) return rc;
  st = tk__sq_stmt(q, SQ_WAIT_PARK,
                   "UPDATE steps SET state = 'waiting', lease_owner = NULL,"
                   " lease_expires_at = NULL, run_at = ?1 WHERE id = ?2",
                   err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, w->timeout_at);
  sqlite3_bind_int64(st, 2, w->step_id);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  sqlite3_stmt *at = tk__sq_stmt(q, SQ_WAIT_CLAIM, "SELECT attempt FROM attempts WHERE id = ?1",
                                 err);
  if (at == NULL) return TK_ESTORE;
  sqlite3_bind_int64(at, 1, w->claim_id);
  int found, attempt = 0;
  rc = tk__sq_row(q, at, "wait", &found, err);
  if (rc == 0 && found) attempt = sqlite3_column_int(at, 0);
  sqlite3_reset(at);
  if (rc) return rc;
  return tk__sq_transition(q, w->task_id, w->step_id, TK__STEP_IN_PROGRESS, TK__STEP_WAITING,
                           w->now, w->reason ? w->reason : TK__REASON_WAITING, attempt, err);
}

int tk__sq_step_wait(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(sig, 0, sizeof *sig);
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  rc = wait_in(q, w, sig, err);
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  if (rc) tk__signal_rec_free(sig), sig->id = 0;
  return rc;
}

/* Move waiting step x->step back to in progress under owner's lease, with
 * its signal or as timed out. Inside the caller's transaction. */
static int resume(tk__sqlite *q, tk__waited *x, const char *owner, int64_t now,
                  int64_t lease_ms, tk_err *err) {
  int rc = deliver(q, x->step.step_id, x->step.claim_id, now, &x->sig, err);
  if (rc) return rc;
  x->timed_out = x->sig.id == 0;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WAIT_RESUME,
                                 "UPDATE steps SET state = 'in_progress', lease_owner = ?1,"
                                 " lease_expires_at = ?2 WHERE id = ?3 AND state = 'waiting'",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, now + lease_ms);
  sqlite3_bind_int64(st, 3, x->step.step_id);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  x->step.lease_expires_at = now + lease_ms;
  snprintf(x->step.prev_state, sizeof x->step.prev_state, "%s", TK__STEP_WAITING);
  return tk__sq_transition(q, x->step.task_id, x->step.step_id, TK__STEP_WAITING,
                           TK__STEP_IN_PROGRESS, now,
                           x->timed_out      ? TK__REASON_WAIT_TIMEOUT
                           : x->sig.callback  ? TK__REASON_CALLBACK
                           : x->sig.child_end ? TK__REASON_CHILD_ENDED
                                              : TK__REASON_SIGNAL,
                           x->step.attempt, err);
}

/* wait_take inside the caller's transaction. */
static int take_in(tk__sqlite *q, int64_t now, const char *owner, int64_t lease_ms, int limit,
                   tk__waited *out, int *n, int64_t *next_at, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_WAIT_DUE,
      "SELECT " CLAIM_COLUMNS " FROM steps s JOIN tasks t ON t.id = s.task_id"
      " LEFT JOIN attempts a ON a.id = s.claim_id WHERE s.id IN ("
      " SELECT id FROM (SELECT id FROM steps INDEXED BY steps_waiting WHERE state = 'waiting'"
      " AND run_at <= ?1 ORDER BY run_at LIMIT ?2)"
      /* From the few undelivered signals to their steps (CROSS JOIN keeps
       * that order): the planner otherwise walks every waiting step. */
      " UNION SELECT g.step_id FROM signals g INDEXED BY signals_undelivered"
      " CROSS JOIN steps w ON w.id = g.step_id WHERE g.claim_id IS NULL AND w.state = 'waiting'"
      " AND (g.for_claim IS NULL OR g.for_claim = w.claim_id))"
      " ORDER BY s.run_at LIMIT ?2",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int(st, 2, limit);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    tk__waited *x = &out[*n];
    memset(x, 0, sizeof *x);
    char unused[TK__OWNER_MAX];
    tk__sq_claim_columns(st, &x->step, unused, sizeof unused);
    x->step.run_at = sqlite3_column_int64(st, 7);
    (*n)++;
  }
  sqlite3_reset(st);
  if ((rc = tk__sq_rows_end(q, rc, "waits due", err))) return rc;
  for (int i = 0; i < *n && rc == 0; i++) rc = resume(q, &out[i], owner, now, lease_ms, err);
  if (rc) return rc;
  st = tk__sq_stmt(q, SQ_WAIT_NEXT,
                   "SELECT min(run_at) FROM steps INDEXED BY steps_waiting"
                   " WHERE state = 'waiting'",
                   err);
  if (st == NULL) return TK_ESTORE;
  int found;
  rc = tk__sq_row(q, st, "next wait", &found, err);
  *next_at = rc == 0 && found && sqlite3_column_type(st, 0) != SQLITE_NULL
                 ? sqlite3_column_int64(st, 0)
                 : INT64_MAX;
  sqlite3_reset(st);
  return rc;
}

int tk__sq_wait_take(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                     tk__waited *out, int *n, int64_t *next_at, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *n = 0;
  *next_at = INT64_MAX;
  /* In the write transaction: a read outside one was seen to miss a
   * signal just committed by another process (docs/waiting.md). */
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  rc = take_in(q, now, owner, lease_ms, limit, out, n, next_at, err);
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  if (rc) {
    for (int i = 0; i < *n; i++) tk__signal_rec_free(&out[i].sig);
    *n = 0;
  }
  return rc;
}
