/* The system clock and the manual clock used by tests. */
#include <tasker/clock.h>

#include <errno.h>
#include <time.h>

static int64_t system_now(void *ud) {
  (void)ud;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void system_sleep(void *ud, int64_t ms) {
  (void)ud;
  if (ms <= 0) return;
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

tk_clock tk_clock_system(void) {
  tk_clock c = {system_now, system_sleep, NULL};
  return c;
}

static int64_t manual_now(void *ud) { return ((tk_manual_clock *)ud)->now_ms; }

static void manual_sleep(void *ud, int64_t ms) {
  tk_manual_clock *m = ud;
  if (ms <= 0) return;
  m->now_ms += ms;
  m->slept_ms += ms;
  m->sleeps++;
}

tk_clock tk_clock_manual(tk_manual_clock *m) {
  tk_clock c = {manual_now, manual_sleep, m};
  return c;
}

int64_t tk_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
