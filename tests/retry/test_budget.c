/* Retry budgets: the limit (ratio of first attempts plus the floor), the
 * exact time a refused retry may go, the window sliding, first attempts
 * never refused, reservations (deferred retries counted at their later
 * time, first come, first served), the state saved and loaded as bytes
 * (as the store keeps it for a fleet) answering as the one in memory, the
 * books of reservations starting over once the latest left the window,
 * and a randomized comparison against a model that keeps every event
 * instead of a ring of counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/budget.h>
#include <tasker/rand.h>

static tk_retry_budget budget(double ratio, int64_t window_ms, double min_per_second) {
  tk_retry_budget_config c = {ratio, window_ms, min_per_second};
  tk_retry_budget b;
  tk_err err;
  if (tk_retry_budget_init(&b, &c, &err) != 0) fail_msg("init: %s", err.msg);
  return b;
}

/* Ask for a retry at `now` with fn (try or reserve) and check the verdict
 * and the time it gives. */
#define EXPECT_CALL(fn, b, now, want_ok, want_at)       \
  do {                                                  \
    int64_t at_ = -1;                                   \
    assert_int_equal(fn((b), (now), &at_), (want_ok));  \
    assert_int_equal(at_, (want_at));                   \
  } while (0)
#define EXPECT_TRY(b, now, ok, at) EXPECT_CALL(tk_retry_budget_try, b, now, ok, at)
#define EXPECT_RESERVE(b, now, ok, at) EXPECT_CALL(tk_retry_budget_reserve, b, now, ok, at)

/* ratio 0.5 of 4 first attempts = 2, plus 1/s over 1 s = 1: three retries.
 * The fourth waits; the first attempts leave at 1000 (the capacity falls
 * to the floor, 1) and the retries at 1100, 1200, 1300: at 1300 none is
 * left and the floor admits one. */
static void admits_ratio_of_firsts_plus_floor(void **state) {
  (void)state;
  tk_retry_budget b = budget(0.5, 1000, 1);
  for (int i = 0; i < 4; i++) tk_retry_budget_first(&b, 0);
  assert_int_equal(tk_retry_budget_available(&b, 50), 3);
  EXPECT_TRY(&b, 100, 1, 100);
  EXPECT_TRY(&b, 200, 1, 200);
  EXPECT_TRY(&b, 300, 1, 300);
  assert_int_equal(tk_retry_budget_available(&b, 300), 0);
  EXPECT_TRY(&b, 400, 0, 1300);
  EXPECT_TRY(&b, 999, 0, 1300);
  EXPECT_TRY(&b, 1299, 0, 1300); /* still refused one millisecond before */
  EXPECT_TRY(&b, 1300, 1, 1300);
  EXPECT_TRY(&b, 1300, 0, 2300); /* the one just spent leaves a window later */
  assert_int_equal(b.total_firsts, 4);
  assert_int_equal(b.total_retries, 4);
  assert_int_equal(b.total_deferred, 4);
}

/* Here leaving retries, not arriving time, decide: ratio 1 of 2 first
 * attempts plus 1 = 3 retries at 500, 600, 700. At 1000 the first attempts
 * leave (capacity 1, three retries in the window); at 1500, 1600 two
 * retries leave, and at 1700 the last, so one more fits. */
static void allowed_at_waits_for_retries_to_leave(void **state) {
  (void)state;
  tk_retry_budget b = budget(1, 1000, 1);
  tk_retry_budget_first(&b, 0);
  tk_retry_budget_first(&b, 0);
  EXPECT_TRY(&b, 500, 1, 500);
  EXPECT_TRY(&b, 600, 1, 600);
  EXPECT_TRY(&b, 700, 1, 700);
  EXPECT_TRY(&b, 800, 0, 1700);
  EXPECT_TRY(&b, 1650, 0, 1700);
  EXPECT_TRY(&b, 1700, 1, 1700);
}

/* The earliest time is not always "when the oldest retry leaves": the
 * first attempts that paid for retries leave with them. */
static void leaving_firsts_can_delay_a_retry(void **state) {
  (void)state;
  tk_retry_budget b = budget(1, 1000, 1);
  tk_retry_budget_first(&b, 0);
  EXPECT_TRY(&b, 0, 1, 0);
  EXPECT_TRY(&b, 0, 1, 0); /* 1 first + floor 1 = 2 */
  tk_retry_budget_first(&b, 500);
  EXPECT_TRY(&b, 500, 1, 500);
  /* At 1000 the two retries at 0 leave with their first attempt: 2 fit. */
  EXPECT_TRY(&b, 600, 0, 1000);
  EXPECT_TRY(&b, 1000, 1, 1000);
  /* Now the first at 500 and retries at 500 and 1000. At 1500 the retry
   * at 500 leaves, but so does the first attempt that paid for it: the
   * capacity falls to the floor, 1, with the retry at 1000 still in. Only
   * when that one leaves too, at 2000, does one more fit. */
  EXPECT_TRY(&b, 1000, 0, 2000);
  EXPECT_TRY(&b, 1500, 0, 2000);
  EXPECT_TRY(&b, 2000, 1, 2000);
}

/* First attempts are recorded whatever the state, and each one adds ratio
 * to what retries may spend: a refused retry goes as soon as enough have
 * come, earlier than the time it was given. */
static void first_attempts_are_never_refused(void **state) {
  (void)state;
  tk_retry_budget b = budget(0.1, 10000, 0.1); /* floor: 1 retry per 10 s */
  EXPECT_TRY(&b, 0, 1, 0);
  EXPECT_TRY(&b, 1, 0, 10000);
  for (int i = 0; i < 9; i++) tk_retry_budget_first(&b, 2);
  EXPECT_TRY(&b, 3, 0, 10000); /* 0.9 + 1 < 2 */
  tk_retry_budget_first(&b, 4);
  EXPECT_TRY(&b, 5, 1, 5); /* 0.1 x 10 = exactly 1, plus the floor: 2 */
  EXPECT_TRY(&b, 6, 0, 10000);
  for (int i = 0; i < 100000; i++) tk_retry_budget_first(&b, 7);
  assert_int_equal(b.total_firsts, 100010);
  /* 0.1 x 100010 + 1 = 10002 retries in all, 2 of them spent. */
  assert_int_equal(tk_retry_budget_available(&b, 8), 10000);
  for (int i = 0; i < 10000; i++) EXPECT_TRY(&b, 8, 1, 8);
  EXPECT_TRY(&b, 8, 0, 10000);
}

/* Without any first attempt the floor alone admits min_per_second x window
 * retries per window. */
static void floor_alone(void **state) {
  (void)state;
  tk_retry_budget b = budget(0.5, 2000, 5); /* 10 per 2 s */
  for (int i = 0; i < 10; i++) EXPECT_TRY(&b, 0, 1, 0);
  EXPECT_TRY(&b, 0, 0, 2000);
  EXPECT_TRY(&b, 1999, 0, 2000);
  for (int i = 0; i < 10; i++) EXPECT_TRY(&b, 2000, 1, 2000);
  EXPECT_TRY(&b, 2001, 0, 4000);
  /* A fractional floor: 0.25/s over 10 s is 2.5 retries, so 2 at a time.
   * Slots are 100 ms: the retry at 0 leaves at 10000, the one at 150 at
   * 10100. */
  tk_retry_budget q = budget(0, 10000, 0.25);
  EXPECT_TRY(&q, 0, 1, 0);
  EXPECT_TRY(&q, 150, 1, 150);
  EXPECT_TRY(&q, 160, 0, 10000);
  EXPECT_TRY(&q, 10000, 1, 10000);
  EXPECT_TRY(&q, 10000, 0, 10100);
  EXPECT_TRY(&q, 10100, 1, 10100);
}

/* The window slides one slot (window / 100) at a time: a first attempt
 * counts until the slot it fell in leaves, up to one slot less than a
 * window later. */
static void window_slides_by_slots(void **state) {
  (void)state;
  tk_retry_budget b = budget(1, 1000, 1); /* slots of 10 ms */
  assert_int_equal(b.slot_ms, 10);
  tk_retry_budget_first(&b, 15); /* slot [10, 20): in the window until 1010 */
  assert_int_equal(tk_retry_budget_available(&b, 15), 2);
  assert_int_equal(tk_retry_budget_available(&b, 1009), 2);
  assert_int_equal(tk_retry_budget_available(&b, 1010), 1); /* the floor alone */
  EXPECT_TRY(&b, 1010, 1, 1010);
  EXPECT_TRY(&b, 1010, 0, 2010);
  /* A jump of more than a window forgets everything. */
  assert_int_equal(tk_retry_budget_available(&b, 5000), 1);
  EXPECT_TRY(&b, 5000, 1, 5000);
  EXPECT_TRY(&b, 5000, 0, 6000);
}

/* A clock that steps back counts in the newest slot: expired counts never
 * come back, and nothing is lost. */
static void clock_stepping_back(void **state) {
  (void)state;
  tk_retry_budget b = budget(1, 1000, 1);
  EXPECT_TRY(&b, 5000, 1, 5000);
  EXPECT_TRY(&b, 4000, 0, 6000); /* counted at 5000's slot, so free at 6000 */
  tk_retry_budget_first(&b, 3000); /* counted at 5000's slot too */
  EXPECT_TRY(&b, 4000, 1, 4000);
  EXPECT_TRY(&b, 5500, 0, 6000); /* all of them leave together */
  EXPECT_TRY(&b, 6000, 1, 6000);
}

/* Balances are running totals; a budget that lives long enough for them to
 * drift far from 0 is shifted back, which must change no verdict. The
 * drift is planted (it takes billions of calls to happen for real): the
 * same history with every balance moved up by nearly 2^62 must behave as
 * the original, through the shift back. */
static void drifted_balances_are_shifted_back(void **state) {
  (void)state;
  tk_retry_budget a = budget(0.5, 1000, 2), b;
  for (int i = 0; i < 30; i++) {
    tk_retry_budget_first(&a, i * 20);
    int64_t at;
    tk_retry_budget_try(&a, i * 20 + 5, &at);
  }
  b = a;
  const int64_t drift = (INT64_C(1) << 62) - 12345;
  for (int i = 0; i < TK_RETRY_BUDGET_SLOTS; i++) b.sum[i] += drift;
  b.base += drift;
  for (int64_t now = 600; now < 5000; now += 7) {
    if (now % 3 == 0) {
      tk_retry_budget_first(&a, now);
      tk_retry_budget_first(&b, now);
    }
    int64_t at_a, at_b;
    assert_int_equal(tk_retry_budget_try(&a, now, &at_a), tk_retry_budget_try(&b, now, &at_b));
    assert_int_equal(at_a, at_b);
    assert_int_equal(tk_retry_budget_available(&a, now), tk_retry_budget_available(&b, now));
  }
  assert_true(b.base < (INT64_C(1) << 61)); /* it was shifted */
}

/* A floor of 3 per 1 s window and nothing else: three retries at 0 go at
 * once; without reservations every later one would be told 1000 and all
 * would go together. Reserved, they are counted where they go: three at
 * 1000, three at 2000, and so on. try gives the time the next reservation
 * would get, and counts nothing. */
static void reservations_spread_deferred_retries(void **state) {
  (void)state;
  tk_retry_budget b = budget(0, 1000, 3);
  for (int i = 0; i < 3; i++) EXPECT_RESERVE(&b, 0, 1, 0);
  EXPECT_TRY(&b, 0, 0, 1000);
  for (int i = 0; i < 3; i++) EXPECT_RESERVE(&b, 0, 0, 1000);
  EXPECT_TRY(&b, 0, 0, 2000);
  for (int i = 0; i < 3; i++) EXPECT_RESERVE(&b, 5, 0, 2000);
  EXPECT_RESERVE(&b, 10, 0, 3000);
  assert_int_equal(b.total_retries, 10);
  assert_int_equal(b.total_deferred, 9); /* the reservations and the two tries */
  assert_int_equal(b.resv_total, 7);
  /* While reservations wait, nothing goes now, however much the floor
   * would allow: the reserved ones are served first. */
  assert_int_equal(tk_retry_budget_available(&b, 999), 0);
  EXPECT_TRY(&b, 999, 0, 3000);
  /* At 1000 the ones reserved at 2000 and 3000 still wait. The slot of
   * 3000 holds one of 3, so two more fit there, and the next goes a window
   * later. */
  assert_int_equal(tk_retry_budget_available(&b, 1000), 0);
  EXPECT_RESERVE(&b, 1500, 0, 3000);
  EXPECT_RESERVE(&b, 1500, 0, 3000);
  EXPECT_RESERVE(&b, 1500, 0, 4000);
  /* Past the last reservation, the window counts the reserved retries in
   * their slots like any other. */
  assert_int_equal(tk_retry_budget_available(&b, 4000), 2);
  EXPECT_TRY(&b, 4000, 1, 4000);
  EXPECT_RESERVE(&b, 4000, 1, 4000);
  EXPECT_RESERVE(&b, 4000, 0, 5000);
}

/* A reservation counts the first attempts recorded before it; those that
 * come after make room for later retries, and never move a reserved one. */
static void reservations_and_first_attempts(void **state) {
  (void)state;
  tk_retry_budget b = budget(1, 1000, 1); /* slots of 10 ms */
  tk_retry_budget_first(&b, 0);
  EXPECT_RESERVE(&b, 0, 1, 0);
  EXPECT_RESERVE(&b, 0, 1, 0); /* 1 first + the floor */
  /* The first attempt and the two retries leave at 1000. */
  EXPECT_RESERVE(&b, 0, 0, 1000);
  /* Two first attempts at 500: a retry at 1000 finds them in the window
   * (they leave at 1500), and the one reserved at 1000: 2 + 1 - 1 = 2. */
  tk_retry_budget_first(&b, 500);
  tk_retry_budget_first(&b, 500);
  EXPECT_RESERVE(&b, 600, 0, 1000);
  EXPECT_RESERVE(&b, 600, 0, 1000);
  /* Full at 1000 (3 of 3); at 1500 the first attempts leave and take their
   * share with them while the three reserved at 1000 stay until 2000. */
  EXPECT_RESERVE(&b, 600, 0, 2000);
  EXPECT_TRY(&b, 700, 0, 3000);
}

static void bad_configs_are_named(void **state) {
  (void)state;
  static const struct {
    tk_retry_budget_config c;
    const char *msg;
  } cases[] = {
      {{-0.1, 10000, 1}, "ratio is -0.1: must be from 0 to 1000 (retries per first attempt)"},
      {{1001, 10000, 1}, "ratio is 1001: must be from 0 to 1000 (retries per first attempt)"},
      {{0.1, 150, 1},
       "window is 150 ms: must be a multiple of 100 ms from 100 ms to 1 day (it slides in 100 "
       "equal steps)"},
      {{0.1, 0, 1},
       "window is 0 ms: must be a multiple of 100 ms from 100 ms to 1 day (it slides in 100 "
       "equal steps)"},
      {{0.1, 86400100, 1},
       "window is 86400100 ms: must be a multiple of 100 ms from 100 ms to 1 day (it slides in "
       "100 equal steps)"},
      {{0.1, 10000, -1}, "min_per_second is -1: must be from 0 to 1000000"},
      {{0.1, 10000, 0.05},
       "min_per_second is 0.05: over the 10s window that allows 0.5 retries; it must allow at "
       "least 1, or a deferred retry could wait for first attempts that never come"},
      {{0.1, 10000, 0},
       "min_per_second is 0: over the 10s window that allows 0 retries; it must allow at least "
       "1, or a deferred retry could wait for first attempts that never come"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tk_retry_budget b;
    memset(&b, 0x5a, sizeof b);
    tk_err err;
    assert_int_equal(tk_retry_budget_init(&b, &cases[i].c, &err), TK_ERANGE);
    assert_string_equal(err.msg, cases[i].msg);
    assert_int_equal(b.slot_ms, 0x5a5a5a5a5a5a5a5aLL); /* untouched */
  }
  tk_retry_budget_config ok = {0, 100, 10}; /* the smallest window, 1 retry in it */
  assert_int_equal(tk_retry_budget_config_validate(&ok, NULL), 0);
}

/* ---- the reference model: every event kept, the rule applied directly ---- */

typedef struct model {
  int64_t slot_ms, ratio_ppm, floor_ppm;
  int64_t newest; /* the newest slot seen */
  int started;
  int reserved;      /* a reservation was made */
  int64_t resv_last; /* the latest reservation's slot */
  int64_t *slot_of; /* each event's slot */
  int *is_retry;
  size_t n;
} model;

/* Allowed at slot k? Counts every event in the N slots up to k. */
static int model_allows(const model *m, int64_t k) {
  int64_t firsts = 0, retries = 0;
  for (size_t i = 0; i < m->n; i++)
    if (m->slot_of[i] > k - TK_RETRY_BUDGET_SLOTS && m->slot_of[i] <= k) {
      if (m->is_retry[i]) retries++;
      else firsts++;
    }
  return (retries + 1) * 1000000 <= m->ratio_ppm * firsts + m->floor_ppm;
}

static int64_t model_slot(model *m, int64_t now) {
  int64_t k = now / m->slot_ms;
  if (!m->started || k > m->newest) m->newest = k;
  m->started = 1;
  return m->newest;
}

static void model_add(model *m, int64_t k, int retry) {
  m->slot_of[m->n] = k;
  m->is_retry[m->n++] = retry;
}

static void matches_a_model_that_keeps_every_event(void **state) {
  (void)state;
  static const double ratios[] = {0, 0.1, 0.5, 1, 2.5};
  static const double floors[] = {0.1, 0.5, 1, 3};
  static const int64_t windows[] = {1000, 2000, 10000};
  enum { OPS = 3000 };
  tk_rand r;
  tk_rand_seed(&r, 20240612);
  model m;
  m.slot_of = malloc(OPS * sizeof *m.slot_of);
  m.is_retry = malloc(OPS * sizeof *m.is_retry);
  /* The reservations waiting, oldest first, as event indexes of m. */
  size_t *fifo = malloc(OPS * sizeof *fifo), qh = 0, qt = 0;
  int refusals = 0, admissions = 0, reservations = 0, promoted = 0, kept = 0;
  for (int round = 0; round < 180; round++) {
    /* The same configurations again, reserving, and then reserving,
     * settling and bringing reservations earlier as the engine does. */
    int with_resv = round >= 60, with_promote = round >= 120;
    qh = qt = 0;
    tk_retry_budget_config c = {ratios[round % 5], windows[round % 3], floors[round % 4]};
    if (tk_retry_budget_config_validate(&c, NULL) != 0) continue; /* floor below 1 */
    tk_retry_budget b;
    assert_int_equal(tk_retry_budget_init(&b, &c, NULL), 0);
    m.slot_ms = b.slot_ms;
    m.ratio_ppm = b.ratio_ppm;
    m.floor_ppm = b.floor_ppm;
    m.started = 0;
    m.reserved = 0;
    m.n = 0;
    int64_t now = tk_rand_range(&r, 0, 100000);
    for (int op = 0; op < OPS; op++) {
      /* Mostly small steps, sometimes none, a long gap or a step back. */
      int64_t kind = tk_rand_range(&r, 0, 99);
      if (kind < 60) now += tk_rand_range(&r, 0, b.slot_ms * 3);
      else if (kind < 95) now += 0;
      else if (kind < 98) now += tk_rand_range(&r, 0, c.window_ms * 2);
      else now -= tk_rand_range(&r, 0, b.slot_ms * 5);
      if (now < 0) now = 0;
      int64_t k = model_slot(&m, now);
      /* Reservations come due: settled. Then, half the time, the oldest
       * still waiting is brought to now when the window at now (counting
       * every event at or before now) has room: the budget must agree. */
      while (with_promote && qh < qt && m.slot_of[fifo[qh]] <= k)
        tk_retry_budget_settle(&b, now, m.slot_of[fifo[qh++]] * b.slot_ms);
      if (with_promote && qh < qt && tk_rand_range(&r, 0, 1) == 0) {
        int ok = tk_retry_budget_promote(&b, now, m.slot_of[fifo[qh]] * b.slot_ms);
        assert_int_equal(ok, model_allows(&m, k));
        if (ok) {
          m.slot_of[fifo[qh++]] = k;
          promoted++;
        } else {
          kept++;
        }
        continue;
      }
      if (tk_rand_range(&r, 0, 2) == 0) {
        tk_retry_budget_first(&b, now);
        model_add(&m, k, 0);
        continue;
      }
      /* With reservations, half the checks reserve. */
      int reserve = with_resv && tk_rand_range(&r, 0, 1) == 0;
      int64_t at;
      int ok = reserve ? tk_retry_budget_reserve(&b, now, &at) : tk_retry_budget_try(&b, now, &at);
      /* First come, first served: nothing goes now while a reservation
       * waits for a later slot. */
      int pending = with_promote ? qh < qt : m.reserved && m.resv_last > k;
      assert_int_equal(ok, !pending && model_allows(&m, k));
      if (ok) {
        assert_int_equal(at, now);
        model_add(&m, k, 1);
        admissions++;
        continue;
      }
      refusals++;
      /* The model's answer: the first later slot, not before the latest
       * reservation, where the rule holds. */
      int64_t from = pending ? m.resv_last : k + 1, j = from;
      while (!model_allows(&m, j)) j++;
      assert_int_equal(at, j * b.slot_ms);
      assert_true(j - (pending ? m.resv_last : k) <= TK_RETRY_BUDGET_SLOTS);
      if (reserve) {
        fifo[qt++] = m.n;
        model_add(&m, j, 1);
        m.reserved = 1;
        m.resv_last = j;
        reservations++;
      }
    }
    assert_int_equal(b.total_retries + b.total_firsts, m.n);
  }
  /* Both verdicts were exercised many times. */
  assert_true(refusals > 1000);
  assert_true(admissions > 1000);
  assert_true(reservations > 1000);
  assert_true(promoted > 100);
  assert_true(kept > 100);
  free(fifo);
  free(m.slot_of);
  free(m.is_retry);
}


/* ---- the state as bytes ---------------------------------------------------- */

/* The fields every answer reads, the same in a and b. */
static void expect_same_state(const tk_retry_budget *a, const tk_retry_budget *b) {
  assert_int_equal(a->slot_ms, b->slot_ms);
  assert_int_equal(a->ratio_ppm, b->ratio_ppm);
  assert_int_equal(a->floor_ppm, b->floor_ppm);
  assert_int_equal(a->cur, b->cur);
  assert_int_equal(a->started, b->started);
  assert_int_equal(a->head, b->head);
  assert_int_equal(a->base, b->base);
  assert_memory_equal(a->sum, b->sum, sizeof a->sum);
  assert_int_equal(a->resv_started, b->resv_started);
  assert_int_equal(a->resv_last, b->resv_last);
  assert_int_equal(a->resv_base, b->resv_base);
  assert_int_equal(a->resv_total, b->resv_total);
  assert_memory_equal(a->resv, b->resv, sizeof a->resv);
  assert_int_equal(a->resv_live, b->resv_live);
  assert_int_equal(a->resv_epoch, b->resv_epoch);
  assert_int_equal(a->total_firsts, b->total_firsts);
  assert_int_equal(a->total_retries, b->total_retries);
  assert_int_equal(a->total_deferred, b->total_deferred);
  assert_int_equal(a->total_promoted, b->total_promoted);
}

/* A budget used through bytes, saved after each call and loaded before
 * the next (as two orchestrators take turns on the stored state), gives
 * every answer the one kept in memory gives, and ends in the same state. */
static void saved_state_answers_as_the_one_in_memory(void **state) {
  (void)state;
  tk_retry_budget_config c = {0.5, 2000, 2};
  tk_retry_budget mem, b;
  assert_int_equal(tk_retry_budget_init(&mem, &c, NULL), 0);
  unsigned char bytes[TK_RETRY_BUDGET_STATE_SIZE];
  size_t len = 0; /* nothing saved yet */
  tk_rand r;
  tk_rand_seed(&r, 77);
  int64_t now = 1000000, fifo[4096];
  size_t qh = 0, qt = 0;
  for (int op = 0; op < 4000; op++) {
    now += tk_rand_range(&r, 0, 40);
    assert_int_equal(tk_retry_budget_load(&b, &c, bytes, len), len > 0);
    int64_t kind = tk_rand_range(&r, 0, 9), at_mem = 0, at_b = 0;
    if (kind < 4) {
      tk_retry_budget_first(&mem, now);
      tk_retry_budget_first(&b, now);
    } else if (kind < 6) {
      assert_int_equal(tk_retry_budget_try(&mem, now, &at_mem), tk_retry_budget_try(&b, now, &at_b));
    } else if (kind < 9) {
      int ok = tk_retry_budget_reserve(&mem, now, &at_mem);
      assert_int_equal(tk_retry_budget_reserve(&b, now, &at_b), ok);
      if (!ok && qt < 4096) fifo[qt++] = at_mem;
    } else {
      while (qh < qt && fifo[qh] <= now) {
        tk_retry_budget_settle(&mem, now, fifo[qh]);
        tk_retry_budget_settle(&b, now, fifo[qh++]);
      }
      if (qh < qt) {
        int ok = tk_retry_budget_promote(&mem, now, fifo[qh]);
        assert_int_equal(tk_retry_budget_promote(&b, now, fifo[qh]), ok);
        qh += ok;
      }
    }
    assert_int_equal(at_b, at_mem);
    tk_retry_budget_save(&b, bytes);
    len = sizeof bytes;
  }
  assert_true(mem.total_deferred > 100 && mem.total_promoted > 10);
  assert_int_equal(tk_retry_budget_load(&b, &c, bytes, len), 1);
  expect_same_state(&b, &mem);
}

/* What is not a saved state of this window starts empty: nothing saved,
 * another size, another layout's version, bytes no save wrote, another
 * window. Another ratio or floor keeps the counts and takes the new ones. */
static void load_starts_empty_unless_it_can_read(void **state) {
  (void)state;
  tk_retry_budget_config c = {1, 1000, 3}, other_window = {1, 2000, 3},
                         other_ratio = {0.5, 1000, 5};
  tk_retry_budget b = budget(1, 1000, 3), fresh = budget(1, 1000, 3), got;
  tk_retry_budget_first(&b, 5000);
  EXPECT_RESERVE(&b, 5000, 1, 5000);
  unsigned char bytes[TK_RETRY_BUDGET_STATE_SIZE + 1];
  tk_retry_budget_save(&b, bytes);
  assert_int_equal(tk_retry_budget_load(&got, &c, bytes, TK_RETRY_BUDGET_STATE_SIZE), 1);
  expect_same_state(&got, &b);
  assert_int_equal(tk_retry_budget_load(&got, &c, bytes, 0), 0);
  expect_same_state(&got, &fresh);
  assert_int_equal(tk_retry_budget_load(&got, &c, bytes, TK_RETRY_BUDGET_STATE_SIZE + 1), 0);
  assert_int_equal(tk_retry_budget_load(&got, &other_window, bytes, TK_RETRY_BUDGET_STATE_SIZE),
                   0);
  tk_retry_budget fresh2 = budget(1, 2000, 3);
  expect_same_state(&got, &fresh2);
  /* The head's position (the 7th word after the version) out of the ring. */
  unsigned char bad[TK_RETRY_BUDGET_STATE_SIZE];
  memcpy(bad, bytes, sizeof bad);
  bad[8 * 12] = 200;
  assert_int_equal(tk_retry_budget_load(&got, &c, bad, sizeof bad), 0);
  expect_same_state(&got, &fresh);
  memcpy(bad, bytes, sizeof bad);
  bad[0] = 9; /* another version */
  assert_int_equal(tk_retry_budget_load(&got, &c, bad, sizeof bad), 0);
  assert_int_equal(tk_retry_budget_load(&got, &other_ratio, bytes, TK_RETRY_BUDGET_STATE_SIZE),
                   1);
  assert_int_equal(got.ratio_ppm, 500000);
  assert_int_equal(got.floor_ppm, 5000000);
  assert_int_equal(got.total_firsts, 1);
  assert_int_equal(got.total_retries, 1);
}

/* Reservations nobody settles (an orchestrator that stopped) are dropped
 * from the books once the latest has left the window: a new epoch, and
 * every answer as if they had been settled. */
static void books_start_over_once_the_latest_left_the_window(void **state) {
  (void)state;
  tk_retry_budget kept = budget(0, 1000, 1), settled = budget(0, 1000, 1);
  tk_retry_budget *both[] = {&kept, &settled};
  for (int i = 0; i < 2; i++) {
    EXPECT_RESERVE(both[i], 0, 1, 0);
    EXPECT_RESERVE(both[i], 0, 0, 1000);
    EXPECT_RESERVE(both[i], 0, 0, 2000);
    assert_int_equal(both[i]->resv_epoch, 1);
  }
  tk_retry_budget_settle(&settled, 2000, 1000);
  tk_retry_budget_settle(&settled, 2000, 2000);
  assert_int_equal(settled.resv_started, 0);
  /* At 2990 the one at 2000 is still in the window: kept's books stay. */
  assert_int_equal(tk_retry_budget_available(&kept, 2990), 0);
  assert_int_equal(kept.resv_live, 2);
  assert_int_equal(tk_retry_budget_available(&kept, 3000), 1);
  assert_int_equal(kept.resv_started, 0);
  assert_int_equal(kept.resv_live, 0);
  for (int i = 0; i < 2; i++) {
    EXPECT_RESERVE(both[i], 3000, 1, 3000);
    EXPECT_RESERVE(both[i], 3000, 0, 4000);
    assert_int_equal(both[i]->resv_epoch, 2);
  }
  /* The same answers from then on (a caller settles no reservation of
   * the old epoch: budget.h). */
  for (int i = 0; i < 2; i++) {
    EXPECT_TRY(both[i], 3500, 0, 5000);
    EXPECT_RESERVE(both[i], 3600, 0, 5000);
    tk_retry_budget_settle(both[i], 4000, 4000);
    assert_int_equal(tk_retry_budget_promote(both[i], 4100, 5000), 0);
    assert_int_equal(tk_retry_budget_promote(both[i], 5000, 5000), 0);
  }
  assert_int_equal(kept.resv_live, settled.resv_live);
  /* (The balances themselves differ by what settled subtracted long ago:
   * only their differences are answers.) */
  for (int64_t t = 5000; t <= 7000; t += 250)
    assert_int_equal(tk_retry_budget_available(&kept, t), tk_retry_budget_available(&settled, t));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(admits_ratio_of_firsts_plus_floor),
      cmocka_unit_test(allowed_at_waits_for_retries_to_leave),
      cmocka_unit_test(leaving_firsts_can_delay_a_retry),
      cmocka_unit_test(first_attempts_are_never_refused),
      cmocka_unit_test(floor_alone),
      cmocka_unit_test(window_slides_by_slots),
      cmocka_unit_test(clock_stepping_back),
      cmocka_unit_test(drifted_balances_are_shifted_back),
      cmocka_unit_test(reservations_spread_deferred_retries),
      cmocka_unit_test(reservations_and_first_attempts),
      cmocka_unit_test(bad_configs_are_named),
      cmocka_unit_test(saved_state_answers_as_the_one_in_memory),
      cmocka_unit_test(load_starts_empty_unless_it_can_read),
      cmocka_unit_test(books_start_over_once_the_latest_left_the_window),
      cmocka_unit_test(matches_a_model_that_keeps_every_event),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
