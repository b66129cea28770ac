/* The retry iterator and tk_retry_call: exact delay sequences under a
 * fixed seed, the attempt budget (the first try counts), hints, permanent
 * errors and the exhaustion message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include <tasker/retry.h>

#include "rec_clock.h"

/* Full jitter, base 10 ms, cap 1 s, seed 42: failures 1..8. */
#define FULL_JITTER_SEED42 {0, 15, 30, 41, 158, 312, 484, 910}

static tk_backoff_policy policy(tk_jitter j, int64_t base, int64_t cap) {
  tk_backoff_policy p;
  tk_backoff_policy_default(&p);
  p.jitter = j;
  p.base_ms = base;
  p.max_delay_ms = cap;
  return p;
}

static void iterator_gives_the_geometric_sequence_then_stops(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_NONE, 10, 1000);
  tk_retry it;
  assert_int_equal(tk_retry_init(&it, &p, 9, NULL, NULL), 0);
  assert_int_equal(it.attempts, 1);
  const int64_t want[] = {10, 20, 40, 80, 160, 320, 640, 1000};
  int64_t d;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(tk_retry_next(&it, -1, &d), 1);
    assert_int_equal(d, want[i]);
    assert_int_equal(it.attempts, i + 2);
  }
  assert_int_equal(tk_retry_next(&it, -1, &d), 0);
  assert_int_equal(d, 0);
  assert_int_equal(tk_retry_next(&it, -1, &d), 0); /* stays stopped */
  assert_int_equal(it.attempts, 9);
  assert_int_equal(it.slept_ms, 2270);
}

/* Jittered modes: the iterator's delays are tk_backoff_delay's, failure by
 * failure, with the previous delay threaded through (decorrelated reads
 * it), drawn from the injected source in order. */
static void iterator_follows_the_one_backoff_path_under_a_seed(void **state) {
  (void)state;
  for (int j = TK_JITTER_PROPORTIONAL; j <= TK_JITTER_DECORRELATED; j++) {
    tk_backoff_policy p = policy((tk_jitter)j, 10, 1000);
    tk_rand r1, r2;
    tk_rand_seed(&r1, 42);
    tk_rand_seed(&r2, 42);
    tk_retry it;
    assert_int_equal(tk_retry_init(&it, &p, 20, &r1, NULL), 0);
    int64_t prev = 0, d;
    for (int32_t n = 1; n < 20; n++) {
      int64_t want = tk_backoff_delay(&p, n, prev, -1, &r2, NULL);
      assert_int_equal(tk_retry_next(&it, -1, &d), 1);
      assert_int_equal(d, want);
      prev = want;
    }
    assert_int_equal(tk_retry_next(&it, -1, &d), 0);
  }
}

/* Pinned numbers: full jitter, base 10 ms, cap 1 s, seed 42. A change here
 * means a change in the random source or the policy, not in the iterator. */
static void full_jitter_sequence_is_pinned(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_FULL, 10, 1000);
  tk_rand r;
  tk_rand_seed(&r, 42);
  tk_retry it;
  assert_int_equal(tk_retry_init(&it, &p, 9, &r, NULL), 0);
  const int64_t want[] = FULL_JITTER_SEED42;
  int64_t d, sum = 0;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(tk_retry_next(&it, -1, &d), 1);
    assert_int_equal(d, want[i]);
    sum += d;
  }
  assert_int_equal(it.slept_ms, sum);
}

static void one_attempt_means_no_retry(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_FULL, 10, 1000);
  tk_rand r;
  tk_rand_seed(&r, 1);
  tk_rand before = r;
  tk_retry it;
  assert_int_equal(tk_retry_init(&it, &p, 1, &r, NULL), 0);
  int64_t d = 99;
  assert_int_equal(tk_retry_next(&it, -1, &d), 0);
  assert_int_equal(d, 0);
  assert_int_equal(it.attempts, 1);
  assert_int_equal(it.slept_ms, 0);
  assert_memory_equal(&r, &before, sizeof r); /* no draw was spent */
}

static void hint_takes_precedence_and_is_capped(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_FULL, 10, 1000);
  p.max_server_delay_ms = 3000;
  tk_rand r;
  tk_rand_seed(&r, 1);
  tk_retry it;
  assert_int_equal(tk_retry_init(&it, &p, 5, &r, NULL), 0);
  int64_t d;
  assert_int_equal(tk_retry_next(&it, 2500, &d), 1);
  assert_int_equal(d, 2500);
  assert_int_equal(it.last_source, TK_DELAY_SERVER);
  assert_int_equal(tk_retry_next(&it, 60000, &d), 1);
  assert_int_equal(d, 3000);
  assert_int_equal(tk_retry_next(&it, -1, &d), 1);
  assert_true(d >= 0 && d <= 1000);
  assert_int_equal(it.last_source, TK_DELAY_COMPUTED);
}

static void init_rejects_bad_arguments_with_a_reason(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_FULL, 10, 1000);
  tk_retry it;
  tk_err err;
  tk_rand r;
  tk_rand_seed(&r, 1);
  assert_int_equal(tk_retry_init(&it, &p, 0, &r, &err), TK_EINVAL);
  assert_string_equal(err.msg, "max_attempts is 0: it counts the first try, so it must be >= 1");
  assert_int_equal(tk_retry_init(&it, &p, 3, NULL, &err), TK_EINVAL);
  assert_string_equal(err.msg, "jitter \"full\" needs a random source, got none");
  p.multiplier = 0.5;
  assert_int_equal(tk_retry_init(&it, &p, 3, &r, &err), TK_ERANGE);
  assert_string_equal(err.msg,
                      "invalid backoff policy: multiplier is 0.5: must be a finite number >= 1");
}

static void exhaustion_message(void **state) {
  (void)state;
  tk_retry it = {0};
  it.attempts = 7;
  it.slept_ms = 1230;
  tk_err err;
  assert_int_equal(tk_retry_exhausted(&it, NULL, &err), TK_EEXHAUSTED);
  assert_int_equal(err.code, TK_EEXHAUSTED);
  assert_string_equal(err.msg, "retries exhausted after 7 attempts, 1.23 s of backoff");
  strcpy(err.msg, "version 3 is stale");
  tk_retry_exhausted(&it, err.msg, &err); /* its own message as the last error */
  assert_string_equal(err.msg, "retries exhausted after 7 attempts, 1.23 s of backoff: last "
                               "error: version 3 is stale");
  it.attempts = 1;
  it.slept_ms = 0;
  tk_retry_exhausted(&it, "", &err);
  assert_string_equal(err.msg, "retries exhausted after 1 attempt, 0.00 s of backoff");
}

/* ---- tk_retry_call ---- */

typedef struct script {
  int succeed_on;  /* 0: never */
  int fail_perm_on; /* 0: never */
  int64_t hint;    /* given with every retryable failure; -1 none */
  int calls;
  int32_t seen[64]; /* attempt numbers passed in */
} script;

static int scripted(void *ctx, int32_t attempt, int64_t *hint_ms, tk_err *err) {
  script *s = ctx;
  assert_int_equal(*hint_ms, -1);
  assert_int_equal(err->code, 0);
  s->seen[s->calls++] = attempt;
  if (attempt == s->succeed_on) return 0;
  if (attempt == s->fail_perm_on) return tk_err_set(err, TK_EIO, "disk on fire at try %d", attempt);
  *hint_ms = s->hint;
  tk_err_set(err, TK_EEXIST, "version %d is stale", attempt);
  return TK_RETRY_AGAIN;
}

/* One tk_retry_call under test: a policy, a recording clock, a script. */
typedef struct call_fixture {
  tk_backoff_policy p;
  rec_clock rc;
  tk_clock c;
  script s;
  tk_rand r;
  tk_err err;
} call_fixture;

static void call_setup(call_fixture *x, tk_jitter j, uint64_t seed) {
  memset(x, 0, sizeof *x);
  x->p = policy(j, 10, 1000);
  x->c = rec_clock_start(&x->rc, 1000000);
  x->s.hint = -1;
  tk_rand_seed(&x->r, seed);
}

static int call_run(call_fixture *x, int32_t max_attempts) {
  tk_rand *rng = x->p.jitter == TK_JITTER_NONE ? NULL : &x->r;
  return tk_retry_call(&x->p, max_attempts, scripted, &x->s, &x->c, rng, &x->err);
}

static void call_success_first_time_does_not_sleep(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_NONE, 0);
  x.s.succeed_on = 1;
  assert_int_equal(call_run(&x, 5), 0);
  assert_int_equal(x.s.calls, 1);
  assert_int_equal(x.rc.n, 0);
  assert_int_equal(x.err.code, 0);
}

static void call_sleeps_the_policy_between_tries(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_NONE, 0);
  x.s.succeed_on = 4;
  assert_int_equal(call_run(&x, 5), 0);
  assert_int_equal(x.s.calls, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(x.s.seen[i], i + 1);
  assert_int_equal(x.rc.n, 3);
  assert_int_equal(x.rc.sleeps[0], 10);
  assert_int_equal(x.rc.sleeps[1], 20);
  assert_int_equal(x.rc.sleeps[2], 40);
  assert_int_equal(x.rc.m.now_ms, 1000000 + 70);
}

static void call_full_jitter_sleeps_match_the_iterator(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_FULL, 42);
  assert_int_equal(call_run(&x, 9), TK_EEXHAUSTED);
  const int64_t want[] = FULL_JITTER_SEED42;
  assert_int_equal(x.rc.n, 8);
  for (int i = 0; i < 8; i++) assert_int_equal(x.rc.sleeps[i], want[i]);
}

static void call_exhaustion_says_attempts_backoff_and_last_error(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_NONE, 0);
  /* Six sleeps adding up to 1.23 s. */
  const int64_t sched[] = {10, 20, 100, 200, 400, 500};
  memcpy(x.p.schedule_ms, sched, sizeof sched);
  x.p.schedule_len = 6;
  assert_int_equal(call_run(&x, 7), TK_EEXHAUSTED);
  assert_int_equal(x.err.code, TK_EEXHAUSTED);
  assert_string_equal(x.err.msg, "retries exhausted after 7 attempts, 1.23 s of backoff: last "
                                 "error: version 7 is stale");
  assert_int_equal(x.s.calls, 7);
  assert_int_equal(x.rc.n, 6); /* no sleep after the last try */
  assert_int_equal(x.rc.m.now_ms - 1000000, 1230);
}

static void call_with_one_attempt_tries_once_and_never_sleeps(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_FULL, 3);
  assert_int_equal(call_run(&x, 1), TK_EEXHAUSTED);
  assert_int_equal(x.s.calls, 1);
  assert_int_equal(x.rc.n, 0);
  assert_string_equal(x.err.msg, "retries exhausted after 1 attempt, 0.00 s of backoff: last "
                                 "error: version 1 is stale");
}

static void call_permanent_error_propagates_at_once(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_NONE, 0);
  x.s.fail_perm_on = 2;
  assert_int_equal(call_run(&x, 10), TK_EIO);
  assert_int_equal(x.err.code, TK_EIO);
  assert_string_equal(x.err.msg, "disk on fire at try 2");
  assert_int_equal(x.s.calls, 2);
  assert_int_equal(x.rc.n, 1); /* the sleep before try 2, none after it */
}

static int bare_permanent(void *ctx, int32_t attempt, int64_t *hint_ms, tk_err *err) {
  (void)ctx, (void)attempt, (void)hint_ms, (void)err;
  return TK_ECANCELED;
}

static void call_permanent_error_without_words_gets_the_code_text(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_NONE, 10, 1000);
  tk_manual_clock m = {0};
  tk_clock c = tk_clock_manual(&m);
  tk_err err;
  assert_int_equal(tk_retry_call(&p, 3, bare_permanent, NULL, &c, NULL, &err), TK_ECANCELED);
  assert_string_equal(err.msg, "canceled");
  assert_int_equal(m.sleeps, 0);
}

static void call_honours_the_tries_hint(void **state) {
  (void)state;
  call_fixture x;
  call_setup(&x, TK_JITTER_FULL, 5);
  x.p.max_server_delay_ms = 400;
  x.s.succeed_on = 3;
  x.s.hint = 750;
  assert_int_equal(call_run(&x, 5), 0);
  assert_int_equal(x.rc.n, 2);
  assert_int_equal(x.rc.sleeps[0], 400);
  assert_int_equal(x.rc.sleeps[1], 400);
}

static void call_rejects_bad_arguments_without_trying(void **state) {
  (void)state;
  tk_backoff_policy p = policy(TK_JITTER_NONE, 10, 1000);
  tk_manual_clock m = {0};
  tk_clock c = tk_clock_manual(&m);
  script s = {.succeed_on = 1, .hint = -1};
  tk_err err;
  assert_int_equal(tk_retry_call(&p, 0, scripted, &s, &c, NULL, &err), TK_EINVAL);
  assert_int_equal(tk_retry_call(&p, 3, NULL, &s, &c, NULL, &err), TK_EINVAL);
  assert_string_equal(err.msg, "tk_retry_call: fn is NULL");
  assert_int_equal(tk_retry_call(&p, 3, scripted, &s, NULL, NULL, &err), TK_EINVAL);
  assert_string_equal(err.msg, "tk_retry_call: clock is NULL");
  assert_int_equal(s.calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(iterator_gives_the_geometric_sequence_then_stops),
      cmocka_unit_test(iterator_follows_the_one_backoff_path_under_a_seed),
      cmocka_unit_test(full_jitter_sequence_is_pinned),
      cmocka_unit_test(one_attempt_means_no_retry),
      cmocka_unit_test(hint_takes_precedence_and_is_capped),
      cmocka_unit_test(init_rejects_bad_arguments_with_a_reason),
      cmocka_unit_test(exhaustion_message),
      cmocka_unit_test(call_success_first_time_does_not_sleep),
      cmocka_unit_test(call_sleeps_the_policy_between_tries),
      cmocka_unit_test(call_full_jitter_sleeps_match_the_iterator),
      cmocka_unit_test(call_exhaustion_says_attempts_backoff_and_last_error),
      cmocka_unit_test(call_with_one_attempt_tries_once_and_never_sleeps),
      cmocka_unit_test(call_permanent_error_propagates_at_once),
      cmocka_unit_test(call_permanent_error_without_words_gets_the_code_text),
      cmocka_unit_test(call_honours_the_tries_hint),
      cmocka_unit_test(call_rejects_bad_arguments_without_trying),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
