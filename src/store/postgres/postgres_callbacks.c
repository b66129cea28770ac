/* Callbacks of http steps on PostgreSQL (DESIGN §18, 0020_callbacks.sql):
 * an attempt's token kept as its hash, a callback stored as a signal bound
 * to its attempt (delivered by the wait machinery, postgres_wait.c), and
 * the heartbeat that extends a wait. Each locks the step's row first, as
 * signal_put does, so a callback and the step's park are ordered. */
#include "store/postgres/postgres_wait.h"

#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/rules.h"

#define Q TK__PG_Q

/* An armed claim as callback_put and callback_extend read it. */
typedef struct armed {
  int64_t step_id, task_id, timeout_ms, limit_at, prior_at;
  int attempt, held, waiting;
} armed;

/* A hash as hex text for decode(..., 'hex'). */
static void hex(const unsigned char h[TK__TOKEN_HASH_LEN], char out[2 * TK__TOKEN_HASH_LEN + 1]) {
  for (int i = 0; i < TK__TOKEN_HASH_LEN; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

int tk__pg_callback_arm(tk_store *s, const tk__callback_arm *a, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  char h[2 * TK__TOKEN_HASH_LEN + 1];
  hex(a->token_hash, h);
  tk__pg_args v = {0};
  tk__pg_arg_i64(&v, a->claim_id);
  tk__pg_arg_i64(&v, a->step_id);
  tk__pg_arg_text(&v, h);
  tk__pg_arg_i64(&v, a->timeout_ms);
  tk__pg_arg_i64(&v, a->limit_at);
  tk__pg_arg_i64(&v, a->now);
  PGresult *r;
  int rc = tk__pg_usable(pg, "arm a callback", err);
  if (rc == 0)
    rc = tk__pg_wait_exec(
        pg,
        "INSERT INTO callbacks (claim_id, step_id, token_hash, timeout_ms, limit_at, created_at)"
        " SELECT $1::bigint, $2::bigint, decode($3::text, 'hex'), $4::bigint, $5::bigint,"
        " $6::bigint WHERE EXISTS (SELECT 1 FROM steps WHERE id = $2::bigint AND state = "
        Q(TK__STEP_IN_PROGRESS) " AND claim_id = $1::bigint)"
        " ON CONFLICT (claim_id) DO UPDATE SET token_hash = excluded.token_hash",
        6, v.v, &r, "arm a callback", err);
  if (rc) return rc;
  int changed = atoi(PQcmdTuples(r));
  PQclear(r);
  return changed ? 0 : tk__heartbeat_refused(err, a->step_id, a->claim_id);
}

/* The armed claim r names into *c and out (its step locked), inside the
 * caller's transaction: TK_ENOENT when there is none or the secret's hash
 * differs. */
static int find(tk__pg *pg, const tk__callback_req *r, armed *c, tk__callback_ans *out,
                tk_err *err) {
  char h[2 * TK__TOKEN_HASH_LEN + 1];
  hex(r->token_hash, h);
  tk__pg_args v = {0};
  tk__pg_arg_i64(&v, r->claim_id);
  tk__pg_arg_text(&v, h);
  PGresult *res;
  /* The hash of a secret: comparing it in any time tells nothing of it. */
  int rc = tk__pg_wait_exec(
      pg,
      "SELECT c.step_id, c.timeout_ms, c.limit_at, s.task_id, s.name, s.state,"
      " s.claim_id = c.claim_id, a.attempt,"
      " (SELECT created_at FROM signals WHERE for_claim = c.claim_id)"
      " FROM callbacks c JOIN steps s ON s.id = c.step_id JOIN attempts a ON a.id = c.claim_id"
      " WHERE c.claim_id = $1::bigint AND c.token_hash = decode($2::text, 'hex')"
      " FOR UPDATE OF s",
      2, v.v, &res, "callback", err);
  if (rc) return rc;
  int found = PQntuples(res) == 1;
  if (found) {
    c->step_id = out->step_id = tk__pg_i64(res, 0, 0);
    c->timeout_ms = tk__pg_i64(res, 0, 1);
    c->limit_at = tk__pg_i64(res, 0, 2);
    c->task_id = out->task_id = tk__pg_i64(res, 0, 3);
    tk__pg_copy(out->step, sizeof out->step, res, 0, 4);
    tk__pg_copy(out->step_state, sizeof out->step_state, res, 0, 5);
    int same = tk__pg_bool(res, 0, 6);
    c->attempt = out->attempt = (int)tk__pg_i64(res, 0, 7);
    c->prior_at = tk__pg_i64(res, 0, 8);
    c->waiting = strcmp(out->step_state, TK__STEP_WAITING) == 0;
    c->held = same && (c->waiting || strcmp(out->step_state, TK__STEP_IN_PROGRESS) == 0);
  }
  PQclear(res);
  return found ? 0 : tk_err_set(err, TK_ENOENT, "no callback has this token");
}

/* callback_put inside the caller's transaction. */
static int put_in(tk__pg *pg, const tk__callback_req *r, tk__callback_ans *out, tk_err *err) {
  armed c;
  int rc = find(pg, r, &c, out, err);
  if (rc == 0)
    rc = tk__callback_plan(c.task_id, out->step, c.attempt, c.held, out->step_state,
                           c.prior_at, err);
  if (rc) return rc;
  tk__pg_args v = {0};
  tk__pg_arg_i64(&v, c.step_id);
  tk__pg_arg_text(&v, NULL);
  tk__pg_arg_text(&v, NULL);
  tk__pg_arg_i64(&v, r->now);
  tk__pg_arg_i64(&v, r->claim_id);
  tk__pg_arg_i64(&v, r->final);
  if (r->retry_after_ms >= 0) tk__pg_arg_i64(&v, r->retry_after_ms);
  else tk__pg_arg_null(&v);
  char *tmp_data, *tmp_error;
  v.v[1] = tk__pg_utf8(r->data, &tmp_data);
  v.v[2] = tk__pg_utf8(r->error, &tmp_error);
  PGresult *res;
  rc = tk__pg_wait_exec(pg,
                        "INSERT INTO signals (step_id, data, error, created_at, for_claim, final,"
                        " retry_after_ms) VALUES ($1::bigint, $2::text, $3::text, $4::bigint,"
                        " $5::bigint, $6::int, $7::bigint) RETURNING id",
                        7, v.v, &res, "callback", err);
  free(tmp_data);
  free(tmp_error);
  if (rc) return rc;
  out->signal_id = tk__pg_i64(res, 0, 0);
  PQclear(res);
  return 0;
}

int tk__pg_callback_put(tk_store *s, const tk__callback_req *r, tk__callback_ans *out,
                        tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  memset(out, 0, sizeof *out);
  out->until = TK__NONE;
  if ((r->data == NULL) == (r->error == NULL))
    return tk_err_set(err, TK_EINVAL, "a callback carries either results or an error");
  int rc = tk__pg_wait_begin(pg, "callback", err);
  if (rc) return rc;
  rc = put_in(pg, r, out, err);
  return tk__pg_wait_end(pg, rc, TK__PG_NOTIFY_SIGNAL, "callback", err);
}

/* callback_extend inside the caller's transaction. */
static int extend_in(tk__pg *pg, const tk__callback_req *r, int64_t extend_ms,
                     tk__callback_ans *out, tk_err *err) {
  armed c;
  int rc = find(pg, r, &c, out, err);
  if (rc == 0)
    rc = tk__callback_plan(c.task_id, out->step, c.attempt, c.held, out->step_state, TK__NONE,
                           err);
  if (rc || !c.waiting) return rc;
  int64_t until = tk__callback_until(r->now, extend_ms, c.timeout_ms, c.limit_at);
  tk__pg_args v = {0};
  tk__pg_arg_i64(&v, until);
  tk__pg_arg_i64(&v, c.step_id);
  if ((rc = tk__pg_wait_exec(pg, "UPDATE steps SET run_at = $1::bigint WHERE id = $2::bigint",
                             2, v.v, NULL, "callback heartbeat", err)))
    return rc;
  out->until = until;
  return 0;
}

int tk__pg_callback_extend(tk_store *s, const tk__callback_req *r, int64_t extend_ms,
                           tk__callback_ans *out, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  memset(out, 0, sizeof *out);
  out->until = TK__NONE;
  int rc = tk__pg_wait_begin(pg, "callback heartbeat", err);
  if (rc) return rc;
  rc = extend_in(pg, r, extend_ms, out, err);
  /* Orchestrators learn the later timeout at their next look. */
  return tk__pg_wait_end(pg, rc, TK__PG_NOTIFY_NONE, "callback heartbeat", err);
}
