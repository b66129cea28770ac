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

int tk__claim_body_parse(const char *body, size_t len, tk__claim_body *out, tk__api_error *e) {
  static const char *const members[] = {"worker", "max", "wait", NULL};
  json_t *root;
  memset(out, 0, sizeof *out);
  out->max = 1;
  if (tk__body_object(body, len, &root, e) != 0) return -1;
  json_t *worker = json_object_get(root, "worker"), *max = json_object_get(root, "max"),
         *wait = json_object_get(root, "wait");
  int rc = tk__body_only(root, "body", members, "worker, max or wait", e);
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
  json_decref(root);
  return rc;
}

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
  json_t *results = json_object_get(root, "results");
  if (rc == 0 && results != NULL &&
      (out->results = json_dumps(results, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)) ==
          NULL)
    rc = tk__api_fail(e, 500, "internal", NULL, "out of memory");
  json_decref(root);
  return rc;
}

void tk__fail_body_free(tk__fail_body *b) {
  json_decref(b->root);
  memset(b, 0, sizeof *b);
}

int tk__fail_body_parse(const char *body, size_t len, tk__fail_body *out, tk__api_error *e) {
  static const char *const members[] = {"error", "retryable", "retry_after", NULL};
  memset(out, 0, sizeof *out);
  out->retryable = 1;
  out->retry_after_ms = -1;
  if (tk__body_object(body, len, &out->root, e) != 0) return -1;
  json_t *error = json_object_get(out->root, "error"),
         *retryable = json_object_get(out->root, "retryable"),
         *after = json_object_get(out->root, "retry_after");
  int rc = tk__body_only(out->root, "body", members, "error, retryable or retry_after", e);
  if (rc == 0 && (!json_is_string(error) || json_string_length(error) == 0 ||
                  strlen(json_string_value(error)) != json_string_length(error)))
    rc = tk__api_fail(e, 400, "bad_request", "error",
                      "error: %s: expected a non-empty string saying why",
                      !json_is_string(error)           ? tk__json_type_name(error)
                      : json_string_length(error) == 0 ? "empty"
                                                       : "the string holds a NUL character");
  if (rc == 0 && retryable != NULL && !json_is_boolean(retryable))
    rc = tk__api_fail(e, 400, "bad_request", "retryable", "retryable: %s: expected true or false",
                      tk__json_type_name(retryable));
  if (rc == 0 && after != NULL && !json_is_null(after) && json_is_false(retryable))
    rc = tk__api_fail(e, 400, "bad_request", "retry_after",
                      "retry_after: a failure that is not retryable is not retried: give "
                      "retry_after only with \"retryable\": true");
  if (rc == 0 && after != NULL && !json_is_null(after))
    rc = seconds_member(after, "retry_after", TK__RETRY_AFTER_MAX_S, &out->retry_after_ms, e);
  if (rc != 0) {
    tk__fail_body_free(out);
    return -1;
  }
  out->error = json_string_value(error);
  if (retryable != NULL) out->retryable = json_is_true(retryable);
  return 0;
}
