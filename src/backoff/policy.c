/* The backoff policy: the one function that turns a failure into a delay. */
#include <tasker/backoff.h>

#include <assert.h>
#include <math.h>
#include <string.h>

/* 2^63 as a double: every double below it converts to int64 exactly. */
#define TWO_POW_63 9223372036854775808.0

/* tk_backoff_policy_default() lives in src/config/defaults.c, beside every
 * other built-in default. */

int tk_backoff_policy_validate(const tk_backoff_policy *p, tk_err *err) {
  if (p->schedule_len < 0 || p->schedule_len > TK_BACKOFF_SCHEDULE_MAX)
    return tk_err_set(err, TK_ERANGE, "schedule has %d entries: at most %d are allowed",
                      p->schedule_len, TK_BACKOFF_SCHEDULE_MAX);
  for (int i = 0; i < p->schedule_len; i++)
    if (p->schedule_ms[i] < 0)
      return tk_err_set(err, TK_ERANGE, "schedule entry %d is %lld ms: delays must be >= 0",
                        i + 1, (long long)p->schedule_ms[i]);
  if (p->base_ms < 0)
    return tk_err_set(err, TK_ERANGE, "base is %lld ms: must be >= 0", (long long)p->base_ms);
  if (!(p->multiplier >= 1.0) || !isfinite(p->multiplier))
    return tk_err_set(err, TK_ERANGE, "multiplier is %g: must be a finite number >= 1",
                      p->multiplier);
  if (p->min_delay_ms < 0)
    return tk_err_set(err, TK_ERANGE, "min_delay is %lld ms: must be >= 0",
                      (long long)p->min_delay_ms);
  if (p->max_delay_ms < p->min_delay_ms)
    return tk_err_set(err, TK_ERANGE, "max_delay (%lld ms) is below min_delay (%lld ms)",
                      (long long)p->max_delay_ms, (long long)p->min_delay_ms);
  if (p->jitter < TK_JITTER_NONE || p->jitter > TK_JITTER_DECORRELATED)
    return tk_err_set(err, TK_ERANGE, "jitter mode %d is unknown", (int)p->jitter);
  if (!(p->jitter_fraction >= 0.0 && p->jitter_fraction <= 1.0))
    return tk_err_set(err, TK_ERANGE, "jitter_fraction is %g: must be within [0, 1]",
                      p->jitter_fraction);
  if (p->max_server_delay_ms < 0)
    return tk_err_set(err, TK_ERANGE, "max_server_delay is %lld ms: must be >= 0",
                      (long long)p->max_server_delay_ms);
  return 0;
}

/* A non-negative double rounded to int64, saturating at INT64_MAX. The
 * margin keeps v + 0.5 below 2^63, so the conversion is always defined. */
static int64_t saturate(double v) {
  if (!(v < TWO_POW_63 - 1024.0)) return INT64_MAX; /* also catches inf and nan */
  if (v <= 0) return 0;
  return (int64_t)(v + 0.5);
}

/* start * m^k for m >= 1, k >= 1, by repeated squaring: at most 31 rounds
 * for any int32 k, and it stops as soon as the product saturates. */
static int64_t grow(int64_t start, double m, int32_t k) {
  double acc = (double)start;
  double factor = m;
  uint32_t e = (uint32_t)k;
  for (;;) {
    if (e & 1u) {
      acc *= factor;
      if (!(acc < TWO_POW_63)) return INT64_MAX;
    }
    e >>= 1;
    if (e == 0) break;
    factor *= factor; /* may reach +inf; then acc saturates next round */
  }
  return saturate(acc);
}

int64_t tk_backoff_raw(const tk_backoff_policy *p, int32_t n) {
  assert(n >= 1);
  if (n <= p->schedule_len) return p->schedule_ms[n - 1];
  int64_t start;
  int32_t k; /* growth steps past the start */
  if (p->schedule_len > 0) {
    start = p->schedule_ms[p->schedule_len - 1];
    k = n - p->schedule_len;
  } else {
    start = p->base_ms;
    k = n - 1;
  }
  if (k == 0 || start == 0 || p->multiplier == 1.0) return start;
  return grow(start, p->multiplier, k);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The first delay of the policy, the floor of decorrelated jitter. */
static int64_t policy_base(const tk_backoff_policy *p) {
  return p->schedule_len > 0 ? p->schedule_ms[0] : p->base_ms;
}

static int64_t jittered(const tk_backoff_policy *p, int64_t capped, int64_t prev, tk_rand *rng) {
  switch (p->jitter) {
  case TK_JITTER_NONE:
    return capped;
  case TK_JITTER_PROPORTIONAL: {
    double f = p->jitter_fraction;
    int64_t lo = saturate((double)capped * (1.0 - f));
    int64_t hi = saturate((double)capped * (1.0 + f));
    return tk_rand_range(rng, min64(lo, hi), hi);
  }
  case TK_JITTER_FULL:
    return tk_rand_range(rng, 0, capped);
  case TK_JITTER_EQUAL:
    return tk_rand_range(rng, capped / 2, capped);
  case TK_JITTER_DECORRELATED: {
    int64_t base = policy_base(p);
    int64_t from = prev > 0 ? prev : base;
    int64_t hi = from > INT64_MAX / 3 ? INT64_MAX : from * 3;
    return tk_rand_range(rng, base, max64(hi, base));
  }
  }
  assert(!"unknown jitter mode");
  return capped;
}

int64_t tk_backoff_delay(const tk_backoff_policy *p, int32_t n, int64_t prev_delay_ms,
                         int64_t hint_ms, tk_rand *rng, tk_backoff_result *out) {
  assert(n >= 1);
  int64_t raw = tk_backoff_raw(p, n);
  int64_t capped = min64(raw, p->max_delay_ms);
  int64_t delay;
  tk_delay_source source;
  if (hint_ms >= 0) {
    delay = min64(hint_ms, p->max_server_delay_ms);
    source = TK_DELAY_SERVER;
  } else {
    delay = jittered(p, capped, prev_delay_ms, rng);
    delay = max64(p->min_delay_ms, min64(delay, p->max_delay_ms));
    source = TK_DELAY_COMPUTED;
  }
  if (out != NULL) {
    out->raw_ms = raw;
    out->capped_ms = capped;
    out->delay_ms = delay;
    out->source = source;
  }
  return delay;
}

static const char *const jitter_names[] = {"none", "proportional", "full", "equal",
                                           "decorrelated"};

const char *tk_jitter_name(tk_jitter j) {
  if (j < TK_JITTER_NONE || j > TK_JITTER_DECORRELATED) return "unknown";
  return jitter_names[j];
}

int tk_jitter_parse(const char *name, tk_jitter *out) {
  for (int i = 0; i <= TK_JITTER_DECORRELATED; i++)
    if (strcmp(name, jitter_names[i]) == 0) {
      *out = (tk_jitter)i;
      return 0;
    }
  return TK_EINVAL;
}

const char *tk_delay_source_name(tk_delay_source s) {
  switch (s) {
  case TK_DELAY_COMPUTED: return "computed";
  case TK_DELAY_SERVER: return "server";
  case TK_DELAY_IN_CALL: return "in_call";
  case TK_DELAY_BUDGET: return "budget";
  }
  return "unknown";
}
