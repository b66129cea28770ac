/* Wait steps (DESIGN §18): a claimed wait step is parked in the store
 * (no lease, no worker) rather than run, and the waits that a signal or a
 * timeout ended come back as jobs whose outcome is known, recorded
 * through tk__engine_finish as any attempt's: a signal's data complete
 * the step, its error or the timeout fail the attempt under the step's
 * retry policy (a retry is claimed, and so waits, again). */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"

int tk__engine_is_wait(const job *j) { return j->def->kind == &tk__wait_kind; }

int tk__engine_signal_result(const tk__signal_rec *sig, tk_handler_result *r) {
  memset(r, 0, sizeof *r);
  r->retry_after_ms = -1;
  if (sig->error != NULL) {
    r->status = sig->final ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY;
    r->retry_after_ms = sig->retry_after_ms;
    snprintf(r->error, sizeof r->error, "%s", sig->error);
    return 0;
  }
  r->status = TK_HANDLER_SUCCESS;
  r->results = strdup(sig->data ? sig->data : "null");
  return r->results ? 0 : -1;
}

/* j's outcome from signal sig (a callback's: with whether it is final
 * and its retry_after), or its timeout (sig NULL), at now. 0, or -1 when
 * memory ran out copying the signal's data. */
static int outcome_of(job *j, const tk__signal_rec *sig, int64_t now) {
  free(j->result.results);
  j->finished_at = now;
  j->waited = 1;
  if (sig != NULL) return tk__engine_signal_result(sig, &j->result);
  memset(&j->result, 0, sizeof j->result);
  j->result.retry_after_ms = -1;
  j->result.status = TK_HANDLER_RETRY;
  j->result.timed_out = 1;
  snprintf(j->result.error, sizeof j->result.error, "%s",
           j->def->callback_ms > 0 ? TK__CALLBACK_TIMEOUT_ERROR
           : tk__engine_is_child(j) ? TK__CHILD_TIMEOUT_ERROR
                                    : TK__WAIT_TIMEOUT_ERROR);
  return 0;
}

int tk__engine_park(tk_engine *e, job *j, int64_t now) {
  int64_t timeout = j->def->timeout_ms > 0 ? j->def->timeout_ms : INT64_C(86400000);
  return tk__engine_park_until(e, j, now, now + timeout, NULL);
}

int tk__engine_park_until(tk_engine *e, job *j, int64_t now, int64_t timeout_at,
                          const char *reason) {
  tk__wait_req w = {.step_id = j->claim.step_id, .claim_id = j->claim.claim_id,
                    .task_id = j->claim.task_id, .timeout_at = timeout_at, .now = now,
                    .reason = reason};
  tk__signal_rec sig;
  tk_err err;
  int rc = e->store->ops->step_wait(e->store, &w, &sig, &err);
  if (rc) {
    tk__engine_log(e, TK_LOG_WARN, "task %lld step %s attempt %d: cannot wait: %s",
                   (long long)j->claim.task_id, j->name, j->claim.attempt, err.msg);
    return 0;
  }
  if (sig.id == 0) {
    if (w.timeout_at < e->wait_at || e->wait_at == INT64_MIN) e->wait_at = w.timeout_at;
    tk__engine_log(e, TK_LOG_INFO, "task %lld step %s attempt %d: waiting for a %s",
                   (long long)j->claim.task_id, j->name, j->claim.attempt,
                   j->def->callback_ms > 0 ? "callback" : "signal");
    return 0;
  }
  if (j->started_at == 0) j->started_at = now;
  rc = outcome_of(j, &sig, now);
  tk__signal_rec_free(&sig);
  if (rc == 0) return 1;
  tk__engine_log(e, TK_LOG_ERROR, "task %lld step %s: out of memory taking its signal",
                 (long long)j->claim.task_id, j->name);
  return 0;
}

/* A job for the wait x that wait_take handed back, its outcome set; NULL
 * (logged) when it cannot be made: its lease then expires and the reaper
 * fails the attempt, and the signal is delivered to the next wait. */
static job *waited_job(tk_engine *e, tk__waited *x, int64_t now) {
  tk_err err;
  const template_entry *t = tk__engine_template(e, x->step.template_id, &err);
  if (t == NULL || x->step.idx >= t->nsteps) {
    tk__engine_log(e, TK_LOG_ERROR, "cannot end the wait of step %lld: %s",
                   (long long)x->step.step_id,
                   t ? "its index is past the template's steps" : err.msg);
    return NULL;
  }
  job *j = calloc(1, sizeof *j);
  if (j == NULL) return NULL;
  j->claim = x->step;
  j->def = &t->steps[x->step.idx];
  j->name = tk__claim_step_name(&j->claim, j->def->name, j->instance_name,
                                sizeof j->instance_name);
  j->engine = e;
  if (outcome_of(j, x->timed_out ? NULL : &x->sig, now) != 0) {
    tk__job_free(j);
    return NULL;
  }
  return j;
}

int tk__engine_waits(tk_engine *e, int64_t now, job **done, tk_err *err) {
  *done = NULL;
  /* A signal stored: taken now. Other changes may have brought one too
   * (a backend that cannot tell): looked at, at most every
   * TK__WAIT_LOOK_MS (each look is a transaction). */
  if (e->wait_news) {
    e->wait_news = 0;
    e->wait_at = now;
  }
  if (e->waits_changed) {
    e->waits_changed = 0;
    int64_t look = e->waits_looked_at == INT64_MIN ? now : e->waits_looked_at + TK__WAIT_LOOK_MS;
    /* INT64_MIN: look at this pass (nothing known yet). */
    if (e->wait_at != INT64_MIN && look < e->wait_at) e->wait_at = look;
  }
  if (e->wait_at != INT64_MIN && now < e->wait_at) return 0;
  int n = 0;
  int64_t next_at = INT64_MAX;
  int rc = e->store->ops->wait_take(e->store, now, e->id, e->lease_ms, e->claim_batch,
                                    e->waited, &n, &next_at, err);
  if (rc) return rc;
  e->waits_looked_at = now;
  /* A full batch may have left more behind: look again at once. */
  e->wait_at = n == e->claim_batch ? now : next_at;
  job **end = done;
  for (int i = 0; i < n; i++) {
    tk__waited *x = &e->waited[i];
    job *j = waited_job(e, x, now);
    tk__signal_rec_free(&x->sig);
    if (j == NULL) continue;
    if (x->timed_out)
      tk__engine_log(e, TK_LOG_INFO, "task %lld step %s attempt %d: no %s came in time",
                     (long long)j->claim.task_id, j->name, j->claim.attempt,
                     j->def->callback_ms > 0 ? "callback" : "signal");
    j->next = NULL;
    *end = j;
    end = &j->next;
  }
  if (n > 0) tk__engine_claimed_leases(e, now);
  return 0;
}
