/* Schedules through the engine on a real SQLite store and the injected
 * clock (DESIGN §16, include/tasker/schedule.h): the engine's next wake-up
 * is the next slot; after a gap with nothing running, a skip schedule
 * fires none of the missed slots (but a slot reached within the grace
 * minute still fires) and a catch_up one fires each, oldest first, at
 * most the latest 100; each slot's task.created names the orchestrator
 * that fired it; a day's schedule in Europe/Berlin fires once on
 * both daylight-saving change days, at the instants cron.h documents, and
 * an hourly one fires through both repeated hours; a zone's file is read
 * once per engine, not on every pass; configured schedules
 * are written into the store by the first pass; a slot whose task cannot
 * be written moves nothing and fires at the next pass; an engine asleep on
 * the system clock notices a schedule another connection adds.
 *
 * Exactly-once with several orchestrators, on SQLite and PostgreSQL, is in
 * tests/store/test_conformance.c ("schedules: ..."). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <tasker/schedule.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"

#define MIN(m) ((int64_t)(m) * 60000)
#define HOUR(h) ((int64_t)(h) * 3600000)

/* EFX_T0 is 2026-01-01T00:00:00Z. */

static void add(efx *f, const char *name, const char *cron, const char *zone,
                tk_schedule_missed missed) {
  tk_schedule_def d = {.name = name, .cron = cron, .zone = zone, .template_name = "job",
                       .context_json = "{\"k\":1}", .missed = missed};
  tk_err err;
  int rc = tk_schedule_add(f->store, f->cfg, &d, f->clock.now_ms, &err);
  if (rc) fail_msg("add %s: %s", name, err.msg);
}

/* The slots of schedule name that have a task, as "HH:MM" of their UTC
 * time (with the date when it is not 2026-01-01), one per line. */
static char *fired(efx *f, const char *name) {
  return efx_sql_text(f->db,
                      "SELECT CASE WHEN substr(identity, length('schedule:%1$s:') + 1, 10) ="
                      " '2026-01-01' THEN substr(identity, length('schedule:%1$s:') + 12, 5)"
                      " ELSE substr(identity, length('schedule:%1$s:') + 1, 16) END"
                      " FROM tasks WHERE identity LIKE 'schedule:%1$s:%%' ORDER BY identity",
                      name);
}

static void expect_fired(efx *f, const char *name, const char *want) {
  char *got = fired(f, name);
  assert_string_equal(got, want);
  free(got);
}

static efx *setup_job(void **state) {
  efx *f = *state = efx_new(NULL, "orch-1");
  efx_one_step(f, "job", "{ kind = \"builtin\", name = \"noop\" }", "{}");
  return f;
}

/* The engine sleeps until the next slot, fires it there, and the task runs
 * in the same pass. */
static void next_due_is_the_next_slot(void **state) {
  efx *f = setup_job(state);
  add(f, "q", "*/15 * * * *", NULL, TK_MISSED_SKIP);
  assert_int_equal(efx_tick(f), EFX_T0 + MIN(15));
  f->clock.now_ms = EFX_T0 + MIN(15);
  /* A pass that claimed work looks again at once; then the next slot. */
  assert_int_equal(efx_tick(f), EFX_T0 + MIN(15));
  assert_int_equal(efx_tick(f), EFX_T0 + MIN(30));
  expect_fired(f, "q", "00:15");
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM tasks WHERE state = 'complete'"),
                   1);
  /* The task carries the schedule's context; the schedule its last slot. */
  efx_sql_expect(f->db, "{\"k\":1}", "SELECT context FROM tasks");
  efx_sql_expect(f->db, "1767226500000|1", "SELECT last_fired, last_task_id FROM schedules");
  /* The engine's observers hear of it. */
  assert_int_equal(efx_events(f, "task.created", NULL), 1);
  json_t *ev = json_array_get(f->events, 0);
  assert_string_equal(json_string_value(json_object_get(ev, "identity")),
                      "schedule:q:2026-01-01T00:15:00Z");
  assert_string_equal(json_string_value(json_object_get(ev, "orchestrator")), "orch-1");
}

/* With two orchestrators on one store, each slot's task.created names the
 * one that fired it (issue 19: the event had no orchestrator). */
static void task_created_names_the_orchestrator(void **state) {
  efx *f = setup_job(state);
  add(f, "q", "*/15 * * * *", NULL, TK_MISSED_SKIP);
  tk_engine *other = efx_engine_on(f, f->store, "orch-2");
  tk_err err;
  f->clock.now_ms = EFX_T0 + MIN(15);
  assert_int_equal(tk_engine_tick(f->engine, NULL, &err), 0);
  f->clock.now_ms = EFX_T0 + MIN(30);
  assert_int_equal(tk_engine_tick(other, NULL, &err), 0);
  tk_engine_free(other);
  assert_int_equal(efx_events(f, "task.created", NULL), 2);
  static const char *const want[][2] = {{"schedule:q:2026-01-01T00:15:00Z", "orch-1"},
                                        {"schedule:q:2026-01-01T00:30:00Z", "orch-2"}};
  size_t i, k = 0;
  json_t *ev;
  json_array_foreach(f->events, i, ev) {
    assert_non_null(json_string_value(json_object_get(ev, "orchestrator")));
    if (strcmp(json_string_value(json_object_get(ev, "type")), "task.created") != 0) continue;
    assert_string_equal(json_string_value(json_object_get(ev, "identity")), want[k][0]);
    assert_string_equal(json_string_value(json_object_get(ev, "orchestrator")), want[k][1]);
    k++;
  }
}

/* Both fire 01:00; then nothing runs until 05:30. skip fires none of 02:00
 * to 05:00, catch_up fires all four; both go on at 06:00. */
static void skip_and_catch_up_after_a_gap(void **state) {
  efx *f = setup_job(state);
  add(f, "s", "@hourly", NULL, TK_MISSED_SKIP);
  add(f, "c", "@hourly", NULL, TK_MISSED_CATCH_UP);
  f->clock.now_ms = EFX_T0 + HOUR(1);
  efx_tick(f);
  f->clock.now_ms = EFX_T0 + HOUR(5) + MIN(30);
  efx_tick(f);
  assert_int_equal(efx_tick(f), EFX_T0 + HOUR(6));
  expect_fired(f, "s", "01:00");
  expect_fired(f, "c", "01:00\n02:00\n03:00\n04:00\n05:00");
  f->clock.now_ms = EFX_T0 + HOUR(6);
  efx_tick(f);
  expect_fired(f, "s", "01:00\n06:00");
  expect_fired(f, "c", "01:00\n02:00\n03:00\n04:00\n05:00\n06:00");
  /* Reached 59 s late, within the grace minute, a skip slot still fires;
   * 61 s late it is missed. */
  f->clock.now_ms = EFX_T0 + HOUR(7) + 59000;
  efx_tick(f);
  f->clock.now_ms = EFX_T0 + HOUR(8) + 61000;
  efx_tick(f);
  expect_fired(f, "s", "01:00\n06:00\n07:00");
}

/* A per-minute catch_up schedule after three hours with nothing running:
 * the latest 100 slots fire, oldest first; the 80 before them do not. */
static void catch_up_is_bounded(void **state) {
  efx *f = setup_job(state);
  add(f, "m", "* * * * *", NULL, TK_MISSED_CATCH_UP);
  f->clock.now_ms = EFX_T0 + HOUR(3);
  efx_tick(f);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM tasks"), TK_SCHEDULE_CATCH_UP_MAX);
  efx_sql_expect(f->db, "schedule:m:2026-01-01T01:21:00Z|schedule:m:2026-01-01T03:00:00Z",
                 "SELECT min(identity), max(identity) FROM tasks");
  /* Oldest first: task ids follow the slots. */
  efx_sql_expect(f->db, "schedule:m:2026-01-01T01:21:00Z",
                 "SELECT identity FROM tasks ORDER BY id LIMIT 1");
}

/* Fire every slot of the store's schedules from `from` to `to` (ms),
 * jumping the clock to each next due time as an engine would sleep. */
static void drive_until(efx *f, int64_t from, int64_t to) {
  f->clock.now_ms = from;
  for (int guard = 0; guard < 1000; guard++) {
    int64_t next = efx_tick(f);
    if (next > to) return;
    f->clock.now_ms = next;
  }
  fail_msg("more than 1000 passes");
}

/* 02:30 every day in Berlin: on 2026-03-29 it does not exist (clocks go
 * from 02:00 to 03:00): it fires once, at the change, 01:00Z; on
 * 2026-10-25 it happens twice: it fires once, at the first, 00:30Z. An
 * hourly schedule fires in both 02:00 hours of 2026-10-25. */
static void berlin_daylight_saving_days(void **state) {
  efx *f = setup_job(state);
  f->clock.now_ms = EFX_T0 + HOUR(24 * 86); /* 2026-03-28T00:00Z */
  add(f, "daily", "30 2 * * *", "Europe/Berlin", TK_MISSED_SKIP);
  drive_until(f, f->clock.now_ms, EFX_T0 + HOUR(24 * 88)); /* to 2026-03-30T00:00Z */
  expect_fired(f, "daily", "2026-03-28T01:30\n2026-03-29T01:00");

  f->clock.now_ms = EFX_T0 + HOUR(24 * 296); /* 2026-10-24T00:00Z */
  add(f, "daily2", "30 2 * * *", "Europe/Berlin", TK_MISSED_SKIP);
  add(f, "hourly", "0 * * * *", "Europe/Berlin", TK_MISSED_SKIP);
  drive_until(f, f->clock.now_ms, EFX_T0 + HOUR(24 * 297) + HOUR(4)); /* 2026-10-25T04:00Z */
  expect_fired(f, "daily2", "2026-10-24T00:30\n2026-10-25T00:30");
  char *hours = efx_sql_text(f->db, "SELECT group_concat(substr(identity, 28, 5), ' ') FROM"
                                    " (SELECT identity FROM tasks WHERE identity LIKE"
                                    " 'schedule:hourly:2026-10-25%%' ORDER BY identity)");
  /* 02:00 CEST is 00:00Z, 02:00 CET is 01:00Z: both fire. */
  assert_string_equal(hours, "00:00 01:00 02:00 03:00 04:00");
  free(hours);
}

/* The engine reads a schedule's zone file once, not on every pass: with
 * the file gone after the first pass (TZDIR a copy of the database's
 * Berlin only), the next passes still fire at Berlin's slots (before
 * issue 19's cache, each pass failed "time zone ... No such file"). */
static void zone_files_are_read_once(void **state) {
  efx *f = setup_job(state);
  char zdir[400], cmd[1200];
  snprintf(zdir, sizeof zdir, "%s/zoneinfo", f->dir);
  const char *sys = getenv("TZDIR");
  snprintf(cmd, sizeof cmd, "mkdir -p %s/Europe && cp %s/Europe/Berlin %s/Europe/Berlin", zdir,
           sys && *sys ? sys : "/usr/share/zoneinfo", zdir);
  assert_int_equal(system(cmd), 0);
  char *saved = sys ? strdup(sys) : NULL;
  setenv("TZDIR", zdir, 1);
  add(f, "berlin", "0 * * * *", "Europe/Berlin", TK_MISSED_SKIP);
  /* The first pass reads the zone; then the file is gone. */
  assert_int_equal(efx_tick(f), EFX_T0 + HOUR(1));
  snprintf(cmd, sizeof cmd, "%s/Europe/Berlin", zdir);
  assert_int_equal(remove(cmd), 0);
  drive_until(f, EFX_T0 + HOUR(1), EFX_T0 + HOUR(3));
  if (saved) setenv("TZDIR", saved, 1);
  else unsetenv("TZDIR");
  free(saved);
  expect_fired(f, "berlin", "01:00\n02:00\n03:00");
  char *logs = json_dumps(f->logs, 0);
  assert_null(strstr(logs, "could not fire"));
  free(logs);
}

/* [schedules.NAME] is written into the store by the engine's first pass
 * and fires like a stored one. */
static void configured_schedules_fire(void **state) {
  static const char *const sets[] = {"schedules.cfg.cron=*/30 * * * *",
                                     "schedules.cfg.template=job",
                                     "schedules.cfg.context={ day = \"today\", n = 2 }",
                                     "schedules.cfg.missed=catch_up", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "job", "{ kind = \"builtin\", name = \"noop\" }", "{}");
  assert_int_equal(efx_tick(f), EFX_T0 + MIN(30));
  efx_sql_expect(f->db, "cfg|*/30 * * * *|job|catch_up|config|{\"day\":\"today\",\"n\":2}",
                 "SELECT name, cron, template, missed, source, context FROM schedules");
  f->clock.now_ms = EFX_T0 + HOUR(1);
  efx_tick(f);
  expect_fired(f, "cfg", "00:30\n01:00");
  efx_sql_expect(f->db, "{\"day\":\"today\",\"n\":2}", "SELECT DISTINCT context FROM tasks");
}

/* Run sql on the store's file from a connection of the test's own. */
/* A slot whose task cannot be written (a trigger aborts the insert, as a
 * crash inside the transaction would end it) leaves the schedule's
 * progress where it was, and the next pass fires that slot, once. */
static void a_slot_that_fails_moves_nothing(void **state) {
  efx *f = setup_job(state);
  add(f, "q", "*/15 * * * *", NULL, TK_MISSED_CATCH_UP);
  char *before = efx_sql_text(f->db, "SELECT cursor, last_fired FROM schedules");
  efx_exec(f->db, "CREATE TRIGGER no_tasks BEFORE INSERT ON tasks"
              " BEGIN SELECT RAISE(ABORT, 'the disk is full'); END");
  f->clock.now_ms = EFX_T0 + MIN(15);
  tk_schedule_pass p;
  tk_err err;
  assert_int_equal(tk_schedule_fire_due(f->store, f->cfg, f->clock.now_ms, NULL, NULL, &p, &err), 0);
  assert_int_equal(p.failed, 1);
  assert_int_equal(p.fired, 0);
  assert_non_null(strstr(err.msg, "schedule q: "));
  assert_non_null(strstr(err.msg, "the disk is full"));
  efx_sql_expect(f->db, before, "SELECT cursor, last_fired FROM schedules");
  free(before);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM tasks"), 0);
  efx_exec(f->db, "DROP TRIGGER no_tasks");
  f->clock.now_ms = EFX_T0 + MIN(16);
  assert_int_equal(tk_schedule_fire_due(f->store, f->cfg, f->clock.now_ms, NULL, NULL, &p, &err), 0);
  assert_int_equal(p.fired, 1);
  assert_int_equal(tk_schedule_fire_due(f->store, f->cfg, f->clock.now_ms, NULL, NULL, &p, &err), 0);
  assert_int_equal(p.fired + p.existed, 0);
  expect_fired(f, "q", "00:15");
}

/* What the running engine's thread needs. */
typedef struct runner {
  tk_engine *e;
  int rc;
  tk_err err;
} runner;

static void *run_engine(void *arg) {
  runner *r = arg;
  r->rc = tk_engine_run(r->e, 0, &r->err);
  return NULL;
}

typedef struct counted {
  efx *f;
  const char *sql;
  int64_t at_least;
} counted;

static int count_reached(void *ud) {
  counted *c = ud;
  return efx_sql_int(c->f->db, "%s", c->sql) >= c->at_least;
}

/* An engine sleeping on the system clock (tk_engine_run) notices a
 * schedule another connection adds: the store's change wakes it, it reads
 * the schedules, and fires the ten slots that schedule missed (catch_up;
 * its progress moved ten minutes back by hand). Real time, bounded by a
 * limit, not timed: the assertion is on what happened. */
static void a_sleeping_engine_sees_a_new_schedule(void **state) {
  efx *f = setup_job(state);
  tk_err err;
  /* Connections of their own, on the system clock (the fixture's store
   * has its manual clock). */
  tk_store *mine;
  assert_int_equal(tk_store_open(f->url, &mine, &err), 0);
  tk_engine_options o = {.store = mine, .config = f->cfg, .id = "sleeper"};
  runner r = {0};
  assert_int_equal(tk_engine_new(&o, &r.e, &err), 0);
  pthread_t th;
  pthread_create(&th, NULL, run_engine, &r);
  /* Once this task is done, the engine is up and has nothing to do. */
  tk_store *other;
  assert_int_equal(tk_store_open(f->url, &other, &err), 0);
  tk_submit_request req = {.template_name = "job"};
  int64_t id;
  int existed;
  tk_clock clock = tk_store_clock(other);
  assert_int_equal(tk_task_submit(other, f->cfg, &req, tk_clock_now(&clock), &id, &existed,
                                  &err), 0);
  counted done = {f, "SELECT count(*) FROM tasks WHERE state = 'complete'", 1};
  assert_true(efx_wait_for(count_reached, &done, 30000));
  tk_schedule_def d = {.name = "late", .cron = "* * * * *", .template_name = "job",
                       .missed = TK_MISSED_CATCH_UP};
  assert_int_equal(tk_schedule_add(other, f->cfg, &d, tk_clock_now(&clock), &err), 0);
  efx_exec(f->db, "UPDATE schedules SET cursor = (cursor / 60000 - 10) * 60000");
  counted fired = {f, "SELECT count(*) FROM tasks WHERE identity LIKE 'schedule:late:%' AND"
                      " state = 'complete'", 10};
  int seen = efx_wait_for(count_reached, &fired, 30000);
  tk_engine_stop(r.e);
  pthread_join(th, NULL);
  tk_engine_free(r.e);
  tk_store_close(mine);
  tk_store_close(other);
  assert_true(seen);
  assert_int_equal(r.rc, 0);
  /* Each slot once: as many tasks as distinct identities. */
  efx_sql_expect(f->db, "1", "SELECT count(*) = count(DISTINCT identity) FROM tasks"
                             " WHERE identity LIKE 'schedule:late:%%'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(next_due_is_the_next_slot, efx_teardown),
      cmocka_unit_test_teardown(task_created_names_the_orchestrator, efx_teardown),
      cmocka_unit_test_teardown(skip_and_catch_up_after_a_gap, efx_teardown),
      cmocka_unit_test_teardown(catch_up_is_bounded, efx_teardown),
      cmocka_unit_test_teardown(berlin_daylight_saving_days, efx_teardown),
      cmocka_unit_test_teardown(configured_schedules_fire, efx_teardown),
      cmocka_unit_test_teardown(zone_files_are_read_once, efx_teardown),
      cmocka_unit_test_teardown(a_slot_that_fails_moves_nothing, efx_teardown),
      cmocka_unit_test_teardown(a_sleeping_engine_sees_a_new_schedule, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
