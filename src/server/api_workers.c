/* The worker protocol (DESIGN §19, docs/api.md "Workers"): claim by queue
 * with a long-poll, then heartbeat, complete or fail by the claim's token.
 * Each call is the engine's (src/engine/remote.h), so a worker's claims
 * and outcomes go through the same claim, fence, backoff, budgets, events
 * and metrics as any step's. A claim that finds nothing and may wait is
 * left to loop.c, which resumes it when steps may have become ready. */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/buf.h"
#include "core/civil.h"
#include "engine/remote.h"

/* ms since the epoch as RFC 3339 UTC with milliseconds,
 * "2026-11-28T20:40:01.123Z" (the worker protocol's times). */
static json_t *utc_ms(int64_t ms) {
  int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
  int64_t in_day = ms - days * 86400000;
  int y, mo, d;
  tk__civil_from_days(days, &y, &mo, &d);
  char text[40];
  snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", y, mo, d,
           (int)(in_day / 3600000), (int)(in_day / 60000 % 60), (int)(in_day / 1000 % 60),
           (int)(in_day % 1000));
  return json_string(text);
}

/* {"claims": [CLAIM, ...]}; the claims are freed. */
static json_t *claims_json(tk__remote_claimed *c, int n) {
  json_t *list = json_array();
  for (int i = 0; list && i < n; i++)
    json_array_append_new(
        list, json_pack("{s:s, s:I, s:s, s:i, s:o, s:I, s:O}", "token", c[i].token, "task_id",
                        (json_int_t)c[i].task_id, "step", c[i].step, "attempt", c[i].attempt,
                        "lease_expires_at", utc_ms(c[i].lease_expires_at), "heartbeat_ms",
                        (json_int_t)c[i].heartbeat_ms, "input",
                        c[i].input ? c[i].input : json_null()));
  tk__remote_claims_free(c, n);
  return json_pack("{s:o?}", "claims", list);
}

int tk__api_claim(tk_server *s, const tk__route *r, const char *body, size_t len, tk__waiter *w,
                  tk__response *out) {
  if (!w->started) {
    tk__api_error e;
    if (tk__claim_body_parse(body, len, &w->body, &e) != 0) {
      tk__respond_error(out, &e);
      return 0;
    }
    memcpy(w->queue, r->name, strlen(r->name) + 1); /* route.c: at most TK__QUEUE_NAME_MAX */
    w->deadline_ns = tk_monotonic_ns() + w->body.wait_ms * 1000000;
    w->started = 1;
  } else if (w->woken == TK__WAKE_GONE || w->woken == TK__WAKE_STOP) {
    /* Nobody to hand steps to (a hang-up: the answer is not read), or the
     * server stops: answer none, claim none. */
    s->claim_answers[w->woken]++;
    tk__respond_json_value(out, 200, claims_json(NULL, 0));
    return 0;
  }
  tk__remote_claimed c[TK__CLAIM_MAX];
  int n = 0;
  tk_err err;
  if (tk__remote_claim(s->engine, w->queue, w->body.worker, w->body.max, c, &n, &err) != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
    return 0;
  }
  if (n == 0 && w->woken != TK__WAKE_TIMEOUT && tk_monotonic_ns() < w->deadline_ns) return 1;
  if (n == w->body.max) tk__loop_more(s, w->queue); /* there may be more for the next one */
  s->claim_answers[n == 0 && w->woken != TK__WAKE_NONE ? TK__WAKE_TIMEOUT : w->woken]++;
  tk__respond_json_value(out, 200, claims_json(c, n));
  return 0;
}

char *tk__workers_metrics(const tk_server *s) {
  tk__buf b = {0};
  tk__buf_addf(&b,
               "# HELP tasker_serve_claims_waiting Worker claims waiting for work (long-polls)\n"
               "# TYPE tasker_serve_claims_waiting gauge\n"
               "tasker_serve_claims_waiting %d\n"
               "# HELP tasker_serve_claim_answers_total Worker claims answered, by what made "
               "the server answer\n"
               "# TYPE tasker_serve_claim_answers_total counter\n",
               s->nwaiters);
  for (int i = 0; i < TK__WAKE_N; i++)
    tk__buf_addf(&b, "tasker_serve_claim_answers_total{after=\"%s\"} %lld\n",
                 tk__wake_names[i], (long long)s->claim_answers[i]);
  return tk__buf_take(&b);
}

/* A refusal of an outcome: a malformed token is no claim (404), a token
 * whose claim no longer holds its step is fenced (409). */
static void outcome_error(tk_server *s, tk__response *out, const tk_err *err) {
  tk__api_error e;
  if (err->code == TK_EINVAL) {
    tk__api_fail(&e, 404, "not_found", "token", "%s", tk_err_message(err));
  } else if (err->code == TK_EFENCED) {
    tk__api_fail(&e, 409, "conflict", "token", "%s", tk_err_message(err));
  } else {
    tk__respond_tk_error(s, out, err, NULL);
    return;
  }
  tk__respond_error(out, &e);
}

/* {"state": STATE} and, for a retry, "run_at". */
static json_t *result_json(const tk__remote_result *res) {
  json_t *j = json_pack("{s:s}", "state", res->state);
  if (j && strcmp(res->state, "waiting_for_retry") == 0)
    json_object_set_new(j, "run_at", utc_ms(res->run_at));
  return j;
}

void tk__api_claim_outcome(tk_server *s, const tk__route *r, const char *body, size_t len,
                           tk__response *out) {
  tk__api_error e;
  tk_err err;
  tk__remote_result res = {0};
  int rc;
  if (r->id == TK__R_HEARTBEAT) {
    int64_t lease = 0;
    if (tk__heartbeat_body_parse(body, len, &e) != 0) {
      tk__respond_error(out, &e);
    } else if ((rc = tk__remote_heartbeat(s->engine, r->name, &lease, &err)) != 0) {
      outcome_error(s, out, &err);
    } else {
      tk__respond_json_value(out, 200, json_pack("{s:o}", "lease_expires_at", utc_ms(lease)));
    }
  } else if (r->id == TK__R_COMPLETE) {
    tk__complete_body b;
    if (tk__complete_body_parse(body, len, &b, &e) != 0) {
      tk__respond_error(out, &e);
      return;
    }
    if (tk__remote_complete(s->engine, r->name, b.results, &res, &err) != 0)
      outcome_error(s, out, &err);
    else
      tk__respond_json_value(out, 200, result_json(&res));
    tk__complete_body_free(&b);
  } else {
    tk__fail_body b;
    if (tk__fail_body_parse(body, len, &b, &e) != 0) {
      tk__respond_error(out, &e);
      return;
    }
    if (tk__remote_fail(s->engine, r->name, b.error, b.retryable, b.retry_after_ms, &res,
                        &err) != 0) {
      outcome_error(s, out, &err);
    } else {
      /* No store signal says when the retry comes due: wake waiting claims then. */
      if (res.run_at > 0)
        tk__loop_due(s, tk_monotonic_ns() + (res.run_at - tk_clock_now(&s->clock)) * 1000000);
      tk__respond_json_value(out, 200, result_json(&res));
    }
    tk__fail_body_free(&b);
  }
}
