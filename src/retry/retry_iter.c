/* The retry iterator: "sleep this long and try again" or "stop". */
#include "retry_internal.h"

#include <stdio.h>

int tk__retry_check(const tk_backoff_policy *policy, const tk_rand *rng, tk_err *err) {
  if (policy == NULL) return tk_err_set(err, TK_EINVAL, "no backoff policy given");
  tk_err perr;
  int rc = tk_backoff_policy_validate(policy, &perr);
  if (rc != 0) return tk_err_set(err, rc, "invalid backoff policy: %s", perr.msg);
  if (rng == NULL && policy->jitter != TK_JITTER_NONE)
    return tk_err_set(err, TK_EINVAL, "jitter \"%s\" needs a random source, got none",
                      tk_jitter_name(policy->jitter));
  return 0;
}

int tk_retry_init(tk_retry *it, const tk_backoff_policy *policy, int32_t max_attempts,
                  tk_rand *rng, tk_err *err) {
  if (max_attempts < 1)
    return tk_err_set(err, TK_EINVAL,
                      "max_attempts is %d: it counts the first try, so it must be >= 1",
                      (int)max_attempts);
  int rc = tk__retry_check(policy, rng, err);
  if (rc != 0) return rc;
  it->policy = policy;
  it->rng = rng;
  it->max_attempts = max_attempts;
  it->attempts = 1;
  it->prev_delay_ms = 0;
  it->slept_ms = 0;
  it->last_source = TK_DELAY_COMPUTED;
  return 0;
}

int tk_retry_next(tk_retry *it, int64_t hint_ms, int64_t *delay_ms) {
  if (it->attempts >= it->max_attempts) {
    *delay_ms = 0;
    return 0;
  }
  tk_backoff_result r;
  /* The try that just failed is failure number `attempts`. */
  int64_t d = tk_backoff_delay(it->policy, it->attempts, it->prev_delay_ms, hint_ms, it->rng, &r);
  it->attempts++;
  it->prev_delay_ms = d;
  it->slept_ms = d > INT64_MAX - it->slept_ms ? INT64_MAX : it->slept_ms + d;
  it->last_source = r.source;
  *delay_ms = d;
  return 1;
}

int tk_retry_exhausted(const tk_retry *it, const char *last_error, tk_err *err) {
  /* A copy, because callers naturally pass err->msg itself. */
  char last[TK_ERR_MSG_MAX];
  snprintf(last, sizeof last, "%s", last_error != NULL ? last_error : "");
  return tk_err_set(err, TK_EEXHAUSTED,
                    "retries exhausted after %d attempt%s, %.2f s of backoff%s%s",
                    (int)it->attempts, it->attempts == 1 ? "" : "s",
                    (double)it->slept_ms / 1000.0, last[0] ? ": last error: " : "", last);
}
