/* The JSON bodies of POST requests (docs/api.md): submit, bulk actions,
 * signals and callbacks. Every member is checked for its type, unknown members are
 * refused, and each refusal names the member. */
#include "server/request_parse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>

/* What a JSON value is, for messages ("missing" for none). */
const char *tk__json_type_name(const json_t *j) {
  if (j == NULL) return "missing";
  switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
  }
}

/* The body as a JSON object into *root. */
int tk__body_object(const char *body, size_t len, json_t **root, tk__api_error *e) {
  json_error_t je;
  *root = NULL;
  if (len == 0)
    return tk__api_fail(e, 400, "bad_request", NULL, "the request has no body: expected a JSON object");
  json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (j == NULL)
    return tk__api_fail(e, 400, "bad_request", NULL,
                        "the body is not valid JSON: %s at line %d, column %d", je.text,
                        je.line, je.column);
  if (!json_is_object(j)) {
    tk__api_fail(e, 400, "bad_request", NULL, "the body is %s: expected a JSON object",
                 tk__json_type_name(j));
    json_decref(j);
    return -1;
  }
  *root = j;
  return 0;
}

/* 400 naming the first member of obj not in `known` (NULL-terminated). */
int tk__body_only(json_t *obj, const char *where, const char *const *known, const char *expected,
                  tk__api_error *e) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!tk__name_in(known, key))
      return tk__api_fail(e, 400, "bad_request", key, "%s: unknown member \"%.100s\": expected %s",
                          where, key, expected);
  }
  return 0;
}

/* An optional string member into *out (NULL when absent): a string with
 * no NUL character in it, and not empty unless may_be_empty. */
static int text_member(json_t *obj, const char *key, const char *code, int may_be_empty,
                       const char **out, tk__api_error *e) {
  json_t *v = json_object_get(obj, key);
  *out = NULL;
  if (v == NULL) return 0;
  if (!json_is_string(v) || (json_string_length(v) == 0 && !may_be_empty))
    return tk__api_fail(e, 400, code, key, "%s: %s: expected a %sstring", key,
                        json_is_string(v) ? "empty" : tk__json_type_name(v),
                        may_be_empty ? "" : "non-empty ");
  if (strlen(json_string_value(v)) != json_string_length(v))
    return tk__api_fail(e, 400, code, key, "%s: the string holds a NUL character", key);
  *out = json_string_value(v);
  return 0;
}

/* An optional non-empty string member into *out (NULL when absent). */
static int string_member(json_t *obj, const char *key, const char *code, const char **out,
                         tk__api_error *e) {
  return text_member(obj, key, code, 0, out, e);
}

void tk__signal_body_free(tk__signal_body *b) {
  json_decref(b->root);
  memset(b, 0, sizeof *b);
}

int tk__signal_body_parse(const char *body, size_t len, tk__signal_body *out, tk__api_error *e) {
  static const char *const members[] = {"data", "error", "key", NULL};
  memset(out, 0, sizeof *out);
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  /* Empty strings pass here: what a signal may carry is the library's rule. */
  if (tk__body_only(out->root, "body", members, "data (any JSON), error or key", e) != 0 ||
      text_member(out->root, "error", "bad_request", 1, &out->error, e) != 0 ||
      text_member(out->root, "key", "bad_request", 1, &out->key, e) != 0) {
    tk__signal_body_free(out);
    return -1;
  }
  out->data = json_object_get(out->root, "data");
  return 0;
}

void tk__submit_body_free(tk__submit_body *b) {
  json_decref(b->root);
  free(b->context);
  memset(b, 0, sizeof *b);
}

/* One submission, the object obj (`where` names it in messages), into
 * *out, whose strings borrow from obj. */
static int submit_object(json_t *obj, const char *where, tk__submit_body *out,
                         tk__api_error *e) {
  static const char *const members[] = {"template", "version", "context", "identity",
                                        "priority", "deadline", NULL};
  json_t *ctx = json_object_get(obj, "context"), *priority = json_object_get(obj, "priority");
  json_t *deadline = json_object_get(obj, "deadline");
  if (tk__body_only(obj, where, members,
                    "template, version, context, identity, priority or deadline", e) != 0 ||
      string_member(obj, "template", "bad_request", &out->template_name, e) != 0 ||
      string_member(obj, "version", "bad_request", &out->version, e) != 0 ||
      string_member(obj, "identity", "bad_request", &out->identity, e) != 0)
    return -1;
  if (out->template_name == NULL)
    return tk__api_fail(e, 400, "bad_request", "template",
                        "template is missing: expected the template's name (\"name\" or "
                        "\"namespace/name\")");
  if (priority != NULL && !json_is_integer(priority))
    return tk__api_fail(e, 400, "bad_request", "priority",
                        "priority: %s: expected an integer (higher is claimed first)",
                        tk__json_type_name(priority));
  out->priority = priority ? json_integer_value(priority) : 0;
  tk_err err;
  out->has_deadline = deadline != NULL;
  if ((out->deadline_text = json_string_value(deadline)) != NULL) {
    if (tk_duration_parse(out->deadline_text, &out->deadline_ms, &err) != 0)
      return tk__api_fail(e, 400, "bad_request", "deadline", "deadline: %s", err.msg);
  } else if (json_is_integer(deadline)) {
    out->deadline_ms = json_integer_value(deadline);
  } else if (deadline != NULL) {
    return tk__api_fail(e, 400, "bad_request", "deadline",
                        "deadline: %s: expected a duration such as \"2h\" or ms",
                        tk__json_type_name(deadline));
  }
  if (ctx != NULL && !json_is_object(ctx))
    return tk__api_fail(e, 400, "bad_request", "context", "context: %s: expected a JSON object",
                        tk__json_type_name(ctx));
  if (ctx != NULL && (out->context = json_dumps(ctx, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
    return tk__api_fail(e, 500, "internal", NULL, "out of memory");
  return 0;
}

int tk__submit_body_parse(const char *body, size_t len, tk__submit_body *out, tk__api_error *e) {
  memset(out, 0, sizeof *out);
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  if (submit_object(out->root, "body", out, e) == 0) return 0;
  tk__submit_body_free(out);
  return -1;
}

int tk__submit_is_list(const char *body, size_t len) {
  size_t i = 0;
  while (i < len && strchr(" \t\r\n", body[i]) != NULL) i++;
  return i < len && body[i] == '[';
}

void tk__submit_list_free(tk__submit_list *l) {
  for (size_t i = 0; l->items && i < l->n; i++) free(l->items[i].context);
  free(l->items);
  json_decref(l->root);
  memset(l, 0, sizeof *l);
}

int tk__submit_list_parse(const char *body, size_t len, tk__submit_list *out, tk__api_error *e) {
  json_error_t je;
  memset(out, 0, sizeof *out);
  json_t *j = out->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (j == NULL)
    return tk__api_fail(e, 400, "bad_request", NULL,
                        "the body is not valid JSON: %s at line %d, column %d", je.text,
                        je.line, je.column);
  size_t n = json_array_size(j);
  if (!json_is_array(j) || n == 0 || n > TK__SUBMIT_LIST_MAX) {
    tk__api_fail(e, 400, "bad_request", NULL,
                 "the body is %s of %zu tasks: expected from 1 to %d submissions",
                 json_is_array(j) ? "an array" : tk__json_type_name(j), n, TK__SUBMIT_LIST_MAX);
    goto fail;
  }
  if ((out->items = calloc(n, sizeof *out->items)) == NULL) {
    tk__api_fail(e, 500, "internal", NULL, "out of memory");
    goto fail;
  }
  for (out->n = 0; out->n < n; out->n++) {
    char where[32];
    snprintf(where, sizeof where, "body[%zu]", out->n);
    json_t *v = json_array_get(j, out->n);
    if (!json_is_object(v)) {
      tk__api_fail(e, 400, "bad_request", NULL, "%s: %s: expected an object {\"template\", "
                   "\"version\"?, \"context\"?, \"identity\"?, \"priority\"?, \"deadline\"?}", where,
                   tk__json_type_name(v));
      goto fail;
    }
    if (submit_object(v, where, &out->items[out->n], e) != 0) {
      out->n++; /* its context, if any, is freed with the rest */
      if (strncmp(e->message, where, strlen(where)) != 0) {
        char msg[sizeof e->message];
        snprintf(msg, sizeof msg, "%s: %.470s", where, e->message);
        memcpy(e->message, msg, sizeof msg);
      }
      goto fail;
    }
  }
  return 0;
fail:
  tk__submit_list_free(out);
  return -1;
}

void tk__bulk_body_free(tk__bulk_body *b) {
  json_decref(b->root);
  free(b->tasks);
  free(b->steps);
  memset(b, 0, sizeof *b);
}

/* A positive task id from v; `what` names it in the message. */
static int task_member(json_t *v, const char *param, const char *what, int64_t *id,
                       tk__api_error *e) {
  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return tk__api_fail(e, 400, "bad_request", param, "%s: %s: expected a positive task id",
                        what, json_is_integer(v) ? "not positive" : tk__json_type_name(v));
  *id = json_integer_value(v);
  return 0;
}

/* The array member `key` with 1 to TK__BULK_LIST_MAX elements. */
static int list_member(json_t *v, const char *key, tk__api_error *e) {
  if (!json_is_array(v))
    return tk__api_fail(e, 400, "bad_request", key, "%s: %s: expected an array", key, tk__json_type_name(v));
  size_t n = json_array_size(v);
  if (n == 0 || n > TK__BULK_LIST_MAX)
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %zu entries: expected from 1 to %d (use a filter for more)", key, n,
                        TK__BULK_LIST_MAX);
  return 0;
}

/* {"tasks": [ID, ...]} into out->tasks. */
static int parse_tasks(json_t *v, tk__bulk_body *out, tk__api_error *e) {
  if (list_member(v, "tasks", e) != 0) return -1;
  out->n = json_array_size(v);
  if ((out->tasks = calloc(out->n, sizeof *out->tasks)) == NULL)
    return tk__api_fail(e, 500, "internal", NULL, "out of memory");
  for (size_t i = 0; i < out->n; i++) {
    char what[48];
    snprintf(what, sizeof what, "tasks[%zu]", i);
    if (task_member(json_array_get(v, i), "tasks", what, &out->tasks[i], e) != 0) return -1;
  }
  return 0;
}

/* {"steps": [{"task", "step"}, ...]} into out->steps. */
static int parse_steps(json_t *v, tk__bulk_body *out, tk__api_error *e) {
  static const char *const members[] = {"task", "step", NULL};
  if (list_member(v, "steps", e) != 0) return -1;
  out->n = json_array_size(v);
  if ((out->steps = calloc(out->n, sizeof *out->steps)) == NULL)
    return tk__api_fail(e, 500, "internal", NULL, "out of memory");
  for (size_t i = 0; i < out->n; i++) {
    json_t *s = json_array_get(v, i);
    char what[48];
    snprintf(what, sizeof what, "steps[%zu]", i);
    if (!json_is_object(s))
      return tk__api_fail(e, 400, "bad_request", "steps", "%s: %s: expected {\"task\": ID, \"step\": NAME}",
                          what, tk__json_type_name(s));
    json_t *step = json_object_get(s, "step");
    char what_task[64];
    snprintf(what_task, sizeof what_task, "%s.task", what);
    if (tk__body_only(s, what, members, "task and step", e) != 0 ||
        task_member(json_object_get(s, "task"), "steps", what_task, &out->steps[i].task, e) != 0)
      return -1;
    if (!json_is_string(step) || json_string_length(step) == 0 ||
        strlen(json_string_value(step)) != json_string_length(step))
      return tk__api_fail(e, 400, "bad_request", "steps", "%s.step: %s: expected a step's name",
                          what, step ? tk__json_type_name(step) : "missing");
    out->steps[i].step = json_string_value(step);
  }
  return 0;
}

/* {"filter": {...}}: the filter's members, each a non-empty string. */
static int parse_filter(json_t *v, tk__bulk_body *out, tk__api_error *e) {
  static const char *const members[] = {"state", "template", "since", "q", NULL};
  if (!json_is_object(v))
    return tk__api_fail(e, 400, "bad_filter", "filter", "filter: %s: expected an object",
                        tk__json_type_name(v));
  tk_task_filter *f = &out->filter.filter;
  if (tk__body_only(v, "filter", members, "state, template, since or q", e) != 0 ||
      string_member(v, "state", "bad_filter", &f->state, e) != 0 ||
      string_member(v, "template", "bad_filter", &f->template_name, e) != 0 ||
      string_member(v, "since", "bad_filter", &out->filter.since, e) != 0 ||
      string_member(v, "q", "bad_filter", &f->error_text, e) != 0)
    return -1;
  return 0;
}

int tk__bulk_body_parse(const char *body, size_t len, tk_operator_action action,
                        tk__bulk_body *out, tk__api_error *e) {
  static const char *const members[] = {"tasks", "steps", "filter", "max", "all", NULL};
  memset(out, 0, sizeof *out);
  out->max = 1000;
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  json_t *tasks = json_object_get(out->root, "tasks"), *steps = json_object_get(out->root, "steps"),
         *filter = json_object_get(out->root, "filter"), *max = json_object_get(out->root, "max"),
         *all = json_object_get(out->root, "all");
  int rc = tk__body_only(out->root, "body", members, "tasks, steps or filter (with max and all)", e);
  if (rc == 0 && (tasks != NULL) + (steps != NULL) + (filter != NULL) != 1)
    rc = tk__api_fail(e, 400, "bad_request", NULL,
                      "the body names %s: expected exactly one of tasks, steps and filter",
                      tasks || steps || filter ? "more than one of tasks, steps and filter"
                                               : "none of tasks, steps and filter");
  if (rc == 0 && max != NULL && filter == NULL)
    rc = tk__api_fail(e, 400, "bad_request", "max", "max applies to a filter only");
  if (rc == 0 && max != NULL &&
      (!json_is_integer(max) || json_integer_value(max) < 1 || json_integer_value(max) > 1000000))
    rc = tk__api_fail(e, 400, "bad_request", "max", "max: %s: expected an integer from 1 to 1000000",
                      json_is_integer(max) ? "out of range" : tk__json_type_name(max));
  if (rc == 0 && all != NULL && filter == NULL)
    rc = tk__api_fail(e, 400, "bad_request", "all", "all applies to a filter only");
  if (rc == 0 && all != NULL && !json_is_boolean(all))
    rc = tk__api_fail(e, 400, "bad_request", "all", "all: %s: expected true or false",
                      tk__json_type_name(all));
  if (rc == 0 && steps != NULL && action == TK_OP_CANCEL)
    rc = tk__api_fail(e, 400, "bad_request", "steps",
                      "steps: cancel acts on whole tasks: give tasks or a filter");
  if (rc == 0 && tasks) {
    out->kind = TK__BULK_TASKS;
    rc = parse_tasks(tasks, out, e);
  } else if (rc == 0 && steps) {
    out->kind = TK__BULK_STEPS;
    rc = parse_steps(steps, out, e);
  } else if (rc == 0) {
    out->kind = TK__BULK_FILTER;
    if (max != NULL) out->max = json_integer_value(max);
    out->filter.filter.all = json_is_true(all);
    rc = parse_filter(filter, out, e);
  }
  if (rc != 0) tk__bulk_body_free(out);
  return rc;
}

/* A delay member v (a number of seconds, or a duration string such as
 * "30s") in [min_ms, a year] into *ms; key names it in messages. */
static int delay_member(json_t *v, const char *key, int64_t min_ms, int64_t *ms,
                        tk__api_error *e) {
  const int64_t max_ms = (int64_t)TK__RETRY_AFTER_MAX_S * 1000;
  if (json_is_string(v)) {
    tk_err err;
    if (tk_duration_parse(json_string_value(v), ms, &err) != 0)
      return tk__api_fail(e, 400, "bad_request", key, "%s: %s", key, tk_err_message(&err));
  } else if (json_is_number(v)) {
    double sec = json_number_value(v);
    *ms = sec >= 0 && sec <= (double)TK__RETRY_AFTER_MAX_S ? (int64_t)llround(sec * 1000.0) : -1;
  } else {
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %s: expected a number of seconds or a duration such as \"30s\"",
                        key, tk__json_type_name(v));
  }
  if (*ms < min_ms || *ms > max_ms)
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: out of range: expected %s up to a year (%d seconds)", key,
                        min_ms > 0 ? "more than 0" : "0", TK__RETRY_AFTER_MAX_S);
  return 0;
}

void tk__callback_body_free(tk__callback_body *b) {
  json_decref(b->root);
  free(b->results);
  memset(b, 0, sizeof *b);
}

/* The members of a failure in root into out. */
static int callback_failure(json_t *root, tk__callback_body *out, tk__api_error *e) {
  json_t *retryable = json_object_get(root, "retryable");
  json_t *after = json_object_get(root, "retry_after");
  if (json_object_get(root, "results") != NULL)
    return tk__api_fail(e, 400, "bad_request", "results",
                        "results: a failure has no results (\"status\": \"success\" has)");
  if (text_member(root, "error", "bad_request", 0, &out->error, e) != 0) return -1;
  if (out->error == NULL)
    return tk__api_fail(e, 400, "bad_request", "error",
                        "error: missing: a failure says why in a non-empty string");
  if (retryable != NULL && !json_is_boolean(retryable))
    return tk__api_fail(e, 400, "bad_request", "retryable", "retryable: %s: expected true or false",
                        tk__json_type_name(retryable));
  out->retryable = retryable == NULL || json_is_true(retryable);
  if (after == NULL || json_is_null(after)) return 0;
  if (!out->retryable)
    return tk__api_fail(e, 400, "bad_request", "retry_after",
                        "retry_after: a failure that is not retryable is not retried: give "
                        "retry_after only with \"retryable\": true");
  return delay_member(after, "retry_after", 0, &out->retry_after_ms, e);
}

int tk__callback_body_parse(const char *body, size_t len, tk__callback_body *out,
                            tk__api_error *e) {
  static const char *const members[] = {"status", "results", "error", "retryable", "retry_after",
                                        NULL};
  memset(out, 0, sizeof *out);
  out->retry_after_ms = -1;
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  const char *status = NULL;
  int rc = tk__body_only(out->root, "body", members,
                         "status, results, error, retryable or retry_after", e);
  if (rc == 0) rc = text_member(out->root, "status", "bad_request", 0, &status, e);
  if (rc == 0 && (status == NULL || (strcmp(status, "success") != 0 &&
                                     strcmp(status, "failure") != 0)))
    rc = tk__api_fail(e, 400, "bad_request", "status",
                      "status: %s: expected \"success\" (with results) or \"failure\" (with "
                      "error)",
                      status ? "unknown" : "missing");
  if (rc == 0 && strcmp(status, "failure") == 0) {
    rc = callback_failure(out->root, out, e);
  } else if (rc == 0) {
    static const char *const extra[] = {"error", "retryable", "retry_after", NULL};
    for (int i = 0; rc == 0 && extra[i]; i++)
      if (json_object_get(out->root, extra[i]) != NULL)
        rc = tk__api_fail(e, 400, "bad_request", extra[i],
                          "%s: a success has results only (\"status\": \"failure\" has %s)",
                          extra[i], extra[i]);
    json_t *results = json_object_get(out->root, "results");
    if (rc == 0 &&
        (out->results = results ? json_dumps(results, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                                          JSON_ENCODE_ANY)
                                : strdup("null")) == NULL)
      rc = tk__api_fail(e, 500, "internal", NULL, "out of memory");
  }
  if (rc != 0) tk__callback_body_free(out);
  return rc;
}

int tk__callback_heartbeat_parse(const char *body, size_t len, int64_t *timeout_ms,
                                 tk__api_error *e) {
  static const char *const members[] = {"timeout", NULL};
  *timeout_ms = 0;
  size_t i = 0;
  while (i < len && strchr(" \t\r\n", body[i]) != NULL) i++;
  if (i == len) return 0; /* no body */
  json_t *root;
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  json_t *t = json_object_get(root, "timeout");
  int rc = tk__body_only(root, "body", members, "timeout", e);
  if (rc == 0 && t != NULL) rc = delay_member(t, "timeout", 1, timeout_ms, e);
  json_decref(root);
  return rc;
}
