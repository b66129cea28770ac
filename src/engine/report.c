/* Reports for operators: a task with its steps and derived statuses
 * (DESIGN §3), the store-wide status, and why a step is not running. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <string.h>

static int is(json_t *step, const char *state) {
  return strcmp(json_string_value(json_object_get(step, "state")), state) == 0;
}

static json_int_t num(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* The first matching execution status of DESIGN §3. */
static const char *execution_status(json_t *steps, int64_t now) {
  int error = 0, ready = 0, running = 0, waiting = 0, done = 0, n = 0;
  size_t i;
  json_t *s;
  json_array_foreach(steps, i, s) {
    n++;
    if (is(s, TK__STEP_ERROR)) error++;
    else if (is(s, TK__STEP_IN_PROGRESS)) running++;
    else if (is(s, TK__STEP_COMPLETE) || is(s, TK__STEP_RESOLVED) || is(s, TK__STEP_CANCELLED)) done++;
    else if ((is(s, TK__STEP_PENDING) || is(s, TK__STEP_WAITING)) && num(s, "parents_remaining") == 0) {
      if (num(s, "run_at") <= now) ready++;
      else waiting++;
    }
  }
  if (error) return "blocked_by_failures";
  if (ready) return "has_ready_steps";
  if (running) return "processing";
  if (done == n) return "all_complete";
  if (waiting) return "waiting_for_retry";
  return "waiting_for_dependencies";
}

/* Why a step is not running now, as {reason, until?, detail}. */
static json_t *why_step(json_t *steps, json_t *s, int64_t now) {
  const char *state = json_string_value(json_object_get(s, "state"));
  if (is(s, TK__STEP_COMPLETE) || is(s, TK__STEP_RESOLVED))
    return json_pack("{s:s, s:s}", "reason", "done", "detail", "the step has finished");
  if (is(s, TK__STEP_CANCELLED))
    return json_pack("{s:s, s:s}", "reason", "cancelled", "detail", "the task was cancelled");
  if (is(s, TK__STEP_ERROR))
    return json_pack("{s:s, s:s}", "reason", "error",
                     "detail", "the step failed for good; `tasker retry` or `tasker resolve` it");
  if (is(s, TK__STEP_IN_PROGRESS))
    return json_pack("{s:s, s:I, s:s}", "reason", "running", "until", num(s, "lease_expires_at"),
                     "detail", "an orchestrator holds the step's lease");
  if (num(s, "parents_remaining") > 0) {
    json_t *blocking = json_array();
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(s, "depends_on"), i, d) {
      size_t k;
      json_t *p;
      json_array_foreach(steps, k, p) {
        if (strcmp(json_string_value(json_object_get(p, "name")), json_string_value(d)) == 0 &&
            !is(p, TK__STEP_COMPLETE) && !is(p, TK__STEP_RESOLVED))
          json_array_append_new(blocking, json_pack("{s:O, s:O}", "step", json_object_get(p, "name"),
                                                    "state", json_object_get(p, "state")));
      }
    }
    return json_pack("{s:s, s:o, s:s}", "reason", "waiting_for_dependencies", "blocking", blocking,
                     "detail", "steps it depends on have not completed");
  }
  if (num(s, "run_at") > now)
    return json_pack("{s:s, s:I, s:s}", "reason",
                     strcmp(state, TK__STEP_WAITING) == 0 ? "waiting_for_retry" : "scheduled",
                     "until", num(s, "run_at"), "detail", "its run_at is in the future");
  return json_pack("{s:s, s:s}", "reason", "ready",
                   "detail", "ready now: the next claim by any orchestrator takes it");
}

static int dump(json_t *v, char **out, tk_err *err) {
  *out = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(v);
  return *out ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory");
}

int tk_engine_task_json(tk_store *s, int64_t task_id, int64_t now, char **out, tk_err *err) {
  json_t *task;
  int rc = s->ops->task_show(s, task_id, &task, err);
  if (rc) return rc;
  json_t *steps = json_object_get(task, "steps");
  /* A cancelled task has nothing left to wait for; say so rather than
   * calling its unfinished steps complete. */
  const char *state = json_string_value(json_object_get(task, "state"));
  json_object_set_new(task, "execution_status",
                      json_string(state && strcmp(state, TK__TASK_CANCELLED) == 0
                                      ? "cancelled"
                                      : execution_status(steps, now)));
  json_object_set_new(task, "now", json_integer(now));
  size_t i;
  json_t *st;
  json_array_foreach(steps, i, st) json_object_set_new(st, "why", why_step(steps, st, now));
  return dump(task, out, err);
}

int tk_engine_status_json(tk_store *s, int64_t now, char **out, tk_err *err) {
  json_t *status;
  int rc = s->ops->status(s, now, &status, err);
  if (rc) return rc;
  json_object_set_new(status, "now", json_integer(now));
  return dump(status, out, err);
}
