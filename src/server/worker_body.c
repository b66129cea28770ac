/* The JSON bodies of the worker protocol (docs/api.md "Workers"): claim,
 * heartbeat, complete and fail. As for every body, each member is checked
 * for its type and bounds, unknown members are refused, and a refusal
 * names the member. */
#include "server/request_parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A JSON number (integer or real) in [0, max] into *ms, in milliseconds
 * (rounded); key names the member in messages. */
static int seconds_member(json_t *v, const char *key, double max, int64_t *ms, tk__api_error *e) {
  if (!json_is_number(v))
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %s: expected a number of seconds from 0 to %g", key,
                        tk__json_type_name(v), max);
  double s = json_number_value(v);
  if (!(s >= 0 && s <= max))
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %g is out of range: expected a number of seconds from 0 to %g", key, s,
                        max);
  *ms = (int64_t)llround(s * 1000.0);
  return 0;
}

static int outcomes_member(json_t *root, json_t *outcomes, tk__outcomes_body *out,
                           tk__api_error *e);

int tk__claim_body_parse(const char *body, size_t len, tk__claim_body *out, tk__api_error *e) {
  static const char *const members[] = {"worker", "max", "wait", "outcomes", NULL};
  json_t *root;
  memset(out, 0, sizeof *out);
  out->max = 1;
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  json_t *worker = json_object_get(root, "worker"), *max = json_object_get(root, "max"),
         *wait = json_object_get(root, "wait"), *outcomes = json_object_get(root, "outcomes");
  int rc = tk__body_only(root, "body", members, "worker, max, wait or outcomes", e);
  if (rc == 0 && !json_is_string(worker))
    rc = tk__api_fail(e, 400, "bad_request", "worker",
                      "worker: %s: expected the worker's name, 1 to %d printable ASCII characters "
                      "(e.g. \"host-1.4242\")",
                      tk__json_type_name(worker), TK__WORKER_NAME_MAX);
  if (rc == 0) {
    const char *w = json_string_value(worker);
    size_t n = json_string_length(worker), i = 0;
    while (i < n && w[i] >= 0x20 && w[i] <= 0x7e) i++;
    if (n == 0 || n > TK__WORKER_NAME_MAX || i < n)
      rc = tk__api_fail(e, 400, "bad_request", "worker",
                        "worker: %s: expected 1 to %d printable ASCII characters",
                        n == 0                    ? "empty"
                        : n > TK__WORKER_NAME_MAX ? "too long"
                                                  : "holds a character that is not printable ASCII",
                        TK__WORKER_NAME_MAX);
    else
      memcpy(out->worker, w, n + 1);
  }
  if (rc == 0 && max != NULL) {
    if (!json_is_integer(max) || json_integer_value(max) < 1 ||
        json_integer_value(max) > TK__CLAIM_MAX)
      rc = tk__api_fail(e, 400, "bad_request", "max", "max: %s: expected an integer from 1 to %d",
                        json_is_integer(max) ? "out of range" : tk__json_type_name(max),
                        TK__CLAIM_MAX);
    else
      out->max = (int)json_integer_value(max);
  }
  if (rc == 0 && wait != NULL)
    rc = seconds_member(wait, "wait", TK__CLAIM_WAIT_MAX_S, &out->wait_ms, e);
  if (rc == 0 && outcomes != NULL) rc = outcomes_member(root, outcomes, &out->outcomes, e);
  json_decref(root);
  if (rc != 0) tk__claim_body_free(out);
  return rc;
}

void tk__claim_body_free(tk__claim_body *b) { tk__outcomes_body_free(&b->outcomes); }

int tk__heartbeat_body_parse(const char *body, size_t len, tk__api_error *e) {
  static const char *const members[] = {NULL};
  size_t i = 0;
  while (i < len && strchr(" \t\r\n", body[i]) != NULL) i++;
  if (i == len) return 0; /* no body */
  json_t *root;
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  int rc = tk__body_only(root, "body", members, "an empty object {}", e);
  json_decref(root);
  return rc;
}

/* Results as compact JSON text (malloc'd) into *text; results may be
 * NULL (absent: null). */
static int results_text(json_t *results, char **text, tk__api_error *e) {
  *text = NULL;
  if (results != NULL &&
      (*text = json_dumps(results, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)) == NULL)
    return tk__api_fail(e, 500, "internal", NULL, "out of memory");
  return 0;
}

void tk__complete_body_free(tk__complete_body *b) {
  free(b->results);
  b->results = NULL;
}

int tk__complete_body_parse(const char *body, size_t len, tk__complete_body *out,
                            tk__api_error *e) {
  static const char *const members[] = {"results", NULL};
  json_t *root;
  out->results = NULL;
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  int rc = tk__body_only(root, "body", members, "results", e);
  if (rc == 0) rc = results_text(json_object_get(root, "results"), &out->results, e);
  json_decref(root);
  return rc;
}

void tk__fail_body_free(tk__fail_body *b) {
  json_decref(b->root);
  memset(b, 0, sizeof *b);
}

/* The members of a fail in obj (a fail's body, or an item of a batch):
 * error, retryable, retry_after, into *error (borrowed from obj),
 * *retryable and *after_ms. `at` prefixes each member's name in the
 * refusal ("" or "outcomes[3]."). */
static int fail_members(json_t *obj, const char *at, const char **error_out, int *retryable_out,
                        int64_t *after_ms, tk__api_error *e) {
  json_t *error = json_object_get(obj, "error"), *retryable = json_object_get(obj, "retryable"),
         *after = json_object_get(obj, "retry_after");
  char key[64];
  int rc = 0;
  *retryable_out = 1;
  *after_ms = -1;
  if (!json_is_string(error) || json_string_length(error) == 0 ||
      strlen(json_string_value(error)) != json_string_length(error)) {
    snprintf(key, sizeof key, "%serror", at);
    rc = tk__api_fail(e, 400, "bad_request", key,
                      "%s: %s: expected a non-empty string saying why", key,
                      !json_is_string(error)           ? tk__json_type_name(error)
                      : json_string_length(error) == 0 ? "empty"
                                                       : "the string holds a NUL character");
  }
  if (rc == 0 && retryable != NULL && !json_is_boolean(retryable)) {
    snprintf(key, sizeof key, "%sretryable", at);
    rc = tk__api_fail(e, 400, "bad_request", key, "%s: %s: expected true or false", key,
                      tk__json_type_name(retryable));
  }
  snprintf(key, sizeof key, "%sretry_after", at);
  if (rc == 0 && after != NULL && !json_is_null(after) && json_is_false(retryable))
    rc = tk__api_fail(e, 400, "bad_request", key,
                      "%s: a failure that is not retryable is not retried: give "
                      "retry_after only with \"retryable\": true",
                      key);
  if (rc == 0 && after != NULL && !json_is_null(after))
    rc = seconds_member(after, key, TK__RETRY_AFTER_MAX_S, after_ms, e);
  if (rc != 0) return -1;
  *error_out = json_string_value(error);
  if (retryable != NULL) *retryable_out = json_is_true(retryable);
  return 0;
}

int tk__fail_body_parse(const char *body, size_t len, tk__fail_body *out, tk__api_error *e) {
  static const char *const members[] = {"error", "retryable", "retry_after", NULL};
  memset(out, 0, sizeof *out);
  out->retryable = 1;
  out->retry_after_ms = -1;
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  int rc = tk__body_only(out->root, "body", members, "error, retryable or retry_after", e);
  if (rc == 0)
    rc = fail_members(out->root, "", &out->error, &out->retryable, &out->retry_after_ms, e);
  if (rc != 0) {
    tk__fail_body_free(out);
    return -1;
  }
  return 0;
}

void tk__outcomes_body_free(tk__outcomes_body *b) {
  for (int i = 0; b->o && i < b->n; i++) free((char *)b->o[i].results);
  free(b->o);
  json_decref(b->root);
  memset(b, 0, sizeof *b);
}

/* Item i of a batch's outcomes, obj, into *o. */
static int outcome_item(json_t *obj, int i, tk__remote_outcome *o, tk__api_error *e) {
  static const char *const members[] = {"token", "results", "error", "retryable", "retry_after",
                                        NULL};
  char at[32], key[64];
  snprintf(at, sizeof at, "outcomes[%d].", i);
  memset(o, 0, sizeof *o);
  if (!json_is_object(obj)) {
    snprintf(key, sizeof key, "outcomes[%d]", i);
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %s: expected an object {\"token\", \"results\"} (a complete) or "
                        "{\"token\", \"error\", \"retryable\", \"retry_after\"} (a fail)",
                        key, tk__json_type_name(obj));
  }
  snprintf(key, sizeof key, "outcomes[%d]", i);
  if (tk__body_only(obj, key, members, "token, results, error, retryable or retry_after", e) !=
      0)
    return -1;
  json_t *token = json_object_get(obj, "token");
  if (!json_is_string(token) || json_string_length(token) == 0 ||
      json_string_length(token) > TK__CLAIM_TOKEN_MAX) {
    snprintf(key, sizeof key, "%stoken", at);
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: %s: expected a claim's token (a string of 1 to %d characters)", key,
                        json_is_string(token) ? "empty or too long" : tk__json_type_name(token),
                        TK__CLAIM_TOKEN_MAX);
  }
  o->token = json_string_value(token);
  if (json_object_get(obj, "error") == NULL) {
    if (json_object_get(obj, "retryable") || json_object_get(obj, "retry_after")) {
      snprintf(key, sizeof key, "%serror", at);
      return tk__api_fail(e, 400, "bad_request", key,
                          "%s: missing: a fail names its error (retryable and retry_after "
                          "belong to a fail)",
                          key);
    }
    char *text;
    if (results_text(json_object_get(obj, "results"), &text, e) != 0) return -1;
    o->results = text;
    return 0;
  }
  if (json_object_get(obj, "results") != NULL) {
    snprintf(key, sizeof key, "%sresults", at);
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s: an outcome is a complete (results) or a fail (error), not both",
                        key);
  }
  o->failed = 1;
  return fail_members(obj, at, &o->error, &o->retryable, &o->retry_after_ms, e);
}

/* The array `outcomes` (a member of root, which out takes over) into out. */
static int outcomes_member(json_t *root, json_t *outcomes, tk__outcomes_body *out,
                           tk__api_error *e) {
  out->root = json_incref(root);
  if (!json_is_array(outcomes) || json_array_size(outcomes) > TK__OUTCOMES_MAX)
    return tk__api_fail(e, 400, "bad_request", "outcomes",
                        "outcomes: %s: expected an array of 0 to %d outcomes",
                        json_is_array(outcomes) ? "too many" : tk__json_type_name(outcomes),
                        TK__OUTCOMES_MAX);
  size_t n = json_array_size(outcomes);
  if (n == 0) return 0;
  if ((out->o = calloc(n, sizeof *out->o)) == NULL)
    return tk__api_fail(e, 500, "internal", NULL, "out of memory");
  for (size_t i = 0; i < n; i++) {
    int rc = outcome_item(json_array_get(outcomes, i), (int)i, &out->o[i], e);
    out->n = (int)i + 1; /* freed with the body, its results too */
    if (rc != 0) return -1;
  }
  return 0;
}

int tk__outcomes_body_parse(const char *body, size_t len, tk__outcomes_body *out,
                            tk__api_error *e) {
  static const char *const members[] = {"outcomes", NULL};
  json_t *root;
  memset(out, 0, sizeof *out);
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  int rc = tk__body_only(root, "body", members, "outcomes", e);
  json_t *outcomes = json_object_get(root, "outcomes");
  if (rc == 0 && outcomes == NULL)
    rc = tk__api_fail(e, 400, "bad_request", "outcomes",
                      "outcomes: missing: expected an array of outcomes");
  if (rc == 0) rc = outcomes_member(root, outcomes, out, e);
  json_decref(root);
  if (rc != 0) tk__outcomes_body_free(out);
  return rc;
}
