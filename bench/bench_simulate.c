/* Wall time of the default `tasker simulate` sweep (clients 10..190 step
 * 10, 100 trials each, every policy), per policy and in total, through the
 * library exactly as the command runs it. Goal: a few seconds in all.
 * The command itself: time build/bin/tasker simulate --seed 1 >/dev/null */
#include <stdio.h>

#include <tasker/clock.h>
#include <tasker/simulate.h>

int main(void) {
  tk_sim_config c;
  tk_sim_config_default(&c);
  c.seed = 1;
  printf("%-34s %10s %14s %12s\n", "simulate sweep (19 sizes x 100)", "seconds", "calls", "ns/call");
  double total_s = 0, total_calls = 0;
  for (int p = 0; p < TK_SIM_POLICY_COUNT; p++) {
    double calls = 0;
    int64_t t0 = tk_monotonic_ns();
    for (int32_t n = 10; n <= 190; n += 10) {
      c.clients = n;
      tk_sim_stats st;
      tk_err err;
      if (tk_simulate(&c, (tk_sim_policy)p, &st, &err) != 0) {
        fprintf(stderr, "bench_simulate: %s\n", err.msg);
        return 1;
      }
      calls += st.calls * c.trials; /* every call is one simulated event */
    }
    double s = (double)(tk_monotonic_ns() - t0) / 1e9;
    char name[64];
    snprintf(name, sizeof name, "policy=%s", tk_sim_policy_name((tk_sim_policy)p));
    printf("%-34s %10.3f %14.0f %12.1f\n", name, s, calls, s * 1e9 / calls);
    total_s += s;
    total_calls += calls;
  }
  printf("%-34s %10.3f %14.0f %12.1f\n", "all policies (the default sweep)", total_s, total_calls,
         total_s * 1e9 / total_calls);
  return 0;
}
