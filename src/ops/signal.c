/* Signals to wait steps (DESIGN §18), for the CLI, the API and the
 * dashboard alike: the body checked (its data parsed once), the step found
 * and checked to be a wait step in its task's template, then stored under
 * the store's rules (store/rules.c: tk__signal_check, tk__signal_plan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/workflow.h>

#include "ops/signal.h"
#include "store/rules.h"
#include "store/store.h"

/* The handler kind of step `name` in template definition def (JSON text),
 * or NULL when the template has no such step. */
static const char *step_kind(json_t *def, const char *name) {
  json_t *steps = json_object_get(def, "steps");
  for (size_t i = 0; i < json_array_size(steps); i++) {
    json_t *st = json_array_get(steps, i);
    const char *n = json_string_value(json_object_get(st, "name"));
    if (n && strcmp(n, name) == 0) {
      const char *k = json_string_value(json_object_get(json_object_get(st, "handler"), "kind"));
      return k ? k : "";
    }
  }
  return NULL;
}

/* The template task_id runs from, with its definition: the task's own row
 * (a list of that one task) names it, and tk__template_lookup finds it by
 * that name and version. No report: no attempts, transitions or instance
 * counts (task_report reads them all). The row's last error and next retry
 * still look at each of the task's steps (list_sql.c), instances
 * included: bench_wait wide times it. */
static int task_template(tk_store *s, int64_t task_id, tk__template_rec *out, tk_err *err) {
  tk__task_query q = {.task_id = task_id, .limit = 1};
  tk__task_row *rows = NULL;
  int n = 0;
  int rc = s->ops->task_list(s, &q, &rows, &n, err);
  if (rc) return rc;
  if (n == 0) {
    rc = tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  } else {
    size_t len = strlen(rows[0].namespace_) + strlen(rows[0].name) + 2;
    char *name = malloc(len);
    if (name == NULL) {
      rc = tk_err_set(err, TK_ENOMEM, "out of memory reading task %lld", (long long)task_id);
    } else {
      snprintf(name, len, "%s/%s", rows[0].namespace_, rows[0].name);
      rc = tk__template_lookup(s, name, rows[0].version, out, err);
      free(name);
    }
  }
  tk__task_rows_free(rows, n);
  return rc;
}

/* TK_ENOENT or TK_EINVAL unless step r->step of r->task_id is a wait step. */
static int check_wait_step(tk_store *s, const tk_signal_request *r, tk_err *err) {
  tk__template_rec t;
  int rc = task_template(s, r->task_id, &t, err);
  if (rc) return rc;
  json_t *def = json_loads(t.definition ? t.definition : "", 0, NULL);
  const char *kind = def ? step_kind(def, r->step) : NULL;
  if (def == NULL)
    rc = tk_err_set(err, TK_ESTORE, "task %lld: its template's definition cannot be read",
                    (long long)r->task_id);
  else if (kind == NULL)
    rc = tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)r->task_id,
                    r->step);
  else if (strcmp(kind, "wait") != 0)
    rc = tk_err_set(err, TK_EINVAL,
                    "step \"%s\" of task %lld is a %s step, not a wait step: only a step with "
                    "handler = { kind = \"wait\", ... } takes signals",
                    r->step, (long long)r->task_id, kind);
  json_decref(def);
  tk__template_rec_free(&t);
  return rc;
}

int tk__step_signal_parsed(tk_store *s, const tk_signal_request *r, const json_t *data,
                           int64_t now, tk_signal_result *out, const char **place, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (place) *place = NULL;
  if (r->step == NULL || r->step[0] == '\0')
    return tk_err_set(err, TK_EINVAL, "task %lld: which step? a signal needs a step name",
                      (long long)r->task_id);
  char *compact; /* the data as the step's results, as any handler's are stored */
  int rc = tk__signal_check(data, r->error, r->key, &compact, place, err);
  if (rc == 0) rc = check_wait_step(s, r, err);
  if (rc) {
    free(compact);
    return rc;
  }
  tk__signal_req q = {.task_id = r->task_id, .step = r->step, .data = compact,
                      .error = r->error, .key = r->key, .now = now};
  tk__signal_ans a;
  rc = s->ops->signal_put(s, &q, &a, err);
  free(compact);
  if (rc) return rc;
  out->signal_id = a.signal_id;
  out->sent_at = a.created_at;
  out->duplicate = a.duplicate;
  out->delivered = a.delivered;
  snprintf(out->step_state, sizeof out->step_state, "%s", a.step_state);
  return 0;
}

int tk_step_signal(tk_store *s, const tk_signal_request *r, int64_t now, tk_signal_result *out,
                   tk_err *err) {
  json_t *data = NULL;
  int rc = 0;
  memset(out, 0, sizeof *out);
  if (r->data_json != NULL) rc = tk__signal_data_parse(r->data_json, &data, err);
  if (rc == 0) rc = tk__step_signal_parsed(s, r, data, now, out, NULL, err);
  json_decref(data);
  return rc;
}

int tk_signal_result_json(const tk_signal_request *r, const tk_signal_result *res, char **json,
                          tk_err *err) {
  json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:b, s:b, s:s}", "task", (json_int_t)r->task_id,
                        "step", r->step, "signal", (json_int_t)res->signal_id, "sent_at",
                        (json_int_t)res->sent_at, "duplicate", res->duplicate, "delivered",
                        res->delivered, "step_state", res->step_state);
  *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory writing a signal's answer");
}
