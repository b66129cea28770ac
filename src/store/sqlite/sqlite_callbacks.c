/* Callbacks of http steps on SQLite (DESIGN §18, 0018_callbacks.sql): an
 * attempt's token kept as its hash, a callback stored as a signal bound to
 * its attempt (delivered by the wait machinery, sqlite_wait.c), and the
 * heartbeat that extends a wait. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/rules.h"

/* An armed claim as callback_put and callback_extend read it. */
typedef struct armed {
  int64_t step_id, task_id, step_claim, timeout_ms, limit_at, prior_at;
  int attempt, held, waiting;
} armed;

int tk__sq_callback_arm(tk_store *s, const tk__callback_arm *a, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_CB_ARM,
      "INSERT INTO callbacks (claim_id, step_id, token_hash, timeout_ms, limit_at, created_at)"
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM steps WHERE id = ?2"
      " AND state = 'in_progress' AND claim_id = ?1)"
      " ON CONFLICT (claim_id) DO UPDATE SET token_hash = excluded.token_hash",
      err);
  if (st == NULL) rc = TK_ESTORE;
  if (rc == 0) {
    sqlite3_bind_int64(st, 1, a->claim_id);
    sqlite3_bind_int64(st, 2, a->step_id);
    sqlite3_bind_blob(st, 3, a->token_hash, TK__TOKEN_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, a->timeout_ms);
    sqlite3_bind_int64(st, 5, a->limit_at);
    sqlite3_bind_int64(st, 6, a->now);
    rc = tk__sq_done(q, st, err);
  }
  if (rc == 0 && sqlite3_changes(q->db) == 0)
    rc = tk__heartbeat_refused(err, a->step_id, a->claim_id);
  if (rc == 0) return tk__sq_commit(q, err);
  tk__sq_rollback(q);
  return rc;
}

/* The armed claim r names into *c and out (its step), inside the caller's
 * transaction: TK_ENOENT when there is none or the secret's hash differs. */
static int find(tk__sqlite *q, const tk__callback_req *r, armed *c, tk__callback_ans *out,
                tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_CB_FIND,
      "SELECT c.step_id, c.token_hash, c.timeout_ms, c.limit_at, s.task_id, s.name, s.state,"
      " s.claim_id, a.attempt, (SELECT created_at FROM signals WHERE for_claim = c.claim_id)"
      " FROM callbacks c JOIN steps s ON s.id = c.step_id JOIN attempts a ON a.id = c.claim_id"
      " WHERE c.claim_id = ?1",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, r->claim_id);
  int found, rc = tk__sq_row(q, st, "callback", &found, err);
  /* The hash of a secret: comparing it in any time tells nothing of it. */
  if (rc == 0 && found)
    found = sqlite3_column_bytes(st, 1) == TK__TOKEN_HASH_LEN &&
            memcmp(sqlite3_column_blob(st, 1), r->token_hash, TK__TOKEN_HASH_LEN) == 0;
  if (rc == 0 && found) {
    c->step_id = out->step_id = sqlite3_column_int64(st, 0);
    c->timeout_ms = sqlite3_column_int64(st, 2);
    c->limit_at = sqlite3_column_int64(st, 3);
    c->task_id = out->task_id = sqlite3_column_int64(st, 4);
    snprintf(out->step, sizeof out->step, "%s", tk__sq_text(st, 5));
    snprintf(out->step_state, sizeof out->step_state, "%s", tk__sq_text(st, 6));
    c->step_claim = sqlite3_column_int64(st, 7);
    c->attempt = out->attempt = sqlite3_column_int(st, 8);
    c->prior_at = sqlite3_column_type(st, 9) == SQLITE_NULL ? TK__NONE
                                                             : sqlite3_column_int64(st, 9);
    c->waiting = strcmp(out->step_state, TK__STEP_WAITING) == 0;
    c->held = c->step_claim == r->claim_id &&
              (c->waiting || strcmp(out->step_state, TK__STEP_IN_PROGRESS) == 0);
  }
  sqlite3_reset(st);
  if (rc == 0 && !found) rc = tk_err_set(err, TK_ENOENT, "no callback has this token");
  return rc;
}

/* callback_put inside the caller's transaction. */
static int put_in(tk__sqlite *q, const tk__callback_req *r, tk__callback_ans *out,
                  tk_err *err) {
  armed c;
  int rc = find(q, r, &c, out, err);
  if (rc == 0)
    rc = tk__callback_plan(c.task_id, out->step, c.attempt, c.held, out->step_state,
                           c.prior_at, err);
  if (rc) return rc;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_CB_PUT,
                                 "INSERT INTO signals (step_id, data, error, created_at,"
                                 " for_claim, final, retry_after_ms)"
                                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, c.step_id);
  if (r->data) sqlite3_bind_text(st, 2, r->data, -1, SQLITE_STATIC);
  if (r->error) sqlite3_bind_text(st, 3, r->error, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, r->now);
  sqlite3_bind_int64(st, 5, r->claim_id);
  sqlite3_bind_int(st, 6, r->final);
  if (r->retry_after_ms >= 0) sqlite3_bind_int64(st, 7, r->retry_after_ms);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  out->signal_id = sqlite3_last_insert_rowid(q->db);
  return 0;
}

int tk__sq_callback_put(tk_store *s, const tk__callback_req *r, tk__callback_ans *out,
                        tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  out->until = TK__NONE;
  if ((r->data == NULL) == (r->error == NULL))
    return tk_err_set(err, TK_EINVAL, "a callback carries either results or an error");
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  rc = put_in(q, r, out, err);
  if (rc == 0) return tk__sq_commit(q, err);
  tk__sq_rollback(q);
  return rc;
}

/* callback_extend inside the caller's transaction. */
static int extend_in(tk__sqlite *q, const tk__callback_req *r, int64_t extend_ms,
                     tk__callback_ans *out, tk_err *err) {
  armed c;
  int rc = find(q, r, &c, out, err);
  if (rc == 0)
    rc = tk__callback_plan(c.task_id, out->step, c.attempt, c.held, out->step_state, TK__NONE,
                           err);
  if (rc || !c.waiting) return rc;
  int64_t until = tk__callback_until(r->now, extend_ms, c.timeout_ms, c.limit_at);
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_CB_EXTEND,
                                 "UPDATE steps SET run_at = ?1 WHERE id = ?2"
                                 " AND state = 'waiting' AND claim_id = ?3",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, until);
  sqlite3_bind_int64(st, 2, c.step_id);
  sqlite3_bind_int64(st, 3, r->claim_id);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  out->until = until;
  return 0;
}

int tk__sq_callback_extend(tk_store *s, const tk__callback_req *r, int64_t extend_ms,
                           tk__callback_ans *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  out->until = TK__NONE;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  rc = extend_in(q, r, extend_ms, out, err);
  if (rc == 0) return tk__sq_commit(q, err);
  tk__sq_rollback(q);
  return rc;
}
