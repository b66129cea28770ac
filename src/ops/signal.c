/* Signals to wait steps (DESIGN §18), for the CLI, the API and the
 * dashboard alike: the body checked, the step found and checked to be a
 * wait step in its task's template, then stored under the store's rules
 * (store/rules.c: tk__signal_plan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/workflow.h>

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

/* TK_ENOENT or TK_EINVAL unless step r->step of r->task_id is a wait step. */
static int check_wait_step(tk_store *s, const tk_signal_request *r, tk_err *err) {
  tk__task_report rep;
  memset(&rep, 0, sizeof rep);
  int rc = s->ops->task_report(s, r->task_id, &rep, err);
  if (rc) return rc;
  json_t *def = json_loads(rep.template_.definition ? rep.template_.definition : "", 0, NULL);
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
  tk__task_report_free(&rep);
  return rc;
}

int tk_step_signal(tk_store *s, const tk_signal_request *r, int64_t now, tk_signal_result *out,
                   tk_err *err) {
  memset(out, 0, sizeof *out);
  if (r->step == NULL || r->step[0] == '\0')
    return tk_err_set(err, TK_EINVAL, "task %lld: which step? a signal needs a step name",
                      (long long)r->task_id);
  int rc = tk__signal_body_check(r->data_json, r->error, r->key, err);
  if (rc == 0) rc = check_wait_step(s, r, err);
  if (rc) return rc;
  /* The data as compact JSON: the step's results as any handler's are. */
  char *data = NULL;
  if (r->data_json != NULL) {
    json_t *j = json_loads(r->data_json, JSON_DECODE_ANY, NULL);
    data = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (data == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory reading signal data");
  }
  tk__signal_req q = {.task_id = r->task_id, .step = r->step, .data = data, .error = r->error,
                      .key = r->key, .now = now};
  tk__signal_ans a;
  rc = s->ops->signal_put(s, &q, &a, err);
  free(data);
  if (rc) return rc;
  out->signal_id = a.signal_id;
  out->sent_at = a.created_at;
  out->duplicate = a.duplicate;
  out->delivered = a.delivered;
  snprintf(out->step_state, sizeof out->step_state, "%s", a.step_state);
  return 0;
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
