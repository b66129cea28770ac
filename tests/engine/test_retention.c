/* Delayed starts and background retention (DESIGN §16) in the engine, on
 * the manual clock, on SQLite and (with TK_TEST_PG_URL) on PostgreSQL: a
 * delayed task's start is the engine's next wake-up and its step runs then
 * and not before; [retention] prunes finished tasks in batches, one batch
 * per pass, and never a task that is not finished. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "store/store.h"

#define MINUTE INT64_C(60000)
#define HOUR (60 * MINUTE)

static const char *const retention_sets[] = {
    "retention.finished_after=\"1h\"", "retention.batch=3", "retention.interval=\"1m\"",
    "engine.max_attempts=1000", "backoff.jitter=\"none\"", "backoff.max_delay=\"2m\"", NULL};

/* The backend of a test: "sqlite", or "postgres" on a fresh database of
 * TK_TEST_PG_URL's server (the test is skipped without one). */
typedef struct param {
  const char *backend;
} param;

static efx *fixture(void **state, const char *const *sets) {
  const param *p = *state;
  efx *f = calloc(1, sizeof *f);
  efx_open(f, sets);
  *state = f;
  if (strcmp(p->backend, "postgres") == 0) efx_use_postgres(f, getenv("TK_TEST_PG_URL"), "tk_retention");
  efx_engine(f, "orch-1");
  return f;
}

static int teardown(void **state) {
  efx_close(*state);
  free(*state);
  return 0;
}

/* Tasks of the store in `state` (the status report). */
static int64_t tasks_in(efx *f, const char *state) {
  tk__status_report st;
  tk_err err;
  if (f->store->ops->status(f->store, f->clock.now_ms, &st, &err) != 0) fail_msg("%s", err.msg);
  for (int i = 0; i < st.ntasks; i++)
    if (strcmp(st.tasks[i].state, state) == 0) return st.tasks[i].n;
  return 0;
}

static int64_t submit_at(efx *f, const char *name, int64_t start_at) {
  tk_submit_request req = {.template_name = name, .start_at = start_at};
  int64_t id;
  int existed;
  tk_err err;
  if (tk_task_submit(f->store, f->cfg, &req, f->clock.now_ms, &id, &existed, &err) != 0)
    fail_msg("submit: %s", err.msg);
  return id;
}

/* A delayed task: the engine's next wake-up is its start, nothing runs a
 * millisecond before, and it runs at its start; why says until when. */
static void delayed_start_runs_at_its_time(void **state) {
  efx *f = fixture(state, NULL);
  efx_one_step(f, "later", "{ kind = \"builtin\", name = \"noop\" }", "{}");
  int64_t id = submit_at(f, "later", EFX_T0 + 3 * HOUR);
  assert_int_equal(efx_tick(f), EFX_T0 + 3 * HOUR);
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")), "scheduled");
  json_t *why = json_object_get(efx_step(t, "s"), "why");
  assert_string_equal(json_string_value(json_object_get(why, "reason")), "scheduled");
  assert_int_equal(json_integer_value(json_object_get(why, "until")), EFX_T0 + 3 * HOUR);
  assert_string_equal(json_string_value(json_object_get(why, "detail")),
                      "waiting until 2026-01-01T03:00:00Z (in 3h)");
  assert_int_equal(json_integer_value(json_object_get(efx_step(t, "s"), "parents_remaining")), 0);
  json_decref(t);
  f->clock.now_ms = EFX_T0 + 3 * HOUR - 1;
  assert_int_equal(efx_tick(f), EFX_T0 + 3 * HOUR);
  assert_int_equal(efx_events(f, "step.claimed", NULL), 0);
  efx_expect(f, id, "pending", "s", "pending", NULL);
  f->clock.now_ms = EFX_T0 + 3 * HOUR;
  efx_tick(f);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  assert_int_equal(efx_events(f, "step.claimed", NULL), 1);
  /* It started on time: the claim's lateness is 0. */
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), "step.claimed") == 0)
      assert_int_equal(json_integer_value(json_object_get(e, "at")), EFX_T0 + 3 * HOUR);
  }
}

/* [retention] prunes a batch per pass once tasks are old enough, and
 * leaves the unfinished ones alone. */
static void background_pruning_in_batches(void **state) {
  efx *f = fixture(state, retention_sets);
  efx_one_step(f, "quick", "{ kind = \"builtin\", name = \"noop\" }", "{}");
  efx_one_step(f, "stuck", "{ kind = \"builtin\", name = \"fail\" }", "{}");
  for (int i = 0; i < 10; i++) efx_submit(f, "quick", NULL);
  int64_t stuck = efx_submit(f, "stuck", NULL);
  int64_t delayed = submit_at(f, "quick", EFX_T0 + 5 * HOUR);
  /* Everything runs; nothing is old enough: the next look is a minute on. */
  int64_t due = efx_tick(f);
  assert_int_equal(tasks_in(f, "complete"), 10);
  assert_true(due <= EFX_T0 + MINUTE);
  /* An hour and a minute on: a batch of 3 per pass, then the interval. */
  f->clock.now_ms = EFX_T0 + HOUR + MINUTE;
  int64_t left[] = {7, 4, 1, 0};
  for (int i = 0; i < 4; i++) {
    due = efx_tick(f);
    assert_int_equal(tasks_in(f, "complete"), left[i]);
    if (i < 3) assert_int_equal(due, f->clock.now_ms); /* a full batch: more to do */
  }
  assert_true(due > f->clock.now_ms);
  assert_true(due <= f->clock.now_ms + MINUTE);
  /* Unfinished tasks are all still there. */
  json_t *t = efx_task(f, stuck);
  assert_string_not_equal(json_string_value(json_object_get(t, "state")), "complete");
  assert_true(json_integer_value(json_object_get(efx_step(t, "s"), "attempts")) >= 1);
  json_decref(t);
  efx_expect(f, delayed, "pending", "s", "pending", NULL);
  /* The log says what went. */
  assert_int_equal(efx_logs(f, "retention: removed 3 finished tasks"), 3);
}

/* Without [retention] nothing is pruned and it costs the engine no wake-up. */
static void retention_off_by_default(void **state) {
  efx *f = fixture(state, NULL);
  efx_one_step(f, "quick", "{ kind = \"builtin\", name = \"noop\" }", "{}");
  efx_submit(f, "quick", NULL);
  efx_drive(f, 10); /* runs it, then nothing is scheduled */
  f->clock.now_ms = EFX_T0 + 1000 * HOUR;
  assert_int_equal(efx_tick(f), INT64_MAX);
  assert_int_equal(tasks_in(f, "complete"), 1);
}

int main(void) {
  static param sqlite = {"sqlite"}, postgres = {"postgres"};
#define CASE(b, fn) {#b ": " #fn, fn, NULL, teardown, &b}
  const struct CMUnitTest tests[] = {
      CASE(sqlite, delayed_start_runs_at_its_time), CASE(sqlite, background_pruning_in_batches),
      CASE(sqlite, retention_off_by_default), CASE(postgres, delayed_start_runs_at_its_time),
      CASE(postgres, background_pruning_in_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
