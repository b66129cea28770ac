/* The POST endpoints (docs/api.md): submit, one action, many actions.
 * The body is checked whole before anything is done, so a bad request
 * changes nothing; each action is then its own transaction
 * (tk_task_operate), and a bulk answer reports the ones refused. */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/duration.h>

#include "ops/signal.h"

static int64_t now(const tk_server *s) { return tk_clock_now(&s->clock); }

/* The range of a submission's deadline and priority (the library's rules,
 * which name the value the body gave): 0, or a 400 naming the member. */
static int submission_check(const tk__submit_body *b, tk__api_error *e) {
  tk_err err;
  if (b->has_deadline && tk_deadline_check(b->deadline_ms, b->deadline_text, &err) != 0) {
    /* tk_deadline_check's message names the deadline already. */
    int named = strncmp(err.msg, "deadline", 8) == 0;
    return tk__api_fail(e, 400, "bad_request", "deadline", "%s%s", named ? "" : "deadline: ",
                        err.msg);
  }
  if (tk_priority_check(b->priority, &err) != 0)
    return tk__api_fail(e, 400, "bad_request", "priority", "%s", err.msg);
  return 0;
}

/* POST /api/v1/tasks with an array (bulk submit, tk_task_submit_many):
 * all of the tasks in one transaction or none; {"tasks": [{"id",
 * "existed"}, ...]} in the body's order, 201 when any task was created,
 * else 200. A refusal names the element at fault. */
static void submit_list(tk_server *s, const char *body, size_t len, tk__response *out) {
  tk__submit_list l;
  tk__api_error e;
  if (tk__submit_list_parse(body, len, &l, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  for (size_t i = 0; i < l.n; i++) {
    if (submission_check(&l.items[i], &e) == 0) continue;
    char msg[sizeof e.message];
    snprintf(msg, sizeof msg, "body[%zu]: %.470s", i, e.message);
    memcpy(e.message, msg, sizeof msg);
    tk__respond_error(out, &e);
    tk__submit_list_free(&l);
    return;
  }
  tk_submit_request *reqs = calloc(l.n, sizeof *reqs);
  int64_t *ids = calloc(l.n, sizeof *ids);
  int *existed = calloc(l.n, sizeof *existed);
  tk_err err;
  int failed = -1, rc;
  if (!reqs || !ids || !existed) {
    rc = tk_err_set(&err, TK_ENOMEM, "out of memory submitting %zu tasks", l.n);
  } else {
    for (size_t i = 0; i < l.n; i++)
      reqs[i] = (tk_submit_request){.template_name = l.items[i].template_name,
                                    .version = l.items[i].version,
                                    .context_json = l.items[i].context,
                                    .identity = l.items[i].identity,
                                    .priority = (int)l.items[i].priority,
                                    .deadline_ms = l.items[i].deadline_ms};
    rc = tk_task_submit_many(s->store, s->config, reqs, (int)l.n, now(s), ids, existed, &failed,
                             &err);
  }
  if (rc != 0) {
    tk_err at = err;
    if (failed >= 0) tk_err_set(&at, err.code, "body[%d]: %.480s", failed, err.msg);
    tk__respond_tk_error(s, out, &at, err.code == TK_ENOENT ? "template" : NULL);
  } else {
    json_t *tasks = json_array();
    int created = 0;
    for (size_t i = 0; tasks && i < l.n; i++) {
      created |= !existed[i];
      json_array_append_new(tasks, json_pack("{s:I, s:b}", "id", (json_int_t)ids[i], "existed",
                                             existed[i]));
    }
    tk__respond_json_value(out, created ? 201 : 200, json_pack("{s:o?}", "tasks", tasks));
  }
  free(reqs);
  free(ids);
  free(existed);
  tk__submit_list_free(&l);
}

/* POST /api/v1/tasks: 201 for a new task, 200 when its identity existed. */
static void submit(tk_server *s, const char *body, size_t len, tk__response *out) {
  tk__submit_body b;
  tk__api_error e;
  if (tk__submit_is_list(body, len)) {
    submit_list(s, body, len, out);
    return;
  }
  if (tk__submit_body_parse(body, len, &b, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk_submit_request req = {.template_name = b.template_name, .version = b.version,
                           .context_json = b.context, .identity = b.identity,
                           .priority = (int)b.priority, .deadline_ms = b.deadline_ms};
  int64_t id;
  int existed;
  tk_err err;
  if (submission_check(&b, &e) != 0) {
    tk__respond_error(out, &e);
  } else if (tk_task_submit(s->store, s->config, &req, now(s), &id, &existed, &err) != 0) {
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

/* POST .../steps/STEP/signal (DESIGN §18): the body read once
 * (tk__signal_body_parse: {"data": ANY} or {"error": "..."} and an
 * optional "key"), then the library's rules on its parsed data
 * (tk__step_signal_parsed) and its answer (tk_signal_result_json), 200
 * also for a repeated key. A refusal names the member at fault and changes
 * nothing. */
static void signal_step(tk_server *s, const tk__route *r, const char *body, size_t len,
                        tk__response *out) {
  tk__api_error e;
  tk__signal_body b;
  if (tk__signal_body_parse(body, len, &b, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk_signal_request req = {.task_id = r->task, .step = r->step, .error = b.error, .key = b.key};
  tk_signal_result res;
  tk_err err;
  const char *place;
  char *answer;
  if (tk__step_signal_parsed(s->store, &req, b.data, now(s), &res, &place, &err) != 0 ||
      tk_signal_result_json(&req, &res, &answer, &err) != 0)
    tk__respond_tk_error(s, out, &err, place);
  else
    tk__respond_json(out, 200, answer);
  tk__signal_body_free(&b);
}

/* The targets of a list body (tasks, or steps), as the library takes
 * them; NULL when out of memory. */
static tk_bulk_target *targets_of(const tk__bulk_body *b) {
  tk_bulk_target *t = calloc(b->n ? b->n : 1, sizeof *t);
  for (size_t i = 0; t && i < b->n; i++)
    t[i] = b->kind == TK__BULK_STEPS ? (tk_bulk_target){b->steps[i].task, b->steps[i].step}
                                     : (tk_bulk_target){b->tasks[i], NULL};
  return t;
}

/* POST /api/v1/actions/ACTION: by filter (tk_tasks_operate, which acts on
 * nothing when more than max match) or by list (tk_bulk_operate); the
 * answer is the library's result (tk_bulk_result_json). */
static void bulk_action(tk_server *s, const tk__route *r, const char *body, size_t len,
                        tk__response *out) {
  tk__bulk_body bb;
  tk__api_error e;
  if (tk__bulk_body_parse(body, len, r->action, &bb, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk_bulk_result res;
  memset(&res, 0, sizeof res);
  tk_err err;
  tk_err_clear(&err);
  int rc;
  if (bb.kind == TK__BULK_FILTER) {
    if (tk__filter_resolve(&bb.filter, now(s), "state", &e) != 0) {
      tk__respond_error(out, &e);
      goto done;
    }
    if (tk_bulk_filter_check(&bb.filter.filter, &err) != 0) {
      tk__api_fail(&e, 400, "bad_filter", "filter", "%s (\"all\": true)", tk_err_message(&err));
      tk__respond_error(out, &e);
      goto done;
    }
    rc = tk_tasks_operate(s->store, r->action, &bb.filter.filter, bb.max, now(s), &res, &err);
  } else {
    tk_bulk_target *t = targets_of(&bb);
    rc = t ? tk_bulk_operate(s->store, r->action, t, bb.n, now(s), &res, &err)
           : tk_err_set(&err, TK_ENOMEM, "out of memory");
    free(t);
  }
  char *json;
  if (rc == TK_ERANGE) {
    tk__api_fail(&e, 409, "conflict", "max", "%s", tk_err_message(&err));
    tk__respond_error(out, &e);
  } else if (rc != 0 || tk_bulk_result_json(&res, &json, &err) != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
  } else {
    tk__respond_json(out, 200, json);
  }
done:
  tk_bulk_result_free(&res);
  tk__bulk_body_free(&bb);
}

void tk__api_actions(tk_server *s, const tk__route *r, const char *body, size_t len,
                     tk__response *out) {
  if (r->id == TK__R_TASKS) submit(s, body, len, out);
  else if (r->id == TK__R_BULK) bulk_action(s, r, body, len, out);
  else if (r->id == TK__R_SIGNAL) signal_step(s, r, body, len, out);
  else if (r->callback) tk__api_callback(s, r, body, len, out);
  else one_action(s, r, out);
}
