/* The batch helper: only pending items are offered, attempts are counted
 * through the callbacks, an item gives up once at its budget, the in-call
 * budget ends with a next-retry hint, and whole-call errors propagate. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tasker/retry.h>

#include "rec_clock.h"

#define NITEMS 4

/* A fake downstream: item i is acked from call ack_on[i] on (0: never).
 * It logs what each call offered, as "0,1,2|2|2". */
typedef struct fake {
  int ack_on[NITEMS];
  int call_error;        /* returned by the call with this number; 0 none */
  int64_t hint;          /* given with every call; -1 none */
  int rejected_error_on; /* rejected() fails for this item + 1; 0 none */
  int skip_verdict;      /* leave the last offered item without a verdict */
  int calls;
  int32_t attempts[NITEMS];
  int gave_up[NITEMS];
  int acked[NITEMS];
  char log[512];
} fake;

static int fake_call(void *ud, const size_t *items, size_t n, tk_item_report *rep,
                     int64_t *hint_ms, tk_err *err) {
  fake *f = ud;
  f->calls++;
  size_t len = strlen(f->log);
  if (f->calls > 1) len += (size_t)snprintf(f->log + len, sizeof f->log - len, "|");
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(f->log + len, sizeof f->log - len, "%s%zu", i ? "," : "", items[i]);
  assert_int_equal(*hint_ms, -1);
  if (f->calls == f->call_error) return tk_err_set(err, TK_EIO, "connection reset by peer");
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(rep[i].state, TK_ITEM_PENDING);
    int on = f->ack_on[items[i]];
    if (on != 0 && f->calls >= on) {
      rep[i].state = TK_ITEM_ACKED;
    } else {
      rep[i].state = TK_ITEM_REJECTED;
      rep[i].reason = "throttled";
    }
  }
  if (f->skip_verdict) rep[n - 1].state = TK_ITEM_PENDING;
  *hint_ms = f->hint;
  return 0;
}

static int fake_rejected(void *ud, size_t item, const char *reason, int32_t *attempts,
                         tk_err *err) {
  fake *f = ud;
  assert_string_equal(reason, "throttled");
  if (f->rejected_error_on == (int)item + 1)
    return tk_err_set(err, TK_ESTORE, "store unavailable while counting item %zu", item);
  *attempts = ++f->attempts[item];
  return 0;
}

static int fake_gave_up(void *ud, size_t item, int32_t attempts, const char *reason,
                        tk_err *err) {
  (void)err;
  fake *f = ud;
  assert_int_equal(attempts, f->attempts[item]);
  assert_string_equal(reason, "throttled");
  f->gave_up[item]++;
  return 0;
}

static int fake_acked(void *ud, size_t item, tk_err *err) {
  (void)err;
  ((fake *)ud)->acked[item]++;
  return 0;
}

static const tk_batch_ops ops = {fake_call, fake_rejected, fake_gave_up, fake_acked};

typedef struct fixture {
  tk_backoff_policy policy;
  tk_batch_limits limits;
  rec_clock rc;
  tk_clock clock;
  tk_item_state states[NITEMS];
  fake f;
  tk_batch_result res;
  tk_err err;
} fixture;

static void setup(fixture *x, tk_jitter j) {
  memset(x, 0, sizeof *x);
  tk_backoff_policy_default(&x->policy);
  x->policy.jitter = j;
  x->policy.base_ms = 10;
  x->policy.max_delay_ms = 1000;
  x->limits = (tk_batch_limits){.max_in_call_retries = 3, .max_item_attempts = 100};
  x->clock = rec_clock_start(&x->rc, 5000);
  x->f.hint = -1;
  for (int i = 0; i < NITEMS; i++) x->f.ack_on[i] = 1;
}

static int run(fixture *x, tk_rand *rng) {
  return tk_batch_retry(&x->policy, &x->limits, &ops, &x->f, x->states, NITEMS, &x->clock, rng,
                        &x->res, &x->err);
}

static void success_first_time_does_not_sleep(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  assert_int_equal(run(&x, NULL), 0);
  assert_string_equal(x.f.log, "0,1,2,3");
  assert_int_equal(x.res.calls, 1);
  assert_int_equal(x.rc.n, 0);
  assert_int_equal(x.res.acked, NITEMS);
  assert_int_equal(x.res.pending, 0);
  assert_int_equal(x.res.next_retry_at_ms, -1);
  for (int i = 0; i < NITEMS; i++) {
    assert_int_equal(x.states[i], TK_ITEM_ACKED);
    assert_int_equal(x.f.acked[i], 1);
  }
}

static void partial_then_success_sleeps_the_first_delay_once(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.ack_on[2] = 2;
  assert_int_equal(run(&x, NULL), 0);
  assert_string_equal(x.f.log, "0,1,2,3|2"); /* acked items are not re-sent */
  assert_int_equal(x.res.calls, 2);
  assert_int_equal(x.rc.n, 1);
  assert_int_equal(x.rc.sleeps[0], 10);
  assert_int_equal(x.res.slept_ms, 10);
  assert_int_equal(x.f.attempts[2], 1);
  assert_int_equal(x.res.acked, NITEMS);
  for (int i = 0; i < NITEMS; i++) assert_int_equal(x.f.acked[i], 1);
}

static void persistent_partial_spends_the_budget_and_hints(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.ack_on[1] = 0;
  x.f.ack_on[3] = 0;
  assert_int_equal(run(&x, NULL), TK_RETRY_AGAIN);
  assert_string_equal(x.f.log, "0,1,2,3|1,3|1,3|1,3");
  assert_int_equal(x.res.calls, 4); /* the first call and 3 in-call retries */
  assert_int_equal(x.rc.n, 3);
  assert_int_equal(x.rc.sleeps[0], 10);
  assert_int_equal(x.rc.sleeps[1], 20);
  assert_int_equal(x.rc.sleeps[2], 40);
  assert_int_equal(x.res.next_delay_ms, 80);
  assert_int_equal(x.res.next_retry_at_ms, 5000 + 70 + 80);
  assert_int_equal(x.res.next_source, TK_DELAY_IN_CALL);
  assert_int_equal(x.res.pending, 2);
  assert_int_equal(x.res.acked, 2);
  assert_int_equal(x.f.attempts[1], 4);
  assert_int_equal(x.err.code, TK_RETRY_AGAIN);
  assert_string_equal(x.err.msg, "2 of 4 items still pending after 4 calls");
}

static void persistent_partial_jittered_delays_follow_the_policy(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_DECORRELATED);
  x.f.ack_on[0] = 0;
  tk_rand r, ref;
  tk_rand_seed(&r, 9);
  tk_rand_seed(&ref, 9);
  assert_int_equal(run(&x, &r), TK_RETRY_AGAIN);
  int64_t prev = 0;
  for (int32_t n = 1; n <= 4; n++) {
    int64_t want = tk_backoff_delay(&x.policy, n, prev, -1, &ref, NULL);
    if (n <= 3) assert_int_equal(x.rc.sleeps[n - 1], want);
    else assert_int_equal(x.res.next_delay_ms, want);
    prev = want;
  }
  assert_int_equal(x.res.next_retry_at_ms, x.rc.m.now_ms + x.res.next_delay_ms);
}

static void zero_in_call_retries_calls_once(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.limits.max_in_call_retries = 0;
  x.f.ack_on[0] = 0;
  assert_int_equal(run(&x, NULL), TK_RETRY_AGAIN);
  assert_int_equal(x.res.calls, 1);
  assert_int_equal(x.rc.n, 0);
  assert_int_equal(x.res.next_delay_ms, 10);
  assert_int_equal(x.res.next_retry_at_ms, 5010);
}

static void an_item_at_its_budget_gives_up_once_and_is_never_offered_again(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.limits.max_item_attempts = 3;
  x.limits.max_in_call_retries = 5;
  x.f.ack_on[1] = 0;     /* never accepted ... */
  x.f.attempts[1] = 1;   /* ... and already rejected once, in an earlier run */
  x.f.ack_on[3] = 3;     /* accepted on the third call */
  assert_int_equal(run(&x, NULL), 0);
  assert_string_equal(x.f.log, "0,1,2,3|1,3|3");
  assert_int_equal(x.states[1], TK_ITEM_GAVE_UP);
  assert_int_equal(x.f.gave_up[1], 1);
  assert_int_equal(x.f.attempts[1], 3);
  assert_int_equal(x.f.attempts[3], 2);
  assert_int_equal(x.f.gave_up[3], 0);
  assert_int_equal(x.res.gave_up, 1);
  assert_int_equal(x.res.acked, 3);
  assert_int_equal(x.res.pending, 0);
  assert_int_equal(x.rc.n, 2);
}

static void a_second_run_offers_nothing_already_settled(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.limits.max_item_attempts = 1;
  x.limits.max_in_call_retries = 0;
  x.f.ack_on[2] = 0;
  assert_int_equal(run(&x, NULL), 0);
  assert_int_equal(x.f.gave_up[2], 1);
  x.f.log[0] = '\0';
  x.f.calls = 0;
  assert_int_equal(run(&x, NULL), 0);
  assert_int_equal(x.res.calls, 0);
  assert_string_equal(x.f.log, "");
  assert_int_equal(x.f.gave_up[2], 1);
  assert_int_equal(x.f.acked[0], 1);
}

static void a_handler_error_propagates_without_retry(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.call_error = 1;
  assert_int_equal(run(&x, NULL), TK_EIO);
  assert_string_equal(x.err.msg, "connection reset by peer");
  assert_int_equal(x.res.calls, 1);
  assert_int_equal(x.rc.n, 0);
  assert_int_equal(x.res.pending, NITEMS);
  assert_int_equal(x.res.next_retry_at_ms, -1);
}

static void a_handler_error_after_partial_progress_keeps_what_was_recorded(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.ack_on[0] = 0;
  x.f.call_error = 2;
  assert_int_equal(run(&x, NULL), TK_EIO);
  assert_int_equal(x.res.calls, 2);
  assert_int_equal(x.rc.n, 1);
  assert_int_equal(x.res.acked, 3);
  assert_int_equal(x.states[0], TK_ITEM_PENDING);
}

static void a_callback_error_propagates(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.ack_on[2] = 0;
  x.f.rejected_error_on = 3;
  assert_int_equal(run(&x, NULL), TK_ESTORE);
  assert_string_equal(x.err.msg, "store unavailable while counting item 2");
  assert_int_equal(x.res.calls, 1);
  assert_int_equal(x.rc.n, 0);
}

static void a_missing_verdict_is_a_handler_error_and_records_nothing(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.f.skip_verdict = 1;
  assert_int_equal(run(&x, NULL), TK_EHANDLER);
  assert_string_equal(x.err.msg, "handler gave item 3 no verdict (state 0): each offered item "
                                 "must be acked or rejected");
  assert_int_equal(x.res.acked, 0);
  assert_int_equal(x.f.acked[0], 0);
}

static void a_handler_hint_sets_the_sleep_and_the_next_retry(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_FULL);
  x.policy.max_server_delay_ms = 60000;
  x.limits.max_in_call_retries = 1;
  x.f.ack_on[0] = 0;
  x.f.hint = 2500;
  tk_rand r;
  tk_rand_seed(&r, 1);
  assert_int_equal(run(&x, &r), TK_RETRY_AGAIN);
  assert_int_equal(x.rc.n, 1);
  assert_int_equal(x.rc.sleeps[0], 2500);
  assert_int_equal(x.res.next_delay_ms, 2500);
  assert_int_equal(x.res.next_source, TK_DELAY_SERVER);
  assert_int_equal(x.res.next_retry_at_ms, 5000 + 2500 + 2500);
}

static void bad_arguments_are_refused_before_any_call(void **state) {
  (void)state;
  fixture x;
  setup(&x, TK_JITTER_NONE);
  x.limits.max_item_attempts = 0;
  assert_int_equal(run(&x, NULL), TK_EINVAL);
  assert_string_equal(x.err.msg, "max_item_attempts is 0: must be >= 1");
  setup(&x, TK_JITTER_NONE);
  x.states[1] = TK_ITEM_REJECTED;
  assert_int_equal(run(&x, NULL), TK_EINVAL);
  assert_string_equal(x.err.msg, "item 1 has state 2: expected pending, acked or gave up");
  setup(&x, TK_JITTER_NONE);
  tk_batch_ops no_rejected = {fake_call, NULL, NULL, NULL};
  assert_int_equal(tk_batch_retry(&x.policy, &x.limits, &no_rejected, &x.f, x.states, NITEMS,
                                  NULL, NULL, &x.res, &x.err),
                   TK_EINVAL);
  assert_string_equal(x.err.msg, "tk_batch_retry: clock is NULL");
  assert_int_equal(tk_batch_retry(&x.policy, &x.limits, &no_rejected, &x.f, x.states, NITEMS,
                                  &x.clock, NULL, &x.res, &x.err),
                   TK_EINVAL);
  assert_string_equal(x.err.msg, "tk_batch_ops: rejected is NULL: call and rejected are required");
  setup(&x, TK_JITTER_FULL);
  assert_int_equal(run(&x, NULL), TK_EINVAL);
  assert_string_equal(x.err.msg, "jitter \"full\" needs a random source, got none");
  assert_int_equal(x.f.calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(success_first_time_does_not_sleep),
      cmocka_unit_test(partial_then_success_sleeps_the_first_delay_once),
      cmocka_unit_test(persistent_partial_spends_the_budget_and_hints),
      cmocka_unit_test(persistent_partial_jittered_delays_follow_the_policy),
      cmocka_unit_test(zero_in_call_retries_calls_once),
      cmocka_unit_test(an_item_at_its_budget_gives_up_once_and_is_never_offered_again),
      cmocka_unit_test(a_second_run_offers_nothing_already_settled),
      cmocka_unit_test(a_handler_error_propagates_without_retry),
      cmocka_unit_test(a_handler_error_after_partial_progress_keeps_what_was_recorded),
      cmocka_unit_test(a_callback_error_propagates),
      cmocka_unit_test(a_missing_verdict_is_a_handler_error_and_records_nothing),
      cmocka_unit_test(a_handler_hint_sets_the_sleep_and_the_next_retry),
      cmocka_unit_test(bad_arguments_are_refused_before_any_call),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
