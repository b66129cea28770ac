/* The JSON-lines observer: each typed event as one JSON object (DESIGN
 * §11), the --events lines of tasker run and tasker submit. */
#include <stdlib.h>

#include <jansson.h>

#include <tasker/events.h>

static const char *const names[TK_EV__COUNT] = {
    [TK_EV_TASK_CREATED] = "task.created",
    [TK_EV_STEP_CLAIMED] = "step.claimed",
    [TK_EV_STEP_COMPLETED] = "step.completed",
    [TK_EV_STEP_FAILED] = "step.failed",
    [TK_EV_STEP_RETRY_DEFERRED] = "step.retry_deferred",
    [TK_EV_STEP_RETRY_SCHEDULED] = "step.retry_scheduled",
    [TK_EV_STEP_EXHAUSTED] = "step.exhausted",
    [TK_EV_STEP_LEASE_EXPIRED] = "step.lease_expired",
    [TK_EV_STEP_FENCED_OUT] = "step.fenced_out",
    [TK_EV_TASK_COMPLETED] = "task.completed",
    [TK_EV_TASK_FAILED] = "task.failed",
    [TK_EV_ITEM_GAVE_UP] = "item.gave_up",
};

const char *tk_event_type_name(tk_event_type type) {
  return (unsigned)type < TK_EV__COUNT ? names[type] : "unknown";
}

static void set_int(json_t *o, const char *k, int64_t v) {
  json_object_set_new(o, k, json_integer((json_int_t)v));
}

static void set_str(json_t *o, const char *k, const char *v) {
  json_object_set_new(o, k, json_string(v));
}

char *tk_event_json(const tk_event *ev) {
  json_t *o = json_object();
  if (o == NULL) return NULL;
  set_str(o, "type", tk_event_type_name(ev->type));
  set_int(o, "at", ev->at);
  if (ev->type == TK_EV_TASK_CREATED) {
    /* A schedule's slot is created by an orchestrator, which says who;
     * tk_task_submit's has none (no engine) and leaves it out. */
    if (ev->orchestrator) set_str(o, "orchestrator", ev->orchestrator);
    set_int(o, "task", ev->task);
    set_str(o, "template", ev->u.created.template_name);
    if (ev->u.created.version) set_str(o, "version", ev->u.created.version);
    if (ev->u.created.identity) set_str(o, "identity", ev->u.created.identity);
    goto dump;
  }
  set_str(o, "orchestrator", ev->orchestrator);
  set_int(o, "task", ev->task);
  if (ev->type == TK_EV_TASK_COMPLETED || ev->type == TK_EV_TASK_FAILED) {
    set_str(o, "state", ev->u.finished.state);
    goto dump;
  }
  set_str(o, "step", ev->step);
  set_int(o, "attempt", ev->attempt);
  switch (ev->type) {
  case TK_EV_STEP_CLAIMED:
    set_int(o, "max_attempts", ev->u.claimed.max_attempts);
    set_int(o, "late_ms", ev->late_ms);
    set_int(o, "claim_us", ev->u.claimed.claim_us);
    goto dump;
  case TK_EV_STEP_LEASE_EXPIRED:
    set_str(o, "owner", ev->u.lease.owner);
    goto dump;
  case TK_EV_ITEM_GAVE_UP:
    set_str(o, "item", ev->u.item.item);
    set_int(o, "item_attempts", ev->u.item.item_attempts);
    set_str(o, "error", ev->u.item.error);
    goto dump;
  default: break;
  }
  if (ev->has_late_ms) set_int(o, "late_ms", ev->late_ms);
  switch (ev->type) {
  case TK_EV_STEP_FENCED_OUT: set_str(o, "outcome", ev->u.failed.outcome); break;
  case TK_EV_STEP_COMPLETED: set_int(o, "children_released", ev->u.completed.children_released); break;
  case TK_EV_STEP_FAILED:
  case TK_EV_STEP_EXHAUSTED:
    set_str(o, "error", ev->u.failed.error);
    set_str(o, "outcome", ev->u.failed.outcome);
    break;
  case TK_EV_STEP_RETRY_DEFERRED:
    set_str(o, "budget", ev->u.deferred.budget);
    json_object_set_new(o, "host",
                        ev->u.deferred.host ? json_string(ev->u.deferred.host) : json_null());
    set_int(o, "computed_delay_ms", ev->u.deferred.computed_delay_ms);
    set_str(o, "computed_source", tk_delay_source_name(ev->u.deferred.computed_source));
    set_int(o, "computed_run_at", ev->u.deferred.computed_run_at);
    set_int(o, "deferred_until", ev->u.deferred.deferred_until);
    break;
  case TK_EV_STEP_RETRY_SCHEDULED:
    set_int(o, "delay_ms", ev->u.retry.delay_ms);
    set_str(o, "source", tk_delay_source_name(ev->u.retry.source));
    set_int(o, "run_at", ev->u.retry.run_at);
    break;
  default: break;
  }
dump:;
  char *line = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return line;
}

static void jsonl_on_event(const tk_event *ev, void *ud) {
  const tk_jsonl_sink *sink = ud;
  if (sink == NULL || sink->fn == NULL) return;
  char *line = tk_event_json(ev);
  if (line) sink->fn(line, sink->ud);
  free(line);
}

const tk_observer tk_observer_jsonl = {TK_OBSERVER_VERSION, TK_EV_ALL, jsonl_on_event};
