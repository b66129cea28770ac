/* The task state machine's rules, shared by every backend (rules.h). */
#include "store/rules.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

static int eq(const char *a, const char *b) { return a != NULL && strcmp(a, b) == 0; }

const char *tk__next_state_name(tk__next_state n) {
  switch (n) {
  case TK__NEXT_COMPLETE: return TK__STEP_COMPLETE;
  case TK__NEXT_RETRY: return TK__STEP_WAITING_FOR_RETRY;
  case TK__NEXT_ERROR: return TK__STEP_ERROR;
  }
  return "?";
}

int tk__settle_needs_scan(const tk__task_counts *c) {
  return (c->errors > 0 || eq(c->state, TK__TASK_ERROR)) && c->done < c->total;
}

const char *tk__settle(const tk__task_counts *c, int can_progress, const char **reason) {
  *reason = NULL;
  /* A cancelled or complete task never moves again. */
  if (eq(c->state, TK__TASK_CANCELLED) || eq(c->state, TK__TASK_COMPLETE)) return NULL;
  const char *to = NULL;
  if (c->done == c->total) {
    to = TK__TASK_COMPLETE;
    *reason = TK__REASON_ALL_COMPLETE;
  } else if (!can_progress && c->errors > 0) {
    to = TK__TASK_ERROR;
    *reason = TK__REASON_TASK_FAILED;
  } else if (eq(c->state, TK__TASK_ERROR) && can_progress) {
    to = TK__TASK_IN_PROGRESS;
    *reason = TK__REASON_TASK_RESUMED;
  }
  if (to == NULL || eq(c->state, to)) {
    *reason = NULL;
    return NULL;
  }
  return to;
}

int tk__task_state_terminal(const char *to) {
  return eq(to, TK__TASK_COMPLETE) || eq(to, TK__TASK_ERROR) || eq(to, TK__TASK_CANCELLED);
}

int tk__task_cancellable(const char *task_state) {
  return !eq(task_state, TK__TASK_COMPLETE) && !eq(task_state, TK__TASK_CANCELLED);
}

int tk__task_operable(tk__operator_action action, const char *task_state) {
  return action == TK__OP_CANCEL ? tk__task_cancellable(task_state)
                                 : !eq(task_state, TK__TASK_CANCELLED);
}

int tk__operator_plan(tk__operator_action action, int64_t task_id, const char *task_state,
                      const char *step, const char *step_state, const tk__op_step_kind *kind,
                      tk__op_plan *plan, tk_err *err) {
  static const tk__op_step_kind ordinary;
  if (kind == NULL) kind = &ordinary;
  memset(plan, 0, sizeof *plan);
  plan->action = action;
  if (action == TK__OP_CANCEL) {
    if (!tk__task_cancellable(task_state))
      return tk_err_set(err, TK_ESTATE, "task %lld is already %s", (long long)task_id,
                        task_state);
    plan->cancel_task = 1;
    plan->task_to = TK__TASK_CANCELLED;
    plan->reason = "operator cancel";
    plan->step_reason = TK__REASON_TASK_CANCELLED;
    return 0;
  }
  if (!tk__task_operable(action, task_state))
    return tk_err_set(err, TK_ESTATE, "task %lld is cancelled", (long long)task_id);
  int in_error = eq(step_state, TK__STEP_ERROR);
  if (action == TK__OP_RETRY && kind->map)
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld is a map step: retry its failed instances "
                      "(\"%s[N]\") instead, or resolve it",
                      step, (long long)task_id, step);
  plan->map_settle = kind->instance;
  if (action == TK__OP_RETRY) {
    if (!in_error)
      return tk_err_set(err, TK_ESTATE,
                        "step \"%s\" of task %lld is %s: only a step in error can be retried",
                        step, (long long)task_id, step_state);
    /* A finished map has handed its results, null for this instance, to its
     * children: a new run could change nothing they saw. */
    if (kind->instance && kind->map_state &&
        (eq(kind->map_state, TK__STEP_COMPLETE) || eq(kind->map_state, TK__STEP_RESOLVED)))
      return tk_err_set(err, TK_ESTATE,
                        "step \"%s\" of task %lld is an instance of a map that is already %s: "
                        "its children have the map's results (null for this instance); resolve "
                        "it instead",
                        step, (long long)task_id, kind->map_state);
    plan->step_to = TK__STEP_WAITING_FOR_RETRY;
    plan->reset_attempts = 1;
    plan->steps_error_delta = kind->instance ? 0 : -1;
    plan->reason = "operator retry";
    plan->settle = 1;
    return 0;
  }
  if (!in_error && !eq(step_state, TK__STEP_PENDING) && !eq(step_state, TK__STEP_WAITING_FOR_RETRY))
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld is %s: only a step that is pending, waiting for "
                      "a retry or in error can be resolved",
                      step, (long long)task_id, step_state);
  plan->step_to = TK__STEP_RESOLVED;
  plan->steps_done_delta = kind->instance ? 0 : 1;
  plan->steps_error_delta = in_error && !kind->instance ? -1 : 0;
  plan->release_children = !kind->instance;
  plan->skip_branches = kind->decision;
  plan->reason = "operator resolve";
  plan->settle = 1;
  return 0;
}

int tk__deadline_plan(const char *task_state, int64_t deadline_at, int64_t now,
                      tk__op_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (deadline_at == TK__NONE || deadline_at > now) return 0;
  if (!eq(task_state, TK__TASK_PENDING) && !eq(task_state, TK__TASK_IN_PROGRESS)) return 0;
  plan->action = TK__OP_CANCEL;
  plan->cancel_task = 1;
  plan->task_to = TK__TASK_ERROR;
  plan->reason = TK__REASON_DEADLINE;
  plan->step_reason = TK__REASON_STEP_DEADLINE;
  return 1;
}

int tk__fenced_error(tk_err *err, const tk__outcome *o) {
  return tk_err_set(err, TK_EFENCED,
                    "outcome of step %lld attempt %d by %s refused: the lease was lost or the "
                    "attempt superseded",
                    (long long)o->step_id, o->attempt, o->owner);
}

int tk__heartbeat_refused(tk_err *err, int64_t step_id, int64_t claim_id) {
  return tk_err_set(err, TK_EFENCED, "the lease of step %lld is no longer held by claim %lld",
                    (long long)step_id, (long long)claim_id);
}

void tk__fenced_attempt_text(char *buf, size_t cap, const tk__outcome *o) {
  snprintf(buf, cap, "%s refused: the step was no longer held by this claim", o->attempt_outcome);
}

int tk__budget_key_check(const char *key, tk_err *err) {
  size_t len = key ? strlen(key) : 0;
  if (len == 0 || len > TK__BUDGET_KEY_MAX)
    return tk_err_set(err, TK_EINVAL,
                      "retry budget key of %zu bytes: must be 1 to %d bytes (a budget's name "
                      "and a host)",
                      len, TK__BUDGET_KEY_MAX);
  return 0;
}

/* ms since the epoch as "YYYY-MM-DD HH:MM:SS UTC" in buf. */
static const char *utc_text(int64_t ms, char *buf, size_t cap) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  if (ms == TK__NONE || gmtime_r(&t, &tm) == NULL) {
    snprintf(buf, cap, "an unknown time");
    return buf;
  }
  strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

int tk__step_state_finished(const char *state) {
  return eq(state, TK__STEP_COMPLETE) || eq(state, TK__STEP_ERROR) ||
         eq(state, TK__STEP_RESOLVED) || eq(state, TK__STEP_SKIPPED) ||
         eq(state, TK__STEP_CANCELLED);
}

int tk__signal_plan(int64_t task_id, const char *task_state, const char *step,
                    const char *step_state, int64_t finished_at, int64_t pending_at,
                    tk_err *err) {
  char when[48];
  if (tk__step_state_finished(step_state))
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld already finished: %s since %s; a signal cannot "
                      "change it",
                      step, (long long)task_id, step_state,
                      utc_text(finished_at, when, sizeof when));
  if (eq(task_state, TK__TASK_COMPLETE) || eq(task_state, TK__TASK_CANCELLED))
    return tk_err_set(err, TK_ESTATE, "task %lld is %s: a signal cannot change it",
                      (long long)task_id, task_state);
  if (pending_at != TK__NONE)
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld has a signal sent at %s that is not delivered "
                      "yet; send it again with the same key to see its answer",
                      step, (long long)task_id, utc_text(pending_at, when, sizeof when));
  return 0;
}

int tk__signal_data_parse(const char *text, json_t **data, tk_err *err) {
  json_error_t je;
  *data = json_loads(text, JSON_DECODE_ANY, &je);
  if (*data == NULL)
    return tk_err_set(err, TK_EINVAL, "signal data is not JSON: %s at line %d, column %d",
                      je.text, je.line, je.column);
  return 0;
}

int tk__signal_check(const json_t *data, const char *error, const char *key, char **compact,
                     const char **place, tk_err *err) {
  const char *at = NULL;
  int rc = 0;
  if (compact) *compact = NULL;
  if ((data == NULL) == (error == NULL)) {
    at = data ? "error" : "data";
    rc = tk_err_set(err, TK_EINVAL, "a signal carries either data (JSON) or an error, exactly "
                                    "one of them, not %s",
                    data ? "both" : "neither");
  } else if (error != NULL && error[0] == '\0') {
    at = "error";
    rc = tk_err_set(err, TK_EINVAL, "error: empty: a failing signal needs a message");
  } else if (key != NULL && (key[0] == '\0' || strlen(key) > 200)) {
    at = "key";
    rc = tk_err_set(err, TK_EINVAL, "key: an idempotency key must be 1 to 200 bytes, not %zu",
                    strlen(key));
  } else if (data != NULL && compact != NULL &&
             (*compact = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL) {
    rc = tk_err_set(err, TK_ENOMEM, "out of memory writing signal data");
  }
  if (place) *place = at;
  return rc;
}

int tk__signal_body_check(const char *data, const char *error, const char *key, tk_err *err) {
  json_t *parsed = NULL;
  int rc = data ? tk__signal_data_parse(data, &parsed, err) : 0;
  if (rc == 0) rc = tk__signal_check(parsed, error, key, NULL, NULL, err);
  json_decref(parsed);
  return rc;
}

int64_t tk__callback_until(int64_t now, int64_t extend_ms, int64_t timeout_ms, int64_t limit_at) {
  int64_t until = now + (extend_ms > 0 ? extend_ms : timeout_ms);
  return until < limit_at ? until : limit_at;
}

int tk__callback_plan(int64_t task_id, const char *step, int attempt, int held,
                      const char *step_state, int64_t prior_at, tk_err *err) {
  char when[48];
  if (prior_at != TK__NONE)
    return tk_err_set(err, TK_ESTATE,
                      "a callback for attempt %d of step \"%s\" of task %lld came already at %s: "
                      "an attempt takes one callback",
                      attempt, step, (long long)task_id, utc_text(prior_at, when, sizeof when));
  if (!held)
    return tk_err_set(err, TK_ESTATE,
                      "attempt %d of step \"%s\" of task %lld is over (the step is %s now): its "
                      "callback token changes nothing",
                      attempt, step, (long long)task_id, step_state);
  return 0;
}

char *tk__child_identity(int64_t task_id, int64_t step_id, int64_t claim_id, char *buf,
                         size_t cap) {
  snprintf(buf, cap, "tasker:child:%lld:%lld:%lld", (long long)task_id, (long long)step_id,
           (long long)claim_id);
  return buf;
}
