/* The worker protocol (DESIGN §19, docs/api.md "Workers"): claim by queue
 * with a long-poll, then heartbeat, complete or fail by the claim's token.
 * Each call is the engine's (src/engine/remote.h), so a worker's claims
 * and outcomes go through the same claim, fence, backoff, budgets, events
 * and metrics as any step's. A claim that finds nothing and may wait is
 * left to loop.c, which resumes it when steps may have become ready.
 * Completes and fails are not recorded as they arrive: those read in one
 * pass of the loop are recorded together, in one store transaction
 * (tk__remote_record), each fenced by its own token and answered on its
 * own; a worker with 8 steps finishing at once pays for one commit. */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/buf.h"
#include "engine/remote.h"

/* {"claims": [CLAIM, ...]} and, when the claim carried outcomes, their
 * "outcomes" (answers, taken over); the claims are freed. */
static json_t *claims_json(tk__remote_claimed *c, int n, json_t *answers) {
  json_t *list = json_array();
  for (int i = 0; list && i < n; i++)
    json_array_append_new(
        list, json_pack("{s:s, s:I, s:s, s:i, s:I, s:I, s:O}", "token", c[i].token, "task_id",
                        (json_int_t)c[i].task_id, "step", c[i].step, "attempt", c[i].attempt,
                        "lease_expires_at", (json_int_t)c[i].lease_expires_at, "heartbeat_ms",
                        (json_int_t)c[i].heartbeat_ms, "input",
                        c[i].input ? c[i].input : json_null()));
  tk__remote_claims_free(c, n);
  return answers ? json_pack("{s:o?, s:o}", "claims", list, "outcomes", answers)
                 : json_pack("{s:o?}", "claims", list);
}

/* One (queue, worker) pair worker_seen recorded, and when (monotonic). */
typedef struct tk__seen {
  char queue[TK__QUEUE_NAME_MAX + 1];
  char worker[TK__WORKER_NAME_MAX + 1];
  int64_t at_ns;
} tk__seen;

/* The pairs remembered: past this many, the one seen longest ago is
 * forgotten (and recorded again at its next claim). */
#define SEEN_MAX 256

/* Record that w's worker claims from its queue, unless this pair was
 * recorded less than TK__SEEN_MS ago; a failure is logged only. Called
 * right before a claim (see the drain). */
static void worker_seen(tk_server *s, const tk__waiter *w) {
  int64_t now = tk_monotonic_ns();
  if (s->seen == NULL && (s->seen = calloc(SEEN_MAX, sizeof *s->seen)) == NULL) return;
  tk__seen *slot = NULL;
  for (int i = 0; i < s->nseen; i++) {
    tk__seen *p = &s->seen[i];
    if (strcmp(p->queue, w->queue) == 0 && strcmp(p->worker, w->body.worker) == 0) {
      if (now - p->at_ns < (int64_t)TK__SEEN_MS * 1000000) return;
      slot = p;
      break;
    }
    if (slot == NULL || p->at_ns < slot->at_ns) slot = p;
  }
  if (s->nseen < SEEN_MAX && (slot == NULL || strcmp(slot->queue, w->queue) != 0 ||
                              strcmp(slot->worker, w->body.worker) != 0))
    slot = &s->seen[s->nseen++];
  snprintf(slot->queue, sizeof slot->queue, "%s", w->queue);
  snprintf(slot->worker, sizeof slot->worker, "%s", w->body.worker);
  slot->at_ns = now;
  tk_err err;
  if (tk__remote_seen(s->engine, w->queue, w->body.worker, &err) != 0)
    tk__server_log(s, TK_LOG_WARN, "queue %s: recording worker %s: %s", w->queue, w->body.worker,
                   tk_err_message(&err));
  /* The write signals a change (SQLite's watch sees this process's
   * writes too), which would wake the claim for nothing once it waits.
   * Drained before the claim that follows, which sees every change the
   * drained signal may have stood for. */
  tk__remote_drain(s->engine);
}

/* A refusal of an outcome into *e: a malformed token is no claim (404), a
 * token whose claim no longer holds its step is fenced (409); 0, or -1 for
 * another error (the caller answers it as any store error). */
static int outcome_refusal(const tk_err *err, tk__api_error *e) {
  if (err->code == TK_EINVAL) {
    tk__api_fail(e, 404, "not_found", "token", "%s", tk_err_message(err));
    return 0;
  }
  if (err->code == TK_EFENCED) {
    tk__api_fail(e, 409, "conflict", "token", "%s", tk_err_message(err));
    return 0;
  }
  return -1;
}

/* {"state": STATE} and, for a retry, "run_at". */
static json_t *result_json(const tk__remote_result *res) {
  json_t *j = json_pack("{s:s}", "state", res->state);
  if (j && strcmp(res->state, "waiting_for_retry") == 0)
    json_object_set_new(j, "run_at", json_integer(res->run_at));
  return j;
}

/* After outcome o was recorded: steps may have become ready; and no
 * store signal says when a retry comes due, so wake the waiting claims
 * then. */
static void outcome_recorded(tk_server *s, const tk__remote_outcome *o) {
  if (o->err.code != 0) return;
  s->changed = 1;
  if (o->failed && o->result.run_at > 0)
    tk__loop_due(s, tk_monotonic_ns() + (o->result.run_at - tk_clock_now(&s->clock)) * 1000000);
}

/* The answers to a batch's outcomes o[0..n), in its order: each as its
 * own endpoint answers it, {"state", "run_at"?}, or {"error": {"status",
 * "code", "message", "param"?}}. */
static json_t *outcome_answers(tk_server *s, const tk__remote_outcome *o, int n) {
  json_t *list = json_array();
  for (int i = 0; list && i < n; i++) {
    outcome_recorded(s, &o[i]);
    if (o[i].err.code == 0) {
      json_array_append_new(list, result_json(&o[i].result));
      continue;
    }
    tk__api_error e;
    if (outcome_refusal(&o[i].err, &e) != 0) {
      tk__server_log(s, TK_LOG_ERROR, "recording an outcome: %s", tk_err_message(&o[i].err));
      tk__api_fail(&e, o[i].err.code == TK_EDISCONNECTED ? 503 : 500,
                   o[i].err.code == TK_EDISCONNECTED ? "unavailable" : "internal", NULL, "%s",
                   tk_err_message(&o[i].err));
    }
    json_t *err = json_pack("{s:i, s:s, s:s}", "status", e.status, "code", e.code, "message",
                            e.message);
    if (err && e.param[0]) json_object_set_new(err, "param", json_string(e.param));
    json_array_append_new(list, json_pack("{s:o?}", "error", err));
  }
  return list;
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
    worker_seen(s, w);
  } else if (w->woken == TK__WAKE_GONE || w->woken == TK__WAKE_STOP) {
    /* Nobody to hand steps to (a hang-up: the answer is not read), or the
     * server stops: answer none, claim none. */
    s->claim_answers[w->woken]++;
    tk__respond_json_value(out, 200, claims_json(NULL, 0, w->answers));
    w->answers = NULL;
    return 0;
  }
  tk__remote_claimed c[TK__CLAIM_MAX];
  int n = 0;
  int64_t due;
  tk_err err;
  int rc;
  s->claim_queries++;
  tk__outcomes_body *carried = &w->body.outcomes;
  if (carried->root != NULL) {
    /* The outcomes it carries, recorded once, in its first claim's
     * transaction, and answered with the claim. */
    rc = tk__remote_record_claim(s->engine, carried->o, carried->n, w->queue, w->body.worker,
                                 w->body.max, c, &n, &due, &err);
    s->outcome_groups += carried->n > 0;
    s->outcomes_recorded += carried->n;
    w->answers = outcome_answers(s, carried->o, carried->n);
    /* Their answers are not held back by a wait for work: a claim that
     * carries outcomes answers at once (the worker's next claim waits). */
    if (carried->n > 0) w->deadline_ns = 0;
    tk__outcomes_body_free(carried);
  } else {
    rc = tk__remote_claim(s->engine, w->queue, w->body.worker, w->body.max, c, &n, &due, &err);
  }
  if (rc != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
    return 0;
  }
  tk__loop_queue_due(s, w->queue, w, due);
  if (n == 0 && !s->stopping && w->woken != TK__WAKE_TIMEOUT &&
      tk_monotonic_ns() < w->deadline_ns)
    return 1;
  if (n == w->body.max) tk__loop_more(s, w->queue); /* there may be more for the next one */
  s->claim_answers[n == 0 && w->woken != TK__WAKE_NONE ? TK__WAKE_TIMEOUT : w->woken]++;
  tk__respond_json_value(out, 200, claims_json(c, n, w->answers));
  w->answers = NULL;
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
  tk__buf_addf(&b,
               "# HELP tasker_serve_claim_queries_total Claims of worker queues made in the "
               "store (a long-poll claims again on each wake)\n"
               "# TYPE tasker_serve_claim_queries_total counter\n"
               "tasker_serve_claim_queries_total %lld\n"
               "# HELP tasker_serve_outcome_groups_total Store transactions that recorded "
               "workers' completes and fails (group commit)\n"
               "# TYPE tasker_serve_outcome_groups_total counter\n"
               "tasker_serve_outcome_groups_total %lld\n"
               "# HELP tasker_serve_outcomes_total Workers' completes and fails recorded or "
               "refused in those groups\n"
               "# TYPE tasker_serve_outcomes_total counter\n"
               "tasker_serve_outcomes_total %lld\n",
               (long long)s->claim_queries, (long long)s->outcome_groups,
               (long long)s->outcomes_recorded);
  return tk__buf_take(&b);
}

/* A refusal of an outcome (outcome_refusal's), or any other store error. */
static void outcome_error(tk_server *s, tk__response *out, const tk_err *err) {
  tk__api_error e;
  if (outcome_refusal(err, &e) == 0)
    tk__respond_error(out, &e);
  else
    tk__respond_tk_error(s, out, err, NULL);
}

/* w's answer from what its group recorded. */
static void outcome_answer(tk_server *s, tk__waiter *w, tk__response *out) {
  if (w->rec.err.code != 0) {
    outcome_error(s, out, &w->rec.err);
    return;
  }
  outcome_recorded(s, &w->rec);
  tk__respond_json_value(out, 200, result_json(&w->rec.result));
}

void tk__api_outcomes_record(tk_server *s) {
  int n = s->noutcomes;
  if (n == 0) return;
  tk__remote_outcome *group = malloc((size_t)n * sizeof *group);
  tk__waiter **from = malloc((size_t)n * sizeof *from);
  int i = 0;
  for (tk__waiter *w = s->outcomes; w && i < n; w = w->next, i++) {
    if (from) from[i] = w;
    if (group) group[i] = w->rec;
  }
  if (group && from) {
    tk__remote_record(s->engine, group, n);
    s->outcome_groups++;
    s->outcomes_recorded += n;
  }
  for (i = 0; i < n; i++) {
    tk__waiter *w = s->outcomes;
    if (group && from) {
      w->rec = group[i];
    } else {
      tk_err_set(&w->rec.err, TK_ENOMEM, "out of memory recording outcomes");
    }
    tk__loop_unlink(s, w);
    w->started = 1; /* answered when its connection is resumed */
    tk__loop_resume(s, w);
  }
  free(group);
  free(from);
}

int tk__api_worker_resumed(tk_server *s, tk__waiter *w, tk__response *out) {
  if (!w->outcome) return tk__api_claim(s, NULL, NULL, 0, w, out);
  outcome_answer(s, w, out);
  return 0;
}

void tk__api_worker_free(tk__waiter *w) {
  tk__claim_body_free(&w->body);
  json_decref(w->answers);
  w->answers = NULL;
  if (!w->outcome) return;
  tk__complete_body_free(&w->complete);
  tk__fail_body_free(&w->fail);
  w->outcome = 0;
}

int tk__api_claim_outcome(tk_server *s, const tk__route *r, const char *body, size_t len,
                          tk__waiter *w, tk__response *out) {
  tk__api_error e;
  tk_err err;
  if (r->id == TK__R_OUTCOMES) {
    /* A batch: recorded now, in one store transaction (its own group). */
    tk__outcomes_body batch;
    if (tk__outcomes_body_parse(body, len, &batch, &e) != 0) {
      tk__respond_error(out, &e);
      return 0;
    }
    tk__remote_record(s->engine, batch.o, batch.n);
    s->outcome_groups += batch.n > 0;
    s->outcomes_recorded += batch.n;
    tk__respond_json_value(out, 200,
                           json_pack("{s:o}", "outcomes", outcome_answers(s, batch.o, batch.n)));
    tk__outcomes_body_free(&batch);
    return 0;
  }
  if (r->id == TK__R_HEARTBEAT) {
    int64_t lease = 0;
    if (tk__heartbeat_body_parse(body, len, &e) != 0)
      tk__respond_error(out, &e);
    else if (tk__remote_heartbeat(s->engine, r->name, &lease, &err) != 0)
      outcome_error(s, out, &err);
    else
      tk__respond_json_value(out, 200, json_pack("{s:I}", "lease_expires_at", (json_int_t)lease));
    return 0;
  }
  memset(&w->rec, 0, sizeof w->rec);
  size_t k = strnlen(r->name, TK__CLAIM_TOKEN_MAX); /* route.c: no longer than that */
  memcpy(w->token, r->name, k);
  w->token[k] = '\0';
  w->rec.token = w->token;
  if (r->id == TK__R_COMPLETE) {
    if (tk__complete_body_parse(body, len, &w->complete, &e) != 0) {
      tk__respond_error(out, &e);
      return 0;
    }
    w->rec.results = w->complete.results;
  } else {
    if (tk__fail_body_parse(body, len, &w->fail, &e) != 0) {
      tk__respond_error(out, &e);
      return 0;
    }
    w->rec.failed = 1;
    w->rec.error = w->fail.error;
    w->rec.retryable = w->fail.retryable;
    w->rec.retry_after_ms = w->fail.retry_after_ms;
  }
  w->outcome = 1;
  if (!s->stopping) return 1; /* recorded with this pass's group, then answered */
  tk__remote_record(s->engine, &w->rec, 1);
  outcome_answer(s, w, out);
  return 0;
}
