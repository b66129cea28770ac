/* Nanoseconds per delay computation for each jitter mode, and per
 * Retry-After parse for each form; counts heap allocations (goal: none). */
#include <stdio.h>
#include <string.h>

#include <tasker/backoff.h>
#include <tasker/clock.h>

#include "alloc_count.h"

#define ITERS 20000000L
#define PARSE_ITERS 5000000L

static volatile int64_t sink;

static void row(const char *name, double ns, unsigned long long allocs, long iters) {
  printf("%-34s %10.1f %12.3f\n", name, ns, (double)allocs / (double)iters);
}

static void bench_mode(tk_jitter mode) {
  tk_backoff_policy p;
  tk_backoff_policy_default(&p);
  p.jitter = mode;
  p.base_ms = 100;
  p.max_delay_ms = 600000;
  tk_rand r;
  tk_rand_seed(&r, 42);
  int64_t prev = 0, sum = 0;
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS; i++) {
    /* Attempts 1..32: schedule growth, the cap, and the pow path. */
    int32_t n = (int32_t)(i & 31) + 1;
    prev = tk_backoff_delay(&p, n, prev, -1, &r, NULL);
    sum += prev;
  }
  int64_t t1 = tk_monotonic_ns();
  sink = sum;
  char name[64];
  snprintf(name, sizeof name, "delay jitter=%s", tk_jitter_name(mode));
  row(name, (double)(t1 - t0) / ITERS, bench_allocs - a0, ITERS);
}

static void bench_parse(const char *name, const char *value) {
  size_t len = strlen(value);
  int64_t now = 784111777000LL - 3600000, sum = 0, d = 0;
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < PARSE_ITERS; i++) {
    if (tk_retry_after_parse(value, len, now + (i & 7), &d, NULL) == 0) sum += d;
  }
  int64_t t1 = tk_monotonic_ns();
  sink = sum;
  row(name, (double)(t1 - t0) / PARSE_ITERS, bench_allocs - a0, PARSE_ITERS);
}

int main(void) {
  printf("%-34s %10s %12s\n", "backoff benchmark", "ns/op", "allocs/op");
  for (int m = TK_JITTER_NONE; m <= TK_JITTER_DECORRELATED; m++) bench_mode((tk_jitter)m);
  bench_parse("retry-after seconds \"120\"", "120");
  bench_parse("retry-after IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT");
  bench_parse("retry-after RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT");
  bench_parse("retry-after asctime", "Sun Nov  6 08:49:37 1994");
  bench_parse("retry-after malformed", "Sun, 06 Nov 1994 25:49:37 GMT");
  return 0;
}
