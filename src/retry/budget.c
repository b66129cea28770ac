/* Retry budgets: a ring of running balances, one per slot.
 *
 * All quantities are integers in millionths of a retry (PPM): a first
 * attempt deposits ratio_ppm, the floor gives floor_ppm per window, a retry
 * costs PPM. Integer arithmetic makes the limit exact, which matters
 * because tests and the simulator compare against hand-computed figures.
 *
 * Why running balances rather than counts per slot: with A(s) the balance
 * at the end of slot s (every deposit and cost since the start), the
 * window after slot s has left holds A(newest) - A(s). A retry fits at the
 * boundary where slot s leaves exactly when
 *     A(newest) - A(s) + floor_ppm >= PPM,  i.e.  A(s) <= A(newest) + floor_ppm - PPM,
 * a threshold that does not depend on s: the search for the earliest such
 * boundary is one comparison per slot, and the check itself one
 * subtraction. */
#include <tasker/budget.h>

#include <math.h>
#include <string.h>

#include <tasker/duration.h>

#define PPM 1000000LL
#define SLOTS TK_RETRY_BUDGET_SLOTS
#define MAX_WINDOW_MS 86400000LL

/* The floor over one window, in PPM. */
static int64_t floor_ppm(const tk_retry_budget_config *c) {
  return llround(c->min_per_second * (double)c->window_ms * 1000.0);
}

int tk_retry_budget_config_validate(const tk_retry_budget_config *c, tk_err *err) {
  if (!(c->ratio >= 0 && c->ratio <= 1000))
    return tk_err_set(err, TK_ERANGE,
                      "ratio is %g: must be from 0 to 1000 (retries per first attempt)", c->ratio);
  if (c->window_ms < SLOTS || c->window_ms > MAX_WINDOW_MS || c->window_ms % SLOTS != 0)
    return tk_err_set(err, TK_ERANGE,
                      "window is %lld ms: must be a multiple of %d ms from %d ms to 1 day "
                      "(it slides in %d equal steps)",
                      (long long)c->window_ms, SLOTS, SLOTS, SLOTS);
  if (!(c->min_per_second >= 0 && c->min_per_second <= 1e6))
    return tk_err_set(err, TK_ERANGE, "min_per_second is %g: must be from 0 to 1000000",
                      c->min_per_second);
  /* Without a floor of one retry per window, a refused retry could wait for
   * first attempts that never come: it would have no time to run at. */
  if (floor_ppm(c) < PPM) {
    char w[32];
    tk_duration_format(c->window_ms, w, sizeof w);
    return tk_err_set(err, TK_ERANGE,
                      "min_per_second is %g: over the %s window that allows %g retries; it must "
                      "allow at least 1, or a deferred retry could wait for first attempts that "
                      "never come",
                      c->min_per_second, w, c->min_per_second * (double)c->window_ms / 1000.0);
  }
  return 0;
}

int tk_retry_budget_init(tk_retry_budget *b, const tk_retry_budget_config *c, tk_err *err) {
  int rc = tk_retry_budget_config_validate(c, err);
  if (rc != 0) return rc;
  memset(b, 0, sizeof *b);
  b->slot_ms = c->window_ms / SLOTS;
  b->ratio_ppm = llround(c->ratio * (double)PPM);
  b->floor_ppm = floor_ppm(c);
  return 0;
}

/* Bounds that keep every balance far from int64 overflow however long a
 * budget lives: the window's balance stops growing at BALANCE_MAX (over
 * 4 * 10^9 first attempts in one window at ratio 1000: unlimited in all but
 * name), and when base drifts past REBASE_AT every balance is shifted back
 * towards 0, which changes no difference between them. */
#define BALANCE_MAX (INT64_C(1) << 62)
#define REBASE_AT (INT64_C(1) << 61)

static inline int next_pos(int pos) { return pos + 1 == SLOTS ? 0 : pos + 1; }

/* Move the window so that its newest slot holds now_ms. Each slot that
 * leaves becomes the base and its position the new newest slot, which
 * starts from the previous one's balance: O(1) per slot passed, so O(1)
 * amortised; a jump of a whole window or more resets the ring at once. */
static void advance(tk_retry_budget *b, int64_t now_ms) {
  int64_t k = now_ms / b->slot_ms;
  if (now_ms % b->slot_ms < 0) k--; /* floor, for times before 0 */
  if (!b->started) {
    b->started = 1;
    b->cur = k;
    return;
  }
  if (k <= b->cur) return; /* same slot, or the clock stepped back */
  if (k - b->cur >= SLOTS) {
    int64_t v = b->sum[b->head];
    for (int i = 0; i < SLOTS; i++) b->sum[i] = v;
    b->base = v;
  } else {
    for (int64_t i = b->cur; i < k; i++) {
      int pos = next_pos(b->head);
      b->base = b->sum[pos];
      b->sum[pos] = b->sum[b->head];
      b->head = pos;
    }
  }
  b->cur = k;
  if (b->base > REBASE_AT || b->base < -REBASE_AT) {
    int64_t shift = b->base;
    for (int i = 0; i < SLOTS; i++) b->sum[i] -= shift;
    b->base = 0;
  }
}

void tk_retry_budget_first(tk_retry_budget *b, int64_t now_ms) {
  advance(b, now_ms);
  if (b->sum[b->head] - b->base < BALANCE_MAX) b->sum[b->head] += b->ratio_ppm;
  b->total_firsts++;
}

int64_t tk_retry_budget_available(tk_retry_budget *b, int64_t now_ms) {
  advance(b, now_ms);
  int64_t balance = b->sum[b->head] - b->base + b->floor_ppm;
  return balance >= PPM ? balance / PPM : 0;
}

int tk_retry_budget_try(tk_retry_budget *b, int64_t now_ms, int64_t *allowed_at_ms) {
  advance(b, now_ms);
  if (b->sum[b->head] - b->base + b->floor_ppm >= PPM) {
    b->sum[b->head] -= PPM;
    b->total_retries++;
    *allowed_at_ms = now_ms;
    return 1;
  }
  b->total_deferred++;
  /* With nothing new recorded, the window changes only as its slots leave,
   * oldest first, one per slot boundary. Leaving first attempts lower the
   * balance and leaving retries raise it, so it is not monotonic: find the
   * first slot whose leaving is enough (see the top of this file). The
   * newest one always is, since the floor is at least one retry. */
  int64_t threshold = b->sum[b->head] + b->floor_ppm - PPM;
  int j = 0;
  for (int pos = b->head + 1; pos < SLOTS; pos++, j++)
    if (b->sum[pos] <= threshold) goto found;
  for (int pos = 0; pos <= b->head; pos++, j++)
    if (b->sum[pos] <= threshold) goto found;
found:
  *allowed_at_ms = (b->cur + 1 + j) * b->slot_ms;
  return 0;
}
