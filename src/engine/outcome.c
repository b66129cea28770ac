/* Recording an outcome (DESIGN §5): decide the step's next state, take any
 * retry delay from the one backoff function, write it all in one fenced
 * transaction, and say what happened. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>

#include "store/flow.h"

/* The step's policy. A profile that vanished from the configuration since
 * the task was submitted falls back to the default profile, with a
 * warning: the delay still comes from tk_backoff_delay. */
const tk_backoff_policy *tk__engine_policy(tk_engine *e, const char *profile) {
  const tk_backoff_policy *p = tk_config_profile(e->config, profile);
  if (p != NULL) return p;
  tk__engine_log(e, TK_LOG_WARN, "backoff profile \"%s\" is not configured; using \"default\"",
                 profile);
  return tk_config_profile(e->config, "default");
}

/* Whether the results of decision step idx of flow name no choice it may
 * make (DESIGN §17): then why says so, and the step fails for good. Only
 * a decision step's success comes here (tk__finish.decision), so other
 * outcomes pay nothing. Out of memory leaves the check to the store. */
static int decision_refused(const tk__flow *flow, int idx, const char *results, char *why,
                            size_t whylen) {
  unsigned char *chosen = calloc((size_t)flow->nsteps + 1, 1);
  if (chosen == NULL) return 0;
  int refused = tk__flow_decide(flow, idx, results, chosen, why, whylen) != 0;
  free(chosen);
  return refused;
}

/* Decide the next state of the attempt (DESIGN §5) into *o; why holds a
 * refused decision's message. */
static void decide(tk_engine *e, const tk__finish *f, int64_t now, tk__outcome *o,
                   int *exhausted, char *why, size_t whylen) {
  const tk__claimed *c = f->claim;
  const tk_handler_result *r = f->result;
  memset(o, 0, sizeof *o);
  o->step_id = c->step_id;
  o->claim_id = c->claim_id;
  o->task_id = c->task_id;
  o->template_id = c->template_id;
  o->idx = c->idx;
  o->instance = c->item_index + 1;
  o->owner = f->owner;
  o->attempt = c->attempt;
  o->now = now;
  /* A retry's delay counts from the end of the attempt that failed: a
   * Retry-After means after the response, not after the engine thread
   * recorded it. An attempt that never ran (a lease expired) ends now. */
  o->finished_at = f->finished_at > 0 && f->finished_at <= now ? f->finished_at : now;
  o->attempt_outcome = f->attempt_outcome;
  o->fence_lease = f->reaped != TK__REAPED_NOT;
  *exhausted = 0;
  if (r->status == TK_HANDLER_SUCCESS) {
    if (f->decision && decision_refused(f->decision, c->idx, r->results, why, whylen)) {
      o->next = TK__NEXT_ERROR;
      o->attempt_outcome = "failure";
      o->error = why;
      return;
    }
    o->next = TK__NEXT_COMPLETE;
    o->results = r->results;
    return;
  }
  o->error = r->error[0] ? r->error : "the handler reported a failure without a message";
  if (r->status == TK_HANDLER_PERMANENT || !c->retryable) {
    o->next = TK__NEXT_ERROR;
  } else if (c->attempt >= c->max_attempts) {
    o->next = TK__NEXT_ERROR;
    *exhausted = 1;
  } else {
    o->next = TK__NEXT_RETRY;
    if (f->batch == NULL || !tk__batch_chosen_delay(f->batch, &o->delay_ms, &o->source)) {
      tk_backoff_result br;
      o->delay_ms = tk_backoff_delay(tk__engine_policy(e, c->backoff), c->attempt,
                                     c->last_delay_ms, r->retry_after_ms, &e->rng, &br);
      o->source = br.source;
    }
    o->run_at = o->finished_at + o->delay_ms;
  }
}

/* The engine's counters for one recorded (or refused) outcome. */
static void count(tk_engine *e, const tk__outcome *o, int exhausted, int rc,
                  const tk__effects *fx) {
  if (rc == TK_EFENCED) e->stats.fenced++;
  if (rc != 0) return;
  if (fx->task_state != NULL) {
    if (strcmp(fx->task_state, TK__TASK_COMPLETE) == 0) e->stats.tasks_completed++;
    else e->stats.tasks_failed++;
  }
  switch (o->next) {
  case TK__NEXT_COMPLETE: e->stats.completed++; break;
  case TK__NEXT_RETRY:
    e->stats.retried++;
    if (o->source == TK_DELAY_BUDGET) e->stats.retries_deferred++;
    break;
  case TK__NEXT_ERROR: *(exhausted ? &e->stats.exhausted : &e->stats.failed) += 1; break;
  }
}

/* Events, log lines and counters for one recorded (or refused) outcome;
 * d says what a retry budget did to it. */
static void report(tk_engine *e, const tk__finish *f, const tk__outcome *o, int exhausted,
                   int rc, const tk__effects *fx, const tk_err *err, const tk__deferral *d) {
  const tk__claimed *c = f->claim;
  int64_t now = o->now;
  count(e, o, exhausted, rc, fx);
  /* A lease counts as expired once its failure is recorded: a heartbeat
   * that renewed it after the reaper looked fences the reaper out. */
  if (rc == 0 && f->reaped == TK__REAPED_LEASE) e->stats.lease_expired++;
  /* The fields every step event shares; filled only for the events some
   * observer wants. How late after its run_at the handler was called: the
   * retry precision users feel, queueing in this orchestrator included. */
  tk_event ev = {.at = now, .task = c->task_id, .step = f->step_name, .attempt = c->attempt,
                 .has_late_ms = f->started_at > 0,
                 .late_ms = f->started_at > 0 ? f->started_at - c->run_at : 0,
                 .has_duration_us = f->started_at > 0, .duration_us = f->run_ns / 1000};
  if (rc == 0 && f->reaped == TK__REAPED_LEASE && tk__engine_wants(e, TK_EV_STEP_LEASE_EXPIRED)) {
    tk_event x = {.type = TK_EV_STEP_LEASE_EXPIRED, .at = now, .task = c->task_id,
                  .step = f->step_name, .attempt = c->attempt};
    x.u.lease.owner = f->owner;
    tk__engine_emit(e, &x);
  }
  if (rc == TK_EFENCED) {
    tk__engine_log(e, TK_LOG_WARN, "task %lld step %s attempt %d: %s", (long long)c->task_id,
                   f->step_name, c->attempt, err->msg);
    if (tk__engine_wants(e, TK_EV_STEP_FENCED_OUT)) {
      ev.type = TK_EV_STEP_FENCED_OUT;
      ev.u.failed.outcome = o->attempt_outcome;
      tk__engine_emit(e, &ev);
    }
    return;
  }
  if (rc != 0) {
    /* The step stays in progress under its lease; when the lease expires
     * the reaper retries it through this same path. */
    tk__engine_log(e, TK_LOG_ERROR, "task %lld step %s attempt %d: cannot record outcome: %s",
                   (long long)c->task_id, f->step_name, c->attempt, err->msg);
    return;
  }
  switch (o->next) {
  case TK__NEXT_COMPLETE:
    if (tk__engine_wants(e, TK_EV_STEP_COMPLETED)) {
      ev.type = TK_EV_STEP_COMPLETED;
      ev.u.completed.children_released = fx->children_released;
      tk__engine_emit(e, &ev);
    }
    break;
  case TK__NEXT_RETRY: {
    if (tk__engine_wants(e, TK_EV_STEP_FAILED)) {
      tk_event x = ev;
      x.type = TK_EV_STEP_FAILED;
      x.u.failed.error = o->error;
      x.u.failed.outcome = o->attempt_outcome;
      tk__engine_emit(e, &x);
    }
    if (d->budget != NULL && tk__engine_wants(e, TK_EV_STEP_RETRY_DEFERRED)) {
      tk_event x = ev;
      x.type = TK_EV_STEP_RETRY_DEFERRED;
      x.u.deferred.budget = d->budget;
      x.u.deferred.host = d->host;
      x.u.deferred.computed_delay_ms = d->delay_ms;
      x.u.deferred.computed_source = d->source;
      x.u.deferred.computed_run_at = d->run_at;
      x.u.deferred.deferred_until = o->run_at;
      tk__engine_emit(e, &x);
    }
    if (tk__engine_wants(e, TK_EV_STEP_RETRY_SCHEDULED)) {
      tk_event x = ev;
      x.type = TK_EV_STEP_RETRY_SCHEDULED;
      x.u.retry.delay_ms = o->delay_ms;
      x.u.retry.source = o->source;
      x.u.retry.run_at = o->run_at;
      tk__engine_emit(e, &x);
    }
    if (e->on_log == NULL) break;
    char delay[32], why[160];
    tk_duration_format(o->delay_ms, delay, sizeof delay);
    snprintf(why, sizeof why, "%s", tk_delay_source_name(o->source));
    if (d->budget != NULL) {
      char was[32];
      tk_duration_format(d->delay_ms, was, sizeof was);
      snprintf(why, sizeof why, "retry budget %s%s%s deferred it from %s", d->budget,
               d->host ? " for " : "", d->host ? d->host : "", was);
    }
    tk__engine_log(e, TK_LOG_INFO, "task %lld step %s attempt %d/%d failed: %s; retry in %s (%s)",
                   (long long)c->task_id, f->step_name, c->attempt, c->max_attempts, o->error,
                   delay, why);
    break;
  }
  case TK__NEXT_ERROR: {
    tk_event_type t = exhausted ? TK_EV_STEP_EXHAUSTED : TK_EV_STEP_FAILED;
    if (tk__engine_wants(e, t)) {
      ev.type = t;
      ev.u.failed.error = o->error;
      ev.u.failed.outcome = o->attempt_outcome;
      tk__engine_emit(e, &ev);
    }
    tk__engine_log(e, TK_LOG_WARN, "task %lld step %s attempt %d/%d failed%s: %s",
                   (long long)c->task_id, f->step_name, c->attempt, c->max_attempts,
                   exhausted ? ", attempts exhausted" : " permanently", o->error);
    break;
  }
  }
  if (fx->task_state != NULL) {
    int ok = strcmp(fx->task_state, TK__TASK_COMPLETE) == 0;
    tk_event_type t = ok ? TK_EV_TASK_COMPLETED : TK_EV_TASK_FAILED;
    if (tk__engine_wants(e, t)) {
      tk_event x = {.type = t, .at = now, .task = c->task_id};
      x.u.finished.state = fx->task_state;
      tk__engine_emit(e, &x);
    }
    tk__engine_log(e, ok ? TK_LOG_INFO : TK_LOG_WARN, "task %lld %s", (long long)c->task_id,
                   ok ? "complete" : "failed");
  }
}

/* Room in e's finish arrays for n outcomes; 0, or TK_ENOMEM. */
static int finish_room(tk_engine *e, int n) {
  if (n <= e->fin_cap) return 0;
  int cap = e->fin_cap ? e->fin_cap : 64;
  while (cap < n) cap *= 2;
  tk__outcome *o = realloc(e->fin_outcomes, (size_t)cap * sizeof *o);
  if (o) e->fin_outcomes = o;
  tk__effects *fx = realloc(e->fin_effects, (size_t)cap * sizeof *fx);
  if (fx) e->fin_effects = fx;
  tk_err *errs = realloc(e->fin_errs, (size_t)cap * sizeof *errs);
  if (errs) e->fin_errs = errs;
  int *ex = realloc(e->fin_exhausted, (size_t)cap * sizeof *ex);
  if (ex) e->fin_exhausted = ex;
  tk__deferral *d = realloc(e->fin_deferrals, (size_t)cap * sizeof *d);
  if (d) e->fin_deferrals = d;
  char(*why)[320] = realloc(e->fin_why, (size_t)cap * sizeof *why);
  if (why) e->fin_why = why;
  if (!o || !fx || !errs || !ex || !d || !why) return TK_ENOMEM;
  e->fin_cap = cap;
  return 0;
}

void tk__engine_finish_free(tk_engine *e) {
  free(e->fin_outcomes);
  free(e->fin_effects);
  free(e->fin_errs);
  free(e->fin_exhausted);
  free(e->fin_deferrals);
  free(e->fin_why);
  e->fin_cap = 0;
}

int tk__engine_finish(tk_engine *e, const tk__finish *items, int n, tk__claim_request *next,
                      tk_err *lost) {
  if (next) next->n = 0;
  e->fin_unrecorded = 0;
  if (n <= 0) return 0;
  if (finish_room(e, n) != 0) {
    /* Unrecorded attempts keep their leases; the reaper retries them. */
    tk__engine_log(e, TK_LOG_ERROR, "out of memory recording %d outcomes", n);
    e->fin_unrecorded = n;
    return 0;
  }
  tk__outcome *o = e->fin_outcomes;
  tk__effects *fx = e->fin_effects;
  tk_err *errs = e->fin_errs;
  int *exhausted = e->fin_exhausted;
  memset(fx, 0, (size_t)n * sizeof *fx);
  int64_t now = tk_clock_now(&e->clock);
  for (int i = 0; i < n; i++) {
    decide(e, &items[i], now, &o[i], &exhausted[i], e->fin_why[i], sizeof e->fin_why[i]);
    if (items[i].batch) tk__batch_decide(items[i].batch, &o[i]);
  }
  /* Outcomes that a lost connection kept come back here and are counted
   * in their budgets again: rare, and a few counts off for one window. */
  tk__budgets_apply(e, items, o, e->fin_deferrals, n);
  tk_err err;
  tk_err_clear(&err);
  int rc = e->store->ops->record(e->store, o, n, fx, errs, next, &err);
  if (rc == TK_EDISCONNECTED) {
    *lost = err;
    return rc;
  }
  /* Each outcome's code stays in fin_errs for the caller (remote.c). */
  for (int i = 0; rc != 0 && i < n; i++) errs[i] = err;
  for (int i = 0; i < n; i++) {
    const tk_err *one = rc ? &err : &errs[i];
    if (one->code != 0 && one->code != TK_EFENCED) e->fin_unrecorded++;
    tk_err reaper;
    if (rc == 0 && errs[i].code == TK_EFENCED && items[i].reaped) {
      tk_err_set(&reaper, TK_EFENCED, "not expired after all: its owner renewed the lease, or "
                                      "the step moved on, after the reaper looked");
      one = &reaper;
    }
    /* Items that gave up are named before the step's own events. */
    if (rc == 0 && errs[i].code == 0 && items[i].batch) tk__batch_report(e, items[i].batch, now);
    report(e, &items[i], &o[i], exhausted[i], rc ? rc : errs[i].code, &fx[i], one,
           &e->fin_deferrals[i]);
  }
  return 0;
}
