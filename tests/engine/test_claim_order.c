/* Claim order (DESIGN §4, migration 0005): a claim takes the retries that
 * are due first, earliest run_at first, then ready pending steps of the
 * oldest task first; fresh_limit bounds only the latter, retry_ahead_ms
 * lets an orchestrator claim a retry shortly before its run_at, and the
 * claim reports the next retry's run_at. With workers on the system clock,
 * a retry claimed ahead is held until its run_at: no attempt ever starts
 * before its run_at; and slow handlers are not claimed past the workers' queue. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"
#include "store/store.h"

static const char *const sets[] = {"backoff.jitter=none",
                                   "backoff.profiles.x.schedule=[\"1s\"]", NULL};

#define FAIL_ONCE "{ kind = \"builtin\", name = \"fail\", times = 1 }"
#define RETRY_X "{ max_attempts = 3, backoff = \"x\" }"

static int setup(void **state) {
  *state = efx_new(sets, "orch-1");
  return 0;
}

/* A claim alone (record with no outcomes) at `now`. */
static tk__claim_request claim(efx *f, int64_t now, int limit, int fresh_limit, int64_t ahead,
                               tk__claimed *out) {
  tk__claim_request r = {.owner = "orch-2", .lease_ms = 60000, .limit = limit,
                         .fresh_limit = fresh_limit, .retry_ahead_ms = ahead, .out = out};
  tk_err err;
  int64_t saved = f->clock.now_ms;
  f->clock.now_ms = now; /* the store's clock */
  int rc = f->store->ops->record(f->store, NULL, 0, NULL, NULL, &r, &err);
  f->clock.now_ms = saved;
  if (rc != 0) fail_msg("claim at %lld: %s", (long long)now, err.msg);
  return r;
}

/* Tasks of template "flaky" (one step failing once, retried after 1 s)
 * run their first attempts at EFX_T0; then `fresh` noop tasks are
 * submitted at EFX_T0 + 500. */
static void retries_and_fresh_work(efx *f, int flaky, int fresh) {
  efx_one_step(f, "flaky", FAIL_ONCE, RETRY_X);
  efx_one_step(f, "plain", "{ kind = \"builtin\", name = \"noop\" }", RETRY_X);
  for (int i = 0; i < flaky; i++) efx_submit(f, "flaky", NULL);
  efx_tick(f);
  assert_int_equal(efx_events(f, "step.retry_scheduled", NULL), flaky);
  f->clock.now_ms = EFX_T0 + 500;
  for (int i = 0; i < fresh; i++) efx_submit(f, "plain", NULL);
}

static void due_retries_go_before_older_fresh_work(void **state) {
  efx *f = *state;
  retries_and_fresh_work(f, 2, 5);
  tk__claimed c[8];
  /* Before the retries are due: fresh work only, and the retries' time. */
  tk__claim_request r = claim(f, EFX_T0 + 999, 1, 1, 0, c);
  assert_int_equal(r.n, 1);
  assert_string_equal(c[0].prev_state, "pending");
  assert_int_equal(r.next_retry_at, EFX_T0 + 1000);
  /* Due: both retries come first although the fresh steps became ready
   * at EFX_T0 + 500, before them. */
  r = claim(f, EFX_T0 + 1000, 3, 3, 0, c);
  assert_int_equal(r.n, 3);
  assert_string_equal(c[0].prev_state, "waiting_for_retry");
  assert_string_equal(c[1].prev_state, "waiting_for_retry");
  assert_string_equal(c[2].prev_state, "pending");
  assert_true(c[0].task_id < c[1].task_id); /* same run_at: in step order */
  assert_int_equal(r.next_retry_at, INT64_MAX);
}

static void fresh_limit_bounds_fresh_work_but_not_retries(void **state) {
  efx *f = *state;
  retries_and_fresh_work(f, 3, 5);
  tk__claimed c[8];
  tk__claim_request r = claim(f, EFX_T0 + 1000, 8, 1, 0, c);
  assert_int_equal(r.n, 4); /* the 3 retries and 1 fresh step */
  for (int i = 0; i < 3; i++) assert_string_equal(c[i].prev_state, "waiting_for_retry");
  assert_string_equal(c[3].prev_state, "pending");
  /* A zero fresh limit claims no fresh work at all. */
  r = claim(f, EFX_T0 + 1000, 8, 0, 0, c);
  assert_int_equal(r.n, 0);
}

static void retry_ahead_claims_a_retry_before_its_run_at(void **state) {
  efx *f = *state;
  retries_and_fresh_work(f, 1, 0);
  tk__claimed c[2];
  tk__claim_request r = claim(f, EFX_T0 + 899, 2, 2, 100, c);
  assert_int_equal(r.n, 0); /* 101 ms early: outside the window */
  r = claim(f, EFX_T0 + 900, 2, 2, 100, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].run_at, EFX_T0 + 1000); /* the engine holds it until then */
  /* The attempt starts when the engine lets it go, at its run_at, not at
   * the claim's time: a history never shows a retry started early. */
  efx_sql_expect(f->db, "2|1000", "SELECT attempt, started_at - %lld FROM attempts"
                 " ORDER BY id DESC LIMIT 1", (long long)EFX_T0);
}

/* A template of a chain a -> b. */
static void chain(efx *f) {
  efx_template(f, "name = \"chain\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
               EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP);
}

static void a_started_task_goes_on_before_a_newer_one_starts(void **state) {
  static const char *const one[] = {"engine.claim_batch=1", NULL};
  efx *f = *state = efx_new(one, "orch-1");
  chain(f);
  int64_t first = efx_submit(f, "chain", NULL);
  f->clock.now_ms = EFX_T0 + 1;
  int64_t second = efx_submit(f, "chain", NULL);
  /* Step b of the first task becomes ready at EFX_T0 + 2, after step a of
   * the second: it still goes first, as its task is older. */
  f->clock.now_ms = EFX_T0 + 2;
  efx_drive(f, 20);
  char want[128];
  snprintf(want, sizeof want, "%lld|a\n%lld|b\n%lld|a\n%lld|b", (long long)first,
           (long long)first, (long long)second, (long long)second);
  efx_sql_expect(f->db, want,
                 "SELECT s.task_id, s.name FROM attempts a JOIN steps s ON s.id = a.step_id"
                 " ORDER BY a.id");
}

/* When each flaky attempt's handler was called, read by the handler itself
 * from the engine's clock (the store's, which the engine was given): the
 * start times are measured outside the engine, not taken from its late_ms. */
#define NFLAKY 150

typedef struct starts {
  pthread_mutex_t mu;
  tk_clock clock;
  int n;
  struct start {
    int64_t task, at;
    int attempt;
  } at[2 * NFLAKY + 8];
} starts;

/* Handler "flaky": records its start, fails attempt 1, succeeds after. */
static void flaky_handler(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  starts *s = ud;
  int64_t now = tk_clock_now(&s->clock);
  pthread_mutex_lock(&s->mu);
  if (s->n < (int)(sizeof s->at / sizeof s->at[0]))
    s->at[s->n] = (struct start){call->task_id, now, call->attempt};
  s->n++;
  pthread_mutex_unlock(&s->mu);
  if (call->attempt == 1) {
    out->status = TK_HANDLER_RETRY;
    snprintf(out->error, sizeof out->error, "failing attempt 1 on purpose");
  }
}

/* One run of NFLAKY flaky tasks (a retry 30 ms after the first attempt)
 * among as many 1 ms fresh ones, on 2 workers and the system clock; fails
 * if a retry's handler was called before the run_at its first attempt's
 * failure stored. Returns how many retries were claimed ahead of their
 * run_at (their step.claimed events' negative late_ms), the case the hold
 * is for. */
static int run_retries_among_fresh_work(void) {
  static const char *const fast[] = {"backoff.jitter=none", "engine.claim_batch=16",
                                     "backoff.profiles.x.schedule=[\"30ms\"]", NULL};
  efx *f = efx_new(fast, "orch-1");
  efx_one_step(f, "flaky", "{ kind = \"function\", name = \"flaky\" }", RETRY_X);
  efx_one_step(f, "plain", "{ kind = \"builtin\", name = \"sleep\", duration = \"1ms\" }",
               RETRY_X);
  /* Fresh work keeps the orchestrator claiming while the retries come
   * due, which is when it claims them ahead. */
  for (int i = 0; i < NFLAKY; i++) {
    efx_submit(f, "flaky", NULL);
    efx_submit(f, "plain", NULL);
  }
  starts *s = calloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  tk_engine *e = efx_workers_engine(f, "orch-1", 2, efx_on_event, f);
  s->clock = tk_store_clock(f->store);
  tk_err err;
  if (tk_engine_register(e, "flaky", flaky_handler, s, &err) != 0) fail_msg("%s", err.msg);
  int rc = tk_engine_run(e, 1, &err);
  efx_workers_end(f, e);
  if (rc != 0) fail_msg("run: %s", err.msg);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM steps WHERE state = 'complete'"),
                   2 * NFLAKY);
  assert_int_equal(s->n, 2 * NFLAKY);
  int retries = 0, early = 0;
  int64_t worst = INT64_MAX;
  for (int i = 0; i < s->n; i++) {
    if (s->at[i].attempt != 2) continue;
    retries++;
    int64_t run_at = efx_sql_int(f->db, "SELECT a.next_run_at FROM attempts a JOIN steps st"
                                        " ON st.id = a.step_id WHERE st.task_id = %lld"
                                        " AND a.attempt = 1", (long long)s->at[i].task);
    if (run_at <= 0) fail_msg("task %lld: no run_at stored for its retry",
                              (long long)s->at[i].task);
    int64_t late = s->at[i].at - run_at;
    if (late < worst) worst = late;
    if (late < 0) {
      print_error("task %lld: the retry's handler was called at %lld, %lld ms before its"
                  " run_at %lld\n", (long long)s->at[i].task, (long long)s->at[i].at,
                  (long long)-late, (long long)run_at);
      early++;
    }
  }
  assert_int_equal(retries, NFLAKY);
  if (early > 0) fail_msg("%d of %d retries started before their run_at (earliest: %lld ms)",
                          early, retries, (long long)-worst);
  int held = 0;
  size_t i;
  json_t *ev;
  json_array_foreach(f->events, i, ev) {
    if (strcmp(json_string_value(json_object_get(ev, "type")), "step.claimed") == 0 &&
        json_integer_value(json_object_get(ev, "attempt")) == 2 &&
        json_integer_value(json_object_get(ev, "late_ms")) < 0)
      held++;
  }
  pthread_mutex_destroy(&s->mu);
  free(s);
  efx_close(f);
  free(f);
  return held;
}

/* Whether a retry is claimed ahead depends on when passes fall on a busy
 * machine: runs are repeated until one claimed a retry ahead (without one
 * the check proves nothing), each run checking every start. */
static void no_attempt_starts_before_its_run_at(void **state) {
  (void)state;
  enum { ROUNDS = 20 };
  for (int round = 1; round <= ROUNDS; round++)
    if (run_retries_among_fresh_work() > 0) return;
  fail_msg("no retry was claimed ahead of its run_at in %d runs: the hold went untested", ROUNDS);
}

/* With slow handlers an orchestrator claims no more than its workers'
 * queue holds (max(2 x workers, claim_batch)): steps it could not start
 * soon stay ready for other orchestrators. Outstanding attempts are counted
 * from the events: claimed, and not yet recorded. */
static void slow_handlers_are_not_claimed_past_the_queue(void **state) {
  static const char *const small[] = {"engine.claim_batch=4", NULL};
  efx *f = *state = efx_new(small, "orch-1");
  efx_one_step(f, "slow", "{ kind = \"builtin\", name = \"sleep\", duration = \"20ms\" }",
               "{ max_attempts = 1 }");
  for (int i = 0; i < 16; i++) efx_submit(f, "slow", NULL);
  efx_run_workers(f, "orch-1", 2);
  size_t i;
  json_t *ev;
  int outstanding = 0, most = 0;
  json_array_foreach(f->events, i, ev) {
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (strcmp(type, "step.claimed") == 0 && ++outstanding > most) most = outstanding;
    if (strcmp(type, "step.completed") == 0) outstanding--;
  }
  assert_int_equal(outstanding, 0);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM steps WHERE state = 'complete'"), 16);
  if (most > 4) fail_msg("%d attempts outstanding at once; the queue holds 4", most);
  assert_int_equal(most, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(due_retries_go_before_older_fresh_work, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(fresh_limit_bounds_fresh_work_but_not_retries, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(retry_ahead_claims_a_retry_before_its_run_at, setup,
                                      efx_teardown),
      cmocka_unit_test_teardown(a_started_task_goes_on_before_a_newer_one_starts, efx_teardown),
      cmocka_unit_test(no_attempt_starts_before_its_run_at),
      cmocka_unit_test_teardown(slow_handlers_are_not_claimed_past_the_queue, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
