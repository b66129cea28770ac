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

/* A worker's claim on its way to the store: its tokens' secrets, the
 * request (which an outcome group may carry: one transaction for both)
 * and the steps it claimed. */
typedef struct remote_claim {
  const char *queue;
  int max;
  unsigned char secrets[REMOTE_MAX][TK__CLAIM_SECRET_LEN];
  unsigned char hashes[REMOTE_MAX][TK__CLAIM_HASH_LEN];
  char owner[TK__OWNER_MAX];
  tk__claimed claimed[REMOTE_MAX];
  tk__claim_request r;
} remote_claim;

/* Check the claim's arguments, draw its tokens, reap the leases that ran
 * out, and make *c's request. 0 or the error. */
static int claim_prepare(tk_engine *e, const char *queue, const char *worker, int max,
                         remote_claim *c, tk_err *err) {
  if (queue == NULL || !*queue || worker == NULL || !*worker)
    return tk_err_set(err, TK_EINVAL, "a claim needs a queue and a worker name");
  if (max < 1 || max > REMOTE_MAX)
    return tk_err_set(err, TK_ERANGE, "max = %d: expected 1 to %d steps", max, REMOTE_MAX);
  c->queue = queue;
  c->max = max;
  for (int i = 0; i < max; i++)
    if (tk__claim_secret_new(c->secrets[i], c->hashes[i]) != 0)
      return tk_err_set(err, TK_EIO, "no random bytes for claim tokens (getrandom failed)");
  /* A server with workers and no orchestrator reaps too: a worker that
   * died loses its lease, and its step is retried, with no `tasker run`;
   * as an orchestrator does, only once a lease it knows of has run out. */
  (void)tk__remote_reap(e);
  snprintf(c->owner, sizeof c->owner, "%s", worker);
  c->r = (tk__claim_request){
      .owner = c->owner, .lease_ms = e->lease_ms, .limit = max, .fresh_limit = max,
      .out = c->claimed, .next_retry_at = INT64_MIN, .want_inputs = 1, .worker_queue = queue,
      .token_hashes = (const unsigned char(*)[TK__TOKEN_HASH_LEN])c->hashes,
      .next_due_at = INT64_MIN /* unknown, until the store says */};
  return 0;
}

/* Hand out the steps c's request claimed (claim_us: how long the claim
 * took) into out, *n of them, and *next_due_at as tk__remote_claim's. */
static int claim_hand_out(tk_engine *e, remote_claim *c, int64_t claim_us,
                          tk__remote_claimed *out, int *n, int64_t *next_due_at, tk_err *err) {
  tk__claim_request *r = &c->r;
  e->stats.claimed += r->n;
  if (r->n > 0) tk__engine_claimed_leases(e, r->now);
  if (next_due_at) {
    /* A lease that runs out makes its step ready too, once reaped (by the
     * next claim here, tk__engine_reap_due): when this engine knows of one
     * sooner, look then. */
    *next_due_at = r->next_due_at;
    if (r->next_due_at != INT64_MIN && e->reap_at < r->next_due_at) *next_due_at = e->reap_at;
  }
  int handed = 0, rc = 0;
  for (int i = 0; i < r->n; i++) {
    tk__claimed *cl = &c->claimed[i];
    int k = cl->token_index >= 0 && cl->token_index < c->max ? cl->token_index : i;
    /* A step that cannot be handed out keeps its lease and is retried
     * by the reaper, as an orchestrator's step that cannot start. */
    if (rc == 0 && (rc = handed_out(e, cl, c->secrets[k], &out[handed], err)) == 0) {
      handed++;
      if (tk__engine_wants(e, TK_EV_STEP_CLAIMED)) {
        tk_event ev = {.type = TK_EV_STEP_CLAIMED, .at = r->now, .task = cl->task_id,
                       .step = out[handed - 1].step, .attempt = cl->attempt,
                       .has_late_ms = 1, .late_ms = r->now - cl->run_at};
        ev.u.claimed.max_attempts = cl->max_attempts;
        ev.u.claimed.claim_us = claim_us;
        tk__engine_emit(e, &ev);
      }
    }
  }
  tk__claimed_inputs_free(c->claimed, r->n);
  memset(c->secrets, 0, sizeof c->secrets);
  if (rc) {
    tk__engine_log(e, TK_LOG_ERROR, "queue %s: claimed steps not handed out: %s", c->queue,
                   tk_err_message(err));
    tk__remote_claims_free(out, handed);
    return rc;
  }
  *n = handed;
  return 0;
}

/* c's claim alone, in a transaction of its own. */
static int claim_alone(tk_engine *e, remote_claim *c, tk__remote_claimed *out, int *n,
                       int64_t *next_due_at, tk_err *err) {
  int64_t t0 = tk_monotonic_ns();
  int rc;
  STORE_CALL(e, rc, e->store->ops->record(e->store, NULL, 0, NULL, NULL, &c->r, err));
  if (rc) return rc;
  return claim_hand_out(e, c, (tk_monotonic_ns() - t0) / 1000, out, n, next_due_at, err);
}

int tk__remote_claim(tk_engine *e, const char *queue, const char *worker, int max,
                     tk__remote_claimed *out, int *n, int64_t *next_due_at, tk_err *err) {
  *n = 0;
  if (next_due_at) *next_due_at = INT64_MIN;
  remote_claim *c = malloc(sizeof *c);
  if (c == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory claiming");
  int rc = claim_prepare(e, queue, worker, max, c, err);
  if (rc == 0) rc = claim_alone(e, c, out, n, next_due_at, err);
  free(c);
  return rc;
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

/* One outcome of a group on its way to tk__engine_finish: what the
 * token names, and the handler's result it stands for. */
typedef struct pending {
  tk__remote_outcome *o;
  tk__claim_rec rec;
  tk_handler_result res;
  char name[TK__STEP_NAME_MAX];
  int ready; /* checked, and not yet recorded */
} pending;

/* Check outcome p->o (its token's claim, its body) and make the handler's
 * result it stands for: 0, or the error in p->o->err. */
static int prepare(tk_engine *e, pending *p, tk__finish *item) {
  tk__remote_outcome *o = p->o;
  tk_err *err = &o->err;
  if (o->failed) {
    if (o->retry_after_ms < -1)
      return tk_err_set(err, TK_EINVAL, "retry_after: expected a delay >= 0");
    p->res = (tk_handler_result){.status = o->retryable ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                                 .retry_after_ms = o->retry_after_ms};
    snprintf(p->res.error, sizeof p->res.error, "%s",
             o->error && *o->error ? o->error
                                   : "the worker reported a failure without a message");
  } else {
    p->res = (tk_handler_result){.status = TK_HANDLER_SUCCESS, .retry_after_ms = -1};
    /* Stored as compact JSON text, as a handler's results are. */
    json_error_t why;
    json_t *doc = json_loads(o->results ? o->results : "null", JSON_DECODE_ANY, &why);
    if (doc == NULL)
      return tk_err_set(err, TK_EINVAL, "results: not JSON (line %d, column %d: %s)", why.line,
                        why.column, why.text);
    p->res.results = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(doc);
    if (p->res.results == NULL)
      return tk_err_set(err, TK_ENOMEM, "out of memory reading results");
  }
  int rc = token_claim(e, o->token, &p->rec, err);
  if (rc) return rc;
  const template_entry *t = tk__engine_template(e, p->rec.step.template_id, err);
  if (t == NULL) return err->code ? err->code : tk_err_set(err, TK_ESTORE, "no template");
  if (p->rec.step.idx < 0 || p->rec.step.idx >= t->nsteps)
    return tk_err_set(err, TK_ESTORE, "step %lld: its index is past its template's steps",
                      (long long)p->rec.step.step_id);
  const step_def *def = &t->steps[p->rec.step.idx];
  int64_t now = tk_clock_now(&e->clock);
  *item = (tk__finish){
      .claim = &p->rec.step,
      .step_name = tk__claim_step_name(&p->rec.step, def->name, p->name, sizeof p->name),
      .owner = p->rec.owner,
      .attempt_outcome = o->failed ? "failure" : "success",
      .result = &p->res,
      .started_at = p->rec.started_at,
      .finished_at = now,
      .run_ns = now > p->rec.started_at ? (now - p->rec.started_at) * 1000000 : 0,
      .budget = def->budget,
      .decision = def->decision,
  };
  return 0;
}

/* Record the group items[0..m) (of pending outcomes from[0..m)) in one
 * tk__engine_finish, with the claim `next` (may be NULL) in the same
 * transaction, and answer each. */
static void record_group(tk_engine *e, tk__finish *items, pending **from, int m,
                         tk__claim_request *next) {
  tk_err lost;
  int rc;
  STORE_CALL(e, rc, tk__engine_finish(e, items, m, next, &lost));
  for (int i = 0; i < m; i++) {
    tk__remote_outcome *o = from[i]->o;
    if (rc) {
      o->err = lost;
    } else if (e->fin_cap < m) {
      tk_err_set(&o->err, TK_ENOMEM, "out of memory recording an outcome");
    } else if (e->fin_errs[i].code == TK_EFENCED) {
      fenced(&from[i]->rec, &o->err);
    } else if (e->fin_errs[i].code != 0) {
      o->err = e->fin_errs[i];
    } else {
      const tk__outcome *out = &e->fin_outcomes[i];
      o->result.state = out->next == TK__NEXT_COMPLETE ? TK__STEP_COMPLETE
                        : out->next == TK__NEXT_RETRY  ? TK__STEP_WAITING_FOR_RETRY
                                                       : TK__STEP_ERROR;
      o->result.run_at = out->next == TK__NEXT_RETRY ? out->run_at : 0;
    }
  }
}

/* tk__remote_record's, with c's claim (may be NULL) made in the
 * transaction of the first group recorded; *claimed: whether it was (when
 * not, the caller claims alone). */
static void record_outcomes(tk_engine *e, tk__remote_outcome *o, int n, remote_claim *c,
                            int *claimed) {
  *claimed = 0;
  if (n <= 0) return;
  pending *p = calloc((size_t)n, sizeof *p);
  tk__finish *items = calloc((size_t)n, sizeof *items);
  pending **from = calloc((size_t)n, sizeof *from);
  for (int i = 0; i < n; i++) {
    tk_err_clear(&o[i].err);
    o[i].result = (tk__remote_result){0};
    if (p == NULL || items == NULL || from == NULL)
      tk_err_set(&o[i].err, TK_ENOMEM, "out of memory recording an outcome");
  }
  if (p == NULL || items == NULL || from == NULL) goto done;
  tk__finish *checked = calloc((size_t)n, sizeof *checked);
  if (checked == NULL) {
    for (int i = 0; i < n; i++)
      tk_err_set(&o[i].err, TK_ENOMEM, "out of memory recording an outcome");
    goto done;
  }
  for (int i = 0; i < n; i++) {
    p[i].o = &o[i];
    p[i].ready = prepare(e, &p[i], &checked[i]) == 0;
  }
  /* Groups of distinct claims: a claim's second outcome goes in the next
   * group, after its first was recorded (the store then fences it). */
  for (;;) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (!p[i].ready) continue;
      int again = 0;
      for (int j = 0; j < m && !again; j++)
        again = from[j]->rec.step.claim_id == p[i].rec.step.claim_id;
      if (again) continue;
      p[i].ready = 0;
      items[m] = checked[i];
      from[m++] = &p[i];
    }
    if (m == 0) break;
    record_group(e, items, from, m, c && !*claimed ? &c->r : NULL);
    if (c) *claimed = 1;
  }
  free(checked);
done:
  for (int i = 0; p && i < n; i++) free(p[i].res.results);
  free(p);
  free(items);
  free(from);
}

void tk__remote_record(tk_engine *e, tk__remote_outcome *o, int n) {
  int claimed;
  record_outcomes(e, o, n, NULL, &claimed);
}

int tk__remote_record_claim(tk_engine *e, tk__remote_outcome *o, int n, const char *queue,
                            const char *worker, int max, tk__remote_claimed *out, int *nout,
                            int64_t *next_due_at, tk_err *err) {
  *nout = 0;
  if (next_due_at) *next_due_at = INT64_MIN;
  remote_claim *c = malloc(sizeof *c);
  if (c == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory claiming");
  int rc = claim_prepare(e, queue, worker, max, c, err);
  if (rc != 0) {
    for (int i = 0; i < n; i++) o[i].err = *err;
    free(c);
    return rc;
  }
  int64_t t0 = tk_monotonic_ns();
  int claimed;
  record_outcomes(e, o, n, c, &claimed);
  if (claimed)
    rc = claim_hand_out(e, c, (tk_monotonic_ns() - t0) / 1000, out, nout, next_due_at, err);
  else
    rc = claim_alone(e, c, out, nout, next_due_at, err);
  free(c);
  return rc;
}

/* Record one outcome (a group of one) into *out. */
static int record_one(tk_engine *e, tk__remote_outcome *o, tk__remote_result *out,
                      tk_err *err) {
  tk__remote_record(e, o, 1);
  if (o->err.code) {
    if (err) *err = o->err;
    return o->err.code;
  }
  *out = o->result;
  return 0;
}

int tk__remote_complete(tk_engine *e, const char *token, const char *results,
                        tk__remote_result *out, tk_err *err) {
  tk__remote_outcome o = {.token = token, .results = results};
  return record_one(e, &o, out, err);
}

int tk__remote_fail(tk_engine *e, const char *token, const char *error, int retryable,
                    int64_t retry_after_ms, tk__remote_result *out, tk_err *err) {
  tk__remote_outcome o = {.token = token, .failed = 1, .error = error, .retryable = retryable,
                          .retry_after_ms = retry_after_ms};
  return record_one(e, &o, out, err);
}

int tk__remote_seen(tk_engine *e, const char *queue, const char *worker, tk_err *err) {
  if (e->store->ops->worker_seen == NULL) return 0;
  int rc;
  STORE_CALL(e, rc, e->store->ops->worker_seen(e->store, queue, worker,
                                               tk_clock_now(&e->clock), err));
  return rc;
}

int tk__remote_wake_fd(tk_engine *e) {
  return e->store->ops->change_fd ? e->store->ops->change_fd(e->store) : -1;
}

void tk__remote_drain(tk_engine *e) {
  if (e->store->ops->drain_changes) (void)e->store->ops->drain_changes(e->store);
}

int64_t tk__remote_reap_at(tk_engine *e) { return e->reap_at; }

int tk__remote_reap(tk_engine *e) {
  long long before = e->stats.lease_expired;
  tk_err err;
  if (tk__engine_reap_due(e, tk_clock_now(&e->clock), &err) != 0)
    tk__engine_log(e, TK_LOG_WARN, "reaping expired leases: %s", tk_err_message(&err));
  return (int)(e->stats.lease_expired - before);
}
