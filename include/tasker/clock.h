/* tasker: the one clock.
 *
 * All time in tasker is int64 milliseconds since the Unix epoch, read through
 * a tk_clock that the caller supplies, so that tests can drive time by hand
 * and every retry schedule is reproducible.
 */
#ifndef TASKER_CLOCK_H
#define TASKER_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_clock {
  /* Current time in ms since the Unix epoch. Required. */
  int64_t (*now_ms)(void *ud);
  /* Block for `ms` milliseconds (ms <= 0 returns at once). Required. */
  void (*sleep_ms)(void *ud, int64_t ms);
  void *ud;
} tk_clock;

/* The real wall clock (CLOCK_REALTIME) and nanosleep. */
tk_clock tk_clock_system(void);

/* A clock that stands still until advanced; sleeping advances it. */
typedef struct tk_manual_clock {
  int64_t now_ms;
  int64_t slept_ms; /* total of all sleeps, for tests */
  int sleeps;       /* number of sleeps with ms > 0 */
} tk_manual_clock;

/* A tk_clock reading and advancing `m`, which must outlive the clock. */
tk_clock tk_clock_manual(tk_manual_clock *m);

static inline int64_t tk_clock_now(const tk_clock *c) { return c->now_ms(c->ud); }
static inline void tk_clock_sleep(const tk_clock *c, int64_t ms) {
  c->sleep_ms(c->ud, ms);
}

/* Monotonic nanoseconds, for measuring durations (benchmarks, timeouts);
 * never for timestamps that are stored. */
int64_t tk_monotonic_ns(void);

#ifdef __cplusplus
}
#endif
#endif
