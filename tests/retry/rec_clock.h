/* A test clock for the retry helpers: tk_clock_manual keeps the time, and
 * every sleep asked for (0 ms included, which the manual clock does not
 * count) is recorded in order, so a test sees the whole schedule. */
#ifndef TESTS_RETRY_REC_CLOCK_H
#define TESTS_RETRY_REC_CLOCK_H

#include <stdint.h>
#include <string.h>

#include <tasker/clock.h>

#define REC_CLOCK_MAX 64

typedef struct rec_clock {
  tk_manual_clock m; /* the time: m.now_ms */
  tk_clock manual;
  int64_t sleeps[REC_CLOCK_MAX]; /* the first REC_CLOCK_MAX sleeps */
  int n;                         /* sleeps asked for */
} rec_clock;

static inline int64_t rec_now(void *ud) { return tk_clock_now(&((rec_clock *)ud)->manual); }

static inline void rec_sleep(void *ud, int64_t ms) {
  rec_clock *c = ud;
  if (c->n < REC_CLOCK_MAX) c->sleeps[c->n] = ms;
  c->n++;
  tk_clock_sleep(&c->manual, ms);
}

/* Reset `c` to time `now_ms`, no sleeps; the clock that reads it. */
static inline tk_clock rec_clock_start(rec_clock *c, int64_t now_ms) {
  memset(c, 0, sizeof *c);
  c->m.now_ms = now_ms;
  c->manual = tk_clock_manual(&c->m);
  return (tk_clock){rec_now, rec_sleep, c};
}

#endif
