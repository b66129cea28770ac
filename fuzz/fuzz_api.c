/* libFuzzer target for the API's request parsing (src/server/request_parse.h):
 * routes, query strings, list parameters and the JSON bodies of submit, bulk
 * actions and signals (the signal body as the API reads it, then the
 * library's rule on it, store/rules.c tk__signal_check); and, on the same
 * text, the listen address and Host checks (src/server/listen.c). The
 * input is a method selector byte, the request target (path and query) up
 * to a NUL, then the body. Every request must parse or
 * be refused with a complete error (a status from 400 to 599, a code, a
 * message) whose JSON text parses back to the same status; parsed values
 * must be within their documented bounds. Never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/request_parse.h"
#include "server/server_internal.h"
#include "store/rules.h"

#include "fuzz_request.h"

static void check_list(const tk__list_query *lq, int steps) {
  if (lq->limit < 1 || lq->limit > TK_PAGE_MAX) abort();
  if (steps && lq->step_state == NULL) abort();
  if ((lq->filter.state && !lq->filter.state[0]) || (lq->since && !lq->since[0])) abort();
}

static void query(const tk__route *r) {
  tk__query q;
  tk__api_error e;
  if (tk__query_parse(r->query, r->query_len, &q, &e) != 0) {
    fuzz_check_error(&e);
    return;
  }
  for (int steps = 0; steps < 2; steps++) {
    tk__list_query lq;
    if (tk__list_query_parse(&q, steps, &lq, &e) != 0) fuzz_check_error(&e);
    else check_list(&lq, steps);
  }
  int64_t n;
  if (tk__query_int(&q, "attempts", 1, 1000, 10, &n, &e) != 0) fuzz_check_error(&e);
  else if (n < 1 || n > 1000) abort();
  tk__query_free(&q);
}

/* A signal body as POST .../steps/STEP/signal reads it
 * (tk__signal_body_parse), then the library's rule on its parsed values
 * (store/rules.c tk__signal_check), as the API hands them over. A body the
 * parser takes is an object of data, error (a string) and key (a string)
 * only; the rule then refuses it exactly when it is not one of data and
 * error, the error empty or the key outside 1 to 200 bytes, naming the
 * member, else its compact data parse back to the same JSON. */
static void signal_body(const char *body, size_t len) {
  tk__api_error e;
  tk__signal_body sb;
  if (tk__signal_body_parse(body, len, &sb, &e) != 0) {
    fuzz_check_error(&e);
    return;
  }
  const char *k;
  json_t *v;
  json_object_foreach(sb.root, k, v) {
    if (strcmp(k, "data") != 0 && strcmp(k, "error") != 0 && strcmp(k, "key") != 0) abort();
  }
  if ((sb.error && !json_is_string(json_object_get(sb.root, "error"))) ||
      (sb.key && !json_is_string(json_object_get(sb.root, "key"))))
    abort();
  tk_err err;
  memset(&err, 0, sizeof err);
  char *compact = NULL;
  const char *place = NULL;
  int rc = tk__signal_check(sb.data, sb.error, sb.key, &compact, &place, &err);
  int bad = (sb.data == NULL) == (sb.error == NULL) || (sb.error && sb.error[0] == '\0') ||
            (sb.key && (sb.key[0] == '\0' || strlen(sb.key) > 200));
  if ((rc != 0) != bad || (rc != 0 && (rc != TK_EINVAL || err.msg[0] == '\0' || !place)))
    abort();
  if (rc == 0 && (sb.data != NULL) != (compact != NULL)) abort();
  if (compact) {
    json_t *back = json_loads(compact, JSON_DECODE_ANY, NULL);
    if (back == NULL || !json_equal(back, (json_t *)sb.data)) abort();
    json_decref(back);
  }
  free(compact);
  tk__signal_body_free(&sb);
}

/* The same rule on the body's text as the CLI's --data, a C string up to
 * its first NUL (the library parses it): taken exactly when that is JSON
 * (any value), else refused with a message. */
static void signal_text(const char *body) {
  tk_err err;
  memset(&err, 0, sizeof err);
  json_t *j = json_loads(body, JSON_DECODE_ANY, NULL);
  int json = j != NULL;
  json_decref(j);
  int rc = tk__signal_body_check(body, NULL, NULL, &err);
  if ((rc == 0) != json || (rc != 0 && (rc != TK_EINVAL || err.msg[0] == '\0'))) abort();
}

/* A callback's body as POST /api/v1/callbacks/TOKEN reads it
 * (tk__callback_body_parse) and a heartbeat's: taken, it is exactly one
 * of a success (results: JSON text that parses back to the body's
 * results, null when absent; no error) and a failure (a non-empty error
 * without NUL, no results; retry_after only when retryable, within a
 * year); a heartbeat's timeout is > 0 and within a year, or none. */
static void callback_body(const char *body, size_t len) {
  tk__api_error e;
  tk__callback_body cb;
  if (tk__callback_body_parse(body, len, &cb, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    const char *status = json_string_value(json_object_get(cb.root, "status"));
    int success = status && strcmp(status, "success") == 0;
    if (!status || success != (cb.results != NULL) || success == (cb.error != NULL)) abort();
    if (cb.error && (cb.error[0] == '\0' || json_object_get(cb.root, "results"))) abort();
    if (cb.retry_after_ms != -1 && (!cb.retryable || cb.retry_after_ms < 0 ||
                                    cb.retry_after_ms > (int64_t)TK__RETRY_AFTER_MAX_S * 1000))
      abort();
    if (cb.results) {
      json_t *back = json_loads(cb.results, JSON_DECODE_ANY, NULL);
      json_t *want = json_object_get(cb.root, "results");
      if (back == NULL || (want ? !json_equal(back, want) : !json_is_null(back))) abort();
      json_decref(back);
    }
    tk__callback_body_free(&cb);
  }
  int64_t ms;
  if (tk__callback_heartbeat_parse(body, len, &ms, &e) != 0) fuzz_check_error(&e);
  else if (ms < 0 || ms > (int64_t)TK__RETRY_AFTER_MAX_S * 1000) abort();
}

static void bodies(const char *body, size_t len) {
  signal_body(body, len);
  callback_body(body, len);
  signal_text(body);
  tk__api_error e;
  tk__submit_body sb;
  if (tk__submit_body_parse(body, len, &sb, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    if (sb.template_name == NULL || sb.template_name[0] == '\0') abort();
    tk__submit_body_free(&sb);
  }
  /* A bulk submit: every element a checked submission. */
  tk__submit_list sl;
  if (tk__submit_list_parse(body, len, &sl, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    if (sl.n == 0 || sl.n > TK__SUBMIT_LIST_MAX) abort();
    for (size_t k = 0; k < sl.n; k++)
      if (sl.items[k].template_name == NULL || sl.items[k].template_name[0] == '\0') abort();
    tk__submit_list_free(&sl);
  }
  static const tk_operator_action actions[] = {TK_OP_RETRY, TK_OP_RESOLVE, TK_OP_CANCEL};
  for (int i = 0; i < 3; i++) {
    tk__bulk_body bb;
    if (tk__bulk_body_parse(body, len, actions[i], &bb, &e) != 0) {
      fuzz_check_error(&e);
      continue;
    }
    if (bb.kind == TK__BULK_TASKS)
      for (size_t k = 0; k < bb.n; k++)
        if (bb.tasks[k] <= 0) abort();
    if (bb.kind == TK__BULK_STEPS && actions[i] == TK_OP_CANCEL) abort();
    if ((bb.kind != TK__BULK_FILTER && (bb.n < 1 || bb.n > TK__BULK_LIST_MAX)) || bb.max < 1)
      abort();
    tk__bulk_body_free(&bb);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const methods[] = {"GET", "POST", "HEAD", "DELETE"};
  const char *method, *rest;
  size_t ulen, blen;
  char *body;
  if (fuzz_request_split(data, size, methods, &method, &rest, &ulen, &body, &blen) != 0)
    return 0;

  tk__route r;
  tk__api_error e;
  const char *allow;
  if (tk__route_parse(method, rest, ulen, &r, &allow, &e) != 0) {
    fuzz_check_error(&e);
    if ((e.status == 405) != (allow != NULL)) abort();
  } else {
    if (r.path_len > ulen || r.query_len > ulen) abort();
    if ((r.id == TK__R_TASK || r.id == TK__R_TASK_CANCEL || r.id == TK__R_STEP_ACTION) &&
        r.task <= 0)
      abort();
    if ((r.id == TK__R_STEP_ACTION || r.id == TK__R_SIGNAL) && r.step[0] == '\0') abort();
    if (r.id == TK__R_SIGNAL && (r.task <= 0 || !r.post)) abort();
    query(&r);
  }
  bodies(body, blen);
  /* The target as an address and as a Host header: parsed or refused. */
  free(body);
  char *target = malloc(ulen + 1);
  if (target == NULL) return 0;
  memcpy(target, rest, ulen);
  target[ulen] = '\0';
  tk_err err;
  int loopback = -1;
  int rc = tk_server_listen_check(target, &loopback, &err);
  if ((rc != 0 && (rc != TK_EINVAL || err.msg[0] == '\0')) || (rc == 0 && loopback < 0)) abort();
  (void)tk__loopback_host(target);
  free(target);
  return 0;
}
