/* Reports for operators, and the one place their JSON is made: a task with
 * its steps, attempts, transitions and batch items and derived statuses
 * (DESIGN §3), the store-wide status, why a step is not running, and the
 * template list. Backends return typed rows (store.h); this file turns
 * them into the documented JSON (docs/cli.md). */
#include "ops/ops_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>
#include <tasker/engine.h>
#include <tasker/workflow.h>

#include "core/civil.h"
#include "store/rules.h"

/* Instances a task's report shows of each map step (the first ones); the
 * rest are read page by page (tk_instances_json). */
#define TK__INSTANCES_SHOWN 10

static int is(json_t *step, const char *state) {
  return strcmp(json_string_value(json_object_get(step, "state")), state) == 0;
}

static json_int_t num(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* The first matching execution status of DESIGN §3. */
static const char *execution_status(json_t *steps, int64_t now) {
  int error = 0, ready = 0, running = 0, waiting = 0, scheduled = 0, done = 0, n = 0, world = 0;
  size_t i;
  json_t *s;
  json_array_foreach(steps, i, s) {
    n++;
    if (is(s, TK__STEP_ERROR)) error++;
    /* A mapped step's instances are what runs; they are not in the list. */
    else if (is(s, TK__STEP_IN_PROGRESS) || is(s, TK__STEP_MAPPED)) running++;
    /* A wait step waiting for its signal (DESIGN §18). */
    else if (is(s, TK__STEP_WAITING)) world++;
    else if (is(s, TK__STEP_COMPLETE) || is(s, TK__STEP_RESOLVED) || is(s, TK__STEP_CANCELLED) ||
             is(s, TK__STEP_SKIPPED))
      done++;
    else if ((is(s, TK__STEP_PENDING) || is(s, TK__STEP_WAITING_FOR_RETRY)) &&
             num(s, "parents_remaining") == 0) {
      if (num(s, "run_at") <= now) ready++;
      else if (is(s, TK__STEP_WAITING_FOR_RETRY)) waiting++;
      else scheduled++; /* a delayed start */
    }
  }
  if (error) return "blocked_by_failures";
  if (ready) return "has_ready_steps";
  if (running) return "processing";
  if (world) return "waiting_for_the_world";
  if (done == n) return "all_complete";
  if (waiting) return "waiting_for_retry";
  if (scheduled) return "scheduled";
  return "waiting_for_dependencies";
}

/* "waiting until 2026-11-25T09:00:00Z (in 3h)": when a step that is not
 * due yet starts, in UTC to the second, and how long from now. */
static json_t *waiting_until(int64_t at, int64_t now) {
  int64_t secs = at >= 0 ? at / 1000 : (at - 999) / 1000;
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400, sod = secs - days * 86400;
  int y, mo, d;
  tk__civil_from_days(days, &y, &mo, &d);
  char left[48], text[128];
  /* Rounded up to the second, as the time is shown to the second. */
  tk_duration_format((at - now + 999) / 1000 * 1000, left, sizeof left);
  snprintf(text, sizeof text, "waiting until %04d-%02d-%02dT%02d:%02d:%02dZ (in %s)", y, mo, d,
           (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), left);
  return json_string(text);
}

/* The steps of `steps` named in `names` (a JSON array) that hold a child
 * back: not complete, resolved or skipped (a convergence step runs once
 * every parent is one of those), as [{step, state}]. */
static json_t *blocking_parents(json_t *steps, json_t *names) {
  json_t *blocking = json_array();
  size_t i, k;
  json_t *d, *p;
  json_array_foreach(names, i, d) {
    json_array_foreach(steps, k, p) {
      if (strcmp(json_string_value(json_object_get(p, "name")), json_string_value(d)) == 0 &&
          !is(p, TK__STEP_COMPLETE) && !is(p, TK__STEP_RESOLVED) && !is(p, TK__STEP_SKIPPED))
        json_array_append_new(blocking, json_pack("{s:O, s:O}", "step", json_object_get(p, "name"),
                                                  "state", json_object_get(p, "state")));
    }
  }
  return blocking;
}

/* "waiting for 3 of 10 instances (1 failed)": a mapped step's wait. */
static json_t *instances_wait(json_t *instances) {
  char text[160];
  snprintf(text, sizeof text, "waiting for %lld of %lld instances (%lld failed)",
           (long long)num(instances, "waiting"), (long long)num(instances, "total"),
           (long long)num(instances, "failed"));
  return json_string(text);
}

/* Why a step in error is there, and what an operator may do (DESIGN
 * §17): a decision's message says what it chose that it may not, and
 * resolving it chooses nothing; a map failed by its instances is retried
 * through them. */
static json_t *why_error(json_t *s) {
  const char *last = json_string_value(json_object_get(s, "last_error"));
  char text[TK_ERR_MSG_MAX + 160];
  if (json_object_get(s, "decides") && last)
    snprintf(text, sizeof text,
             "the decision failed for good: %s; `tasker retry` it, or `tasker resolve` it "
             "(which skips every branch)",
             last);
  else if (json_object_get(s, "map") && last)
    snprintf(text, sizeof text,
             "the map failed for good: %s; `tasker retry` its failed instances, or `tasker "
             "resolve` it",
             last);
  else
    snprintf(text, sizeof text, "the step failed for good; `tasker retry` or `tasker resolve` it");
  return json_pack("{s:s, s:s}", "reason", "error", "detail", text);
}

/* Why a ready step of a queue with limits waits for room or a token
 * (DESIGN §19), from the queue as queue_list counts it now; NULL when the
 * queue would let a claim take it. */
static json_t *why_queue_held(const tk__queue_rec *q, const char *name) {
  char text[200];
  if (q->concurrency > 0 && q->in_progress >= q->concurrency)
    snprintf(text, sizeof text,
             "ready, waiting for room in queue \"%s\": %lld of its concurrency %d in progress",
             name, (long long)q->in_progress, q->concurrency);
  else if (q->rate > 0 && q->tokens < 1)
    snprintf(text, sizeof text,
             "ready, waiting for a token of queue \"%s\" (rate %g per second): the next in "
             "%.0f ms",
             name, q->rate, ceil((1 - q->tokens) * 1000 / q->rate));
  else
    return NULL;
  return json_pack("{s:s, s:s, s:s}", "reason", "waiting_for_queue", "queue", name, "detail",
                   text);
}

/* The queue named `name` among queues[0..n), or NULL. */
static const tk__queue_rec *queue_find(const tk__queue_rec *queues, int n, const char *name) {
  for (int i = 0; name && i < n; i++)
    if (strcmp(queues[i].name, name) == 0) return &queues[i];
  return NULL;
}

/* s's string member key, or "" when it has none. */
static const char *str_or(json_t *s, const char *key) {
  const char *v = json_string_value(json_object_get(s, key));
  return v ? v : "";
}

/* Why a wait step that waits for its signal (DESIGN §18) is not running:
 * what it waits for, since when (waiting_since, step_json) and until
 * when (its timeout, run_at). */
static json_t *why_waiting(json_t *s) {
  char text[320];
  if (strcmp(str_or(s, "waits_for"), "callback") == 0) {
    snprintf(text, sizeof text,
             "waits for a callback: its request was answered 2xx, and the service it called "
             "POSTs to the attempt's callback URL; at its timeout (until) the attempt fails "
             "as a timeout");
    return json_pack("{s:s, s:s, s:O, s:I, s:s}", "reason", "waiting_for_callback", "waits_for",
                     "callback", "since", json_object_get(s, "waiting_since"), "until",
                     num(s, "run_at"), "detail", text);
  }
  json_t *child = json_object_get(s, "waits_for_child");
  /* No timeout (a task step without one): waits until the child ends. */
  json_t *until = num(s, "run_at") == INT64_MAX ? json_null() : json_integer(num(s, "run_at"));
  if (child != NULL) {
    snprintf(text, sizeof text, "waits for its child task %lld (tasker show %lld) to finish",
             (long long)json_integer_value(child), (long long)json_integer_value(child));
    return json_pack("{s:s, s:s, s:O, s:O, s:o, s:s}", "reason", "waiting_for_child",
                     "waits_for", "child", "child", child, "since",
                     json_object_get(s, "waiting_since"), "until", until, "detail", text);
  }
  json_decref(until);
  snprintf(text, sizeof text,
           "waits for a signal: tasker signal TASK %s, or POST /api/v1/tasks/ID/steps/%s/signal; "
           "at its timeout (until) the attempt fails as a timeout",
           json_string_value(json_object_get(s, "name")),
           json_string_value(json_object_get(s, "name")));
  return json_pack("{s:s, s:s, s:O, s:I, s:s}", "reason", "waiting_for_signal", "waits_for",
                   "signal", "since", json_object_get(s, "waiting_since"), "until",
                   num(s, "run_at"), "detail", text);
}

/* Why a step that its task's deadline cancelled is where it is. */
static json_t *why_deadline(json_t *task) {
  return json_pack("{s:s, s:I, s:s}", "reason", "deadline", "since", num(task, "deadline_at"),
                   "detail", "the task's deadline passed: its unfinished steps were cancelled");
}

/* Why a step is not running now, as {reason, until?, detail}; queues[0..n)
 * the store's queues at now (n 0: none read). */
static json_t *why_step(json_t *steps, json_t *s, int64_t now, const tk__queue_rec *queues,
                        int nqueues) {
  const char *state = json_string_value(json_object_get(s, "state"));
  if (is(s, TK__STEP_COMPLETE) || is(s, TK__STEP_RESOLVED))
    return json_pack("{s:s, s:s}", "reason", "done", "detail", "the step has finished");
  if (is(s, TK__STEP_SKIPPED)) {
    json_t *reason = json_object_get(s, "skipped_reason");
    return json_pack("{s:s, s:o}", "reason", "skipped", "detail",
                     json_is_string(reason) ? json_incref(reason)
                                            : json_string("the step was skipped"));
  }
  if (is(s, TK__STEP_MAPPED)) {
    json_t *instances = json_object_get(s, "instances");
    return json_pack("{s:s, s:o}", "reason", "mapped", "detail",
                     json_is_object(instances) ? instances_wait(instances)
                                               : json_string("its instances are running"));
  }
  if (is(s, TK__STEP_CANCELLED))
    return json_pack("{s:s, s:s}", "reason", "cancelled", "detail", "the task was cancelled");
  if (is(s, TK__STEP_ERROR)) return why_error(s);
  if (is(s, TK__STEP_WAITING)) return why_waiting(s);
  /* A worker step (DESIGN §19) is claimed by its queue's workers only. */
  const char *queue = json_string_value(json_object_get(s, "worker_queue"));
  char text[160];
  if (is(s, TK__STEP_IN_PROGRESS)) {
    if (queue)
      snprintf(text, sizeof text, "a worker of queue \"%s\" holds the step's lease", queue);
    return json_pack("{s:s, s:I, s:s}", "reason", "running", "until", num(s, "lease_expires_at"),
                     "detail", queue ? text : "an orchestrator holds the step's lease");
  }
  if (num(s, "parents_remaining") > 0) {
    json_t *deps = json_object_get(s, "depends_on");
    json_t *blocking = blocking_parents(steps, deps);
    snprintf(text, sizeof text,
             "waiting for %zu of its %zu parents (a parent counts once complete, resolved or "
             "skipped)",
             json_array_size(blocking), json_array_size(deps));
    return json_pack("{s:s, s:o, s:s}", "reason", "waiting_for_dependencies", "blocking",
                     blocking, "detail", text);
  }
  if (num(s, "run_at") > now && strcmp(state, TK__STEP_WAITING_FOR_RETRY) == 0)
    return json_pack("{s:s, s:I, s:s}", "reason", "waiting_for_retry", "until",
                     num(s, "run_at"), "detail", "its run_at is in the future");
  if (num(s, "run_at") > now) /* a delayed start (submit --at, --in) */
    return json_pack("{s:s, s:I, s:o}", "reason", "scheduled", "until", num(s, "run_at"),
                     "detail", waiting_until(num(s, "run_at"), now));
  const char *limited = json_string_value(json_object_get(s, "queue"));
  const tk__queue_rec *q = queue_find(queues, nqueues, limited);
  json_t *held = q ? why_queue_held(q, limited) : NULL;
  if (held) return held;
  if (queue)
    snprintf(text, sizeof text,
             "ready now: the next claim of a worker of queue \"%s\" takes it (orchestrators "
             "never run it)",
             queue);
  return json_pack("{s:s, s:s}", "reason", "ready", "detail",
                   queue ? text : "ready now: the next claim by any orchestrator takes it");
}

/* A nullable integer column as JSON. */
static json_t *opt_int(int64_t v) { return v == TK__NONE ? json_null() : json_integer(v); }
/* Text or null. */
static json_t *opt_str(const char *v) { return v ? json_string(v) : json_null(); }
/* Stored JSON text, parsed; null when NULL or unparsable. */
static json_t *parsed(const char *text) {
  json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  return v ? v : json_null();
}

static json_t *attempt_json(const tk__attempt_rec *a) {
  return json_pack("{s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "attempt", a->attempt,
                   "owner", opt_str(a->owner), "started_at", (json_int_t)a->started_at,
                   "finished_at", opt_int(a->finished_at), "outcome", opt_str(a->outcome),
                   "error", opt_str(a->error), "delay_ms", opt_int(a->delay_ms), "delay_source",
                   opt_str(a->delay_source), "next_run_at", opt_int(a->next_run_at), "due_at",
                   opt_int(a->due_at));
}

/* Why step s was skipped: the reason of its last transition into
 * skipped ("not chosen by triage", "all parents skipped"), or NULL. */
static const char *skipped_reason(const tk__task_report *r, const tk__step_rec *s) {
  const char *reason = NULL;
  for (int i = 0; i < r->ntransitions; i++) {
    const tk__transition_rec *tr = &r->transitions[i];
    if (tr->step_id == s->id && tr->to && strcmp(tr->to, TK__STEP_SKIPPED) == 0)
      reason = tr->reason;
  }
  return reason;
}

/* The branches a decision step chose: the names its results give under
 * its branches_key once complete (the engine checked them), none when an
 * operator resolved it (which skips every branch), null before. */
static json_t *chosen_branches(const tk__step_rec *s, json_t *def_step) {
  if (strcmp(s->state, TK__STEP_RESOLVED) == 0) return json_array();
  if (strcmp(s->state, TK__STEP_COMPLETE) != 0) return json_null();
  json_t *key = json_object_get(def_step, "branches_key");
  json_t *results = parsed(s->results);
  json_t *named = json_object_get(results, json_is_string(key) ? json_string_value(key)
                                                               : "branches");
  json_t *chosen = json_array();
  size_t i;
  json_t *b;
  json_array_foreach(named, i, b) if (json_is_string(b)) json_array_append(chosen, b);
  json_decref(results);
  return chosen;
}

/* A map step's instance counts, or null before it was mapped. */
static json_t *instance_counts(const tk__step_rec *s) {
  if (s->instances_total == TK__NONE) return json_null();
  return json_pack("{s:I, s:I, s:I, s:I}", "total", (json_int_t)s->instances_total, "done",
                   (json_int_t)s->instances_done, "failed", (json_int_t)s->instances_failed,
                   "waiting", (json_int_t)s->instances_waiting);
}

/* The flow of a step (DESIGN §17) as the definition and the store say it:
 * a skipped step's reason; a decision's branches and its choice; a map's
 * spec and its instance counts. */
static void flow_json(json_t *st, const tk__task_report *r, const tk__step_rec *s,
                      json_t *def_step) {
  if (strcmp(s->state, TK__STEP_SKIPPED) == 0)
    json_object_set_new(st, "skipped_reason", opt_str(skipped_reason(r, s)));
  json_t *decides = json_object_get(def_step, "decides");
  if (json_is_array(decides)) {
    json_object_set(st, "decides", decides);
    json_object_set_new(st, "chosen", chosen_branches(s, def_step));
  }
  json_t *map = json_object_get(def_step, "map");
  if (json_is_object(map)) {
    json_object_set(st, "map", map);
    json_object_set_new(st, "instances", instance_counts(s));
  }
}

/* A step's queues from its template step def_step, set on its JSON st:
 * "worker_queue" for a worker step (the queue whose workers claim it), and
 * "queue", the queue whose limits its claims obey (DESIGN §19: the one it
 * names, a worker step's its handler's; null for none). A map's
 * instances have their map step's. */
static void step_queues(json_t *st, json_t *def_step) {
  json_t *handler = json_object_get(def_step, "handler");
  const char *kind = json_string_value(json_object_get(handler, "kind"));
  int worker = kind && strcmp(kind, "worker") == 0;
  if (worker) json_object_set(st, "worker_queue", json_object_get(handler, "queue"));
  json_t *queue = json_object_get(def_step, "queue");
  if (queue == NULL && worker) queue = json_object_get(handler, "queue");
  json_object_set_new(st, "queue", queue ? json_incref(queue) : json_null());
}

/* One step as `tasker show --json` prints it (before "why"). */
static json_t *step_json(const tk__task_report *r, const tk__step_rec *s, json_t *def_step) {
  json_t *st = json_pack(
      "{s:s, s:s, s:i, s:i, s:b, s:o, s:i, s:I, s:o, s:o, s:I, s:o, s:o, s:I}", "name", s->name,
      "state", s->state, "attempts", s->attempts, "max_attempts", s->max_attempts, "retryable",
      s->retryable, "backoff", opt_str(s->backoff), "parents_remaining",
      /* A delayed start's -1 (store.h, TK__DELAYED) is a root: none left. */
      s->parents_remaining < 0 ? 0 : s->parents_remaining,
      "run_at", (json_int_t)s->run_at, "lease_owner", opt_str(s->lease_owner),
      "lease_expires_at", opt_int(s->lease_expires_at), "last_delay_ms",
      (json_int_t)s->last_delay_ms, "last_error", opt_str(s->last_error), "results",
      parsed(s->results), "id", (json_int_t)s->id);
  if (strcmp(s->state, TK__STEP_WAITING) == 0) {
    /* Since its last move into waiting (a retry waits again). */
    int64_t since = TK__NONE;
    for (int i = 0; i < r->ntransitions; i++)
      if (r->transitions[i].step_id == s->id && r->transitions[i].to &&
          strcmp(r->transitions[i].to, TK__STEP_WAITING) == 0)
        since = r->transitions[i].at;
    json_object_set_new(st, "waiting_since", opt_int(since));
    /* An http step waits for its callback (docs/callbacks.md), a task
     * step for its child (docs/children.md), a wait step for a signal. */
    json_t *handler = json_object_get(def_step, "handler");
    const char *kind = json_string_value(json_object_get(handler, "kind"));
    json_object_set_new(st, "waits_for",
                        json_string(json_object_get(handler, "callback_timeout_ms") ? "callback"
                                    : kind && strcmp(kind, "task") == 0           ? "child"
                                                                                  : "signal"));
  }
  json_t *deps = json_object_get(def_step, "depends_on");
  json_object_set_new(st, "depends_on", deps ? json_incref(deps) : json_array());
  step_queues(st, def_step);
  json_t *history = json_array();
  for (int i = 0; i < r->nattempts; i++)
    if (r->attempts[i].step_id == s->id)
      json_array_append_new(history, attempt_json(&r->attempts[i]));
  json_object_set_new(st, "history", history);
  flow_json(st, r, s, def_step);
  if (s->batch) {
    json_t *given_up = json_array();
    for (int i = 0; i < r->ngave_up; i++) {
      const tk__gave_up_rec *g = &r->gave_up[i];
      if (g->step_id == s->id)
        json_array_append_new(given_up, json_pack("{s:s, s:i, s:o}", "key", g->key, "attempts",
                                                  g->attempts, "last_error",
                                                  opt_str(g->last_error)));
    }
    json_object_set_new(
        st, "items",
        json_pack("{s:I, s:I, s:I, s:I, s:o}", "total",
                  (json_int_t)(s->items_pending + s->items_acked + s->items_gave_up), "pending",
                  (json_int_t)s->items_pending, "acked", (json_int_t)s->items_acked, "gave_up",
                  (json_int_t)s->items_gave_up, "given_up", given_up));
  }
  return st;
}

/* Why a finished task ended: the reason of its move to the state it is
 * in (TK__REASON_DEADLINE for a deadline's), or NULL while it runs. */
static const char *end_reason(const tk__task_report *r) {
  if (!tk__task_state_terminal(r->state)) return NULL;
  for (int i = r->ntransitions - 1; i >= 0; i--) {
    const tk__transition_rec *tr = &r->transitions[i];
    if (tr->step_id == TK__NONE && tr->to && strcmp(tr->to, r->state) == 0) return tr->reason;
  }
  return NULL;
}

/* The task of a report as JSON (steps, their history and items, the
 * transitions), without the derived statuses. */
static json_t *task_json(const tk__task_report *r) {
  const tk__template_rec *t = &r->template_;
  json_t *task = json_pack(
      "{s:I, s:s, s:b, s:o, s:I, s:I, s:o, s:i, s:i, s:i, s:{s:s, s:s, s:s}, s:o}", "id",
      (json_int_t)r->id, "state", r->state, "cancellable", tk__task_cancellable(r->state),
      "identity", opt_str(r->identity), "created_at", (json_int_t)r->created_at, "updated_at",
      (json_int_t)r->updated_at, "finished_at", opt_int(r->finished_at), "steps_total",
      r->steps_total, "steps_done", r->steps_done, "steps_error", r->steps_error, "template", "namespace", t->namespace_, "name", t->name,
      "version", t->version, "context", parsed(r->context));
  json_object_set_new(task, "priority", json_integer(r->priority));
  json_object_set_new(task, "deadline_at", opt_int(r->deadline_at));
  json_object_set_new(task, "end_reason", opt_str(end_reason(r)));
  json_t *def = parsed(t->definition);
  json_t *def_steps = json_object_get(def, "steps");
  json_t *steps = json_array();
  for (int i = 0; i < r->nsteps; i++)
    json_array_append_new(steps, step_json(r, &r->steps[i],
                                           json_array_get(def_steps, (size_t)r->steps[i].idx)));
  json_decref(def);
  json_object_set_new(task, "steps", steps);
  json_t *transitions = json_array();
  for (int i = 0; i < r->ntransitions; i++) {
    const tk__transition_rec *tr = &r->transitions[i];
    /* The store names the step: an instance is not among r->steps. */
    json_array_append_new(transitions,
                          json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "at", (json_int_t)tr->at,
                                    "step", opt_str(tr->step_id == TK__NONE ? NULL : tr->step),
                                    "from", opt_str(tr->from),
                                    "to", opt_str(tr->to), "reason", opt_str(tr->reason),
                                    "attempt", opt_int(tr->attempt)));
  }
  json_object_set_new(task, "transitions", transitions);
  return task;
}

static int dump(json_t *v, char **out, tk_err *err) {
  *out = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(v);
  return *out ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory");
}

/* One instance of a map step as its pages list it, with its map step's
 * queues (map_step: "queue", "worker_queue" as step_queues sets them) and
 * why it is not running at `now` (as a step's: an instance has no
 * parents). */
static json_t *instance_json(const tk__step_rec *s, json_t *map_step, int64_t now,
                             const tk__queue_rec *queues, int nqueues) {
  json_t *in = json_pack("{s:i, s:s, s:s, s:i, s:i, s:I, s:o, s:o, s:o, s:o, s:I}", "item_index",
                         s->item_index, "name", s->name, "state", s->state, "attempts",
                         s->attempts, "max_attempts", s->max_attempts, "run_at",
                         (json_int_t)s->run_at, "lease_expires_at", opt_int(s->lease_expires_at),
                         "last_error", opt_str(s->last_error), "item", parsed(s->item),
                         "results", parsed(s->results), "id", (json_int_t)s->id);
  if (in == NULL) return NULL;
  json_object_set(in, "queue", json_object_get(map_step, "queue"));
  json_t *worker_queue = json_object_get(map_step, "worker_queue");
  if (worker_queue) json_object_set(in, "worker_queue", worker_queue);
  json_object_set_new(in, "why", why_step(NULL, in, now, queues, nqueues));
  return in;
}

/* Up to `limit` instances of map step map_idx after item_index `after`
 * (-1: from the first) into *page as {"total", "instances",
 * "next_after"}: next_after the last index shown when more follow, else
 * null. One more row is read to know. */
static int instance_page(tk_store *s, int64_t task_id, int map_idx, json_t *map_step, int after,
                         int limit, int64_t now, const tk__queue_rec *queues, int nqueues,
                         json_t **page, tk_err *err) {
  *page = NULL;
  if (s->ops->instance_list == NULL)
    return tk_err_set(err, TK_EUNSUPPORTED, "this store cannot list a map's instances");
  tk__step_rec *rows = NULL;
  int n = 0;
  int64_t total = 0;
  int rc = s->ops->instance_list(s, task_id, map_idx, after, limit + 1, &rows, &n, &total, err);
  if (rc) return rc;
  json_t *list = json_array();
  for (int i = 0; i < n && i < limit; i++)
    json_array_append_new(list, instance_json(&rows[i], map_step, now, queues, nqueues));
  *page = json_pack("{s:I, s:o, s:o}", "total", (json_int_t)total, "instances", list,
                    "next_after", n > limit ? json_integer(rows[limit - 1].item_index)
                                            : json_null());
  tk__step_recs_free(rows, n);
  return *page ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory");
}

/* The store's queues at now into *queues (malloc'd; free()), *n of them,
 * when one of steps[] (JSON as step_json makes them) names a queue: why
 * a ready step of it waits is the queue's to say. None read otherwise. */
static int queues_for(tk_store *s, json_t *steps, int64_t now, tk__queue_rec **queues, int *n,
                      tk_err *err) {
  *queues = NULL;
  *n = 0;
  size_t i;
  json_t *st;
  json_array_foreach(steps, i, st) {
    if (json_is_string(json_object_get(st, "queue")))
      return s->ops->queue_list(s, now, queues, n, err);
  }
  return 0;
}

/* Each map step of a report with instances gets its first page of them
 * (instances.first, instances.next_after); the rest is paged by
 * tk_instances_json. */
static int first_instances(tk_store *s, const tk__task_report *r, json_t *steps, int64_t now,
                           const tk__queue_rec *queues, int nqueues, tk_err *err) {
  for (int i = 0; i < r->nsteps; i++) {
    json_t *st = json_array_get(steps, (size_t)i);
    json_t *counts = json_object_get(st, "instances");
    if (!json_is_object(counts) || num(counts, "total") <= 0) continue;
    json_t *page;
    int rc = instance_page(s, r->id, r->steps[i].idx, st, -1, TK__INSTANCES_SHOWN, now, queues,
                           nqueues, &page, err);
    if (rc) return rc;
    json_object_set(counts, "first", json_object_get(page, "instances"));
    json_object_set(counts, "next_after", json_object_get(page, "next_after"));
    json_decref(page);
  }
  return 0;
}

int tk_engine_task_json(tk_store *s, int64_t task_id, int64_t now, char **out, tk_err *err) {
  tk__task_report r;
  int rc = s->ops->task_report(s, task_id, &r, err);
  if (rc) return rc;
  json_t *task = task_json(&r);
  json_t *steps = json_object_get(task, "steps");
  tk__queue_rec *queues = NULL;
  int nqueues = 0;
  rc = task ? queues_for(s, steps, now, &queues, &nqueues, err)
            : tk_err_set(err, TK_ENOMEM, "out of memory");
  if (rc == 0) rc = first_instances(s, &r, steps, now, queues, nqueues, err);
  if (rc == 0) rc = tk__family_json(s, task_id, task, err);
  tk__task_report_free(&r);
  if (rc) {
    free(queues);
    json_decref(task);
    return rc;
  }
  /* A cancelled task has nothing left to wait for; say so rather than
   * calling its unfinished steps complete. */
  const char *state = json_string_value(json_object_get(task, "state"));
  /* So is one that its deadline ended (DESIGN §3). */
  const char *ended = json_string_value(json_object_get(task, "end_reason"));
  int deadline = ended && strcmp(ended, TK__REASON_DEADLINE) == 0;
  json_object_set_new(task, "execution_status",
                      json_string(state && strcmp(state, TK__TASK_CANCELLED) == 0 ? "cancelled"
                                  : deadline ? "deadline_passed"
                                             : execution_status(steps, now)));
  json_object_set_new(task, "now", json_integer(now));
  size_t i;
  json_t *st;
  json_array_foreach(steps, i, st) {
    json_t *why = deadline && is(st, TK__STEP_CANCELLED)
                      ? why_deadline(task)
                      : why_step(steps, st, now, queues, nqueues);
    json_object_set_new(st, "why", why);
  }
  free(queues);
  return dump(task, out, err);
}

int tk_engine_status_json(tk_store *s, int64_t now, char **out, tk_err *err) {
  tk__status_report r;
  int64_t ready = INT64_MAX, lease = INT64_MAX;
  int64_t bytes = 0;
  int rc = s->ops->status(s, now, &r, err);
  if (rc == 0) rc = s->ops->next_due(s, &ready, &lease, err);
  if (rc == 0) rc = s->ops->size(s, &bytes, err);
  if (rc) return rc;
  int64_t due = lease < ready ? lease : ready;
  json_t *tasks = json_object(), *steps = json_object(), *counters = json_object();
  for (int i = 0; i < r.ntasks; i++)
    json_object_set_new(tasks, r.tasks[i].state, json_integer(r.tasks[i].n));
  for (int i = 0; i < r.nsteps; i++)
    json_object_set_new(steps, r.steps[i].state, json_integer(r.steps[i].n));
  for (int i = 0; i < r.ncounters; i++)
    json_object_set_new(counters, r.counters[i].name, json_integer(r.counters[i].value));
  json_t *status = json_pack("{s:o, s:o, s:I, s:o, s:o, s:I, s:I}", "tasks", tasks, "steps",
                             steps, "ready_now", (json_int_t)r.ready_now, "next_due_at",
                             due == INT64_MAX ? json_null() : json_integer(due), "counters",
                             counters, "now", (json_int_t)now, "store_bytes",
                             (json_int_t)bytes);
  return dump(status, out, err);
}

int tk_template_list_json(tk_store *s, char **out, tk_err *err) {
  tk__template_rec *recs;
  int n;
  int rc = s->ops->template_list(s, &recs, &n, err);
  if (rc) return rc;
  json_t *all = json_array();
  for (int i = 0; i < n; i++) {
    json_t *def = parsed(recs[i].definition);
    json_t *desc = json_object_get(def, "description");
    json_array_append_new(
        all, json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:o}", "id", (json_int_t)recs[i].id,
                       "namespace", recs[i].namespace_, "name", recs[i].name, "version",
                       recs[i].version, "created_at", (json_int_t)recs[i].created_at, "steps",
                       (json_int_t)json_array_size(json_object_get(def, "steps")),
                       "description", desc ? json_incref(desc) : json_string("")));
    json_decref(def);
  }
  tk__template_recs_free(recs, n);
  free(recs);
  return dump(all, out, err);
}

int tk_instances_json(tk_store *s, int64_t task_id, const char *step, int after, int limit,
                      int64_t now, char **out, tk_err *err) {
  *out = NULL;
  if (limit < 1 || limit > TK_PAGE_MAX)
    return tk_err_set(err, TK_EINVAL, "limit %d: expected 1 to %d", limit, TK_PAGE_MAX);
  if (after < -1)
    return tk_err_set(err, TK_EINVAL,
                      "after %d: expected an instance's item_index (0 or more; -1 or none: "
                      "from the first)",
                      after);
  tk__task_report r;
  int rc = s->ops->task_report(s, task_id, &r, err);
  if (rc) return rc;
  const tk__step_rec *found = NULL;
  for (int i = 0; i < r.nsteps && found == NULL; i++)
    if (strcmp(r.steps[i].name, step) == 0) found = &r.steps[i];
  json_t *def = parsed(r.template_.definition);
  json_t *def_step = found ? json_array_get(json_object_get(def, "steps"), (size_t)found->idx)
                           : NULL;
  json_t *page = NULL;
  json_t *map_step = json_object();
  tk__queue_rec *queues = NULL;
  int nqueues = 0;
  if (found == NULL)
    rc = tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)task_id, step);
  else if (!json_is_object(json_object_get(def_step, "map")))
    rc = tk_err_set(err, TK_EINVAL,
                    "step \"%s\" of task %lld is not a map step: only a map step has instances",
                    step, (long long)task_id);
  else if (map_step == NULL)
    rc = tk_err_set(err, TK_ENOMEM, "out of memory");
  else {
    step_queues(map_step, def_step);
    json_t *one = json_pack("[O]", map_step);
    rc = one ? queues_for(s, one, now, &queues, &nqueues, err)
             : tk_err_set(err, TK_ENOMEM, "out of memory");
    json_decref(one);
    if (rc == 0)
      rc = instance_page(s, task_id, found->idx, map_step, after, limit, now, queues, nqueues,
                         &page, err);
  }
  free(queues);
  json_decref(map_step);
  if (rc == 0)
    rc = json_object_set_new(page, "task", json_integer(task_id)) ||
                 json_object_set_new(page, "step", json_string(step))
             ? tk_err_set(err, TK_ENOMEM, "out of memory")
             : 0;
  json_decref(def);
  tk__task_report_free(&r);
  if (rc) {
    json_decref(page);
    return rc;
  }
  return dump(page, out, err);
}
