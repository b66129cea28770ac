/* tasker: retries inside one call (DESIGN §9, §10).
 *
 * Three small tools over the one backoff path (tk_backoff_delay):
 *
 *  - tk_retry, an iterator that answers "sleep this long, then try again"
 *    or "stop", for loops the caller writes itself;
 *  - tk_retry_call(), which runs a function until it succeeds, fails
 *    permanently or spends its attempt budget, sleeping through an injected
 *    clock;
 *  - tk_batch_retry(), for calls that can succeed for some items and not
 *    others: it re-offers only the items still pending, counts each item's
 *    attempts through the caller's callbacks and gives an item up at its
 *    budget.
 *
 * Counting. `max_attempts` counts every try, the first one included:
 * max_attempts = 1 means one try and never a sleep; max_attempts = 3 means
 * at most three tries with at most two sleeps between them. It must be >= 1.
 * The n-th sleep is the delay the policy gives after the n-th failure.
 *
 * Nothing here allocates except tk_batch_retry (one scratch array per run),
 * prints or keeps global state; time and randomness come from the caller.
 */
#ifndef TASKER_RETRY_H
#define TASKER_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/backoff.h>
#include <tasker/clock.h>
#include <tasker/error.h>
#include <tasker/rand.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returned by a tk_retry_fn for a failure worth another try, and by
 * tk_batch_retry when items remain after its in-call budget, so that a
 * batch run can itself be the function tk_retry_call retries. Where a
 * tk_retry_fn result is read, any positive value counts as this one. */
#define TK_RETRY_AGAIN 1

/* ---- the iterator -------------------------------------------------------
 *
 *   tk_retry it;
 *   tk_retry_init(&it, &policy, 5, &rng, &err);
 *   for (;;) {
 *     if (try_once() == 0) break;                       // it.attempts tries made
 *     if (!tk_retry_next(&it, -1, &d)) { give up; break; }
 *     sleep d ms;
 *   }
 *
 * Fields are readable; change them only through the functions below. */
typedef struct tk_retry {
  const tk_backoff_policy *policy; /* borrowed; must outlive the iterator */
  tk_rand *rng;                    /* borrowed; NULL only with jitter none */
  int32_t max_attempts;            /* >= 1, the first try included */
  int32_t attempts;      /* tries made, counting the one in progress: starts at 1 */
  int64_t prev_delay_ms; /* the last delay handed out, 0 before the first */
  int64_t slept_ms;      /* the sum of all delays handed out */
  tk_delay_source last_source; /* where the last delay came from */
} tk_retry;

/* Start an iterator for a first try that is about to run (attempts = 1).
 * Returns 0, TK_EINVAL when max_attempts < 1 or rng is NULL under a
 * jittered policy, or the policy's validation error; messages in `err`. */
int tk_retry_init(tk_retry *it, const tk_backoff_policy *policy, int32_t max_attempts,
                  tk_rand *rng, tk_err *err);

/* Call after the current try failed. If another try is allowed
 * (attempts < max_attempts) this counts it (attempts += 1), sets *delay_ms
 * to the delay after failure number attempts - 1 (hint_ms >= 0 is a
 * server-requested delay, < 0 none; see tk_backoff_delay), adds it to
 * slept_ms and returns 1: sleep, then try again. Otherwise it sets
 * *delay_ms to 0, changes nothing and returns 0: stop. */
int tk_retry_next(tk_retry *it, int64_t hint_ms, int64_t *delay_ms);

/* Fill `err` with TK_EEXHAUSTED and the message
 *   "retries exhausted after 7 attempts, 1.23 s of backoff"
 * (attempts and slept_ms of `it`), followed by ": last error: MSG" when
 * last_error is neither NULL nor empty (it may be err->msg itself).
 * Returns TK_EEXHAUSTED. */
int tk_retry_exhausted(const tk_retry *it, const char *last_error, tk_err *err);

/* ---- the call helper ------------------------------------------------- */

/* One try. `attempt` is 1 for the first try. *hint_ms is -1 on entry; set
 * it >= 0 to ask for that delay before the next try (capped by the
 * policy's max_server_delay). `err` is cleared before each try; a message
 * put there explains the failure. Return:
 *   0               success;
 *   TK_RETRY_AGAIN  a failure worth another try;
 *   a TK_E* code    a permanent failure: no more tries. */
typedef int (*tk_retry_fn)(void *ctx, int32_t attempt, int64_t *hint_ms, tk_err *err);

/* Call fn(ctx, ...) until it succeeds, fails permanently or has been tried
 * max_attempts times (the first try included), sleeping the policy's delay
 * (or the try's hint) on `clock` between tries. Returns:
 *   0             fn succeeded;
 *   fn's code     fn failed permanently; `err` holds fn's message (or the
 *                 code's description when fn gave none); no sleep follows;
 *   TK_EEXHAUSTED the budget is spent; `err` says "retries exhausted after
 *                 N attempts, S.SS s of backoff: last error: MSG";
 *   TK_EINVAL     bad arguments (nothing was tried).
 * `rng` may be NULL only when the policy has no jitter. */
int tk_retry_call(const tk_backoff_policy *policy, int32_t max_attempts, tk_retry_fn fn,
                  void *ctx, const tk_clock *clock, tk_rand *rng, tk_err *err);

/* ---- the batch helper (partial success) --------------------------------
 *
 * Items are numbered 0..n_items-1 by the caller, who keeps their state in
 * an array of tk_item_state. One run of tk_batch_retry:
 *   1. offers the handler every item still PENDING (never an ACKED or
 *      GAVE_UP one), in increasing order;
 *   2. for each report: ACKED items are recorded (ops.acked) and never sent
 *      again; a REJECTED item's attempts are counted by ops.rejected, and
 *      when they reach max_item_attempts it becomes GAVE_UP and ops.gave_up
 *      is called for it, exactly once;
 *   3. while items remain pending and fewer than max_in_call_retries
 *      re-calls have been made, sleeps the policy's delay (n-th re-call:
 *      the delay after failure n) and goes back to 1;
 *   4. stops with items pending once the budget is spent, and says when the
 *      next try should run (the delay after failure n = calls made).
 * A handler error that is not a per-item report propagates at once.
 */
typedef enum tk_item_state {
  TK_ITEM_PENDING = 0, /* still to deliver: offered on the next call */
  TK_ITEM_ACKED,       /* accepted; never offered again */
  TK_ITEM_REJECTED,    /* in a handler's report only: refused this time */
  TK_ITEM_GAVE_UP      /* rejected max_item_attempts times; never offered again */
} tk_item_state;

/* A handler's verdict on one offered item. */
typedef struct tk_item_report {
  tk_item_state state; /* the handler sets TK_ITEM_ACKED or TK_ITEM_REJECTED */
  const char *reason;  /* for REJECTED, may be NULL; valid until the handler
                          is called again or the run returns */
} tk_item_report;

typedef struct tk_batch_ops {
  /* Deliver items[0..n-1] (n >= 1). Fill reports[i] for items[i] (each
   * starts as TK_ITEM_PENDING, which is not a valid answer). May set
   * *hint_ms >= 0 (it starts at -1) to ask for a delay before the next
   * call. Return 0 when reports were filled (partial success included), or
   * a negative TK_E* code, with a message in err, for a failure of the
   * whole call: that is returned by tk_batch_retry at once. Required. */
  int (*call)(void *ud, const size_t *items, size_t n, tk_item_report *reports,
              int64_t *hint_ms, tk_err *err);
  /* Count one more failed attempt of `item` and set *attempts to its new
   * total (>= 1). A store makes this one atomic increment. Returns 0 or a
   * negative code, which tk_batch_retry returns at once. Required. */
  int (*rejected)(void *ud, size_t item, const char *reason, int32_t *attempts, tk_err *err);
  /* `item` was rejected for the attempts-th time and is given up (an
   * event, a log line). Returns 0 or a negative code, as above. Optional. */
  int (*gave_up)(void *ud, size_t item, int32_t attempts, const char *reason, tk_err *err);
  /* `item` was accepted. Returns 0 or a negative code, as above. Optional. */
  int (*acked)(void *ud, size_t item, tk_err *err);
} tk_batch_ops;

typedef struct tk_batch_limits {
  int32_t max_in_call_retries; /* >= 0: calls after the first, within one run */
  int32_t max_item_attempts;   /* >= 1: rejections that give an item up */
} tk_batch_limits;

typedef struct tk_batch_result {
  int64_t calls;    /* handler calls made in this run */
  int64_t slept_ms; /* total slept between them */
  size_t acked, gave_up, pending; /* states of all n_items after the run */
  /* Only when the run returns TK_RETRY_AGAIN: when to run the next call
   * (clock now + next_delay_ms) and where that delay came from (IN_CALL,
   * or SERVER when the last call gave a hint). Otherwise -1, 0, IN_CALL. */
  int64_t next_retry_at_ms;
  int64_t next_delay_ms;
  tk_delay_source next_source;
} tk_batch_result;

/* Run the batch over states[0..n_items-1] (updated in place) as described
 * above. Returns:
 *   0              no item is pending (all acked or given up: check
 *                  out->gave_up);
 *   TK_RETRY_AGAIN items remain after the in-call budget; out->next_* set
 *                  and err says "K of N items still pending after C calls";
 *   a TK_E* code   from ops (message in err), TK_EHANDLER when the handler
 *                  left an item without a verdict, TK_ENOMEM, or TK_EINVAL
 *                  for bad arguments. States show what was recorded so far.
 * `out` may be NULL. `rng` may be NULL only when the policy has no jitter. */
int tk_batch_retry(const tk_backoff_policy *policy, const tk_batch_limits *limits,
                   const tk_batch_ops *ops, void *ud, tk_item_state *states, size_t n_items,
                   const tk_clock *clock, tk_rand *rng, tk_batch_result *out, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
