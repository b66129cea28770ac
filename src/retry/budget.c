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

/* The absolute slot of time t (floor, also before 0). */
static int64_t slot_of(const tk_retry_budget *b, int64_t t) {
  int64_t k = t / b->slot_ms;
  return t % b->slot_ms < 0 ? k - 1 : k;
}

/* Move the window so that its newest slot holds now_ms. Each slot that
 * leaves becomes the base and its position the new newest slot, which
 * starts from the previous one's balance: O(1) per slot passed, so O(1)
 * amortised; a jump of a whole window or more resets the ring at once. */
static void advance(tk_retry_budget *b, int64_t now_ms) {
  int64_t k = slot_of(b, now_ms);
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
  /* The latest reservation has left the window: no answer reads the books
   * any more (see the notation below), so they start over. */
  if (b->resv_started && b->resv_last <= b->cur - SLOTS) {
    b->resv_started = 0;
    b->resv_total = b->resv_base = b->resv_live = 0;
  }
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

/* ---- reservations and the window at a later slot --------------------------
 *
 * Write A(y) for the running balance at the end of slot y (deposits and
 * retries spent at once) and R(y) for the reservations made at slots <= y.
 * With nothing else recorded, the window that ends at slot e >= cur holds
 *     A(cur) - A(e - SLOTS) - PPM * (R(e) - R(e - SLOTS))
 * and a retry fits in slot e when that plus floor_ppm is >= PPM. Every
 * answer reads y = e - SLOTS >= resv_last - SLOTS only (reservations are
 * first come, first served, so e >= resv_last whenever e > cur, and the
 * check at cur is made only when resv_last <= cur), and y >= cur - SLOTS:
 * the two rings hold exactly that. */

static inline int pos_of(int64_t slot) {
  int64_t p = slot % SLOTS;
  return (int)(p < 0 ? p + SLOTS : p);
}

/* R(y), for resv_last - SLOTS <= y. */
static int64_t resv_upto(const tk_retry_budget *b, int64_t y) {
  if (!b->resv_started || y >= b->resv_last) return b->resv_total;
  if (y <= b->resv_last - SLOTS) return b->resv_base;
  return b->resv[pos_of(y)];
}

/* A reservation is waiting for a slot after the newest one. */
static inline int resv_pending(const tk_retry_budget *b) {
  return b->resv_started && b->resv_last > b->cur;
}

/* What the window holds now, floor included, in PPM. */
static inline int64_t balance_now(const tk_retry_budget *b) {
  int64_t balance = b->sum[b->head] - b->base + b->floor_ppm;
  if (b->resv_started) balance -= PPM * (b->resv_total - resv_upto(b, b->cur - SLOTS));
  return balance;
}

/* The earliest slot after cur in which one more retry fits, with no
 * reservation in reach (none after cur + 1 - SLOTS): one comparison per
 * slot of the ring, oldest first. With A(y) the balance at the end of slot
 * y, the slot e = y + SLOTS fits when A(y) <= A(cur) + floor_ppm - PPM;
 * y runs from cur + 1 - SLOTS: the ring's positions after head, then from
 * 0 up to head, where the floor always fits (see budget.h). */
static inline int64_t next_slot_plain(const tk_retry_budget *b) {
  int64_t threshold = b->sum[b->head] + b->floor_ppm - PPM;
  int j = 0;
  for (int pos = b->head + 1; pos < SLOTS; pos++, j++)
    if (b->sum[pos] <= threshold) return b->cur + 1 + j;
  for (int pos = 0; pos <= b->head; pos++, j++)
    if (b->sum[pos] <= threshold) return b->cur + 1 + j;
  return b->cur + SLOTS; /* not reached */
}

/* The earliest slot after cur, and not before the latest reservation, in
 * which one more retry fits (the caller found none fits now). */
static int64_t next_slot(const tk_retry_budget *b) {
  int64_t start = resv_pending(b) ? b->resv_last : b->cur + 1;
  /* The slot e = y + SLOTS fits when, with the top of this file's
   * notation, A(y) + PPM * (R(e) - R(y)) <= A(cur) + floor_ppm - PPM. The
   * term of reservations is 0 for every y at or past the latest of them:
   * without one in reach it is the plain scan of the ring. */
  int64_t threshold = b->sum[b->head] + b->floor_ppm - PPM;
  int64_t y = start - SLOTS;
  if (!b->resv_started || b->resv_last <= y) return next_slot_plain(b);
  /* Slots whose window starts before cur: both rings, one comparison each
   * (y > cur - SLOTS here, since start > cur). */
  int ps = b->head - (int)(b->cur - y), pr = pos_of(y);
  if (ps < 0) ps += SLOTS;
  for (; y < b->cur; y++) {
    int64_t r = y >= b->resv_last            ? b->resv_total
                : y <= b->resv_last - SLOTS ? b->resv_base
                                            : b->resv[pr];
    if (b->sum[ps] + PPM * (b->resv_total - r) <= threshold) return y + SLOTS;
    ps = next_pos(ps);
    pr = next_pos(pr);
  }
  /* From y = cur on, A(y) is A(cur) and the condition reads
   * R(e) - R(y) <= (floor_ppm - PPM) / PPM: R(y) at least `need`. R grows
   * with y and reaches resv_total at resv_last, so a binary search over the
   * ring of reservations finds the first such y: a queue of reserved
   * retries a window or more ahead costs a few steps, not a window's. */
  int64_t need = b->resv_total - (b->floor_ppm - PPM) / PPM;
  if (resv_upto(b, y) >= need) return y + SLOTS;
  int64_t lo = y, hi = b->resv_last > y ? b->resv_last : y; /* R(lo) < need <= R(hi) */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (resv_upto(b, mid) >= need) hi = mid;
    else lo = mid;
  }
  return hi + SLOTS;
}

/* Take back one reservation counted in slot s (<= resv_last): R(y) drops
 * by one for every y >= s that the rings hold. The last live one gone,
 * the books start over empty, as before the first reservation (a caller
 * that settles leaves no reservation at or before now in them). */
static void unreserve(tk_retry_budget *b, int64_t s) {
  int64_t oldest = b->resv_last - SLOTS + 1; /* the ring's first slot */
  if (s < oldest) b->resv_base--;
  for (int64_t y = s < oldest ? oldest : s; y <= b->resv_last; y++) b->resv[pos_of(y)]--;
  b->resv_total--;
  if (--b->resv_live <= 0) {
    b->resv_live = 0;
    b->resv_started = 0;
  }
}

void tk_retry_budget_settle(tk_retry_budget *b, int64_t now_ms, int64_t at_ms) {
  advance(b, now_ms);
  int64_t s = slot_of(b, at_ms);
  if (!b->resv_started || s > b->cur || s > b->resv_last) return; /* not due: misuse */
  /* From R to A at slot s: A(y) drops by PPM for y >= s. A slot that has
   * left the window shifts every balance the ring holds alike, which
   * changes no difference: nothing to write. */
  if (s > b->cur - SLOTS)
    for (int64_t y = s; y <= b->cur; y++) {
      int pos = b->head - (int)(b->cur - y);
      b->sum[pos < 0 ? pos + SLOTS : pos] -= PPM;
    }
  unreserve(b, s);
}

int tk_retry_budget_promote(tk_retry_budget *b, int64_t now_ms, int64_t at_ms) {
  advance(b, now_ms);
  int64_t s = slot_of(b, at_ms);
  if (!b->resv_started || s <= b->cur || s > b->resv_last) return 0;
  /* Every reservation still in the books lies after now (the caller
   * settled the due ones): the window at now holds retries spent only. */
  if (b->sum[b->head] - b->base + b->floor_ppm < PPM) return 0;
  unreserve(b, s);
  b->sum[b->head] -= PPM;
  b->total_promoted++;
  return 1;
}

/* Count one reservation in slot s >= resv_last: the ring of reservations
 * moves on to end at s, each slot that leaves it becoming the base. */
static void reserve_at(tk_retry_budget *b, int64_t s) {
  if (!b->resv_started || s - b->resv_last >= SLOTS) {
    if (!b->resv_started) b->resv_epoch++;
    for (int i = 0; i < SLOTS; i++) b->resv[i] = b->resv_total;
    b->resv_base = b->resv_total;
    b->resv_started = 1;
    b->resv_last = s;
  }
  for (; b->resv_last < s; b->resv_last++) {
    int pos = pos_of(b->resv_last + 1);
    b->resv_base = b->resv[pos];
    b->resv[pos] = b->resv_total;
  }
  b->resv_total++;
  b->resv_live++;
  b->resv[pos_of(s)] = b->resv_total;
}

int64_t tk_retry_budget_available(tk_retry_budget *b, int64_t now_ms) {
  advance(b, now_ms);
  if (resv_pending(b)) return 0;
  int64_t balance = balance_now(b);
  return balance >= PPM ? balance / PPM : 0;
}

/* Whether one more retry fits now (the window moved to now already). */
static int fits_now(const tk_retry_budget *b) {
  return !resv_pending(b) && balance_now(b) >= PPM;
}

int tk_retry_budget_try(tk_retry_budget *b, int64_t now_ms, int64_t *allowed_at_ms) {
  advance(b, now_ms);
  if (fits_now(b)) {
    b->sum[b->head] -= PPM;
    b->total_retries++;
    *allowed_at_ms = now_ms;
    return 1;
  }
  b->total_deferred++;
  *allowed_at_ms = (b->resv_started ? next_slot(b) : next_slot_plain(b)) * b->slot_ms;
  return 0;
}

int tk_retry_budget_reserve(tk_retry_budget *b, int64_t now_ms, int64_t *at_ms) {
  advance(b, now_ms);
  b->total_retries++;
  if (fits_now(b)) {
    b->sum[b->head] -= PPM;
    *at_ms = now_ms;
    return 1;
  }
  b->total_deferred++;
  int64_t s = next_slot(b);
  reserve_at(b, s);
  *at_ms = s * b->slot_ms;
  return 0;
}

/* ---- the state as bytes ---------------------------------------------------
 *
 * Every field as a little-endian int64, in a fixed order after a version
 * word: orchestrators on different machines read one another's states. */

#define STATE_VERSION 1

static void put64(unsigned char **p, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 0; i < 8; i++) (*p)[i] = (unsigned char)(u >> (8 * i));
  *p += 8;
}

static int64_t get64(const unsigned char **p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u |= (uint64_t)(*p)[i] << (8 * i);
  *p += 8;
  return (int64_t)u;
}

/* The scalar fields, in the saved order. */
#define SCALARS(b)                                                                              \
  &(b)->slot_ms, &(b)->ratio_ppm, &(b)->floor_ppm, &(b)->cur, &(b)->base, &(b)->resv_last,      \
      &(b)->resv_base, &(b)->resv_total, &(b)->resv_live, &(b)->resv_epoch

void tk_retry_budget_save(const tk_retry_budget *b, unsigned char *out) {
  unsigned char *p = out;
  put64(&p, STATE_VERSION);
  const int64_t *v[] = {SCALARS(b)};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) put64(&p, *v[i]);
  put64(&p, b->started);
  put64(&p, b->head);
  put64(&p, b->resv_started);
  for (int i = 0; i < SLOTS; i++) put64(&p, b->sum[i]);
  for (int i = 0; i < SLOTS; i++) put64(&p, b->resv[i]);
  const uint64_t totals[] = {b->total_firsts, b->total_retries, b->total_deferred,
                             b->total_promoted};
  for (int i = 0; i < 4; i++) put64(&p, (int64_t)totals[i]);
}

int tk_retry_budget_load(tk_retry_budget *b, const tk_retry_budget_config *c,
                         const unsigned char *in, size_t len) {
  tk_retry_budget_init(b, c, NULL); /* the caller validated c */
  if (len != TK_RETRY_BUDGET_STATE_SIZE) return 0;
  const unsigned char *p = in;
  if (get64(&p) != STATE_VERSION) return 0;
  tk_retry_budget r;
  int64_t *v[] = {SCALARS(&r)};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) *v[i] = get64(&p);
  int64_t started = get64(&p), head = get64(&p), resv_started = get64(&p);
  /* Another window, or bytes no save wrote: start empty. */
  if (r.slot_ms != b->slot_ms || (started != 0 && started != 1) || head < 0 || head >= SLOTS ||
      (resv_started != 0 && resv_started != 1))
    return 0;
  r.started = (int)started;
  r.head = (int)head;
  r.resv_started = (int)resv_started;
  for (int i = 0; i < SLOTS; i++) r.sum[i] = get64(&p);
  for (int i = 0; i < SLOTS; i++) r.resv[i] = get64(&p);
  r.total_firsts = (uint64_t)get64(&p);
  r.total_retries = (uint64_t)get64(&p);
  r.total_deferred = (uint64_t)get64(&p);
  r.total_promoted = (uint64_t)get64(&p);
  r.ratio_ppm = b->ratio_ppm;
  r.floor_ppm = b->floor_ppm;
  *b = r;
  return 1;
}

int tk_retry_budget_saved_config(const unsigned char *in, size_t len, tk_retry_budget_config *c) {
  if (in == NULL || len != TK_RETRY_BUDGET_STATE_SIZE) return 0;
  const unsigned char *p = in;
  if (get64(&p) != STATE_VERSION) return 0;
  int64_t slot_ms = get64(&p), ratio_ppm = get64(&p), floor = get64(&p);
  tk_retry_budget_config got = {(double)ratio_ppm / PPM, slot_ms * SLOTS,
                                slot_ms > 0 ? (double)floor / ((double)slot_ms * SLOTS * 1000.0)
                                            : 0};
  if (tk_retry_budget_config_validate(&got, NULL) != 0) return 0;
  *c = got;
  return 1;
}
