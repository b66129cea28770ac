/* The POST endpoints (docs/api.md): submit, one action, many actions.
 * The body is checked whole before anything is done, so a bad request
 * changes nothing; each action is then its own transaction
 * (tk_task_operate), and a bulk answer reports the ones refused. */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/store.h"

#define BULK_ERRORS_MAX 100

static int64_t now(const tk_server *s) { return tk_clock_now(&s->clock); }

/* POST /api/v1/tasks: 201 for a new task, 200 when its identity existed. */
static void submit(tk_server *s, const char *body, size_t len, tk__response *out) {
  tk__submit_body b;
  tk__api_error e;
  if (tk__submit_body_parse(body, len, &b, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk_submit_request req = {.template_name = b.template_name, .version = b.version,
                           .context_json = b.context, .identity = b.identity};
  int64_t id;
  int existed;
  tk_err err;
  if (tk_task_submit(s->store, s->config, &req, now(s), &id, &existed, &err) != 0) {
    tk__respond_tk_error(s, out, &err, err.code == TK_ENOENT ? "template" : NULL);
  } else {
    json_t *j = json_pack("{s:I, s:b}", "id", (json_int_t)id, "existed", existed);
    tk__respond_json_value(out, existed ? 200 : 201, j);
  }
  tk__submit_body_free(&b);
}

/* POST .../cancel, .../steps/STEP/retry|resolve: one tk_task_operate. */
static void one_action(tk_server *s, const tk__route *r, tk__response *out) {
  const char *state = NULL;
  tk_err err;
  const char *step = r->id == TK__R_STEP_ACTION ? r->step : NULL;
  if (tk_task_operate(s->store, r->action, r->task, step, now(s), &state, &err) != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
    return;
  }
  json_t *j = json_pack("{s:I, s:s?, s:s, s:s?}", "task", (json_int_t)r->task, "step", step,
                        "action", tk__action_name(r->action), "task_state", state);
  tk__respond_json_value(out, 200, j);
}

/* What a bulk request did so far. */
typedef struct bulk {
  int64_t matched, done, failed;
  json_t *errors;
} bulk;

/* Count a refused action and keep its message (the first 100). */
static void refused(bulk *b, int64_t task, const char *step, const char *msg) {
  b->failed++;
  if (json_array_size(b->errors) >= BULK_ERRORS_MAX) return;
  json_t *e = json_pack("{s:I, s:s?, s:s}", "task", (json_int_t)task, "step", step, "message", msg);
  json_array_append_new(b->errors, e);
}

/* Apply the action to one step (or, for cancel, the task). 1 when it
 * failed for a reason that is not the state of one task (the store). */
static int act(tk_server *s, tk_operator_action a, int64_t task, const char *step, bulk *b) {
  tk_err err;
  int rc = tk_task_operate(s->store, a, task, step, now(s), NULL, &err);
  if (rc == 0) {
    b->done++;
    return 0;
  }
  refused(b, task, step, tk_err_message(&err));
  return rc != TK_ENOENT && rc != TK_ESTATE && rc != TK_EINVAL;
}

/* Retry or resolve every step of task `id` that is in error. */
static int act_on_task_steps(tk_server *s, tk_operator_action a, int64_t id, bulk *b) {
  tk__task_report rep;
  tk_err err;
  int rc = s->store->ops->task_report(s->store, id, &rep, &err);
  if (rc != 0) {
    refused(b, id, NULL, tk_err_message(&err));
    return rc != TK_ENOENT;
  }
  int acted = 0, fatal = 0;
  for (int i = 0; i < rep.nsteps && !fatal; i++) {
    if (strcmp(rep.steps[i].state, TK__STEP_ERROR) != 0) continue;
    acted++;
    fatal = act(s, a, id, rep.steps[i].name, b);
  }
  if (acted == 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "task %lld has no step in error to %s", (long long)id,
             tk__action_name(a));
    refused(b, id, NULL, msg);
  }
  tk__task_report_free(&rep);
  return fatal;
}

/* Bulk by filter: tk_tasks_operate counts first and acts on nothing when
 * more than max match. */
static void bulk_filter(tk_server *s, tk_operator_action a, tk__bulk_body *body, bulk *b,
                        tk__response *out) {
  tk__api_error e;
  if (tk__filter_resolve(&body->filter, now(s), "state", &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk_bulk_result res = {0};
  tk_err err;
  tk_err_clear(&err);
  if (tk_bulk_filter_check(&body->filter.filter, &err) != 0) {
    tk__api_fail(&e, 400, "bad_filter", "filter", "%s (\"all\": true)",
                 tk_err_message(&err));
    tk__respond_error(out, &e);
    return;
  }
  int rc = tk_tasks_operate(s->store, a, &body->filter.filter, body->max, now(s), &res, &err);
  if (rc == TK_ERANGE) {
    tk__api_fail(&e, 409, "conflict", "max", "%s", tk_err_message(&err));
    tk__respond_error(out, &e);
    return;
  }
  if (rc != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
    return;
  }
  b->matched = res.tasks;
  b->done = res.done;
  b->failed = res.failed;
  if (res.failed > 0) {
    json_t *first = json_pack("{s:n, s:n, s:s}", "task", "step", "message", tk_err_message(&err));
    json_array_append_new(b->errors, first);
  }
}

static void bulk_action(tk_server *s, const tk__route *r, const char *body, size_t len,
                        tk__response *out) {
  tk__bulk_body bb;
  tk__api_error e;
  if (tk__bulk_body_parse(body, len, r->action, &bb, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  bulk b = {.errors = json_array()};
  int fatal = 0;
  out->body = NULL;
  if (bb.kind == TK__BULK_FILTER) {
    bulk_filter(s, r->action, &bb, &b, out);
  } else if (bb.kind == TK__BULK_STEPS) {
    b.matched = (int64_t)bb.n;
    for (size_t i = 0; i < bb.n && !fatal; i++)
      fatal = act(s, r->action, bb.steps[i].task, bb.steps[i].step, &b);
  } else {
    b.matched = (int64_t)bb.n;
    for (size_t i = 0; i < bb.n && !fatal; i++)
      fatal = r->action == TK_OP_CANCEL ? act(s, r->action, bb.tasks[i], NULL, &b)
                                        : act_on_task_steps(s, r->action, bb.tasks[i], &b);
  }
  if (out->body == NULL) { /* no error answered */
    json_t *j = json_pack("{s:I, s:I, s:I, s:O}", "matched", (json_int_t)b.matched, "done",
                          (json_int_t)b.done, "failed", (json_int_t)b.failed, "errors", b.errors);
    tk__respond_json_value(out, 200, j);
  }
  json_decref(b.errors);
  tk__bulk_body_free(&bb);
}

void tk__api_actions(tk_server *s, const tk__route *r, const char *body, size_t len,
                     tk__response *out) {
  if (r->id == TK__R_TASKS) submit(s, body, len, out);
  else if (r->id == TK__R_BULK) bulk_action(s, r, body, len, out);
  else one_action(s, r, out);
}
