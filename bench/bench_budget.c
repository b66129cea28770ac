/* Nanoseconds per retry-budget call (goal: <= 100 ns per retry check),
 * with heap allocations per call (goal: none):
 *   first attempt           recording one
 *   check, admits           a budget with room: the common case
 *   check, defers (outage)  a saturated budget during an outage, with first
 *                           attempts arriving between checks, so refusals
 *                           find their time a slot or two ahead
 *   check, defers (worst)   every refusal scans all 100 slots: the only
 *                           retry in the window is in the newest one
 *   reserve, defers (outage) the engine's call: the outage above, each
 *                           refused retry reserved at its later time, so
 *                           the queue of reserved retries grows without end
 *   reserve, defers (worst) reservations alone, a floor of one per window:
 *                           every one scans a whole window past the last
 * The clock moves 1 ms per first attempt (1000 first attempts/s). */
#include <stdio.h>

#include <tasker/budget.h>
#include <tasker/clock.h>

#include "alloc_count.h"

#define ITERS 20000000L

static volatile int64_t sink;

static void row(const char *name, double ns, unsigned long long allocs, long iters,
                double refused) {
  printf("%-34s %10.1f %12.3f %10.1f%%\n", name, ns, (double)allocs / (double)iters,
         refused * 100.0);
}

static tk_retry_budget make(double ratio, int64_t window_ms, double floor) {
  tk_retry_budget_config c = {ratio, window_ms, floor};
  tk_retry_budget b;
  tk_err err;
  if (tk_retry_budget_init(&b, &c, &err) != 0) {
    fprintf(stderr, "bench_budget: %s\n", err.msg);
    b.slot_ms = 0;
  }
  return b;
}

static void bench_first(void) {
  tk_retry_budget b = make(0.1, 10000, 10);
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS; i++) tk_retry_budget_first(&b, i);
  int64_t t1 = tk_monotonic_ns();
  sink = (int64_t)b.total_firsts;
  row("first attempt", (double)(t1 - t0) / ITERS, bench_allocs - a0, ITERS, 0);
}

/* One first attempt (1 ms later each time) then one check, per iteration;
 * the same loop without the checks is timed too and subtracted, so the
 * figure is the check alone. */
static double loop_ns(tk_retry_budget b, int check, long *refused) {
  int64_t sum = 0, at = 0;
  *refused = 0;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS; i++) {
    tk_retry_budget_first(&b, i);
    if (check == 1 && !tk_retry_budget_try(&b, i, &at)) (*refused)++;
    if (check == 2 && !tk_retry_budget_reserve(&b, i, &at)) (*refused)++;
    sum += at;
  }
  int64_t t1 = tk_monotonic_ns();
  sink = sum + (int64_t)b.total_firsts;
  return (double)(t1 - t0);
}

static void bench_check(const char *name, tk_retry_budget b, int reserve) {
  long refused, none;
  unsigned long long a0 = bench_allocs;
  double with = loop_ns(b, reserve ? 2 : 1, &refused);
  unsigned long long allocs = bench_allocs - a0;
  double without = loop_ns(b, 0, &none);
  row(name, (with - without) / ITERS, allocs, ITERS, (double)refused / ITERS);
}

/* Refusals that walk the whole ring: a floor of one retry per window,
 * spent in the newest slot, and the check repeated at the same time. */
static void bench_worst(void) {
  tk_retry_budget b = make(0, 10000, 0.1);
  int64_t at, sum = 0;
  tk_retry_budget_try(&b, 0, &at);
  long refused = 0;
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS; i++) {
    /* Times within slot 0, so the ring never moves. */
    if (!tk_retry_budget_try(&b, i & 63, &at)) refused++;
    sum += at;
  }
  int64_t t1 = tk_monotonic_ns();
  sink = sum;
  row("check, defers (worst: 100 slots)", (double)(t1 - t0) / ITERS, bench_allocs - a0, ITERS,
      (double)refused / ITERS);
}

/* Reservations alone under a floor of one retry per window: each goes a
 * whole window after the one before, found by scanning that window. */
static void bench_reserve_worst(void) {
  tk_retry_budget b = make(0, 10000, 0.1);
  int64_t at, sum = 0;
  long refused = 0;
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS / 10; i++) {
    if (!tk_retry_budget_reserve(&b, i & 63, &at)) refused++;
    sum += at;
  }
  int64_t t1 = tk_monotonic_ns();
  sink = sum;
  row("reserve, defers (worst)", (double)(t1 - t0) / (ITERS / 10), bench_allocs - a0,
      ITERS / 10, (double)refused / (ITERS / 10));
}

int main(void) {
  printf("%-34s %10s %12s %11s\n", "retry budget benchmark", "ns/op", "allocs/op", "refused");
  bench_first();
  /* Ratio 1: a retry per first attempt, so every check is admitted. */
  bench_check("check, admits", make(1, 10000, 10), 0);
  /* Ratio 0.1 and 1 first per check: 9 of 10 refused, as in an outage. */
  bench_check("check, defers (outage)", make(0.1, 10000, 1), 0);
  bench_worst();
  bench_check("reserve, defers (outage)", make(0.1, 10000, 1), 1);
  bench_reserve_worst();
  return 0;
}
