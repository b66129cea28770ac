/* Time to load the example configuration (examples/config/tasker.toml with
 * and without an environment overlay, and with --set flags), against the
 * built-in defaults alone; counts heap allocations per load. Run from the
 * repository root (as `make bench` does). */
#include <stdio.h>

#include <tasker/clock.h>
#include <tasker/config.h>

#include "alloc_count.h"

#define ITERS 20000L
#define EXAMPLE "examples/config/tasker.toml"

static volatile int64_t sink;

/* Load `src` ITERS times; print microseconds and allocations per load. */
static int bench(const char *name, const tk_config_source *src) {
  unsigned long long a0 = bench_allocs;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < ITERS; i++) {
    tk_config *c;
    tk_err err;
    if (tk_config_load(src, &c, &err) != 0) {
      fprintf(stderr, "bench_config: %s\n", err.msg);
      return 1;
    }
    sink += tk_config_engine(c)->workers;
    tk_config_free(c);
  }
  int64_t t1 = tk_monotonic_ns();
  printf("%-34s %10.1f %12.1f\n", name, (double)(t1 - t0) / ITERS / 1000.0,
         (double)(bench_allocs - a0) / ITERS);
  return 0;
}

int main(void) {
  static const char *const sets[] = {"engine.workers=8", "backoff.profiles.payments.max_delay=2m"};
  tk_config_source defaults = {0};
  tk_config_source file = {EXAMPLE, NULL, NULL, NULL, 0};
  tk_config_source prod = {EXAMPLE, NULL, "production", NULL, 0};
  tk_config_source flags = {EXAMPLE, NULL, "production", sets, 2};
  printf("%-34s %10s %12s\n", "config benchmark", "us/load", "allocs/load");
  return bench("defaults only", &defaults) || bench("example tasker.toml", &file) ||
         bench("example + production overlay", &prod) ||
         bench("example + production + 2 --set", &flags);
}
