/* The callbacks of http steps (docs/callbacks.md, DESIGN §18):
 *   POST /api/v1/callbacks/TOKEN            {"status": "success", "results": ...} or
 *                                           {"status": "failure", "error": ..., ...}
 *   POST /api/v1/callbacks/TOKEN/heartbeat  [{"timeout": "10m"}]
 * The token (the attempt's claim id and a secret, core/claim_token.h) is
 * the credential: the store keeps only its hash and checks it with the
 * claim (callback_put, callback_extend), so an earlier attempt's token is
 * refused (409) and changes nothing, an unknown one is 404. A callback is
 * stored as a signal bound to its attempt, which an orchestrator delivers
 * (engine/waits.c). The token is never written to an answer or a log. */
#include "server/server_internal.h"

#include <string.h>

#include "core/claim_token.h"
#include "store/store.h"

/* The claim and secret hash the path's token names into r; -1 with a 404
 * answered when it cannot be a callback's token. */
static int token_of(const tk__route *rt, tk__callback_req *r, tk__response *out) {
  unsigned char secret[TK__CLAIM_SECRET_LEN];
  if (tk__claim_token_parse(rt->name, &r->claim_id, secret) != 0) {
    tk__api_error e;
    tk__api_fail(&e, 404, "not_found", "token", "no callback has this token");
    tk__respond_error(out, &e);
    return -1;
  }
  tk__claim_secret_hash(secret, r->token_hash);
  memset(secret, 0, sizeof secret);
  return 0;
}

/* The answer of a callback or heartbeat the store took. */
static void answer(const tk__callback_ans *a, const char *status, tk__response *out) {
  json_t *j = json_pack("{s:I, s:s, s:i, s:s}", "task", (json_int_t)a->task_id, "step", a->step,
                        "attempt", a->attempt, "step_state", a->step_state);
  if (j && status) json_object_set_new(j, "status", json_string(status));
  if (j && !status)
    json_object_set_new(j, "until", a->until == TK__NONE ? json_null()
                                                         : json_integer((json_int_t)a->until));
  tk__respond_json_value(out, 200, j);
}

static void callback(tk_server *s, const tk__route *rt, const char *body, size_t len,
                     tk__response *out) {
  tk__callback_body b;
  tk__api_error e;
  if (tk__callback_body_parse(body, len, &b, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk__callback_req r = {.data = b.results, .error = b.error, .final = !b.retryable,
                        .retry_after_ms = b.retry_after_ms,
                        .now = tk_clock_now(&s->clock)};
  tk__callback_ans a;
  tk_err err;
  if (token_of(rt, &r, out) == 0) {
    if (s->store->ops->callback_put(s->store, &r, &a, &err) != 0)
      tk__respond_tk_error(s, out, &err, err.code == TK_ENOENT ? "token" : NULL);
    else
      answer(&a, b.error ? "failure" : "success", out);
  }
  memset(r.token_hash, 0, sizeof r.token_hash);
  tk__callback_body_free(&b);
}

static void heartbeat(tk_server *s, const tk__route *rt, const char *body, size_t len,
                      tk__response *out) {
  int64_t extend_ms;
  tk__api_error e;
  if (tk__callback_heartbeat_parse(body, len, &extend_ms, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  tk__callback_req r = {.now = tk_clock_now(&s->clock)};
  tk__callback_ans a;
  tk_err err;
  if (token_of(rt, &r, out) != 0) return;
  if (s->store->ops->callback_extend(s->store, &r, extend_ms, &a, &err) != 0)
    tk__respond_tk_error(s, out, &err, err.code == TK_ENOENT ? "token" : NULL);
  else
    answer(&a, NULL, out);
}

void tk__api_callback(tk_server *s, const tk__route *r, const char *body, size_t len,
                      tk__response *out) {
  if (r->id == TK__R_CALLBACK) callback(s, r, body, len, out);
  else heartbeat(s, r, body, len, out);
}
