/* tk_batch_retry: re-offer the pending items of a partially successful
 * call, counting each item's attempts through the caller (DESIGN §9). */
#include "retry_internal.h"

#include <stdlib.h>

static int check_args(const tk_batch_limits *limits, const tk_batch_ops *ops,
                      const tk_item_state *states, size_t n_items, const tk_clock *clock,
                      tk_err *err) {
  const char *missing = limits == NULL ? "limits" : ops == NULL ? "ops" : clock == NULL ? "clock"
                        : states == NULL && n_items > 0 ? "states" : NULL;
  if (missing != NULL)
    return tk_err_set(err, TK_EINVAL, "tk_batch_retry: %s is NULL", missing);
  if (ops->call == NULL || ops->rejected == NULL)
    return tk_err_set(err, TK_EINVAL, "tk_batch_ops: %s is NULL: call and rejected are required",
                      ops->call == NULL ? "call" : "rejected");
  if (limits->max_in_call_retries < 0)
    return tk_err_set(err, TK_EINVAL, "max_in_call_retries is %d: must be >= 0",
                      (int)limits->max_in_call_retries);
  if (limits->max_item_attempts < 1)
    return tk_err_set(err, TK_EINVAL, "max_item_attempts is %d: must be >= 1",
                      (int)limits->max_item_attempts);
  for (size_t i = 0; i < n_items; i++)
    if (states[i] != TK_ITEM_PENDING && states[i] != TK_ITEM_ACKED &&
        states[i] != TK_ITEM_GAVE_UP)
      return tk_err_set(err, TK_EINVAL,
                        "item %zu has state %d: expected pending, acked or gave up", i,
                        (int)states[i]);
  return 0;
}

static size_t collect_pending(const tk_item_state *states, size_t n_items, size_t *idx) {
  size_t n = 0;
  for (size_t i = 0; i < n_items; i++)
    if (states[i] == TK_ITEM_PENDING) {
      if (idx != NULL) idx[n] = i;
      n++;
    }
  return n;
}

/* Every offered item needs a verdict; checked before any is recorded so a
 * malformed report records nothing. */
static int check_reports(const size_t *idx, const tk_item_report *rep, size_t n, tk_err *err) {
  for (size_t i = 0; i < n; i++)
    if (rep[i].state != TK_ITEM_ACKED && rep[i].state != TK_ITEM_REJECTED)
      return tk_err_set(err, TK_EHANDLER,
                        "handler gave item %zu no verdict (state %d): each offered item must "
                        "be acked or rejected",
                        idx[i], (int)rep[i].state);
  return 0;
}

/* Apply one call's reports: ack, or count the rejection and maybe give up. */
static int record_reports(const tk_batch_limits *limits, const tk_batch_ops *ops, void *ud,
                          tk_item_state *states, const size_t *idx, const tk_item_report *rep,
                          size_t n, tk_err *err) {
  for (size_t i = 0; i < n; i++) {
    size_t item = idx[i];
    int rc = 0;
    if (rep[i].state == TK_ITEM_ACKED) {
      states[item] = TK_ITEM_ACKED;
      if (ops->acked != NULL) rc = ops->acked(ud, item, err);
    } else {
      int32_t attempts = 0;
      rc = ops->rejected(ud, item, rep[i].reason, &attempts, err);
      if (rc == 0 && attempts >= limits->max_item_attempts) {
        states[item] = TK_ITEM_GAVE_UP;
        if (ops->gave_up != NULL) rc = ops->gave_up(ud, item, attempts, rep[i].reason, err);
      }
    }
    if (rc != 0) return rc;
  }
  return 0;
}

static void tally(const tk_item_state *states, size_t n_items, tk_batch_result *out) {
  out->acked = out->gave_up = out->pending = 0;
  for (size_t i = 0; i < n_items; i++) {
    if (states[i] == TK_ITEM_ACKED) out->acked++;
    else if (states[i] == TK_ITEM_GAVE_UP) out->gave_up++;
    else out->pending++;
  }
}

/* One handler call; its code, with a message guaranteed when it failed. */
static int call_handler(const tk_batch_ops *ops, void *ud, const size_t *idx, size_t n,
                        tk_item_report *rep, int64_t *hint, tk_err *err) {
  for (size_t i = 0; i < n; i++) rep[i] = (tk_item_report){TK_ITEM_PENDING, NULL};
  *hint = -1;
  tk_err_clear(err);
  int rc = ops->call(ud, idx, n, rep, hint, err);
  if (rc > 0)
    return tk_err_set(err, TK_EHANDLER,
                      "handler returned %d: expected 0 (reports filled) or a negative code", rc);
  if (rc < 0 && err != NULL && err->msg[0] == '\0') tk_err_set(err, rc, "%s", tk_strerror(rc));
  return rc;
}

int tk_batch_retry(const tk_backoff_policy *policy, const tk_batch_limits *limits,
                   const tk_batch_ops *ops, void *ud, tk_item_state *states, size_t n_items,
                   const tk_clock *clock, tk_rand *rng, tk_batch_result *out, tk_err *err) {
  tk_batch_result local;
  if (out == NULL) out = &local;
  *out = (tk_batch_result){0, 0, 0, 0, 0, -1, 0, TK_DELAY_IN_CALL};
  int rc = check_args(limits, ops, states, n_items, clock, err);
  if (rc == 0) rc = tk__retry_check(policy, rng, err);
  if (rc != 0) return rc;

  /* Pending items only ever become fewer, so the first count sizes both. */
  size_t n = collect_pending(states, n_items, NULL);
  size_t *idx = malloc((n + 1) * sizeof *idx); /* + 1: never a zero-size malloc */
  tk_item_report *rep = malloc((n + 1) * sizeof *rep);
  if (idx == NULL || rep == NULL) {
    free(idx);
    free(rep);
    return tk_err_set(err, TK_ENOMEM, "no memory for a batch of %zu items", n);
  }
  int64_t prev = 0;
  n = collect_pending(states, n_items, idx);
  while (n > 0) {
    int64_t hint;
    out->calls++;
    if ((rc = call_handler(ops, ud, idx, n, rep, &hint, err)) != 0) break;
    if ((rc = check_reports(idx, rep, n, err)) != 0) break;
    if ((rc = record_reports(limits, ops, ud, states, idx, rep, n, err)) != 0) break;
    /* What is still pending is what the next call offers. */
    if ((n = collect_pending(states, n_items, idx)) == 0) break;
    /* This call was in-call failure number `calls`. */
    int32_t failure = out->calls > INT32_MAX ? INT32_MAX : (int32_t)out->calls;
    tk_backoff_result r;
    int64_t delay = tk_backoff_delay(policy, failure, prev, hint, rng, &r);
    prev = delay;
    if (out->calls - 1 < limits->max_in_call_retries) {
      tk_clock_sleep(clock, delay);
      out->slept_ms += delay;
      continue;
    }
    out->next_delay_ms = delay;
    out->next_source = r.source == TK_DELAY_SERVER ? TK_DELAY_SERVER : TK_DELAY_IN_CALL;
    int64_t now = tk_clock_now(clock);
    out->next_retry_at_ms = delay > INT64_MAX - now ? INT64_MAX : now + delay;
    rc = TK_RETRY_AGAIN;
    break;
  }
  free(idx);
  free(rep);
  tally(states, n_items, out);
  if (rc == TK_RETRY_AGAIN)
    tk_err_set(err, TK_RETRY_AGAIN, "%zu of %zu items still pending after %lld calls", out->pending,
               n_items, (long long)out->calls);
  return rc;
}
