/* Bulk operator actions (include/tasker/query.h): what a filter or a list
 * names, each action its own transaction (tk_task_operate), every refusal
 * counted by reason and the first TK_BULK_KEPT kept with their task and
 * step. Which tasks an action applies to is store/rules.c's. */
#include "ops/ops_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/list_sql.h"
#include "store/rules.h"

int tk_bulk_filter_check(const tk_task_filter *f, tk_err *err) {
  int rc = f ? tk_task_filter_check(f, err) : 0;
  if (rc) return rc;
  int any = f && ((f->state && *f->state) || (f->template_name && *f->template_name) ||
                  f->created_since > 0 || (f->error_text && *f->error_text));
  if (!any && !(f && f->all))
    return tk_err_set(err, TK_EINVAL,
                      "no filter: that would act on every task; choose tasks by state, template, "
                      "creation time or error text, or ask for all");
  return 0;
}

static const char *const reason_names[TK_BULK_REASONS] = {
    [TK_BULK_STATE] = "state",
    [TK_BULK_NOT_FOUND] = "not_found",
    [TK_BULK_NO_FAILED_STEP] = "no_failed_step",
};

const char *tk_bulk_reason_name(tk_bulk_reason r) {
  return r >= 0 && r < TK_BULK_REASONS ? reason_names[r] : "?";
}

void tk_bulk_result_free(tk_bulk_result *r) {
  for (int i = 0; i < r->kept; i++) {
    free(r->first[i].step);
    free(r->first[i].message);
  }
  memset(r, 0, sizeof *r);
}

static json_t *opt_str(const char *v) { return v ? json_string(v) : json_null(); }

int tk_bulk_result_json(const tk_bulk_result *r, char **json, tk_err *err) {
  json_t *refused = json_object(), *errors = json_array();
  for (int k = 0; k < TK_BULK_REASONS; k++)
    json_object_set_new(refused, reason_names[k], json_integer(r->refused[k]));
  for (int i = 0; i < r->kept; i++) {
    const tk_bulk_refusal *f = &r->first[i];
    json_array_append_new(errors, json_pack("{s:I, s:o, s:s, s:o}", "task", (json_int_t)f->task,
                                            "step", opt_str(f->step), "reason",
                                            tk_bulk_reason_name(f->reason), "message",
                                            opt_str(f->message)));
  }
  json_t *doc = json_pack("{s:I, s:I, s:I, s:o, s:o}", "matched", (json_int_t)r->tasks, "done",
                          (json_int_t)r->done, "failed", (json_int_t)r->failed, "refused",
                          refused, "errors", errors);
  *json = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(doc);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory");
}

/* Count a refusal of the action on task (and step), keeping the first
 * TK_BULK_KEPT (one that cannot be kept for want of memory is still
 * counted). */
static void refuse(tk_bulk_result *out, int64_t task, const char *step, tk_bulk_reason why,
                   const char *message) {
  out->failed++;
  out->refused[why]++;
  if (out->kept >= TK_BULK_KEPT) return;
  tk_bulk_refusal *f = &out->first[out->kept];
  f->task = task;
  f->reason = why;
  f->step = step ? strdup(step) : NULL;
  f->message = strdup(message);
  if ((step && f->step == NULL) || f->message == NULL) {
    free(f->step);
    free(f->message);
    return;
  }
  out->kept++;
}

/* TK_EINVAL unless action is one of the three. */
static int action_check(tk_operator_action action, tk_err *err) {
  if (action == TK_OP_RETRY || action == TK_OP_RESOLVE || action == TK_OP_CANCEL) return 0;
  return tk_err_set(err, TK_EINVAL,
                    "action %d: expected TK_OP_RETRY, TK_OP_RESOLVE or TK_OP_CANCEL", (int)action);
}

/* One action through tk_task_operate: done, or a refusal (the state does
 * not allow it, the task or step is not there) counted; anything else is
 * returned. */
static int act(tk_store *s, tk_operator_action action, int64_t task, const char *step, int64_t now,
               tk_bulk_result *out, tk_err *err) {
  tk_err e;
  tk_err_clear(&e);
  int rc = tk_task_operate(s, action, task, step, now, NULL, &e);
  if (rc == 0) {
    out->done++;
    return 0;
  }
  if (rc != TK_ESTATE && rc != TK_ENOENT) {
    *err = e;
    return rc;
  }
  refuse(out, task, action == TK_OP_CANCEL ? NULL : step,
         rc == TK_ESTATE ? TK_BULK_STATE : TK_BULK_NOT_FOUND, e.msg);
  return 0;
}

/* ---- By filter ---- */

/* What a filter takes: tasks (cancel) or steps in error (retry, resolve),
 * task by task. */
typedef struct target {
  int64_t task;
  char *step; /* NULL for cancel */
} target;

typedef struct targets {
  target *v;
  int64_t n, tasks;
  int cap;
} targets;

static void targets_free(targets *t) {
  for (int64_t i = 0; i < t->n; i++) free(t->v[i].step);
  free(t->v);
  memset(t, 0, sizeof *t);
}

/* Add task's step (NULL: the task); a task counts once while its targets
 * come in a row, as every list gives them. */
static int push(targets *t, int64_t task, const char *step, tk_err *err) {
  if (t->n >= INT32_MAX - 1 || tk__grow((void **)&t->v, &t->cap, (int)t->n + 1, sizeof *t->v))
    return tk_err_set(err, TK_ENOMEM, "out of memory collecting tasks");
  char *copy = NULL;
  if (step && (copy = strdup(step)) == NULL)
    return tk_err_set(err, TK_ENOMEM, "out of memory collecting steps");
  if (t->n == 0 || t->v[t->n - 1].task != task) t->tasks++;
  t->v[t->n++] = (target){task, copy};
  return 0;
}

/* One page of q (from q->before) into t: *got rows read, q->before moved
 * past them. */
static int page_into(tk_store *s, tk_operator_action action, tk__task_query *q, targets *t,
                     int *got, tk_err *err) {
  int rc = 0;
  if (action == TK_OP_CANCEL) {
    tk__task_row *rows;
    if ((rc = s->ops->task_list(s, q, &rows, got, err))) return rc;
    for (int i = 0; i < *got && rc == 0; i++) rc = push(t, rows[i].id, NULL, err);
    if (*got > 0) q->before = rows[*got - 1].id;
    tk__task_rows_free(rows, *got);
  } else {
    tk__step_row *rows;
    if ((rc = s->ops->step_list(s, TK__STEP_ERROR, q, &rows, got, err))) return rc;
    for (int i = 0; i < *got && rc == 0; i++) rc = push(t, rows[i].task_id, rows[i].name, err);
    if (*got > 0) q->before = rows[*got - 1].id;
    tk__step_rows_free(rows, *got);
  }
  return rc;
}

/* Every target of `action` among the tasks f matches, state by state (each
 * task state the action applies to, and the filter's own, through the
 * store's state-keyed lists): stops once more than max tasks are in (max
 * > 0). */
static int collect(tk_store *s, tk_operator_action action, const tk_task_filter *f, int64_t max,
                   targets *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__query q;
  int rc = tk_bulk_filter_check(f, err);
  if (rc == 0) rc = tk__query_of(f, &q, err);
  for (int k = 0; rc == 0 && tk__task_states[k]; k++) {
    const char *state = tk__task_states[k];
    if (!tk__task_operable(action, state) || (q.q.state && strcmp(q.q.state, state) != 0))
      continue;
    tk__task_query page = q.q;
    page.state = state;
    page.limit = TK_PAGE_MAX;
    page.before = 0;
    int got = TK_PAGE_MAX;
    while (rc == 0 && got == TK_PAGE_MAX && !(max > 0 && out->tasks > max))
      rc = page_into(s, action, &page, out, &got, err);
  }
  if (rc) targets_free(out);
  return rc;
}

int tk_tasks_preview(tk_store *s, tk_operator_action action, const tk_task_filter *f,
                     int64_t *tasks, int64_t *actions, tk_err *err) {
  *tasks = *actions = 0;
  if (action_check(action, err)) return TK_EINVAL;
  targets t;
  int rc = collect(s, action, f, 0, &t, err);
  if (rc) return rc;
  *tasks = t.tasks;
  *actions = t.n;
  targets_free(&t);
  return 0;
}

int tk_tasks_operate(tk_store *s, tk_operator_action action, const tk_task_filter *f, int64_t max,
                     int64_t now, tk_bulk_result *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (action_check(action, err)) return TK_EINVAL;
  if (max < 0)
    return tk_err_set(err, TK_EINVAL, "max %lld: expected 0 (no limit) or more", (long long)max);
  targets t;
  int rc = collect(s, action, f, max, &t, err);
  if (rc) return rc;
  if (max > 0 && t.tasks > max) {
    targets_free(&t);
    return tk_err_set(err, TK_ERANGE,
                      "more than %lld tasks match (the most one action may take): nothing done; "
                      "narrow the filter or raise the maximum",
                      (long long)max);
  }
  out->tasks = t.tasks;
  for (int64_t i = 0; rc == 0 && i < t.n; i++)
    rc = act(s, action, t.v[i].task, t.v[i].step, now, out, err);
  targets_free(&t);
  if (rc == 0) tk_err_clear(err);
  return rc;
}

/* ---- By list ---- */

/* Retry or resolve every step in error of a listed task; none is a
 * refusal (no_failed_step, or not_found for no such task). */
static int act_on_failed_steps(tk_store *s, tk_operator_action action, int64_t task, int64_t now,
                               tk_bulk_result *out, tk_err *err) {
  tk__task_query q = {.task_id = task, .limit = TK_PAGE_MAX};
  tk__step_row *steps;
  int n;
  int rc = s->ops->step_list(s, TK__STEP_ERROR, &q, &steps, &n, err);
  for (int i = 0; rc == 0 && i < n; i++) rc = act(s, action, task, steps[i].name, now, out, err);
  tk__step_rows_free(steps, n);
  if (rc || n > 0) return rc;
  int64_t found;
  if ((rc = s->ops->task_count(s, &q, &found, err))) return rc;
  tk_err e;
  if (found)
    tk_err_set(&e, TK_ESTATE, "task %lld has no step in error to %s", (long long)task,
               action == TK_OP_RETRY ? "retry" : "resolve");
  else
    tk_err_set(&e, TK_ENOENT, "no task %lld", (long long)task);
  refuse(out, task, NULL, found ? TK_BULK_NO_FAILED_STEP : TK_BULK_NOT_FOUND, e.msg);
  return 0;
}

int tk_bulk_operate(tk_store *s, tk_operator_action action, const tk_bulk_target *targets,
                    size_t n, int64_t now, tk_bulk_result *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (action_check(action, err)) return TK_EINVAL;
  out->tasks = (int64_t)n;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const tk_bulk_target *t = &targets[i];
    if (action == TK_OP_CANCEL || t->step)
      rc = act(s, action, t->task, action == TK_OP_CANCEL ? NULL : t->step, now, out, err);
    else
      rc = act_on_failed_steps(s, action, t->task, now, out, err);
  }
  if (rc == 0) tk_err_clear(err);
  return rc;
}
