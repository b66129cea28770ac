/* The engine's side of the worker protocol (remote.h, DESIGN §19): claims
 * of a worker queue through the store's claim, outcomes through
 * tk__engine_finish (so backoff, budgets, events, metrics and the fence
 * are every step's), heartbeats through the store's heartbeat, each
 * checked first against the claim's token (core/claim_token.h).
 *
 * A claim's owner (its attempt row, events, `tasker show`) is the
 * worker's name as the worker gave it, cut to TK__OWNER_MAX - 1 bytes;
 * the queue is the step's own (steps.worker_queue). */
#include "engine/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/claim_token.h"
#include "engine/engine_internal.h"

#define REMOTE_MAX 100

_Static_assert(TK__CLAIM_HASH_LEN == TK__TOKEN_HASH_LEN, "the store keeps the token's hash");
_Static_assert(TK__CLAIM_TOKEN_LEN <= TK__CLAIM_TOKEN_MAX, "a token fits the claim");

/* ops call `call` once more after the store's connection was lost and made
 * again (a server outlives a database restart). */
#define STORE_CALL(e, rc, call)                                                                \
  do {                                                                                         \
    (rc) = (call);                                                                             \
    if ((rc) == TK_EDISCONNECTED && (e)->store->ops->reconnect &&                              \
        (e)->store->ops->reconnect((e)->store, NULL) == 0)                                     \
      (rc) = (call);                                                                           \
  } while (0)

void tk__remote_claims_free(tk__remote_claimed *c, int n) {
  for (int i = 0; c && i < n; i++) {
    free(c[i].step);
    json_decref(c[i].input);
    c[i].step = NULL;
    c[i].input = NULL;
  }
}

/* Claimed step c as the worker gets it into *out (its token from secret);
 * 0, or TK_ENOMEM / the template's error. */
static int handed_out(tk_engine *e, tk__claimed *c, const unsigned char *secret,
                      tk__remote_claimed *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  const template_entry *t = tk__engine_template(e, c->template_id, err);
  if (t == NULL) return err ? err->code : TK_ESTORE;
  if (c->idx < 0 || c->idx >= t->nsteps)
    return tk_err_set(err, TK_ESTORE, "step %lld: its index is past its template's steps",
                      (long long)c->step_id);
  char name[TK__STEP_NAME_MAX];
  out->step = strdup(tk__claim_step_name(c, t->steps[c->idx].name, name, sizeof name));
  tk__claim_token_format(c->claim_id, secret, out->token);
  out->task_id = c->task_id;
  out->attempt = c->attempt;
  out->lease_expires_at = c->lease_expires_at;
  out->heartbeat_ms = e->heartbeat_ms;
  if (c->input) {
    out->input = json_loads(c->input, 0, NULL);
  } else {
    /* The claim could not build it: read it as any handler's input. */
    json_t *in = NULL;
    int rc;
    STORE_CALL(e, rc, e->store->ops->inputs(e->store, &c->step_id, 1, &in, err));
    if (rc) return rc;
    out->input = in;
  }
  if (out->step == NULL || out->input == NULL)
    return tk_err_set(err, TK_ENOMEM, "out of memory handing out step %lld",
                      (long long)c->step_id);
  return 0;
}

int tk__remote_claim(tk_engine *e, const char *queue, const char *worker, int max,
                     tk__remote_claimed *out, int *n, tk_err *err) {
  *n = 0;
  if (queue == NULL || !*queue || worker == NULL || !*worker)
    return tk_err_set(err, TK_EINVAL, "a claim needs a queue and a worker name");
  if (max < 1 || max > REMOTE_MAX)
    return tk_err_set(err, TK_ERANGE, "max = %d: expected 1 to %d steps", max, REMOTE_MAX);
  unsigned char secrets[REMOTE_MAX][TK__CLAIM_SECRET_LEN];
  unsigned char hashes[REMOTE_MAX][TK__CLAIM_HASH_LEN];
  for (int i = 0; i < max; i++)
    if (tk__claim_secret_new(secrets[i], hashes[i]) != 0)
      return tk_err_set(err, TK_EIO, "no random bytes for claim tokens (getrandom failed)");
  /* A server with workers and no orchestrator reaps too: a worker that
   * died loses its lease, and its step is retried, with no `tasker run`;
   * as an orchestrator does, only once a lease it knows of has run out. */
  tk_err reaping;
  if (tk__engine_reap_due(e, tk_clock_now(&e->clock), &reaping) != 0)
    tk__engine_log(e, TK_LOG_WARN, "queue %s: reaping expired leases: %s", queue,
                   tk_err_message(&reaping));
  char owner[TK__OWNER_MAX];
  snprintf(owner, sizeof owner, "%s", worker);
  tk__claimed claimed[REMOTE_MAX];
  tk__claim_request r = {.owner = owner, .lease_ms = e->lease_ms, .limit = max,
                         .fresh_limit = max, .out = claimed, .next_retry_at = INT64_MIN,
                         .want_inputs = 1, .worker_queue = queue,
                         .token_hashes = (const unsigned char(*)[TK__TOKEN_HASH_LEN])hashes};
  int64_t t0 = tk_monotonic_ns();
  int rc;
  STORE_CALL(e, rc, e->store->ops->record(e->store, NULL, 0, NULL, NULL, &r, err));
  if (rc) return rc;
  int64_t claim_us = (tk_monotonic_ns() - t0) / 1000;
  e->stats.claimed += r.n;
  if (r.n > 0) tk__engine_claimed_leases(e, r.now);
  int handed = 0;
  for (int i = 0; i < r.n; i++) {
    tk__claimed *c = &claimed[i];
    int k = c->token_index >= 0 && c->token_index < max ? c->token_index : i;
    /* A step that cannot be handed out keeps its lease and is retried
     * by the reaper, as an orchestrator's step that cannot start. */
    if (rc == 0 && (rc = handed_out(e, c, secrets[k], &out[handed], err)) == 0) {
      handed++;
      if (tk__engine_wants(e, TK_EV_STEP_CLAIMED)) {
        tk_event ev = {.type = TK_EV_STEP_CLAIMED, .at = r.now, .task = c->task_id,
                       .step = out[handed - 1].step, .attempt = c->attempt,
                       .has_late_ms = 1, .late_ms = r.now - c->run_at};
        ev.u.claimed.max_attempts = c->max_attempts;
        ev.u.claimed.claim_us = claim_us;
        tk__engine_emit(e, &ev);
      }
    }
  }
  tk__claimed_inputs_free(claimed, r.n);
  memset(secrets, 0, sizeof secrets);
  if (rc) {
    tk__engine_log(e, TK_LOG_ERROR, "queue %s: claimed steps not handed out: %s", queue,
                   tk_err_message(err));
    tk__remote_claims_free(out, handed);
    return rc;
  }
  *n = handed;
  return 0;
}

/* Why claim rec no longer holds its step, for a fenced write's message:
 * what the step's state shows, without guessing which of an earlier
 * outcome and an expired lease ended the claim when either could have. */
static int fenced(const tk__claim_rec *rec, tk_err *err) {
  if (strcmp(rec->state, TK__STEP_IN_PROGRESS) == 0)
    return tk_err_set(err, TK_EFENCED,
                      "step %lld is held by a later claim: this claim's lease expired and the "
                      "step was claimed again",
                      (long long)rec->step.step_id);
  return tk_err_set(err, TK_EFENCED,
                    "this claim no longer holds step %lld: its outcome was recorded already or "
                    "its lease expired; the step is %s now",
                    (long long)rec->step.step_id, rec->state);
}

/* The claim that token names, checked against its stored hash, into *rec:
 * 0, TK_EINVAL when token is not a live claim's token, or the store's
 * error. */
static int token_claim(tk_engine *e, const char *token, tk__claim_rec *rec, tk_err *err) {
  int64_t claim_id;
  unsigned char secret[TK__CLAIM_SECRET_LEN];
  if (tk__claim_token_parse(token, &claim_id, secret) != 0)
    return tk_err_set(err, TK_EINVAL, "not a claim token");
  int rc;
  STORE_CALL(e, rc, e->store->ops->claim_get(e->store, claim_id, rec, err));
  int ok = rc == 0 && rec->has_token && tk__claim_secret_matches(secret, rec->token_hash);
  memset(secret, 0, sizeof secret);
  if (rc == TK_ENOENT || (rc == 0 && !ok)) return tk_err_set(err, TK_EINVAL, "not a claim token");
  return rc;
}

int tk__remote_heartbeat(tk_engine *e, const char *token, int64_t *lease_expires_at,
                         tk_err *err) {
  tk__claim_rec rec;
  int rc = token_claim(e, token, &rec, err);
  if (rc) return rc;
  int64_t expires = tk_clock_now(&e->clock) + e->lease_ms;
  STORE_CALL(e, rc, e->store->ops->heartbeat(e->store, rec.step.step_id, rec.step.claim_id,
                                                 expires, err));
  if (rc == TK_EFENCED) {
    e->stats.fenced++;
    return fenced(&rec, err);
  }
  if (rc == 0 && lease_expires_at) *lease_expires_at = expires;
  return rc;
}

/* Record the outcome r of the claim token names, as a handler's would be
 * (tk__engine_finish), into *out. */
static int finish(tk_engine *e, const char *token, const char *outcome,
                  const tk_handler_result *res, tk__remote_result *out, tk_err *err) {
  tk__claim_rec rec;
  int rc = token_claim(e, token, &rec, err);
  if (rc) return rc;
  const template_entry *t = tk__engine_template(e, rec.step.template_id, err);
  if (t == NULL) return err ? err->code : TK_ESTORE;
  if (rec.step.idx < 0 || rec.step.idx >= t->nsteps)
    return tk_err_set(err, TK_ESTORE, "step %lld: its index is past its template's steps",
                      (long long)rec.step.step_id);
  const step_def *def = &t->steps[rec.step.idx];
  char name[TK__STEP_NAME_MAX];
  int64_t now = tk_clock_now(&e->clock);
  tk__finish item = {
      .claim = &rec.step,
      .step_name = tk__claim_step_name(&rec.step, def->name, name, sizeof name),
      .owner = rec.owner,
      .attempt_outcome = outcome,
      .result = res,
      .started_at = rec.started_at,
      .finished_at = now,
      .run_ns = now > rec.started_at ? (now - rec.started_at) * 1000000 : 0,
      .budget = def->budget,
      .decision = def->decision,
  };
  tk_err lost;
  STORE_CALL(e, rc, tk__engine_finish(e, &item, 1, NULL, &lost));
  if (rc) {
    if (err) *err = lost;
    return rc;
  }
  if (e->fin_cap < 1) return tk_err_set(err, TK_ENOMEM, "out of memory recording an outcome");
  const tk_err *one = &e->fin_errs[0];
  if (one->code == TK_EFENCED) return fenced(&rec, err);
  if (one->code != 0) {
    if (err) *err = *one;
    return one->code;
  }
  const tk__outcome *o = &e->fin_outcomes[0];
  out->state = o->next == TK__NEXT_COMPLETE ? TK__STEP_COMPLETE
               : o->next == TK__NEXT_RETRY  ? TK__STEP_WAITING
                                            : TK__STEP_ERROR;
  out->run_at = o->next == TK__NEXT_RETRY ? o->run_at : 0;
  return 0;
}

int tk__remote_complete(tk_engine *e, const char *token, const char *results,
                        tk__remote_result *out, tk_err *err) {
  tk_handler_result res = {.status = TK_HANDLER_SUCCESS, .retry_after_ms = -1};
  /* Stored as compact JSON text, as a handler's results are. */
  json_error_t why;
  json_t *doc = json_loads(results ? results : "null", JSON_DECODE_ANY, &why);
  if (doc == NULL)
    return tk_err_set(err, TK_EINVAL, "results: not JSON (line %d, column %d: %s)", why.line,
                      why.column, why.text);
  res.results = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(doc);
  if (res.results == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory reading results");
  int rc = finish(e, token, "success", &res, out, err);
  free(res.results);
  return rc;
}

int tk__remote_fail(tk_engine *e, const char *token, const char *error, int retryable,
                    int64_t retry_after_ms, tk__remote_result *out, tk_err *err) {
  if (retry_after_ms < -1)
    return tk_err_set(err, TK_EINVAL, "retry_after: expected a delay >= 0");
  tk_handler_result res = {.status = retryable ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                           .retry_after_ms = retry_after_ms};
  snprintf(res.error, sizeof res.error, "%s",
           error && *error ? error : "the worker reported a failure without a message");
  return finish(e, token, "failure", &res, out, err);
}

int tk__remote_wake_fd(tk_engine *e) {
  return e->store->ops->change_fd ? e->store->ops->change_fd(e->store) : -1;
}

void tk__remote_drain(tk_engine *e) {
  if (e->store->ops->drain_changes) e->store->ops->drain_changes(e->store);
}
