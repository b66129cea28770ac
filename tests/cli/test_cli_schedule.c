/* tasker schedule add|list|remove through the real binary on a real SQLite
 * file: a schedule is stored and listed with its next three fire times in
 * UTC and in its zone (--count N of them, --from TIME on); every bad flag
 * value is refused naming the flag and the value (an empty zone too, and
 * a zone in the wrong case with the right one suggested), exit 2, nothing
 * stored; a bad [schedules.NAME] table is
 * refused at FILE:LINE:COLUMN (exit 78); a configured name cannot be added
 * or removed by hand; an orchestrator writes the configured ones into the
 * store, and then they are listed too; its --events lines each name it,
 * the task.created of a slot it fired included. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/run_cli.h"

static const char config[] = "[schedules.configured]\ncron = \"@daily\"\ntemplate = \"etl\"\n";

static const char etl[] = "name = \"etl\"\nversion = \"1\"\n"
                          "[[steps]]\nname = \"load\"\n"
                          "handler = { kind = \"builtin\", name = \"noop\" }\n";

static int setup(void **state) {
  cli *c = cli_store_open(config);
  char path[400];
  efx_write(c->dir, "etl.toml", etl, path, sizeof path);
  run_result r;
  CLI(c, &r, "template", "add", path);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  *state = c;
  return 0;
}

static int teardown(void **state) {
  cli_store_close(*state);
  return 0;
}

/* Tokyo has no daylight saving: 02:00 there is 17:00Z the day before, in
 * every season. */
static void add_list_remove(void **state) {
  cli *c = *state;
  run_result r;
  CLI(c, &r, "schedule", "add", "tokyo", "--cron", "0 2 * * *", "--zone", "Asia/Tokyo",
      "--template", "etl", "--context", "{\"region\":\"jp\"}", "--missed", "catch_up");
  assert_int_equal(r.status, 0);
  expect_contains(r.err, "added schedule tokyo");
  run_result_free(&r);

  CLI(c, &r, "schedule", "list", "--json");
  assert_int_equal(r.status, 0);
  json_t *all = json_loads(r.out, 0, NULL);
  assert_int_equal(json_array_size(all), 2); /* and the configured one, not stored yet */
  assert_false(json_is_true(json_object_get(json_array_get(all, 1), "stored")));
  json_t *s = json_array_get(all, 0);
  assert_true(json_is_true(json_object_get(s, "stored")));
  assert_string_equal(json_string_value(json_object_get(s, "name")), "tokyo");
  assert_string_equal(json_string_value(json_object_get(s, "zone")), "Asia/Tokyo");
  assert_string_equal(json_string_value(json_object_get(s, "missed")), "catch_up");
  assert_string_equal(json_string_value(json_object_get(s, "source")), "cli");
  assert_true(json_is_null(json_object_get(s, "last_fired")));
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(s, "context"), "region")), "jp");
  json_t *next = json_object_get(s, "next");
  assert_int_equal(json_array_size(next), 3);
  int64_t prev = 0;
  for (size_t i = 0; i < 3; i++) {
    json_t *n = json_array_get(next, i);
    int64_t at = json_integer_value(json_object_get(n, "at"));
    if (i > 0) assert_int_equal(at - prev, 86400000); /* a day apart */
    prev = at;
    const char *utc = json_string_value(json_object_get(n, "utc"));
    const char *local = json_string_value(json_object_get(n, "local"));
    assert_string_equal(utc + 10, "T17:00:00Z");
    assert_string_equal(local + 10, "T02:00:00+09:00");
  }
  json_decref(all);
  run_result_free(&r);

  CLI(c, &r, "schedule", "list");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "tokyo  0 2 * * *  Asia/Tokyo  template etl  missed=catch_up  (cli)");
  expect_contains(r.out, "    last (none yet)\n");
  expect_contains(r.out, "T17:00:00Z  (");
  expect_contains(r.out, "T02:00:00+09:00)\n");
  run_result_free(&r);

  CLI(c, &r, "schedule", "remove", "tokyo");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  CLI(c, &r, "schedule", "list");
  assert_int_equal(r.status, 0);
  /* Only the configured one, which no orchestrator has stored yet. */
  expect_contains(r.out, "configured  @daily  UTC  template etl  missed=skip  (config)\n"
                         "    configured: an orchestrator starting with this configuration "
                         "adds it\n");
  assert_null(strstr(r.out, "tokyo"));
  run_result_free(&r);
  CLI(c, &r, "schedule", "remove", "tokyo");
  assert_int_equal(r.status, 2);
  assert_string_equal(r.err, "tasker schedule remove: schedule \"tokyo\": no such schedule\n");
  run_result_free(&r);
}

/* Each bad value: exit 2, one line naming the flag and the value. */
static void bad_input_is_refused_and_nothing_stored(void **state) {
  cli *c = *state;
  static const struct {
    const char *args[12];
    const char *err;
  } cases[] = {
      {{"--cron", "0 25 * * *", "--template", "etl"},
       "tasker schedule add: --cron \"0 25 * * *\": cron expression \"0 25 * * *\": column 3 "
       "(hour): 25 is out of range: expected 0-23\n"},
      {{"--cron", "0 2 * * *", "--zone", "Mars/Olympus", "--template", "etl"},
       "tasker schedule add: --zone \"Mars/Olympus\": time zone \"Mars/Olympus\": "},
      /* An empty zone is not UTC by accident: it is refused. */
      {{"--cron", "0 2 * * *", "--zone", "", "--template", "etl"},
       "tasker schedule add: --zone \"\": time zone \"\": expected a tz database name such as "
       "\"Europe/Berlin\" (leave the zone out for UTC)\n"},
      /* The database's name that differs only in case is suggested. */
      {{"--cron", "0 2 * * *", "--zone", "europe/berlin", "--template", "etl"},
       "tasker schedule add: --zone \"europe/berlin\": time zone \"europe/berlin\": no such "
       "zone; did you mean \"Europe/Berlin\"?\n"},
      {{"--cron", "0 2 * * *", "--zone", "america/NEW_york", "--template", "etl"},
       "tasker schedule add: --zone \"america/NEW_york\": time zone \"america/NEW_york\": no "
       "such zone; did you mean \"America/New_York\"?\n"},
      {{"--cron", "0 2 * * *", "--template", "nope"},
       "tasker schedule add: --template nope: no template \"nope\""},
      {{"--cron", "0 2 * * *", "--template", "etl", "--version", "9"},
       "tasker schedule add: --template etl --version 9: "},
      {{"--cron", "0 2 * * *", "--template", "etl", "--context", "[1]"},
       "tasker schedule add: --context [1]: context [1]: expected a JSON object"},
      {{"--cron", "0 2 * * *", "--template", "etl", "--context", "{bad"},
       "tasker schedule add: --context {bad: context: invalid JSON"},
      {{"--cron", "0 2 * * *", "--template", "etl", "--missed", "always"},
       "tasker schedule add: --missed: invalid value \"always\": expected skip"},
      {{"--template", "etl"}, "tasker schedule add: --cron EXPR is required\n"},
      {{"--cron", "@daily"}, "tasker schedule add: --template NAME is required\n"},
      {{"--cron", "@daily", "--template", "etl", "--count", "3"},
       "tasker schedule: --count: only `schedule list` takes it\n"},
  };
  char *before = efx_snapshot(c->db);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[20] = {"--config", c->cfg, "--db", c->url, "schedule", "add", "x"};
    int n = 7;
    for (int k = 0; cases[i].args[k]; k++) args[n++] = cases[i].args[k];
    args[n] = NULL;
    run_result r;
    assert_int_equal(run_cli(&r, NULL, args), 0);
    if (r.status != 2 || strncmp(r.err, cases[i].err, strlen(cases[i].err)) != 0)
      fail_msg("case %zu: exit %d, stderr %s", i, r.status, r.err);
    run_result_free(&r);
  }
  run_result r;
  CLI(c, &r, "schedule", "add", "a b", "--cron", "@daily", "--template", "etl");
  assert_int_equal(r.status, 2);
  expect_contains(r.err, "schedule name \"a b\": character 2 (' ') is not allowed");
  run_result_free(&r);
  /* The configured name is taken: neither added nor removed by hand. */
  CLI(c, &r, "schedule", "add", "configured", "--cron", "@daily", "--template", "etl");
  assert_int_equal(r.status, 2);
  expect_contains(r.err, "schedule \"configured\" is defined in the configuration");
  run_result_free(&r);
  efx_unchanged(c->db, before);
}

/* An orchestrator writes the configured schedule into the store; then it
 * is listed, and cannot be removed by name. */
static void configured_schedules_are_synced_by_run(void **state) {
  cli *c = *state;
  run_result r;
  CLI(c, &r, "run", "--until-idle");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  CLI(c, &r, "schedule", "list");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "configured  @daily  UTC  template etl  missed=skip  (config)\n"
                         "    last (none yet)\n");
  expect_contains(r.out, "T00:00:00Z\n");
  run_result_free(&r);
  CLI(c, &r, "schedule", "remove", "configured");
  assert_int_equal(r.status, 2);
  expect_contains(r.err, "is defined in the configuration ([schedules.configured]): remove it "
                         "there");
  run_result_free(&r);
}

/* schedule list --count N --from TIME: N fire times at or after TIME
 * (the default is 3 from now); the Berlin autumn change of 2026 for every
 * other hour shows the repeated 02:00 once. Bad values: exit 2. */
static void list_count_and_from(void **state) {
  cli *c = *state;
  run_result r;
  CLI(c, &r, "schedule", "add", "bi", "--cron", "0 */2 * * *", "--zone", "Europe/Berlin",
      "--template", "etl");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  CLI(c, &r, "schedule", "list", "--count", "5", "--from", "2026-10-24T22:00:00Z");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "bi  0 */2 * * *  Europe/Berlin  template etl  missed=skip  (cli)\n"
                         "    last (none yet)\n"
                         "    next 2026-10-24T22:00:00Z  (2026-10-25T00:00:00+02:00)\n"
                         "    next 2026-10-25T00:00:00Z  (2026-10-25T02:00:00+02:00)\n"
                         "    next 2026-10-25T03:00:00Z  (2026-10-25T04:00:00+01:00)\n"
                         "    next 2026-10-25T05:00:00Z  (2026-10-25T06:00:00+01:00)\n"
                         "    next 2026-10-25T07:00:00Z  (2026-10-25T08:00:00+01:00)\n"
                         "configured");
  run_result_free(&r);
  /* An offset in TIME is the same instant; --json has as many. */
  CLI(c, &r, "schedule", "list", "--json", "--count", "12", "--from",
      "2027-04-04T01:00:00+11:00");
  assert_int_equal(r.status, 0);
  json_t *all = json_loads(r.out, 0, NULL);
  json_t *next = json_object_get(json_array_get(all, 0), "next");
  assert_int_equal(json_array_size(next), 12);
  assert_string_equal(json_string_value(json_object_get(json_array_get(next, 0), "utc")),
                      "2027-04-03T14:00:00Z");
  assert_int_equal(json_array_size(json_object_get(json_array_get(all, 1), "next")), 12);
  json_decref(all);
  run_result_free(&r);
  CLI(c, &r, "schedule", "list");
  assert_int_equal(r.status, 0);
  char *second = strstr(r.out, "configured  ");
  assert_non_null(second);
  *second = '\0';
  int shown = 0;
  for (char *p = r.out; (p = strstr(p, "    next ")) != NULL; p++) shown++;
  assert_int_equal(shown, 3);
  run_result_free(&r);
  static const struct {
    const char *flag, *value, *err;
  } bad[] = {
      {"--count", "0", "tasker schedule list: --count: invalid value \"0\": expected an integer "
                       "from 1 to 1000\n"},
      {"--count", "1001", "expected an integer from 1 to 1000"},
      {"--from", "1h", "tasker schedule list: --from: invalid value \"1h\": expected an RFC 3339 "
                       "time"},
      {"--from", "2026-13-01T00:00:00Z", "--from: invalid value \"2026-13-01T00:00:00Z\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CLI(c, &r, "schedule", "list", bad[i].flag, bad[i].value);
    if (r.status != 2 || strstr(r.err, bad[i].err) == NULL || r.out[0] != '\0')
      fail_msg("%s %s: exit %d, stderr %s", bad[i].flag, bad[i].value, r.status, r.err);
    run_result_free(&r);
  }
}

/* tasker run --events: every line says which orchestrator wrote it, the
 * task.created of each slot it fired too (issue 19: that one had no
 * orchestrator, so with two nobody could tell which fired a slot). */
static void run_events_name_the_orchestrator(void **state) {
  cli *c = *state;
  run_result r;
  CLI(c, &r, "schedule", "add", "m", "--cron", "* * * * *", "--template", "etl", "--missed",
      "catch_up");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  /* Three slots behind: the orchestrator fires them at once. */
  sqlite3 *h;
  assert_int_equal(sqlite3_open(c->db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "UPDATE schedules SET cursor = (cursor / 60000 - 3) * 60000",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);
  char events[400];
  snprintf(events, sizeof events, "%s/events.jsonl", c->dir);
  CLI(c, &r, "run", "--until-idle", "--id", "orch-A", "--events", events);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  char *text = efx_read(events);
  int created = 0, lines = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
    json_t *ev = json_loads(line, 0, NULL);
    if (ev == NULL) fail_msg("not JSON: %s", line);
    const char *who = json_string_value(json_object_get(ev, "orchestrator"));
    if (who == NULL || strcmp(who, "orch-A") != 0) fail_msg("no orchestrator orch-A: %s", line);
    if (strcmp(json_string_value(json_object_get(ev, "type")), "task.created") == 0) {
      created++;
      assert_non_null(strstr(json_string_value(json_object_get(ev, "identity")), "schedule:m:"));
    }
    json_decref(ev);
  }
  free(text);
  /* Three slots, or four if a minute turned meanwhile; each task's steps
   * add lines of their own. */
  if (created < 3 || created > 4) fail_msg("%d task.created lines", created);
  assert_true(lines > created);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM tasks"), created);
}

/* A bad table in the configuration file: FILE:LINE:COLUMN, exit 78. */
static void bad_configuration_is_placed(void **state) {
  cli *c = *state;
  static const struct {
    const char *toml, *err;
  } cases[] = {
      {"[schedules.n]\ncron = \"61 * * * *\"\ntemplate = \"etl\"\n",
       ":2:8: schedules.n.cron: cron expression \"61 * * * *\": column 1 (minute): 61 is out "
       "of range: expected 0-59"},
      {"[schedules.n]\ncron = \"@daily\"\nzone = \"Nowhere/City\"\ntemplate = \"etl\"\n",
       ":3:8: schedules.n.zone: time zone \"Nowhere/City\""},
      {"[schedules.n]\ncron = \"@daily\"\n", ":1:12: schedules.n: template is required"},
      {"[schedules.n]\ncron = \"@daily\"\ntemplate = \"etl\"\nmissed = \"later\"\n",
       ":4:10: schedules.n.missed = \"later\": expected \"skip\""},
      {"[schedules.n]\ncron = \"@daily\"\ntemplate = \"etl\"\ncontext = 3\n",
       ":4:11: schedules.n.context: expected a table"},
      {"[schedules.n]\ncron = \"@daily\"\ntemplate = \"etl\"\ncontext = { a = [1.5, nan] }\n",
       ":4:23: schedules.n.context: a float JSON cannot hold (nan or inf)"},
      {"[schedules.n]\ncorn = \"@daily\"\ntemplate = \"etl\"\n",
       ":2:1: schedules.n: unknown key \"corn\"; did you mean \"cron\"?"},
      {"[schedules.n]\ncron = \"@daily\"\nzone = \"\"\ntemplate = \"etl\"\n",
       ":3:8: schedules.n.zone: time zone \"\": expected a tz database name"},
      {"[schedules.n]\ncron = \"@daily\"\nzone = \"europe/berlin\"\ntemplate = \"etl\"\n",
       ":3:8: schedules.n.zone: time zone \"europe/berlin\": no such zone; did you mean "
       "\"Europe/Berlin\"?"},
      /* Not a zone name at all: placed at the zone, not at the expression. */
      {"[schedules.n]\ncron = \"@daily\"\nzone = \"../etc\"\ntemplate = \"etl\"\n",
       ":3:8: schedules.n.zone: time zone \"../etc\": expected a tz database name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[400];
    efx_write(c->dir, "bad.toml", cases[i].toml, path, sizeof path);
    const char *args[] = {"--config", path, "--db", c->url, "schedule", "list", NULL};
    run_result r;
    assert_int_equal(run_cli(&r, NULL, args), 0);
    if (r.status != 78 || strstr(r.err, cases[i].err) == NULL || strstr(r.err, path) == NULL)
      fail_msg("case %zu: exit %d, stderr %s", i, r.status, r.err);
    run_result_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(add_list_remove, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_input_is_refused_and_nothing_stored, setup, teardown),
      cmocka_unit_test_setup_teardown(configured_schedules_are_synced_by_run, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_configuration_is_placed, setup, teardown),
      cmocka_unit_test_setup_teardown(run_events_name_the_orchestrator, setup, teardown),
      cmocka_unit_test_setup_teardown(list_count_and_from, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
