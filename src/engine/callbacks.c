/* Callbacks of http steps (DESIGN §18, docs/callbacks.md): each attempt
 * of a step with `callback = { timeout = ... }` gets a random token, kept
 * in the store only as its hash (callback_arm), and a URL under
 * server.public_url, which the request may carry ({{task.callback_url}},
 * {{task.callback_token}}). A 2xx answer does not complete the step: it is
 * parked as waiting (step_wait) until the callback comes (a signal bound
 * to the attempt, taken back by waits.c) or its timeout. Anything else is
 * the request's ordinary outcome. */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/claim_token.h"
#include "store/rules.h"

#define CALLBACK_PATH "/api/v1/callbacks/"

void tk__engine_callback_wipe(job *j) {
  if (j->cb_token) memset(j->cb_token, 0, strlen(j->cb_token));
  if (j->cb_url) memset(j->cb_url, 0, strlen(j->cb_url));
  free(j->cb_token);
  free(j->cb_url);
  j->cb_token = j->cb_url = NULL;
}

/* j fails at now without running: status, message. */
static int fail_now(job *j, int64_t now, tk_handler_status status, const char *msg) {
  memset(&j->result, 0, sizeof j->result);
  j->result.status = status;
  j->result.retry_after_ms = -1;
  snprintf(j->result.error, sizeof j->result.error, "%s", msg);
  j->started_at = j->finished_at = now;
  return -1;
}

int tk__engine_callback_arm(tk_engine *e, job *j, int64_t now, int *dropped) {
  *dropped = 0;
  const char *base = tk_config_server(e->config)->public_url;
  if (base == NULL || base[0] == '\0')
    return fail_now(j, now, TK_HANDLER_PERMANENT,
                    "this http step waits for a callback, but the configuration has no "
                    "server.public_url (the URL tasker serve is reached at, which the "
                    "callback URL begins with)");
  unsigned char secret[TK__CLAIM_SECRET_LEN];
  tk__callback_arm a = {.step_id = j->claim.step_id, .claim_id = j->claim.claim_id,
                        .timeout_ms = j->def->callback_ms,
                        .limit_at = j->def->timeout_ms > 0 ? now + j->def->timeout_ms
                                                           : INT64_MAX,
                        .now = now};
  if (tk__claim_secret_new(secret, a.token_hash) != 0)
    return fail_now(j, now, TK_HANDLER_RETRY, "cannot draw a callback token: no entropy");
  char token[TK__CLAIM_TOKEN_LEN + 1];
  tk__claim_token_format(j->claim.claim_id, secret, token);
  memset(secret, 0, sizeof secret);
  size_t blen = strlen(base);
  while (blen > 0 && base[blen - 1] == '/') blen--;
  size_t ulen = blen + sizeof CALLBACK_PATH + TK__CLAIM_TOKEN_LEN;
  j->cb_token = strdup(token);
  j->cb_url = malloc(ulen);
  if (j->cb_url) snprintf(j->cb_url, ulen, "%.*s%s%s", (int)blen, base, CALLBACK_PATH, token);
  memset(token, 0, sizeof token);
  if (j->cb_token == NULL || j->cb_url == NULL)
    return fail_now(j, now, TK_HANDLER_RETRY, "out of memory making a callback token");
  tk_err err;
  if (e->store->ops->callback_arm(e->store, &a, &err) == 0) return 0;
  tk__engine_log(e, TK_LOG_WARN, "task %lld step %s attempt %d: cannot keep its callback: %s",
                 (long long)j->claim.task_id, j->name, j->claim.attempt, err.msg);
  tk__job_free(j);
  *dropped = 1;
  return -1;
}

/* Park j, whose request a 2xx answered, until its callback: 1 when a
 * callback came first (j's outcome is now the callback's: record it), 0
 * when it waits now or could not be parked (free j). */
static int park(tk_engine *e, job *j) {
  int64_t now = tk_clock_now(&e->clock);
  int64_t until = now + j->def->callback_ms;
  /* The step's timeout covers the whole attempt, waiting included. */
  if (j->def->timeout_ms > 0 && j->started_at + j->def->timeout_ms < until)
    until = j->started_at + j->def->timeout_ms;
  tk__engine_callback_wipe(j);
  return tk__engine_park_until(e, j, now, until, TK__REASON_CALLBACK_WAITING);
}

job *tk__engine_callbacks_park(tk_engine *e, job *list) {
  job *kept = NULL, **end = &kept;
  while (list) {
    job *j = list;
    list = j->next;
    j->next = NULL;
    if (j->def->callback_ms > 0 && !j->waited && j->cb_token != NULL &&
        j->result.status == TK_HANDLER_SUCCESS && !park(e, j)) {
      tk__job_free(j);
      continue;
    }
    *end = j;
    end = &j->next;
  }
  return kept;
}
