/* Retry timing through the engine with the injected clock (DESIGN §4-6):
 * a retry due at T runs at T (not before, not at a later poll), delays
 * follow the step's profile (schedule, geometric growth, cap, server hint,
 * jitter within its bounds), every delay is stored with its attempt, and
 * a seed reproduces a jittered schedule exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"

/* A fixture with `sets` in *state, running one task of a one-step template
 * (see efx_one_step) until nothing is scheduled; the step must end in
 * `final`. Returns the task id. */
static int64_t run_one(void **state, const char *const *sets, const char *handler,
                       const char *retry, const char *final) {
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "one", handler, retry);
  int64_t id = efx_submit(f, "one", NULL);
  efx_drive(f, 20);
  efx_expect(f, id, strcmp(final, "error") == 0 ? "error" : "complete", "s", final, NULL);
  return id;
}

static int64_t claims(efx *f) { return tk_engine_stats_get(f->engine).claimed; }

static void schedule_runs_at_exactly_t0_plus_1s_plus_3s(void **state) {
  static const char *const sets[] = {"backoff.profiles.x.schedule=[\"1s\", \"2s\"]",
                                     "backoff.jitter=none", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "twice", "{ kind = \"builtin\", name = \"fail\", times = 2 }",
               "{ max_attempts = 3, backoff = \"x\" }");
  int64_t id = efx_submit(f, "twice", NULL);
  efx_tick(f);
  assert_int_equal(claims(f), 1);
  assert_int_equal(efx_tick(f), EFX_T0 + 1000);
  /* One millisecond early: nothing runs, and the due time does not move. */
  f->clock.now_ms = EFX_T0 + 999;
  assert_int_equal(efx_tick(f), EFX_T0 + 1000);
  assert_int_equal(claims(f), 1);
  f->clock.now_ms = EFX_T0 + 1000;
  efx_tick(f);
  assert_int_equal(claims(f), 2);
  assert_int_equal(efx_tick(f), EFX_T0 + 3000);
  f->clock.now_ms = EFX_T0 + 2999;
  efx_tick(f);
  assert_int_equal(claims(f), 2);
  f->clock.now_ms = EFX_T0 + 3000;
  efx_tick(f);
  assert_int_equal(claims(f), 3);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  assert_int_equal(efx_tick(f), INT64_MAX);

  efx_sql_expect(f->db,
                 "1|failure|0|1000|computed|1000\n"
                 "2|failure|1000|2000|computed|3000\n"
                 "3|success|3000|NULL|NULL|NULL",
                 "SELECT attempt, outcome, started_at - %1$lld, delay_ms, delay_source,"
                 " next_run_at - %1$lld FROM attempts ORDER BY id",
                 (long long)EFX_T0);
  /* Each claim started exactly at its run_at, and the events say so. */
  size_t i;
  json_t *e;
  int64_t delays[2], k = 0;
  json_array_foreach(f->events, i, e) {
    const char *type = json_string_value(json_object_get(e, "type"));
    if (strcmp(type, "step.claimed") == 0)
      assert_int_equal(json_integer_value(json_object_get(e, "late_ms")), 0);
    if (strcmp(type, "step.retry_scheduled") == 0) {
      assert_string_equal(json_string_value(json_object_get(e, "source")), "computed");
      if (k == 2) fail_msg("a third retry was scheduled: %s", json_dumps(e, 0));
      delays[k++] = json_integer_value(json_object_get(e, "delay_ms"));
    }
  }
  assert_int_equal(k, 2);
  assert_int_equal(delays[0], 1000);
  assert_int_equal(delays[1], 2000);
}

/* A handler that takes 400 ms of the manual clock, then fails. */
static void slow_failure(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  efx *f = ud;
  f->clock.now_ms += 400;
  out->status = TK_HANDLER_RETRY;
  snprintf(out->error, sizeof out->error, "slow and failed");
}

/* Two attempts run in one round and are recorded together after both: the
 * first failed 400 ms before the record, and its delay counts from when it
 * failed, not from the record. */
static void a_delay_counts_from_the_end_of_the_failed_attempt(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=1s", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_template(f, "name = \"two\"\nversion = \"1\"\n[retry]\nmax_attempts = 2\n"
                  EFX_STEP("a") "handler = { kind = \"function\", name = \"slow\" }\n"
                  EFX_STEP("b") "handler = { kind = \"function\", name = \"slow\" }\n");
  tk_err err;
  if (tk_engine_register(f->engine, "slow", slow_failure, f, &err) != 0) fail_msg("%s", err.msg);
  efx_submit(f, "two", NULL);
  efx_tick(f);
  efx_sql_expect(f->db, "a|0|400|1000|1400\nb|0|800|1000|1800",
                 "SELECT s.name, a.started_at - %1$lld, a.finished_at - %1$lld, a.delay_ms,"
                 " a.next_run_at - %1$lld FROM attempts a JOIN steps s ON s.id = a.step_id"
                 " ORDER BY a.id",
                 (long long)EFX_T0);
  /* The step's run_at is the attempt's next_run_at, and the engine wakes for it. */
  efx_sql_expect(f->db, "a|1400\nb|1800",
                 "SELECT name, run_at - %lld FROM steps ORDER BY id", (long long)EFX_T0);
  assert_int_equal(efx_tick(f), EFX_T0 + 1400);
}

static void past_the_schedule_delays_grow_geometrically_to_the_cap(void **state) {
  static const char *const sets[] = {"backoff.profiles.x.schedule=[\"1s\", \"2s\"]",
                                     "backoff.profiles.x.multiplier=3",
                                     "backoff.profiles.x.max_delay=20s", "backoff.jitter=none",
                                     NULL};
  run_one(state, sets, "{ kind = \"builtin\", name = \"fail\" }",
          "{ max_attempts = 6, backoff = \"x\" }", "error");
  efx *f = *state;
  /* 1s, 2s from the schedule, then 2s * 3 = 6s, 18s, then the 20s cap. */
  efx_sql_expect(f->db, "1000,2000,6000,18000,20000",
                 "SELECT group_concat(delay_ms, ',') FROM (SELECT delay_ms FROM attempts"
                 " ORDER BY id)");
  assert_int_equal(efx_sql_int(f->db, "SELECT MAX(started_at) FROM attempts") - EFX_T0,
                   1000 + 2000 + 6000 + 18000 + 20000);
}

static void server_hint_wins_unjittered_and_capped(void **state) {
  static const char *const sets[] = {"backoff.jitter=full", "backoff.max_server_delay=5s", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "hinted",
               "{ kind = \"builtin\", name = \"fail\", times = 1, retry_after = \"3s\" }",
               "{ max_attempts = 3 }");
  efx_one_step(f, "greedy",
               "{ kind = \"builtin\", name = \"fail\", times = 1, retry_after = \"1h\" }",
               "{ max_attempts = 3 }");
  int64_t a = efx_submit(f, "hinted", NULL);
  int64_t b = efx_submit(f, "greedy", NULL);
  efx_drive(f, 10);
  efx_expect(f, a, "complete", NULL);
  efx_expect(f, b, "complete", NULL);
  char want[128];
  snprintf(want, sizeof want, "%lld|3000|server|3000\n%lld|5000|server|5000", (long long)a,
           (long long)b);
  efx_sql_expect(f->db, want,
                 "SELECT s.task_id, a.delay_ms, a.delay_source, a.next_run_at - %lld"
                 " FROM attempts a JOIN steps s ON s.id = a.step_id"
                 " WHERE a.outcome = 'failure' ORDER BY s.task_id",
                 (long long)EFX_T0);
}

static void a_timeout_is_a_retryable_failure_on_the_injected_clock(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=2s", NULL};
  run_one(state, sets,
          "{ kind = \"builtin\", name = \"sleep\", duration = \"1m\", timeout = \"5s\" }",
          "{ max_attempts = 2 }", "error");
  efx *f = *state;
  /* The handler slept on the manual clock until its deadline, no longer. */
  efx_sql_expect(f->db, "timeout|0|5000|2000\ntimeout|7000|12000|NULL",
                 "SELECT outcome, started_at - %1$lld, finished_at - %1$lld, delay_ms"
                 " FROM attempts ORDER BY id",
                 (long long)EFX_T0);
  assert_int_equal(f->clock.sleeps, 2);
}

/* A profile under test: its jitter, and the bounds of the n-th delay
 * (DESIGN §6) for base 1s, multiplier 2, max 8s; `prev` is the step's
 * previous delay, for decorrelated jitter. */
typedef struct jitter_case {
  const char *jitter;
  void (*bounds)(int n, int64_t prev, int64_t *lo, int64_t *hi);
} jitter_case;

static int64_t capped(int n) {
  int64_t raw = 1000;
  for (int i = 1; i < n; i++) raw *= 2;
  return raw < 8000 ? raw : 8000;
}

static void proportional(int n, int64_t prev, int64_t *lo, int64_t *hi) {
  (void)prev;
  *lo = capped(n) / 2;
  *hi = capped(n) * 3 / 2 < 8000 ? capped(n) * 3 / 2 : 8000;
}
static void full(int n, int64_t prev, int64_t *lo, int64_t *hi) {
  (void)prev;
  *lo = 0;
  *hi = capped(n);
}
static void equal(int n, int64_t prev, int64_t *lo, int64_t *hi) {
  (void)prev;
  *lo = capped(n) / 2;
  *hi = capped(n);
}
static void decorrelated(int n, int64_t prev, int64_t *lo, int64_t *hi) {
  (void)n;
  int64_t from = prev > 0 ? prev : 1000;
  *lo = 1000;
  *hi = 3 * from < 8000 ? 3 * from : 8000;
}

#define JITTER_TASKS 6
#define JITTER_FAILURES 7

static void run_jitter_case(const jitter_case *jc) {
  char mode[64];
  snprintf(mode, sizeof mode, "backoff.profiles.j.jitter=%s", jc->jitter);
  const char *const sets[] = {"backoff.profiles.j.base=1s", "backoff.profiles.j.multiplier=2",
                              "backoff.profiles.j.max_delay=8s",
                              "backoff.profiles.j.jitter_fraction=0.5", mode, NULL};
  efx f;
  efx_open(&f, sets);
  efx_engine(&f, "orch-1");
  efx_one_step(&f, "jittery", "{ kind = \"builtin\", name = \"fail\" }",
               "{ max_attempts = 8, backoff = \"j\" }");
  for (int t = 0; t < JITTER_TASKS; t++) efx_submit(&f, "jittery", NULL);
  efx_drive(&f, 200);
  int distinct = 0;
  for (int t = 0; t < JITTER_TASKS; t++) {
    char *rows = efx_sql_text(f.db, "SELECT a.attempt, a.started_at, a.delay_ms, a.finished_at,"
                                    " a.next_run_at FROM attempts a JOIN steps s ON"
                                    " s.id = a.step_id WHERE s.task_id = %d ORDER BY a.attempt",
                              t + 1);
    int64_t prev = 0, prev_next = -1;
    int n = 0;
    for (char *line = strtok(rows, "\n"); line; line = strtok(NULL, "\n")) {
      int attempt;
      long long delay, finished, next, started;
      int got = sscanf(line, "%d|%lld|%lld|%lld|%lld", &attempt, &started, &delay, &finished, &next);
      if (got != 5) {
        /* The last attempt, exhausted: no delay. */
        assert_int_equal(got, 2);
        assert_int_equal(attempt, JITTER_FAILURES + 1);
        assert_int_equal(started, prev_next);
        continue;
      }
      n++;
      assert_int_equal(attempt, n);
      int64_t lo, hi;
      jc->bounds(n, prev, &lo, &hi);
      if (delay < lo || delay > hi)
        fail_msg("%s jitter: delay %d of task %d is %lld ms, outside [%lld, %lld]", jc->jitter, n,
                 t + 1, delay, (long long)lo, (long long)hi);
      assert_int_equal(next, finished + delay);
      if (prev_next >= 0) assert_int_equal(started, prev_next); /* ran when due */
      prev = delay;
      prev_next = next;
    }
    assert_int_equal(n, JITTER_FAILURES);
    free(rows);
  }
  /* The delays do vary: a jitter that silently did nothing fails here. */
  distinct = (int)efx_sql_int(f.db, "SELECT COUNT(DISTINCT delay_ms) FROM attempts WHERE attempt = 2");
  if (distinct < 2) fail_msg("%s jitter: every second delay was the same", jc->jitter);
  efx_close(&f);
}

static void jittered_delays_stay_within_their_bounds(void **state) {
  (void)state;
  static const jitter_case cases[] = {{"proportional", proportional}, {"full", full},
                                      {"equal", equal}, {"decorrelated", decorrelated}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_jitter_case(&cases[i]);
}

/* The delays of a jittered run with the given seed, as text. */
static char *jittered_run(uint64_t seed) {
  static const char *const sets[] = {"backoff.jitter=full", NULL};
  efx f;
  efx_open(&f, sets);
  f.seed = seed;
  efx_engine(&f, "orch-1");
  efx_one_step(&f, "seeded", "{ kind = \"builtin\", name = \"fail\" }", "{ max_attempts = 6 }");
  efx_submit(&f, "seeded", NULL);
  efx_submit(&f, "seeded", NULL);
  efx_drive(&f, 50);
  char *rows = efx_sql_text(f.db, "SELECT step_id, attempt, delay_ms, started_at FROM attempts"
                                  " ORDER BY id");
  efx_close(&f);
  return rows;
}

static void a_seed_reproduces_the_schedule(void **state) {
  (void)state;
  char *a = jittered_run(7), *b = jittered_run(7), *c = jittered_run(8);
  assert_string_equal(a, b);
  assert_string_not_equal(a, c);
  free(a);
  free(b);
  free(c);
}

/* Tests that open their fixture in *state; it is closed after each. */
#define TEST(fn) cmocka_unit_test_teardown(fn, efx_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(schedule_runs_at_exactly_t0_plus_1s_plus_3s),
      TEST(a_delay_counts_from_the_end_of_the_failed_attempt),
      TEST(past_the_schedule_delays_grow_geometrically_to_the_cap),
      TEST(server_hint_wins_unjittered_and_capped),
      TEST(a_timeout_is_a_retryable_failure_on_the_injected_clock),
      cmocka_unit_test(jittered_delays_stay_within_their_bounds),
      cmocka_unit_test(a_seed_reproduces_the_schedule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
