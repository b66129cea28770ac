/* The contention simulator's model: exact small cases with a fixed
 * latency, determinism for a seed, and the comparisons it exists for. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_client_succeeds_at_once),
      cmocka_unit_test(two_clients_in_lock_step),
      cmocka_unit_test(same_seed_same_numbers),
      cmocka_unit_test(at_100_clients_jitter_pays_and_linear_fails),
      cmocka_unit_test(budgets),
      cmocka_unit_test(bad_settings_are_named),
      cmocka_unit_test(policy_names_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
