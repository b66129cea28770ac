/* The backoff policy: exact schedules, jitter bounds and spread,
 * reproducibility, overflow, server hints and validation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include <tasker/backoff.h>

#define DRAWS 20000

static tk_backoff_policy policy_schedule(const int64_t *ms, int n, double mult, int64_t max) {
  tk_backoff_policy p;
  tk_backoff_policy_default(&p);
  if (n > 0) memcpy(p.schedule_ms, ms, (size_t)n * sizeof *ms);
  p.schedule_len = n;
  p.multiplier = mult;
  p.max_delay_ms = max;
  p.jitter = TK_JITTER_NONE;
  return p;
}

static void schedule_then_geometric_growth_to_cap(void **state) {
  (void)state;
  const int64_t s[] = {1000, 2000, 4000, 8000, 16000, 32000};
  tk_backoff_policy p = policy_schedule(s, 6, 2.0, 60000);
  assert_int_equal(tk_backoff_policy_validate(&p, NULL), 0);
  const int64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};
  tk_rand r;
  tk_rand_seed(&r, 1);
  for (int n = 1; n <= 8; n++) {
    tk_backoff_result res;
    assert_int_equal(tk_backoff_delay(&p, n, 0, -1, &r, &res), want[n - 1]);
    assert_int_equal(res.source, TK_DELAY_COMPUTED);
  }
  /* raw keeps growing past the cap: 32 s * 2, * 4. */
  assert_int_equal(tk_backoff_raw(&p, 7), 64000);
  assert_int_equal(tk_backoff_raw(&p, 8), 128000);
}

static void empty_schedule_grows_from_base(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 2.0, 1000);
  p.base_ms = 10;
  const int64_t want[] = {10, 20, 40, 80, 160, 320, 640, 1000, 1000};
  for (int n = 1; n <= 9; n++)
    assert_int_equal(tk_backoff_delay(&p, n, 0, -1, NULL, NULL), want[n - 1]);
}

static void fractional_multiplier(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 1.5, 1000000);
  p.base_ms = 1000;
  assert_int_equal(tk_backoff_raw(&p, 1), 1000);
  assert_int_equal(tk_backoff_raw(&p, 2), 1500);
  assert_int_equal(tk_backoff_raw(&p, 4), 3375);
}

static void overflow_saturates_then_caps(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 10.0, 3600000);
  p.base_ms = 100;
  assert_int_equal(tk_backoff_delay(&p, 1, 0, -1, NULL, NULL), 100);
  assert_int_equal(tk_backoff_delay(&p, 1 << 20, 0, -1, NULL, NULL), 3600000);
  assert_int_equal(tk_backoff_delay(&p, INT32_MAX, 0, -1, NULL, NULL), 3600000);
  assert_int_equal(tk_backoff_raw(&p, INT32_MAX), INT64_MAX);
  /* Huge multipliers and huge caps saturate too, without undefined behaviour. */
  p.multiplier = 1e300;
  p.max_delay_ms = INT64_MAX;
  assert_int_equal(tk_backoff_delay(&p, INT32_MAX, 0, -1, NULL, NULL), INT64_MAX);
  const int64_t s[] = {5, 7};
  tk_backoff_policy q = policy_schedule(s, 2, 10.0, 60000);
  assert_int_equal(tk_backoff_delay(&q, INT32_MAX, 0, -1, NULL, NULL), 60000);
  /* Every jitter mode copes with a saturated raw value and an unbounded cap. */
  tk_rand r;
  tk_rand_seed(&r, 9);
  for (int j = TK_JITTER_NONE; j <= TK_JITTER_DECORRELATED; j++) {
    p.jitter = (tk_jitter)j;
    p.jitter_fraction = 1.0;
    int64_t d = tk_backoff_delay(&p, INT32_MAX, INT64_MAX, -1, &r, NULL);
    assert_true(d >= 0);
  }
}

static void multiplier_one_is_constant(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 1.0, 60000);
  p.base_ms = 250;
  const int32_t ns[] = {1, 2, 3, 100, 1 << 20, INT32_MAX};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    assert_int_equal(tk_backoff_delay(&p, ns[i], 0, -1, NULL, NULL), 250);
}

/* Draw DRAWS delays for attempt n, check each lies in [lo, hi] and
 * [min, max], and that the draws spread (at least `distinct` values and
 * both ends of the range approached within 5%). */
static void check_mode(tk_jitter mode, int32_t n, int64_t lo, int64_t hi) {
  tk_backoff_policy p = policy_schedule(NULL, 0, 2.0, 10000);
  p.base_ms = 1000;
  p.min_delay_ms = 300;
  p.jitter = mode;
  p.jitter_fraction = 0.25;
  assert_int_equal(tk_backoff_policy_validate(&p, NULL), 0);
  tk_rand r1, r2;
  tk_rand_seed(&r1, 12345);
  tk_rand_seed(&r2, 12345);
  int64_t seen_lo = INT64_MAX, seen_hi = INT64_MIN, prev = 0;
  int64_t first = -1;
  int all_equal = 1;
  for (int i = 0; i < DRAWS; i++) {
    int64_t d = tk_backoff_delay(&p, n, prev, -1, &r1, NULL);
    int64_t again = tk_backoff_delay(&p, n, prev, -1, &r2, NULL);
    assert_int_equal(d, again); /* same seed, same draws */
    assert_true(d >= p.min_delay_ms);
    assert_true(d <= p.max_delay_ms);
    assert_true(d >= lo && d <= hi);
    if (first < 0) first = d;
    if (d != first) all_equal = 0;
    if (d < seen_lo) seen_lo = d;
    if (d > seen_hi) seen_hi = d;
    if (mode == TK_JITTER_DECORRELATED) prev = d;
  }
  assert_false(all_equal);
  int64_t slack = (hi - lo) / 20;
  assert_true(seen_lo <= lo + slack);
  assert_true(seen_hi >= hi - slack);
}

static void jitter_proportional(void **state) {
  (void)state;
  /* attempt 3: capped 4000, f 0.25 -> [3000, 5000] */
  check_mode(TK_JITTER_PROPORTIONAL, 3, 3000, 5000);
  /* attempt 5: capped 10000, upper side clamped to max 10000 */
  check_mode(TK_JITTER_PROPORTIONAL, 5, 7500, 10000);
}

static void jitter_full(void **state) {
  (void)state;
  /* [0, 4000] clamped below by min 300 */
  check_mode(TK_JITTER_FULL, 3, 300, 4000);
}

static void jitter_equal(void **state) {
  (void)state;
  check_mode(TK_JITTER_EQUAL, 3, 2000, 4000);
  check_mode(TK_JITTER_EQUAL, 10, 5000, 10000);
}

static void jitter_decorrelated(void **state) {
  (void)state;
  /* Chained: [base, 3 * prev], clamped to [300, 10000]. */
  check_mode(TK_JITTER_DECORRELATED, 1, 1000, 10000);
}

static void decorrelated_first_delay_is_within_base_and_three_base(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 2.0, 60000);
  p.base_ms = 100;
  p.jitter = TK_JITTER_DECORRELATED;
  tk_rand r;
  tk_rand_seed(&r, 3);
  for (int i = 0; i < DRAWS; i++) {
    int64_t d = tk_backoff_delay(&p, 1, 0, -1, &r, NULL);
    assert_in_range(d, 100, 300);
    int64_t e = tk_backoff_delay(&p, 2, 2000, -1, &r, NULL);
    assert_in_range(e, 100, 6000);
  }
}

static void different_seeds_differ(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 2.0, 60000);
  p.jitter = TK_JITTER_FULL;
  tk_rand a, b;
  tk_rand_seed(&a, 1);
  tk_rand_seed(&b, 2);
  int differ = 0;
  for (int i = 0; i < 100; i++)
    differ += tk_backoff_delay(&p, 5, 0, -1, &a, NULL) != tk_backoff_delay(&p, 5, 0, -1, &b, NULL);
  assert_true(differ > 50);
}

static void server_hint_takes_precedence(void **state) {
  (void)state;
  tk_backoff_policy p = policy_schedule(NULL, 0, 2.0, 60000);
  p.jitter = TK_JITTER_FULL;
  p.min_delay_ms = 5000;
  p.max_server_delay_ms = 120000;
  tk_rand r;
  tk_rand_seed(&r, 5);
  tk_backoff_result res;
  /* Above max_delay but under the server cap: honoured, unjittered. */
  assert_int_equal(tk_backoff_delay(&p, 1, 0, 90000, &r, &res), 90000);
  assert_int_equal(res.source, TK_DELAY_SERVER);
  /* Over the server cap: capped. */
  assert_int_equal(tk_backoff_delay(&p, 1, 0, 500000, &r, &res), 120000);
  /* Zero is a hint too ("retry now"). */
  assert_int_equal(tk_backoff_delay(&p, 3, 0, 0, &r, &res), 0);
  assert_int_equal(res.source, TK_DELAY_SERVER);
  /* The hint path never consumes randomness. */
  tk_rand before = r;
  tk_backoff_delay(&p, 1, 0, 10, &r, NULL);
  assert_memory_equal(&before, &r, sizeof r);
}

static void validation_names_field_and_value(void **state) {
  (void)state;
  tk_backoff_policy p;
  tk_err err;
  tk_backoff_policy_default(&p);
  assert_int_equal(tk_backoff_policy_validate(&p, &err), 0);
  p.multiplier = 0.5;
  assert_int_equal(tk_backoff_policy_validate(&p, &err), TK_ERANGE);
  assert_string_equal(err.msg, "multiplier is 0.5: must be a finite number >= 1");
  tk_backoff_policy_default(&p);
  p.min_delay_ms = 2000;
  p.max_delay_ms = 1000;
  assert_int_equal(tk_backoff_policy_validate(&p, &err), TK_ERANGE);
  assert_string_equal(err.msg, "max_delay (1000 ms) is below min_delay (2000 ms)");
  tk_backoff_policy_default(&p);
  p.jitter_fraction = 1.5;
  assert_int_equal(tk_backoff_policy_validate(&p, &err), TK_ERANGE);
  assert_string_equal(err.msg, "jitter_fraction is 1.5: must be within [0, 1]");
  tk_backoff_policy_default(&p);
  p.schedule_len = 1;
  p.schedule_ms[0] = -5;
  assert_int_equal(tk_backoff_policy_validate(&p, &err), TK_ERANGE);
  assert_string_equal(err.msg, "schedule entry 1 is -5 ms: delays must be >= 0");
}

static void jitter_names_round_trip(void **state) {
  (void)state;
  for (int j = TK_JITTER_NONE; j <= TK_JITTER_DECORRELATED; j++) {
    tk_jitter out;
    assert_int_equal(tk_jitter_parse(tk_jitter_name((tk_jitter)j), &out), 0);
    assert_int_equal(out, j);
  }
  tk_jitter out;
  assert_int_equal(tk_jitter_parse("fulll", &out), TK_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(schedule_then_geometric_growth_to_cap),
      cmocka_unit_test(empty_schedule_grows_from_base),
      cmocka_unit_test(fractional_multiplier),
      cmocka_unit_test(overflow_saturates_then_caps),
      cmocka_unit_test(multiplier_one_is_constant),
      cmocka_unit_test(jitter_proportional),
      cmocka_unit_test(jitter_full),
      cmocka_unit_test(jitter_equal),
      cmocka_unit_test(jitter_decorrelated),
      cmocka_unit_test(decorrelated_first_delay_is_within_base_and_three_base),
      cmocka_unit_test(different_seeds_differ),
      cmocka_unit_test(server_hint_takes_precedence),
      cmocka_unit_test(validation_names_field_and_value),
      cmocka_unit_test(jitter_names_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
