/* Wait steps and signals on PostgreSQL (DESIGN §18,
 * 0018_waits_and_signals.sql): storing a signal, parking a claimed wait
 * step, and taking the waiting steps whose signal came or whose timeout
 * passed back to in progress. None of them records an outcome: the taker
 * records it through `record`, fenced by the claim that parked the step,
 * so a wait ends through the same path as any attempt (children,
 * counters, settling, retries).
 *
 * Off the hot path, so each statement is sent on its own (PQexecParams,
 * unnamed), not prepared in a pipeline. Locks: each operation locks the
 * step's row (FOR UPDATE) before it reads the step's signals, so a signal
 * stored while its step is parked is seen by one or the other: stored
 * first, step_wait delivers it; parked first, the step waits and
 * wait_take finds the signal. wait_take skips locked steps, so any number
 * of orchestrators take waits at once, each step once. */
#include "store/postgres/postgres_wait.h"

#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q TK__PG_Q

/* A signal that attempt (claim) $2 of step $1 may take: never delivered,
 * or delivered to an attempt that ended without applying it; one bound to
 * a claim (for_claim, 0020: a callback, a child's end) only by that claim. */
static const char DELIVERABLE_SQL[] =
    "SELECT " TK__SIGNAL_COLUMNS_SQL " FROM signals g"
    " LEFT JOIN attempts a ON a.id = g.claim_id WHERE g.step_id = $1::bigint"
    " AND (g.claim_id IS NULL OR a.outcome IN ('lease_expired', 'fenced_out'))"
    " AND (g.for_claim IS NULL OR g.for_claim = $2::bigint) ORDER BY g.id LIMIT 1";

/* The waiting steps to take: those whose timeout passed ($1 now, the
 * ready rows of kind 4) and those a signal waits for, at most $2, locked
 * (skipping locked ones); each moved back to in progress under $3's
 * lease ($4 ms), its signal delivered to its claim, and its move
 * recorded. Returns the claim columns and the signal. */
static const char TAKE_SQL[] =
    "WITH c AS (SELECT s.id, s.claim_id FROM steps s WHERE s.id = ANY (ARRAY("
    " (SELECT r.step_id FROM ready r WHERE r.kind = 4 AND r.run_at <= $1::bigint"
    " ORDER BY r.run_at LIMIT $2::int)"
    " UNION (SELECT g.step_id FROM signals g JOIN steps w ON w.id = g.step_id"
    " WHERE g.claim_id IS NULL AND (g.for_claim IS NULL OR g.for_claim = w.claim_id))))"
    " AND s.state = " Q(TK__STEP_WAITING) " ORDER BY s.run_at LIMIT $2"
    " FOR UPDATE SKIP LOCKED),"
    " sg AS (SELECT DISTINCT ON (g.step_id) g.id, g.step_id, g.data, g.error, g.idem_key,"
    " g.created_at, g.final, COALESCE(g.retry_after_ms, -1) AS retry_after_ms,"
    " " TK__SIGNAL_SOURCE_SQL " AS source FROM signals g"
    " JOIN c ON c.id = g.step_id WHERE g.claim_id IS NULL"
    " AND (g.for_claim IS NULL OR g.for_claim = c.claim_id) ORDER BY g.step_id, g.id),"
    " gm AS (UPDATE signals g SET claim_id = c.claim_id, delivered_at = $1"
    " FROM sg JOIN c ON c.id = sg.step_id WHERE g.id = sg.id),"
    " u AS (UPDATE steps s SET state = " Q(TK__STEP_IN_PROGRESS) ", lease_owner = $3::text,"
    " lease_expires_at = $1 + $4::bigint FROM c WHERE s.id = c.id"
    " RETURNING s.id, s.task_id, s.idx, s.map_idx, s.attempts, s.max_attempts, s.retryable,"
    " s.run_at, s.last_delay_ms, s.backoff, s.claim_id, s.item_index, s.lease_expires_at),"
    " tr AS (INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason, attempt)"
    " SELECT u.task_id, u.id, " Q(TK__STEP_WAITING) ", " Q(TK__STEP_IN_PROGRESS) ", $1,"
    " CASE WHEN sg.id IS NULL THEN " Q(TK__REASON_WAIT_TIMEOUT) " WHEN sg.source = 1 THEN "
    Q(TK__REASON_CALLBACK) " WHEN sg.source = 2 THEN " Q(TK__REASON_CHILD_ENDED) " ELSE "
    Q(TK__REASON_SIGNAL)
    " END, u.attempts FROM u LEFT JOIN sg ON sg.step_id = u.id)"
    " SELECT u.id, u.task_id, t.template_id, COALESCE(u.map_idx, u.idx), u.attempts,"
    " u.max_attempts, u.retryable::int, u.run_at, u.last_delay_ms, u.backoff, u.claim_id,"
    " COALESCE(u.item_index, -1), u.lease_expires_at,"
    " sg.id, sg.data, sg.error, sg.idem_key, sg.created_at, sg.final, sg.retry_after_ms,"
    " sg.source"
    " FROM u JOIN tasks t ON t.id = u.task_id LEFT JOIN sg ON sg.step_id = u.id";

/* Run sql with the n text parameters v on pg's connection; *out the
 * result (PQclear it) when it is tuples or a command's. */
static int exec(tk__pg *pg, const char *sql, int n, const char *const *v, PGresult **out,
                const char *what, tk_err *err) {
  PGresult *r = PQexecParams(pg->conn, sql, n, NULL, v, NULL, NULL, 0);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
    if (out) *out = r;
    else PQclear(r);
    return 0;
  }
  char line[TK_ERR_MSG_MAX];
  snprintf(line, sizeof line, "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(pg->conn));
  line[strcspn(line, "\n")] = '\0';
  PQclear(r);
  if (PQstatus(pg->conn) != CONNECTION_OK)
    return tk_err_set(err, TK_EDISCONNECTED, "postgres: %s: connection lost: %s", what, line);
  return tk_err_set(err, TK_ESTORE, "postgres: %s: %s", what, line);
}

/* BEGIN on a usable connection. */
static int begin(tk__pg *pg, const char *what, tk_err *err) {
  int rc = tk__pg_usable(pg, what, err);
  return rc ? rc : exec(pg, "BEGIN", 0, NULL, NULL, what, err);
}

/* COMMIT after rc == 0 (with a notice when notify: one of a wait's news,
 * TK__PG_WAIT_NEWS, for a signal), else ROLLBACK. */
static int end(tk__pg *pg, int rc, int notify, const char *what, tk_err *err) {
  if (rc == 0 && notify == TK__PG_NOTIFY_CHANGE)
    rc = exec(pg, "SELECT pg_notify('" TK__PG_CHANNEL "', '')", 0, NULL, NULL, what, err);
  if (rc == 0 && notify == TK__PG_NOTIFY_SIGNAL)
    rc = exec(pg, "SELECT pg_notify('" TK__PG_CHANNEL "', '" TK__PG_WAIT_NEWS "')", 0, NULL,
              NULL, what, err);
  if (rc == 0) return exec(pg, "COMMIT", 0, NULL, NULL, what, err);
  if (PQstatus(pg->conn) == CONNECTION_OK) PQclear(PQexec(pg->conn, "ROLLBACK"));
  return rc;
}

/* Column col of row 0 of r copied (NULL kept), *oom set when it fails. */
static char *dup_col(const PGresult *r, int row, int col, int *oom) {
  return tk__dup(tk__pg_text(r, row, col), oom);
}

int tk__pg_signal_columns(const PGresult *r, int row, int col, tk__signal_rec *s, tk_err *err) {
  int oom = 0;
  s->id = tk__pg_i64(r, row, col);
  s->data = dup_col(r, row, col + 1, &oom);
  s->error = dup_col(r, row, col + 2, &oom);
  s->key = dup_col(r, row, col + 3, &oom);
  s->created_at = tk__pg_i64(r, row, col + 4);
  s->final = (int)tk__pg_i64(r, row, col + 5);
  s->retry_after_ms = tk__pg_i64(r, row, col + 6);
  tk__signal_source(s, (int)tk__pg_i64(r, row, col + 7));
  if (!oom) return 0;
  tk__signal_rec_free(s);
  s->id = 0;
  return tk_err_set(err, TK_ENOMEM, "out of memory reading a signal");
}

/* One integer (TK__NONE for no row or NULL) of sql over the parameters. */
static int scalar(tk__pg *pg, const char *sql, int n, const char *const *v, int64_t *out,
                  tk_err *err) {
  PGresult *r;
  int rc = exec(pg, sql, n, v, &r, "signal", err);
  if (rc) return rc;
  *out = PQntuples(r) > 0 ? tk__pg_i64(r, 0, 0) : TK__NONE;
  PQclear(r);
  return 0;
}

/* signal_put inside the caller's transaction, in three statements: the
 * step locked (with its task's state), then what the rules look at (the
 * key's earlier signal, one not yet delivered), read after the lock so
 * that a signal another transaction stored while this one waited for it
 * is seen, then the insert with its notice. When the step finished, the
 * refusal's time is read from its moves (a view whose planning alone
 * took 5 ms: never on the way of a signal that is taken). */
static int signal_in(tk__pg *pg, const tk__signal_req *q, tk__signal_ans *out, tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, q->task_id);
  tk__pg_arg_text(&a, q->step);
  PGresult *r;
  int rc = exec(pg,
                "SELECT t.state, s.id, s.state FROM tasks t LEFT JOIN LATERAL (SELECT id, state"
                " FROM steps WHERE task_id = t.id AND name = $2::text AND map_idx IS NULL"
                " FOR UPDATE) s ON true WHERE t.id = $1::bigint",
                2, a.v, &r, "signal", err);
  if (rc) return rc;
  char task_state[TK__STATE_MAX];
  int found = PQntuples(r) == 1, has_step = found && !PQgetisnull(r, 0, 1);
  if (found) tk__pg_copy(task_state, sizeof task_state, r, 0, 0);
  int64_t step_id = has_step ? tk__pg_i64(r, 0, 1) : 0;
  if (has_step) tk__pg_copy(out->step_state, sizeof out->step_state, r, 0, 2);
  PQclear(r);
  if (!found) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)q->task_id);
  if (!has_step)
    return tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)q->task_id,
                      q->step);
  tk__pg_args b = {0};
  tk__pg_arg_i64(&b, step_id);
  tk__pg_arg_text(&b, q->key);
  if ((rc = exec(pg,
                 "SELECT k.id, k.created_at, k.claim_id IS NOT NULL,"
                 " (SELECT min(created_at) FROM signals WHERE step_id = $1::bigint"
                 " AND claim_id IS NULL)"
                 " FROM (SELECT 1) one LEFT JOIN signals k ON k.step_id = $1::bigint"
                 " AND k.idem_key = $2::text",
                 2, b.v, &r, "signal", err)))
    return rc;
  out->duplicate = q->key != NULL && !PQgetisnull(r, 0, 0);
  if (out->duplicate) {
    out->signal_id = tk__pg_i64(r, 0, 0);
    out->created_at = tk__pg_i64(r, 0, 1);
    out->delivered = tk__pg_bool(r, 0, 2);
  }
  int64_t pending_at = tk__pg_i64(r, 0, 3), finished_at = TK__NONE;
  PQclear(r);
  if (out->duplicate) return 0;
  tk__pg_args f = {0};
  tk__pg_arg_i64(&f, step_id);
  tk__pg_arg_i64(&f, q->task_id);
  if (tk__step_state_finished(out->step_state) &&
      (rc = scalar(pg,
                   "SELECT max(at) FROM moves WHERE task_id = $2::bigint AND step_id = $1::bigint",
                   2, f.v, &finished_at, err)))
    return rc;
  if ((rc = tk__signal_plan(q->task_id, task_state, q->step, out->step_state, finished_at,
                            pending_at, err)))
    return rc;
  tk__pg_args c = {0};
  tk__pg_arg_i64(&c, step_id);
  tk__pg_arg_text(&c, q->key);
  tk__pg_arg_text(&c, q->data);
  tk__pg_arg_text(&c, q->error);
  tk__pg_arg_i64(&c, q->now);
  char *tmp_data, *tmp_error;
  c.v[2] = tk__pg_utf8(q->data, &tmp_data);
  c.v[3] = tk__pg_utf8(q->error, &tmp_error);
  rc = exec(pg,
            "WITH i AS (INSERT INTO signals (step_id, idem_key, data, error, created_at)"
            " VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::bigint) RETURNING id)"
            " SELECT id, pg_notify('" TK__PG_CHANNEL "', '" TK__PG_WAIT_NEWS "') FROM i",
            5, c.v, &r, "signal", err);
  free(tmp_data);
  free(tmp_error);
  if (rc) return rc;
  out->signal_id = tk__pg_i64(r, 0, 0);
  out->created_at = q->now;
  PQclear(r);
  return 0;
}

int tk__pg_signal_put(tk_store *s, const tk__signal_req *q, tk__signal_ans *out, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  memset(out, 0, sizeof *out);
  int rc = tk__signal_body_check(q->data, q->error, q->key, err);
  if (rc == 0) rc = begin(pg, "signal", err);
  if (rc) return rc;
  rc = signal_in(pg, q, out, err);
  /* The insert sent the notice (TK__PG_WAIT_NEWS) itself. */
  return end(pg, rc, TK__PG_NOTIFY_NONE, "signal", err);
}

/* The signal step_id may take now, delivered to claim_id at now, into
 * *sig (id 0: none). Inside the caller's transaction, the step locked. */
static int deliver(tk__pg *pg, int64_t step_id, int64_t claim_id, int64_t now,
                   tk__signal_rec *sig, tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, step_id);
  tk__pg_arg_i64(&a, claim_id);
  PGresult *r;
  int rc = exec(pg, DELIVERABLE_SQL, 2, a.v, &r, "wait", err);
  if (rc) return rc;
  if (PQntuples(r) == 1) rc = tk__pg_signal_columns(r, 0, 0, sig, err);
  PQclear(r);
  if (rc || sig->id == 0) return rc;
  tk__pg_args b = {0};
  tk__pg_arg_i64(&b, claim_id);
  tk__pg_arg_i64(&b, now);
  tk__pg_arg_i64(&b, sig->id);
  return exec(pg,
              "UPDATE signals SET claim_id = $1::bigint, delivered_at = $2::bigint"
              " WHERE id = $3::bigint",
              3, b.v, NULL, "wait", err);
}

/* step_wait inside the caller's transaction; *parked when the step now
 * waits. */
static int wait_in(tk__pg *pg, const tk__wait_req *w, tk__signal_rec *sig, int *parked,
                   tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, w->step_id);
  tk__pg_arg_i64(&a, w->claim_id);
  PGresult *r;
  int rc = exec(pg,
                "SELECT s.attempts FROM steps s WHERE s.id = $1::bigint AND s.state = "
                Q(TK__STEP_IN_PROGRESS) " AND s.claim_id = $2::bigint FOR UPDATE",
                2, a.v, &r, "wait", err);
  if (rc) return rc;
  int held = PQntuples(r) == 1;
  int64_t attempt = held ? tk__pg_i64(r, 0, 0) : 0;
  PQclear(r);
  if (!held) return tk__heartbeat_refused(err, w->step_id, w->claim_id);
  if ((rc = deliver(pg, w->step_id, w->claim_id, w->now, sig, err)) || sig->id > 0) return rc;
  tk__pg_args b = {0};
  tk__pg_arg_i64(&b, w->step_id);
  tk__pg_arg_i64(&b, w->timeout_at);
  tk__pg_arg_i64(&b, w->task_id);
  tk__pg_arg_i64(&b, w->now);
  tk__pg_arg_i64(&b, attempt);
  tk__pg_arg_text(&b, w->reason ? w->reason : TK__REASON_WAITING);
  rc = exec(pg,
            "WITH u AS (UPDATE steps SET state = " Q(TK__STEP_WAITING) ", lease_owner = NULL,"
            " lease_expires_at = NULL, run_at = $2::bigint WHERE id = $1::bigint RETURNING id)"
            " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason,"
            " attempt) SELECT $3::bigint, id, " Q(TK__STEP_IN_PROGRESS) ", "
            Q(TK__STEP_WAITING) ", $4::bigint, $6::text, $5::int FROM u",
            6, b.v, NULL, "wait", err);
  *parked = rc == 0;
  return rc;
}

int tk__pg_step_wait(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  memset(sig, 0, sizeof *sig);
  int parked = 0;
  int rc = begin(pg, "wait", err);
  if (rc) return rc;
  rc = wait_in(pg, w, sig, &parked, err);
  /* A new timeout: other orchestrators learn it at their next wait_take. */
  rc = end(pg, rc, parked ? TK__PG_NOTIFY_CHANGE : TK__PG_NOTIFY_NONE, "wait", err);
  if (rc) {
    tk__signal_rec_free(sig);
    sig->id = 0;
  }
  return rc;
}

/* Row i of TAKE_SQL's result into x. */
static int taken_row(const PGresult *r, int i, tk__waited *x, tk_err *err) {
  memset(x, 0, sizeof *x);
  tk__claimed *c = &x->step;
  c->step_id = tk__pg_i64(r, i, 0);
  c->task_id = tk__pg_i64(r, i, 1);
  c->template_id = tk__pg_i64(r, i, 2);
  c->idx = (int)tk__pg_i64(r, i, 3);
  c->attempt = (int)tk__pg_i64(r, i, 4);
  c->max_attempts = (int)tk__pg_i64(r, i, 5);
  c->retryable = (int)tk__pg_i64(r, i, 6);
  c->run_at = tk__pg_i64(r, i, 7);
  c->last_delay_ms = tk__pg_i64(r, i, 8);
  tk__pg_copy(c->backoff, sizeof c->backoff, r, i, 9);
  c->claim_id = tk__pg_i64(r, i, 10);
  c->item_index = (int)tk__pg_i64(r, i, 11);
  c->lease_expires_at = tk__pg_i64(r, i, 12);
  snprintf(c->prev_state, sizeof c->prev_state, "%s", TK__STEP_WAITING);
  if (PQgetisnull(r, i, 13)) {
    x->timed_out = 1;
    return 0;
  }
  return tk__pg_signal_columns(r, i, 13, &x->sig, err);
}

int tk__pg_wait_take(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                     tk__waited *out, int *n, int64_t *next_at, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  *n = 0;
  *next_at = INT64_MAX;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_i64(&a, limit);
  tk__pg_arg_text(&a, owner);
  tk__pg_arg_i64(&a, lease_ms);
  /* Anything to take? One read outside a transaction first: an engine
   * asks after every change it sees. */
  PGresult *r = NULL;
  int rc = tk__pg_usable(pg, "take waits", err);
  if (rc == 0)
    rc = exec(pg,
              "SELECT (SELECT min(run_at) FROM ready WHERE kind = 4), EXISTS (SELECT 1 FROM signals"
              " g JOIN steps s ON s.id = g.step_id WHERE g.claim_id IS NULL AND s.state = "
              Q(TK__STEP_WAITING) " AND (g.for_claim IS NULL OR g.for_claim = s.claim_id))",
              0, NULL, &r, "take waits", err);
  if (rc) return rc;
  int64_t first = tk__pg_i64(r, 0, 0);
  int signalled = tk__pg_bool(r, 0, 1);
  PQclear(r);
  r = NULL;
  *next_at = first == TK__NONE ? INT64_MAX : first;
  if (!signalled && *next_at > now) return 0;
  *next_at = INT64_MAX;
  if ((rc = begin(pg, "take waits", err))) return rc;
  if ((rc = exec(pg, TAKE_SQL, 4, a.v, &r, "take waits", err)) == 0) {
    int rows = PQntuples(r);
    for (int i = 0; i < rows && i < limit && rc == 0; i++)
      if ((rc = taken_row(r, i, &out[i], err)) == 0) (*n)++;
    PQclear(r);
  }
  if (rc == 0)
    rc = scalar(pg,
                "SELECT min(run_at) FROM ready WHERE kind = 4", 0, NULL, next_at, err);
  if (rc == 0 && *next_at == TK__NONE) *next_at = INT64_MAX;
  /* The steps taken are in progress under this owner's lease: a queue's
   * room is counted by it. Nothing waits on their move. */
  rc = end(pg, rc, TK__PG_NOTIFY_NONE, "take waits", err);
  if (rc) {
    for (int i = 0; i < *n; i++) tk__signal_rec_free(&out[i].sig);
    *n = 0;
  }
  return rc;
}

int tk__pg_wait_exec(tk__pg *pg, const char *sql, int n, const char *const *v, PGresult **out,
                     const char *what, tk_err *err) {
  return exec(pg, sql, n, v, out, what, err);
}

int tk__pg_wait_begin(tk__pg *pg, const char *what, tk_err *err) { return begin(pg, what, err); }

int tk__pg_wait_end(tk__pg *pg, int rc, int notify, const char *what, tk_err *err) {
  return end(pg, rc, notify, what, err);
}
