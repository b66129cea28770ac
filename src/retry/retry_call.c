/* tk_retry_call: run a function under the retry iterator. */
#include "retry_internal.h"

int tk_retry_call(const tk_backoff_policy *policy, int32_t max_attempts, tk_retry_fn fn,
                  void *ctx, const tk_clock *clock, tk_rand *rng, tk_err *err) {
  if (fn == NULL || clock == NULL)
    return tk_err_set(err, TK_EINVAL, "tk_retry_call: %s is NULL", fn == NULL ? "fn" : "clock");
  tk_retry it;
  int rc = tk_retry_init(&it, policy, max_attempts, rng, err);
  if (rc != 0) return rc;
  tk_err last; /* the latest try's own message, kept apart from the caller's */
  for (;;) {
    int64_t hint = -1;
    tk_err_clear(&last);
    rc = fn(ctx, it.attempts, &hint, &last);
    if (rc == 0) {
      tk_err_clear(err);
      return 0;
    }
    if (rc < 0) {
      /* Permanent: the caller sees fn's code and words, unchanged. */
      return tk_err_set(err, rc, "%s", last.msg[0] ? last.msg : tk_strerror(rc));
    }
    int64_t delay;
    if (!tk_retry_next(&it, hint, &delay)) return tk_retry_exhausted(&it, last.msg, err);
    tk_clock_sleep(clock, delay);
  }
}
