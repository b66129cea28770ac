/* The rules of queues' limits that every backend applies (rules.h):
 * which limits are valid, a bucket's size, its refill and its next token. */
#include <math.h>
#include <string.h>

#include "handlers/handler.h"
#include "store/rules.h"

int tk__queue_defs_check(const tk__queue_def *defs, int n, tk_err *err) {
  for (int i = 0; i < n; i++) {
    const tk__queue_def *d = &defs[i];
    const char *name = d->name ? d->name : "";
    if (!tk__queue_name_ok(name, strlen(name)))
      return tk_err_set(err, TK_EINVAL,
                        "queue \"%.80s\": a name is 1 to %d of a-z, 0-9, '_', '.' and '-'", name,
                        TK__QUEUE_MAX);
    if (d->concurrency < 0)
      return tk_err_set(err, TK_EINVAL, "queue %s: concurrency %d: expected 0 (none) or more",
                        name, d->concurrency);
    if (!(d->rate >= 0) || !isfinite(d->rate))
      return tk_err_set(err, TK_EINVAL, "queue %s: rate %g: expected 0 (none) or more per second",
                        name, d->rate);
    if (d->burst < 0)
      return tk_err_set(err, TK_EINVAL, "queue %s: burst %d: expected 0 (the rate's) or more",
                        name, d->burst);
    for (int k = 0; k < i; k++)
      if (strcmp(defs[k].name, name) == 0)
        return tk_err_set(err, TK_EINVAL, "queue %s: defined twice", name);
  }
  return 0;
}

int tk__queue_burst(const tk__queue_def *d) {
  if (d->rate <= 0) return 0;
  if (d->burst > 0) return d->burst;
  double c = ceil(d->rate);
  return c < 1 ? 1 : c > 1e9 ? 1000000000 : (int)c;
}

double tk__queue_tokens(double tokens, int64_t refilled_at, double rate, int burst, int64_t now) {
  if (rate <= 0) return 0;
  if (now > refilled_at) tokens += (double)(now - refilled_at) * rate / 1000.0;
  return tokens > burst ? burst : tokens;
}

int tk__queue_room(double tokens) {
  /* A hair under a whole token counts as one: refills in float arithmetic
   * land on 0.9999999 where the exact sum is 1. */
  double whole = floor(tokens + 1e-9);
  return whole < 0 ? 0 : whole > 1e9 ? 1000000000 : (int)whole;
}

int64_t tk__queue_token_at(double tokens, double rate, int64_t now) {
  if (rate <= 0) return INT64_MAX;
  if (tk__queue_room(tokens) >= 1) return now;
  double ms = ceil((1.0 - tokens) * 1000.0 / rate - 1e-6);
  return now + (ms < 1 ? 1 : (int64_t)ms);
}
