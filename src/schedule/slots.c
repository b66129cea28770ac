/* The fire times of a cron expression between two instants (tasker/cron.h:
 * tk_cron_slots), for the slots a schedule missed. */
#include <tasker/cron.h>

#define FIRST_WINDOW_MS ((int64_t)3600 * 1000)

/* Write the slots in (lo, until] into the ring out[max]; returns how many
 * there were (all of them, also those overwritten). */
static int64_t ring_fill(const tk_cron *c, int64_t lo, int64_t until, int64_t *out, int max) {
  int64_t count = 0;
  for (int64_t t = tk_cron_next(c, lo); t <= until; t = tk_cron_next(c, t))
    out[count++ % max] = t;
  return count;
}

int tk_cron_slots(const tk_cron *c, int64_t after, int64_t until, int64_t *out, int max,
                  int *more) {
  if (more) *more = 0;
  if (until <= after || max < 1) return 0;
  /* Look back from until over a window that doubles until it holds max
   * slots or reaches after: a year-long gap in a per-minute schedule costs
   * a few hundred steps, not half a million. */
  int64_t w = FIRST_WINDOW_MS, lo, count;
  for (;;) {
    lo = until - after <= w ? after : until - w;
    count = ring_fill(c, lo, until, out, max);
    if (count >= max || lo == after) break;
    w = w > INT64_MAX / 2 ? INT64_MAX : 2 * w;
  }
  int n = count < max ? (int)count : max;
  if (count > max) {
    /* Rotate the ring so that the oldest kept slot comes first. */
    int start = (int)(count % max);
    for (int k = 0; k < start; k++) {
      int64_t first = out[0];
      for (int i = 0; i + 1 < max; i++) out[i] = out[i + 1];
      out[max - 1] = first;
    }
  }
  if (more) *more = count > max || (lo > after && tk_cron_next(c, after) <= lo);
  return n;
}
