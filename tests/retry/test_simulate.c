/* The simulators' models. Contention: exact small cases with a fixed
 * latency, determinism for a seed, and the comparisons it exists for.
 * Outage: two cases worked out by hand (the arithmetic is in the comments),
 * the default scenario's figures against the goal, and invariants. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <tasker/simulate.h>

static tk_sim_config config(int32_t clients, int32_t trials) {
  tk_sim_config c;
  tk_sim_config_default(&c);
  c.clients = clients;
  c.trials = trials;
  c.seed = 7;
  return c;
}

static tk_sim_stats sim(const tk_sim_config *c, tk_sim_policy p) {
  tk_sim_stats st;
  tk_err err;
  if (tk_simulate(c, p, &st, &err) != 0) fail_msg("tk_simulate: %s", err.msg);
  return st;
}

/* With no jitter in the network every time is exact: one client reads
 * (10 ms there, 10 back), writes (10 there, 10 back) and is done. */
static void one_client_succeeds_at_once(void **state) {
  (void)state;
  tk_sim_config c = config(1, 3);
  c.latency_sd_ms = 0;
  for (int p = 0; p < TK_SIM_POLICY_COUNT; p++) {
    tk_sim_stats st = sim(&c, (tk_sim_policy)p);
    assert_true(st.calls == 2.0);
    assert_true(st.completion_ms == 40.0);
    assert_true(st.succeeded == 1.0);
  }
}

/* Two clients in lock-step: both read version 0 at 10 ms and write at
 * 30 ms; the first write wins, the second fails and learns it at 40 ms,
 * then sleeps its policy's first delay and goes round again (40 ms). */
static void two_clients_in_lock_step(void **state) {
  (void)state;
  tk_sim_config c = config(2, 1);
  c.latency_sd_ms = 0;
  tk_sim_stats none = sim(&c, TK_SIM_NONE);
  assert_true(none.calls == 6.0);
  assert_true(none.completion_ms == 80.0);
  assert_true(none.succeeded == 1.0);
  tk_sim_stats expo = sim(&c, TK_SIM_EXPONENTIAL); /* sleeps base = 10 ms */
  assert_true(expo.calls == 6.0);
  assert_true(expo.completion_ms == 90.0);
  c.base_ms = 25;
  tk_sim_stats linear = sim(&c, TK_SIM_LINEAR); /* base * 1 */
  assert_true(linear.completion_ms == 105.0);
  c.max_attempts = 1; /* the loser gives up when it learns it lost */
  tk_sim_stats once = sim(&c, TK_SIM_FULL);
  assert_true(once.calls == 4.0);
  assert_true(once.completion_ms == 40.0);
  assert_true(once.succeeded == 0.5);
}

static void same_seed_same_numbers(void **state) {
  (void)state;
  tk_sim_config c = config(30, 10);
  for (int p = 0; p < TK_SIM_POLICY_COUNT; p++) {
    tk_sim_stats a = sim(&c, (tk_sim_policy)p), b = sim(&c, (tk_sim_policy)p);
    assert_memory_equal(&a, &b, sizeof a);
  }
  tk_sim_stats a = sim(&c, TK_SIM_FULL);
  c.seed = 8;
  tk_sim_stats b = sim(&c, TK_SIM_FULL);
  assert_true(a.completion_ms != b.completion_ms);
}

/* What the simulator is for: at 100 clients, full jitter needs fewer calls
 * than exponential without jitter, and the naive linear client fails. */
static void at_100_clients_jitter_pays_and_linear_fails(void **state) {
  (void)state;
  tk_sim_config c = config(100, 20);
  tk_sim_stats full = sim(&c, TK_SIM_FULL);
  tk_sim_stats expo = sim(&c, TK_SIM_EXPONENTIAL);
  tk_sim_stats linear = sim(&c, TK_SIM_LINEAR);
  assert_true(full.calls < expo.calls);
  assert_true(full.succeeded == 1.0);
  assert_true(linear.succeeded < 0.5);
  assert_true(linear.calls <= 100 * 4 * 2);
}

static void budgets(void **state) {
  (void)state;
  tk_sim_config c = config(10, 1);
  assert_int_equal(tk_sim_budget(&c, TK_SIM_FULL), 20);
  assert_int_equal(tk_sim_budget(&c, TK_SIM_LINEAR), 4);
  c.max_attempts = 2;
  assert_int_equal(tk_sim_budget(&c, TK_SIM_LINEAR), 2);
}

static void bad_settings_are_named(void **state) {
  (void)state;
  tk_sim_config c = config(0, 1);
  tk_sim_stats st;
  tk_err err;
  assert_int_equal(tk_simulate(&c, TK_SIM_FULL, &st, &err), TK_ERANGE);
  assert_string_equal(err.msg, "clients is 0: must be from 1 to 1000000");
  c = config(10, 1);
  c.base_ms = 2000;
  assert_int_equal(tk_simulate(&c, TK_SIM_FULL, &st, &err), TK_ERANGE);
  assert_string_equal(err.msg, "base (2000 ms) is above the cap (1000 ms)");
  c = config(10, 1);
  c.jitter_fraction = 3;
  assert_int_equal(tk_simulate(&c, TK_SIM_FULL, &st, &err), TK_ERANGE);
  assert_string_equal(err.msg,
                      "invalid backoff policy: jitter_fraction is 3: must be within [0, 1]");
  c = config(10, 1);
  assert_int_equal(tk_simulate(&c, TK_SIM_POLICY_COUNT, &st, &err), TK_EINVAL);
}

static void policy_names_round_trip(void **state) {
  (void)state;
  for (int p = 0; p < TK_SIM_POLICY_COUNT; p++) {
    tk_sim_policy back;
    assert_int_equal(tk_sim_policy_parse(tk_sim_policy_name((tk_sim_policy)p), &back), 0);
    assert_int_equal(back, p);
  }
  tk_sim_policy back;
  assert_int_equal(tk_sim_policy_parse("jittery", &back), TK_EINVAL);
  assert_string_equal(tk_sim_policy_name(TK_SIM_EXPONENTIAL), "exponential");
}

/* ---- the outage scenario ---- */

/* 10 first attempts/s for 30 s (steps at 0, 100, ..., 29900 ms), every
 * call failing in [10 s, 20 s), 3 attempts, delays 1 s then 2 s without
 * jitter (so a step failing at t retries at t+1000 and t+3000). */
static tk_sim_outage_config small_outage(void) {
  tk_sim_outage_config c;
  tk_sim_outage_config_default(&c);
  c.rate_per_s = 10;
  c.duration_ms = 30000;
  c.outage_start_ms = 10000;
  c.outage_ms = 10000;
  c.max_attempts = 3;
  c.budget = (tk_retry_budget_config){.ratio = 0, .window_ms = 1000, .min_per_second = 1};
  return c;
}

static tk_backoff_policy no_jitter(void) {
  tk_backoff_policy p;
  tk_backoff_policy_default(&p); /* base 1 s, multiplier 2 */
  p.jitter = TK_JITTER_NONE;
  return p;
}

static tk_sim_outage_stats outage(const tk_sim_outage_config *c, const tk_backoff_policy *p,
                                  int with_budget) {
  tk_sim_outage_stats st;
  tk_err err;
  if (tk_simulate_outage(c, p, with_budget, &st, &err) != 0)
    fail_msg("tk_simulate_outage: %s", err.msg);
  return st;
}

static void expect_phase(const tk_sim_phase *ph, int64_t firsts, int64_t calls) {
  assert_int_equal(ph->firsts, firsts);
  assert_int_equal(ph->calls, calls);
  assert_true(ph->amplification == (double)calls / (double)firsts);
}

/* What a hand-worked case predicts beside its phases. */
typedef struct figures {
  int64_t succeeded, exhausted, deferred, max_wait_ms, drain_ms, finish_ms, peak_per_s;
} figures;

static void expect_figures(const tk_sim_outage_stats *st, figures f) {
  assert_int_equal(st->succeeded, f.succeeded);
  assert_int_equal(st->exhausted, f.exhausted);
  assert_int_equal(st->deferred, f.deferred);
  assert_int_equal(st->max_wait_ms, f.max_wait_ms);
  assert_int_equal(st->drain_ms, f.drain_ms);
  assert_int_equal(st->finish_ms, f.finish_ms);
  assert_int_equal(st->peak_per_s, f.peak_per_s);
}

/* Without a budget. The 100 steps that start in the outage (10000..19900)
 * fail; their first retries (t+1000) fall in it for t < 19000 (90 of them)
 * and fail too; their second retries (t+3000) fall in it for t < 17000 (70,
 * which exhaust). During: 100 + 90 + 70 = 260 calls. After: 100 new steps,
 * the 20 second retries of t in [17000, 19000) and the 10 first retries of
 * t in [19000, 20000): 130. The last retry is the second one of the step
 * at 18900, at 21900: the drain takes 1900 ms, in which 20 steps arrive
 * (20000..21900) and 30 retries go out. */
static void outage_by_hand_without_budget(void **state) {
  (void)state;
  tk_sim_outage_config c = small_outage();
  tk_backoff_policy p = no_jitter();
  tk_sim_outage_stats st = outage(&c, &p, 0);
  expect_phase(&st.before, 100, 100);
  expect_phase(&st.during, 100, 260);
  expect_phase(&st.draining, 20, 50);
  expect_phase(&st.after, 100, 130);
  assert_int_equal(st.steps, 300);
  /* The peak: 10 firsts, 10 first and 10 second retries per second. */
  expect_figures(&st, (figures){.succeeded = 230, .exhausted = 70, .deferred = 0,
                                .max_wait_ms = 0, .drain_ms = 1900, .finish_ms = 29900,
                                .peak_per_s = 30});
  assert_int_equal(st.seconds, 30);
  assert_int_equal(st.per_second[15], 30);
  assert_int_equal(st.per_second[25], 10);
  tk_sim_outage_stats_free(&st);
}

/* With a budget of ratio 0 and a floor of 1/s over 1 s: exactly one retry
 * per second, each free again when its 10 ms slot leaves, 1000 ms later.
 * The first retry (step 10000's, at 11000) goes at once; every later one
 * queues. One leaves the queue each second, 12000 .. 19000 in the outage
 * (8 more, all first retries, all failing and queueing again): during the
 * outage 100 + 9 calls and nothing exhausts. At 20000 the queue holds all
 * 100 steps that started in the outage; they go one per second, the last
 * at 20000 + 99 s = 119000, and each succeeds. The last to queue was the
 * second retry of the step let go at 19000, due at 21000: it waited 98 s. */
static void outage_by_hand_with_budget(void **state) {
  (void)state;
  tk_sim_outage_config c = small_outage();
  tk_backoff_policy p = no_jitter();
  tk_sim_outage_stats st = outage(&c, &p, 1);
  expect_phase(&st.before, 100, 100);
  expect_phase(&st.during, 100, 109);
  expect_phase(&st.draining, 100, 200);
  expect_phase(&st.after, 100, 200);
  /* Deferred: 109 retries in all, the first not. */
  expect_figures(&st, (figures){.succeeded = 300, .exhausted = 0, .deferred = 108,
                                .max_wait_ms = 98000, .drain_ms = 99000, .finish_ms = 119000,
                                .peak_per_s = 11});
  assert_int_equal(st.seconds, 120);
  assert_int_equal(st.per_second[15], 11);
  assert_int_equal(st.per_second[119], 1);
  tk_sim_outage_stats_free(&st);
}

/* With ratio 0.1 the first attempts pay for retries: 10 of them in any
 * 1 s window (steps every 100 ms) buy 1, the floor another, so 2 retries
 * per second, and a first attempt arriving can let a queued retry go. The
 * retries at 11000 and 11100 go at once. From then on, at each whole
 * second s the retry at s-1000 leaves with its paying first attempt while
 * the one at s arrives: the head goes at s (on that arrival, not at the
 * 12100 the budget gave when asked at 11900 without it) and the next at
 * s+100. In the outage that is 18 retries: 118 calls. After it, 100 steps
 * need one more (successful) call each: 2 per second up to 29100; then the
 * arrivals stop, at 30000 only 9 first attempts are in the window (1.9
 * retries for the one at 29100 and a new one), so the next goes at 30100
 * and the other 79 one per second, on the floor alone, the last at
 * 30100 + 79 s = 109100. The last to queue was the second retry of the
 * step let go at 19100, due at 21100: it waited 88 s. */
static void outage_by_hand_first_attempts_pay(void **state) {
  (void)state;
  tk_sim_outage_config c = small_outage();
  c.budget.ratio = 0.1;
  tk_backoff_policy p = no_jitter();
  tk_sim_outage_stats st = outage(&c, &p, 1);
  expect_phase(&st.during, 100, 118);
  expect_phase(&st.after, 100, 200);
  expect_figures(&st, (figures){.succeeded = 300, .exhausted = 0, .deferred = 116,
                                .max_wait_ms = 88000, .drain_ms = 89100, .finish_ms = 109100,
                                .peak_per_s = 12});
  assert_int_equal(st.per_second[29], 12);
  assert_int_equal(st.per_second[30], 1);
  tk_sim_outage_stats_free(&st);
}

/* A deferred retry goes as soon as first attempts make room, not only at
 * the time the budget gave when it refused. One step per second, failing
 * in [0, 2 s); delays 500 ms then 1 s; ratio 0.25 over 10 s plus one retry
 * per window. Step 0 (t=0) retries at 500: 0.25 + 1 >= 1, it goes and
 * fails. Step 1 arrives at 1000 and fails. At 1500 step 0's second retry
 * and step 1's first come due: 2 first attempts pay 0.5, plus 1, against
 * one retry spent: both wait (the budget says 10500, when the retry at 500
 * leaves). Each later first attempt adds 0.25: at 3000 (4 of them) there
 * is room for 2 retries, so step 0's goes; at 7000 (8) for 3, so step 1's
 * goes. Both succeed: the drain ends at 7000, 5 s after the outage. */
static void a_first_attempt_lets_a_deferred_retry_go(void **state) {
  (void)state;
  tk_sim_outage_config c = small_outage();
  c.rate_per_s = 1;
  c.duration_ms = 20000;
  c.outage_start_ms = 0;
  c.outage_ms = 2000;
  c.budget = (tk_retry_budget_config){.ratio = 0.25, .window_ms = 10000, .min_per_second = 0.1};
  tk_backoff_policy p = no_jitter();
  p.base_ms = 500;
  tk_sim_outage_stats st = outage(&c, &p, 1);
  assert_int_equal(st.before.firsts, 0);
  assert_true(isnan(st.before.amplification));
  expect_phase(&st.during, 2, 3);
  expect_phase(&st.draining, 6, 8);
  expect_phase(&st.after, 18, 20);
  expect_figures(&st, (figures){.succeeded = 20, .exhausted = 0, .deferred = 2,
                                .max_wait_ms = 5500, .drain_ms = 5000, .finish_ms = 19000,
                                .peak_per_s = 2});
  assert_int_equal(st.per_second[3], 2);
  assert_int_equal(st.per_second[7], 2);
  tk_sim_outage_stats_free(&st);
}

static int64_t series_sum(const tk_sim_outage_stats *st) {
  int64_t n = 0;
  for (size_t i = 0; i < st->seconds; i++) n += st->per_second[i];
  return n;
}

/* The goal (SRE book): with a budget at most 1.1x the first attempts during
 * the outage, against about 3x for three attempts without. The default
 * profile (proportional jitter) and the default scenario. */
static void default_scenario_meets_the_goal(void **state) {
  (void)state;
  tk_sim_outage_config c;
  tk_sim_outage_config_default(&c);
  tk_backoff_policy p;
  tk_backoff_policy_default(&p);
  tk_sim_outage_stats none = outage(&c, &p, 0), with = outage(&c, &p, 1);
  assert_int_equal(none.during.firsts, 6000);
  assert_true(none.during.amplification > 2.9 && none.during.amplification <= 3.0);
  assert_true(with.during.amplification <= 1.1);
  /* The price: what the budget held back goes out afterwards at the same
   * pace (1 + ratio + floor / rate: 5 + 2 retries/s), so draining 6000
   * steps takes minutes instead of seconds, and hardly any step exhausts. */
  assert_true(with.draining.amplification <= 1.1);
  assert_true(none.draining.amplification > 2);
  assert_true(none.drain_ms < 5000);
  assert_true(with.drain_ms > 10 * 60000 && with.drain_ms < 15 * 60000);
  assert_true(none.exhausted > 5500);
  assert_true(with.exhausted < 100);
  const tk_sim_outage_stats *both[] = {&none, &with};
  for (int i = 0; i < 2; i++) {
    const tk_sim_outage_stats *st = both[i];
    assert_int_equal(st->steps, 120000);
    assert_int_equal(st->succeeded + st->exhausted, st->steps);
    assert_int_equal(series_sum(st), st->before.calls + st->during.calls + st->after.calls);
    assert_int_equal(st->before.firsts + st->during.firsts + st->after.firsts, st->steps);
  }
  tk_sim_outage_stats_free(&none);
  tk_sim_outage_stats_free(&with);
}

static void outage_is_deterministic(void **state) {
  (void)state;
  tk_sim_outage_config c;
  tk_sim_outage_config_default(&c);
  c.duration_ms = 300000;
  c.budget.min_per_second = 10;
  tk_backoff_policy p;
  tk_backoff_policy_default(&p);
  p.jitter = TK_JITTER_FULL;
  for (int with = 0; with < 2; with++) {
    tk_sim_outage_stats a = outage(&c, &p, with), b = outage(&c, &p, with);
    assert_int_equal(a.during.calls, b.during.calls);
    assert_int_equal(a.drain_ms, b.drain_ms);
    assert_int_equal(a.max_wait_ms, b.max_wait_ms);
    assert_int_equal(a.seconds, b.seconds);
    assert_memory_equal(a.per_second, b.per_second, a.seconds * sizeof *a.per_second);
    c.seed = 2;
    tk_sim_outage_stats d = outage(&c, &p, with);
    c.seed = 1;
    assert_true(d.drain_ms != a.drain_ms || d.during.calls != a.during.calls);
    tk_sim_outage_stats_free(&a);
    tk_sim_outage_stats_free(&b);
    tk_sim_outage_stats_free(&d);
  }
}

/* One attempt: nothing is ever retried, so the load is the first attempts
 * alone, and every step that starts in the outage is exhausted. */
static void one_attempt_never_retries(void **state) {
  (void)state;
  tk_sim_outage_config c = small_outage();
  c.max_attempts = 1;
  tk_backoff_policy p = no_jitter();
  for (int with = 0; with < 2; with++) {
    tk_sim_outage_stats st = outage(&c, &p, with);
    expect_phase(&st.during, 100, 100);
    assert_true(isnan(st.draining.amplification));
    assert_int_equal(st.exhausted, 100);
    assert_int_equal(st.drain_ms, 0);
    tk_sim_outage_stats_free(&st);
  }
}

static void bad_outage_settings_are_named(void **state) {
  (void)state;
  tk_backoff_policy p = no_jitter();
  static const struct {
    int field;
    const char *msg;
  } cases[] = {
      {0, "rate is 0/s: must be above 0 and at most 1000000/s"},
      {1, "duration is 0 ms: must be above 0 and at most 1 day"},
      {2, "the outage (10s from 25s) must end before arrivals stop at 30s"},
      {3, "max_attempts is 0: it counts the first try, so from 1 to 1000"},
      {4, "budget: window is 1050 ms: must be a multiple of 100 ms from 100 ms to 1 day (it "
          "slides in 100 equal steps)"},
      {5, "rate x duration is 86400000 first attempts: at most 10000000"},
      {6, "outage is 0 ms: must be above 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tk_sim_outage_config c = small_outage();
    switch (cases[i].field) {
      case 0: c.rate_per_s = 0; break;
      case 1: c.duration_ms = 0; break;
      case 2: c.outage_start_ms = 25000; break;
      case 3: c.max_attempts = 0; break;
      case 4: c.budget.window_ms = 1050; break;
      case 5: c.rate_per_s = 1000; c.duration_ms = 86400000; break;
      case 6: c.outage_ms = 0; break;
    }
    tk_sim_outage_stats st;
    tk_err err;
    assert_int_equal(tk_simulate_outage(&c, &p, 1, &st, &err), TK_ERANGE);
    assert_string_equal(err.msg, cases[i].msg);
    assert_null(st.per_second);
  }
  tk_sim_outage_config c = small_outage();
  p.multiplier = 0.5;
  tk_sim_outage_stats st;
  tk_err err;
  assert_int_equal(tk_simulate_outage(&c, &p, 0, &st, &err), TK_ERANGE);
  assert_memory_equal(err.msg, "invalid backoff policy: ", 24);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_client_succeeds_at_once),
      cmocka_unit_test(two_clients_in_lock_step),
      cmocka_unit_test(same_seed_same_numbers),
      cmocka_unit_test(at_100_clients_jitter_pays_and_linear_fails),
      cmocka_unit_test(budgets),
      cmocka_unit_test(bad_settings_are_named),
      cmocka_unit_test(policy_names_round_trip),
      cmocka_unit_test(outage_by_hand_without_budget),
      cmocka_unit_test(outage_by_hand_with_budget),
      cmocka_unit_test(outage_by_hand_first_attempts_pay),
      cmocka_unit_test(a_first_attempt_lets_a_deferred_retry_go),
      cmocka_unit_test(default_scenario_meets_the_goal),
      cmocka_unit_test(outage_is_deterministic),
      cmocka_unit_test(one_attempt_never_retries),
      cmocka_unit_test(bad_outage_settings_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
