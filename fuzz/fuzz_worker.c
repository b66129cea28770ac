/* libFuzzer target for the worker protocol's requests apart from HTTP
 * (src/server/worker_body.c, the worker routes of src/server/route.c):
 * the claim (with the outcomes it may carry), heartbeat, complete, fail
 * and batch-of-outcomes bodies, and the paths that name a queue or a
 * claim token. The input is a method selector byte, the
 * request target up to a NUL, then the body. Every request must parse or
 * be refused with a complete error (a status from 400 to 599, a code, a
 * message) whose JSON says the same status; whatever
 * parses must be within the documented bounds (docs/api.md "Workers").
 * Never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/remote.h"
#include "server/request_parse.h"

#include "fuzz_request.h"

static void route(const char *method, const char *target, size_t len) {
  tk__route r;
  tk__api_error e;
  const char *allow;
  if (tk__route_parse(method, target, len, &r, &allow, &e) != 0) {
    fuzz_check_error(&e);
    return;
  }
  if (r.worker != tk__route_is_worker(r.id) || (r.worker && !r.post)) abort();
  size_t n = strlen(r.name);
  if (r.id == TK__R_CLAIM &&
      (n == 0 || n > TK__QUEUE_NAME_MAX ||
       strspn(r.name, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != n))
    abort();
  if (r.id == TK__R_OUTCOMES && n != 0) abort(); /* names nothing */
  if ((r.id == TK__R_HEARTBEAT || r.id == TK__R_COMPLETE || r.id == TK__R_FAIL) &&
      (n == 0 || n > TK__CLAIM_TOKEN_MAX ||
       strspn(r.name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != n))
    abort();
}

/* A fail's members as parsed (a fail's body, or an item of a batch)
 * within their bounds. */
static void check_fail(const char *error, int retryable, int64_t retry_after_ms) {
  if (error == NULL || error[0] == '\0' || (retryable != 0 && retryable != 1) ||
      retry_after_ms < -1 || retry_after_ms > (int64_t)TK__RETRY_AFTER_MAX_S * 1000 ||
      (!retryable && retry_after_ms != -1))
    abort();
}

/* A batch as parsed: at most TK__OUTCOMES_MAX items, each with a token
 * of 1 to TK__CLAIM_TOKEN_MAX bytes, and a complete's results JSON text
 * of one value or a fail within its bounds. */
static void check_outcomes(const tk__outcomes_body *b) {
  if (b->n < 0 || b->n > TK__OUTCOMES_MAX || (b->n > 0 && b->o == NULL)) abort();
  for (int i = 0; i < b->n; i++) {
    const tk__remote_outcome *o = &b->o[i];
    size_t n = o->token ? strlen(o->token) : 0;
    if (n == 0 || n > TK__CLAIM_TOKEN_MAX) abort();
    if (o->failed) {
      if (o->results) abort();
      check_fail(o->error, o->retryable, o->retry_after_ms);
    } else if (o->results) {
      json_t *j = json_loads(o->results, JSON_DECODE_ANY, NULL);
      if (j == NULL) abort();
      json_decref(j);
    }
  }
}

static void bodies(const char *body, size_t len) {
  tk__api_error e;
  tk__claim_body cb;
  if (tk__claim_body_parse(body, len, &cb, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    size_t n = strlen(cb.worker);
    if (n == 0 || n > TK__WORKER_NAME_MAX || cb.max < 1 || cb.max > TK__CLAIM_MAX ||
        cb.wait_ms < 0 || cb.wait_ms > TK__CLAIM_WAIT_MAX_S * 1000)
      abort();
    for (size_t i = 0; i < n; i++)
      if (cb.worker[i] < 0x20 || cb.worker[i] > 0x7e) abort();
    check_outcomes(&cb.outcomes);
    tk__claim_body_free(&cb);
  }
  tk__outcomes_body ob;
  if (tk__outcomes_body_parse(body, len, &ob, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    if (ob.root == NULL) abort();
    check_outcomes(&ob);
    tk__outcomes_body_free(&ob);
  }
  if (tk__heartbeat_body_parse(body, len, &e) != 0) fuzz_check_error(&e);
  tk__complete_body co;
  if (tk__complete_body_parse(body, len, &co, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    /* The results handed to the engine are JSON text of one value. */
    json_t *j = co.results ? json_loads(co.results, JSON_DECODE_ANY, NULL) : NULL;
    if (co.results && j == NULL) abort();
    json_decref(j);
    tk__complete_body_free(&co);
  }
  tk__fail_body fb;
  if (tk__fail_body_parse(body, len, &fb, &e) != 0) {
    fuzz_check_error(&e);
  } else {
    check_fail(fb.error, fb.retryable, fb.retry_after_ms);
    tk__fail_body_free(&fb);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const methods[] = {"POST", "GET", "HEAD", "PUT"};
  const char *method, *rest;
  size_t ulen, blen;
  char *body;
  if (fuzz_request_split(data, size, methods, &method, &rest, &ulen, &body, &blen) != 0)
    return 0;
  route(method, rest, ulen);
  bodies(body, blen);
  free(body);
  return 0;
}
