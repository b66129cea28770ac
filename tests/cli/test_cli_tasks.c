/* `tasker tasks` and the bulk forms of retry, resolve and cancel through
 * the real binary on a real SQLite file holding tasks in every state the
 * orchestrator leaves: each filter, paging with --cursor to the end (every
 * task once), the JSON shape, bad values refused (flag, value, exit 2,
 * nothing changed); bulk actions counted without --yes (exit 3, nothing
 * changed) and done with it (the failed steps run again), refused with no
 * filter or over --max. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/run_cli.h"

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"10ms\"\n";

/* Run and expect exit status `status`, stdout `out` and stderr `err`. */
static void expect_run(cli *c, int status, const char *out, const char *err,
                       const char *const *args) {
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != status || strcmp(r.out, out) != 0 || strcmp(r.err, err) != 0)
    fail_msg("%s: exit %d (want %d)\nstdout: %s(want %s)\nstderr: %s(want %s)", args[0],
             r.status, status, r.out, out, r.err, err);
  run_result_free(&r);
}
#define EXPECT(c, status, out, err, ...) expect_run((c), (status), (out), (err), ARGS(__VA_ARGS__))

/* A usage error whose message starts with `start` and names `value`:
 * exit 2, nothing on stdout. */
static void expect_refused(cli *c, const char *start, const char *value, const char *const *args) {
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != 2 || r.out[0] != '\0' || strncmp(r.err, start, strlen(start)) != 0 ||
      strstr(r.err, value) == NULL || strchr(r.err, '\n') != r.err + strlen(r.err) - 1)
    fail_msg("exit %d (want 2)\nstdout: %s\nstderr: %s(want one line starting %s naming %s)",
             r.status, r.out, r.err, start, value);
  run_result_free(&r);
}
#define REFUSED(c, start, value, ...) expect_refused((c), (start), (value), ARGS(__VA_ARGS__))

static void run_ok(cli *c, const char *const *args) {
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != 0) fail_msg("%s: exit %d: %s", args[0], r.status, r.err);
  run_result_free(&r);
}
#define RUN_OK(c, ...) run_ok((c), ARGS(__VA_ARGS__))

/* The error the gate step fails with until DIR/open exists. */
static void gate_error(cli *c, char *buf, size_t len) {
  snprintf(buf, len,
           "exit status 3: the gate is closed: %s/open does not exist yet, so this step fails "
           "until someone creates it",
           c->dir);
}

/* The store every test starts from:
 *   1-3   ok        complete (created two days ago)
 *   4-7   ops/gate  error (its command step fails, one attempt)
 *   8-9   boom      error (builtin fail, two attempts)
 *   10    ok        pending (never run)
 *   11    ok        cancelled */
static int setup(void **state) {
  cli *c = cli_store_open(config);
  char path[400], text[1024], err[512];
  efx_write(c->dir, "ok.toml", "name = \"ok\"\nversion = \"1\"\n" EFX_STEP("s") EFX_NOOP, path,
            sizeof path);
  RUN_OK(c, "template", "add", path);
  gate_error(c, err, sizeof err);
  snprintf(text, sizeof text,
           "name = \"gate\"\nnamespace = \"ops\"\nversion = \"2\"\n" EFX_STEP("open")
           "handler = { kind = \"command\", argv = [\"sh\", \"-c\", \"test -e %s/open || "
           "{ echo '%s' >&2; exit 3; }\"] }\n"
           "retry = { max_attempts = 1 }\n" EFX_STEP("after") "depends_on = [\"open\"]\n" EFX_NOOP,
           c->dir, strchr(err, ':') + 2);
  efx_write(c->dir, "gate.toml", text, path, sizeof path);
  RUN_OK(c, "template", "add", path);
  efx_write(c->dir, "boom.toml",
            "name = \"boom\"\nversion = \"1\"\n" EFX_STEP("s")
            "handler = { kind = \"builtin\", name = \"fail\" }\nretry = { max_attempts = 2 }\n",
            path, sizeof path);
  RUN_OK(c, "template", "add", path);
  RUN_OK(c, "submit", "ok", "--count", "3");
  RUN_OK(c, "submit", "gate", "--count", "4");
  RUN_OK(c, "submit", "boom", "--count", "2");
  RUN_OK(c, "run", "--until-idle", "--workers", "1");
  RUN_OK(c, "submit", "ok", "--count", "2");
  RUN_OK(c, "cancel", "11");
  efx_exec(c->db, "UPDATE tasks SET created_at = created_at - 2 * 86400000 WHERE id <= 3");
  efx_sql_expect(c->db,
                 "1|complete\n2|complete\n3|complete\n4|error\n5|error\n6|error\n7|error\n"
                 "8|error\n9|error\n10|pending\n11|cancelled",
                 "SELECT id, state FROM tasks ORDER BY id");
  *state = c;
  return 0;
}

static int teardown(void **state) {
  cli_store_close(*state);
  return 0;
}

/* The JSON a command prints (exit 0), parsed. */
static json_t *json_out(cli *c, const char *const *args) {
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != 0) fail_msg("%s: exit %d: %s", args[0], r.status, r.err);
  json_error_t e;
  json_t *v = json_loads(r.out, JSON_PRESERVE_ORDER, &e);
  if (v == NULL) fail_msg("%s: not JSON (%s): %s", args[0], e.text, r.out);
  run_result_free(&r);
  return v;
}

/* One page of `tasks --json ARGS`: its ids, newest first, joined by ','
 * into ids; its next_cursor into cursor ("" when null). */
static void page(cli *c, char *ids, size_t len, char *cursor, size_t clen,
                 const char *const *args) {
  json_t *p = json_out(c, args);
  size_t i, used = 0;
  json_t *t;
  ids[0] = '\0';
  json_array_foreach(json_object_get(p, "tasks"), i, t) used += (size_t)snprintf(
      ids + used, len - used, "%s%lld", i ? "," : "",
      (long long)json_integer_value(json_object_get(t, "id")));
  json_t *next = json_object_get(p, "next_cursor");
  assert_true(json_is_null(next) || json_is_string(next));
  snprintf(cursor, clen, "%s", json_is_string(next) ? json_string_value(next) : "");
  json_decref(p);
}

/* Assert the ids of the only page of `tasks ARGS`. */
static void expect_ids(cli *c, const char *want, const char *const *args) {
  const char *all[16] = {"tasks", "--json"};
  size_t n = 2;
  while (*args) all[n++] = *args++;
  all[n] = NULL;
  char ids[512], cursor[128];
  page(c, ids, sizeof ids, cursor, sizeof cursor, all);
  if (strcmp(ids, want) != 0) fail_msg("%s %s: ids %s, want %s", all[2], all[3], ids, want);
  assert_string_equal(cursor, "");
}
#define IDS(c, want, ...) expect_ids((c), (want), ARGS(__VA_ARGS__))

static void each_filter_selects_its_tasks_newest_first(void **state) {
  cli *c = *state;
  IDS(c, "11,10,9,8,7,6,5,4,3,2,1", "--limit", "1000");
  IDS(c, "9,8,7,6,5,4", "--state", "error");
  IDS(c, "3,2,1", "--state", "complete");
  IDS(c, "10", "--state", "pending");
  IDS(c, "11", "--state", "cancelled");
  IDS(c, "", "--state", "in_progress");
  IDS(c, "7,6,5,4", "--template", "gate");
  IDS(c, "7,6,5,4", "--template", "ops/gate");
  IDS(c, "11,10,3,2,1", "--template", "ok");
  IDS(c, "", "--template", "nosuch");
  IDS(c, "11,10,9,8,7,6,5,4", "--since", "24h");
  IDS(c, "11,10,9,8,7,6,5,4,3,2,1", "--since", "2000-01-01T00:00:00Z");
  IDS(c, "11,10,9,8,7,6,5,4,3,2,1", "--since", "1960-01-01T00:00:00Z");
  IDS(c, "", "--since", "2999-01-01T00:00:00+02:00");
  IDS(c, "7,6,5,4", "--error", "gate is closed");
  IDS(c, "9,8", "--error", "builtin fail");
  IDS(c, "9,8", "--state", "error", "--template", "boom");
  IDS(c, "", "--state", "complete", "--since", "1h");
  IDS(c, "3,2,1", "--state", "complete", "--since", "72h");
}

static void json_prints_the_apis_page(void **state) {
  cli *c = *state;
  json_t *p = json_out(c, ARGS("tasks", "--json", "--template", "gate", "--limit", "1"));
  expect_keys(p, "tasks,next_cursor");
  assert_true(json_is_string(json_object_get(p, "next_cursor")));
  json_t *t = json_array_get(json_object_get(p, "tasks"), 0);
  expect_keys(t, "id,state,template,identity,created_at,updated_at,finished_at,steps_total,"
                 "steps_done,steps_error,last_error,next_run_at,priority");
  assert_int_equal(json_integer_value(json_object_get(t, "id")), 7);
  assert_string_equal(json_string_value(json_object_get(t, "state")), "error");
  json_t *tp = json_object_get(t, "template");
  expect_keys(tp, "namespace,name,version");
  assert_string_equal(json_string_value(json_object_get(tp, "namespace")), "ops");
  assert_string_equal(json_string_value(json_object_get(tp, "version")), "2");
  assert_true(json_is_null(json_object_get(t, "identity")));
  assert_int_equal(json_integer_value(json_object_get(t, "steps_total")), 2);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_done")), 0);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_error")), 1);
  char err[512];
  gate_error(c, err, sizeof err);
  assert_string_equal(json_string_value(json_object_get(t, "last_error")), err);
  assert_true(json_is_null(json_object_get(t, "next_run_at")));
  json_decref(p);
}

/* The line of `text` that starts with `start`, copied into line. */
static void line_of(const char *text, const char *start, char *line, size_t len) {
  const char *p = text;
  while (p && strncmp(p, start, strlen(start)) != 0) p = (p = strchr(p, '\n')) ? p + 1 : NULL;
  if (p == NULL) fail_msg("no line starting %s in\n%s", start, text);
  snprintf(line, len, "%.*s", (int)strcspn(p, "\n"), p);
}

static void the_table_shows_each_task_on_a_line(void **state) {
  cli *c = *state;
  run_result r;
  cli_run_args(c, &r, ARGS("tasks"));
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  char line[512], want[512], err[512];
  /* Columns as wide as their widest cell: ID 2, STATE 9 (cancelled),
   * TEMPLATE 10 (ops/gate@2). */
  line_of(r.out, "ID", line, sizeof line);
  assert_string_equal(line, "ID  STATE      TEMPLATE    CREATED  STEPS  NEXT RETRY  LAST ERROR");
  /* The error cut to 60 characters. */
  gate_error(c, err, sizeof err);
  snprintf(want, sizeof want, " 7  error      ops/gate@2  ");
  line_of(r.out, want, line, sizeof line);
  snprintf(want, sizeof want, "  0/2    -           %.57s...", err);
  assert_string_equal(line + strlen(line) - strlen(want), want);
  line_of(r.out, " 1  complete   ok@1        2d ago   1/1    -           -", line, sizeof line);
  assert_string_equal(line, " 1  complete   ok@1        2d ago   1/1    -           -");
  line_of(r.out, "10  pending    ok@1        ", line, sizeof line);
  expect_contains(line, "0/1    -           -");
  /* One page of 11 lines under the header, and no cursor line. */
  size_t lines = 0;
  for (const char *p = r.out; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 12);
  run_result_free(&r);
  EXPECT(c, 0, "no tasks match\n", "", "tasks", "--template", "nosuch");
}

static void paging_with_cursor_sees_every_task_once(void **state) {
  cli *c = *state;
  static const char *const want[] = {"11,10", "9,8", "7,6", "5,4", "3,2", "1"};
  char ids[128], cursor[128] = "";
  for (size_t i = 0; i < 6; i++) {
    if (i == 0) {
      page(c, ids, sizeof ids, cursor, sizeof cursor, ARGS("tasks", "--json", "--limit", "2"));
    } else {
      char prev[128];
      snprintf(prev, sizeof prev, "%s", cursor);
      page(c, ids, sizeof ids, cursor, sizeof cursor,
           ARGS("tasks", "--json", "--limit", "2", "--cursor", prev));
    }
    assert_string_equal(ids, want[i]);
    if (i < 5) assert_string_not_equal(cursor, "");
  }
  assert_string_equal(cursor, "");
  /* A filter holds across pages too. */
  page(c, ids, sizeof ids, cursor, sizeof cursor,
       ARGS("tasks", "--json", "--state", "error", "--limit", "4"));
  assert_string_equal(ids, "9,8,7,6");
  char prev[128];
  snprintf(prev, sizeof prev, "%s", cursor);
  page(c, ids, sizeof ids, cursor, sizeof cursor,
       ARGS("tasks", "--json", "--state", "error", "--limit", "4", "--cursor", prev));
  assert_string_equal(ids, "5,4");
  assert_string_equal(cursor, "");
  /* The table's last line says how to get the next page; following it
   * to the end lists every task once. */
  char seen[12] = {0}, arg[128] = "";
  for (int pages = 0;; pages++) {
    assert_true(pages < 6);
    run_result r;
    if (arg[0]) cli_run_args(c, &r, ARGS("tasks", "--limit", "3", "--cursor", arg));
    else cli_run_args(c, &r, ARGS("tasks", "--limit", "3"));
    assert_int_equal(r.status, 0);
    for (const char *l = strchr(r.out, '\n') + 1; *l && l[0] != 'm'; l = strchr(l, '\n') + 1) {
      int id = atoi(l);
      assert_true(id >= 1 && id <= 11);
      assert_int_equal(seen[id]++, 0);
    }
    const char *more = strstr(r.out, "\nmore tasks match: add --cursor ");
    if (more == NULL) {
      run_result_free(&r);
      break;
    }
    assert_int_equal(sscanf(more, "\nmore tasks match: add --cursor %127s for the next page", arg),
                     1);
    run_result_free(&r);
  }
  for (int id = 1; id <= 11; id++) assert_int_equal(seen[id], 1);
}

static void bad_values_name_the_flag_and_change_nothing(void **state) {
  cli *c = *state;
  char *before = efx_snapshot(c->db);
  EXPECT(c, 2, "",
         "tasker tasks: --limit: invalid value \"0\": expected an integer from 1 to 1000\n",
         "tasks", "--limit", "0");
  EXPECT(c, 2, "",
         "tasker tasks: --limit: invalid value \"5000\": expected an integer from 1 to 1000\n",
         "tasks", "--limit", "5000");
  EXPECT(c, 2, "", "tasker tasks: flag --limit needs a value (N)\n", "tasks", "--limit");
  EXPECT(c, 2, "", "tasker tasks: --template: invalid value \"\": expected a non-empty value\n",
         "tasks", "--template", "");
  REFUSED(c, "tasker tasks: --state: ", "\"bogus\"", "tasks", "--state", "bogus");
  REFUSED(c, "tasker tasks: --since: ", "\"5parsecs\"", "tasks", "--since", "5parsecs");
  REFUSED(c, "tasker tasks: --since: ", "\"2026-11-24T05:00:00\"", "tasks", "--since",
          "2026-11-24T05:00:00");
  REFUSED(c, "tasker tasks: --cursor: ", "\"zzz\"", "tasks", "--cursor", "zzz");
  REFUSED(c, "tasker tasks: --template: ", "\"a/b/c\"", "tasks", "--template", "a/b/c");
  /* The bulk forms check the same way, before counting anything. */
  REFUSED(c, "tasker retry: --state: ", "\"bogus\"", "retry", "--state", "bogus", "--yes");
  REFUSED(c, "tasker cancel: --since: ", "\"yesterday\"", "cancel", "--since", "yesterday",
          "--yes");
  efx_unchanged(c->db, before);
}

/* How many attempts step `step` of task `id` has had, from show --json. */
static size_t attempts_of(cli *c, const char *id, const char *step) {
  json_t *t = json_out(c, ARGS("show", id, "--json"));
  size_t i, n = 0;
  json_t *s;
  json_array_foreach(json_object_get(t, "steps"), i, s) if (
      strcmp(json_string_value(json_object_get(s, "name")), step) == 0) n =
      json_array_size(json_object_get(s, "history"));
  json_decref(t);
  return n;
}

static void bulk_retry_counts_first_and_acts_with_yes(void **state) {
  cli *c = *state;
  char *before = efx_snapshot(c->db);
  EXPECT(c, 3, "",
         "4 tasks match; retry would give fresh attempts to their 4 failed steps. Run again with "
         "--yes to do it.\n",
         "retry", "--state", "error", "--template", "gate");
  EXPECT(c, 3,
         "{\"action\": \"retry\", \"confirmed\": false, \"matched\": 4, \"done\": 0, \"failed\": "
         "0, \"refused\": {\"state\": 0, \"not_found\": 0, \"no_failed_step\": 0}, \"errors\": "
         "[]}\n",
         "", "retry", "--state", "error", "--template", "gate", "--json");
  /* A task without a failed step is not one retry takes. */
  EXPECT(c, 3, "", "no tasks match; nothing to do\n", "retry", "--state", "pending", "--since",
         "1h", "--max", "1");
  efx_unchanged(c->db, before);

  /* Open the gate: the retried steps now succeed. */
  char path[400];
  efx_write(c->dir, "open", "", path, sizeof path);
  EXPECT(c, 0, "", "4 tasks matched; 4 failed steps will be retried now\n", "retry", "--state",
         "error", "--template", "gate", "--yes");
  IDS(c, "7,6,5,4", "--state", "in_progress");
  RUN_OK(c, "run", "--until-idle", "--workers", "1");
  IDS(c, "10,7,6,5,4,3,2,1", "--state", "complete");
  IDS(c, "9,8", "--state", "error");
  assert_int_equal(attempts_of(c, "4", "open"), 2);
  assert_int_equal(attempts_of(c, "8", "s"), 2);
  /* Nothing left in error under that filter: nothing to do. */
  EXPECT(c, 0,
         "{\"action\": \"retry\", \"confirmed\": true, \"matched\": 0, \"done\": 0, \"failed\": 0, "
         "\"refused\": {\"state\": 0, \"not_found\": 0, \"no_failed_step\": 0}, \"errors\": []}\n",
         "", "retry", "--state", "error", "--template", "gate", "--yes", "--json");
}

static void bulk_cancel_and_resolve(void **state) {
  cli *c = *state;
  char *before = efx_snapshot(c->db);
  EXPECT(c, 3, "",
         "1 task matches; cancel would cancel it. Run again with --yes to do it.\n",
         "cancel", "--state", "pending");
  EXPECT(c, 3, "", "no tasks match; nothing to do\n", "cancel", "--template", "nosuch");
  efx_unchanged(c->db, before);
  EXPECT(c, 0, "", "1 task matched; 1 task cancelled\n", "cancel", "--state", "pending", "--yes");
  IDS(c, "11,10", "--state", "cancelled");
  EXPECT(c, 0, "", "2 tasks matched; 2 failed steps resolved manually\n", "resolve", "--template",
         "boom", "--yes");
  efx_sql_expect(c->db, "resolved_manually\nresolved_manually",
                 "SELECT state FROM steps WHERE task_id IN (8, 9)");
  RUN_OK(c, "run", "--until-idle", "--workers", "1");
  IDS(c, "9,8,3,2,1", "--state", "complete");
}

/* One rule for cancelling a task in error, however it is asked (issue 19:
 * by id it was cancelled, by filter passed over): it is cancelled; a
 * complete one is not. */
static void tasks_in_error_are_cancelled_by_id_and_by_filter(void **state) {
  cli *c = *state;
  EXPECT(c, 3, "",
         "4 tasks match; cancel would cancel them. Run again with --yes to do it.\n",
         "cancel", "--state", "error", "--template", "gate");
  EXPECT(c, 0, "", "4 tasks matched; 4 tasks cancelled\n", "cancel", "--state", "error",
         "--template", "gate", "--yes");
  IDS(c, "11,7,6,5,4", "--state", "cancelled");
  /* Its failed step stays in error, and can no longer be retried. */
  efx_sql_expect(c->db, "error", "SELECT state FROM steps WHERE task_id = 4 AND name = 'open'");
  EXPECT(c, 2, "", "tasker retry: task 4 is cancelled\n", "retry", "4", "open");
  EXPECT(c, 0, "", "task 8: cancelled; task is now cancelled\n", "cancel", "8");
  EXPECT(c, 2, "", "tasker cancel: task 1 is already complete\n", "cancel", "1");
  /* A complete task is not one cancel takes. */
  EXPECT(c, 0, "", "0 tasks matched; 0 tasks cancelled\n", "cancel", "--template", "ok",
         "--state", "complete", "--max", "5", "--yes");
  IDS(c, "9", "--state", "error");
}

/* Every refusal is reported, by reason and with its task and step (issue
 * 19). A trigger changes steps while the action runs, as another operator
 * or orchestrator would: retrying task 7 (the first) moves task 6's step
 * out of error and renames task 5's. */
static void bulk_refusals_are_counted_by_reason_with_task_and_step(void **state) {
  cli *c = *state;
  efx_exec(c->db, "CREATE TRIGGER meanwhile AFTER UPDATE OF state ON steps"
                  " WHEN NEW.task_id = 7 AND NEW.state = 'waiting_for_retry' BEGIN"
                  " UPDATE steps SET state = 'waiting_for_retry' WHERE task_id = 6;"
                  " UPDATE steps SET name = 'gone' WHERE task_id = 5 AND name = 'open'; END;"
                  "CREATE TRIGGER meanwhile2 AFTER UPDATE OF state ON steps"
                  " WHEN NEW.task_id = 9 AND NEW.state = 'waiting_for_retry' BEGIN"
                  " UPDATE steps SET state = 'complete' WHERE task_id = 8; END;");
  EXPECT(c, 1, "",
         "4 tasks matched; 2 failed steps will be retried now; 2 refused (state: 1, not_found: "
         "1)\n"
         "  task 6, step open: step \"open\" of task 6 is waiting_for_retry: only a step in "
         "error can be retried\n"
         "  task 5, step open: task 5 has no step \"open\"\n",
         "retry", "--template", "gate", "--yes");
  EXPECT(c, 1,
         "{\"action\": \"retry\", \"confirmed\": true, \"matched\": 2, \"done\": 1, \"failed\": "
         "1, \"refused\": {\"state\": 1, \"not_found\": 0, \"no_failed_step\": 0}, \"errors\": "
         "[{\"task\": 8, \"step\": \"s\", \"reason\": \"state\", \"message\": \"step \\\"s\\\" of "
         "task 8 is complete: only a step in error can be retried\"}]}\n",
         "", "retry", "--template", "boom", "--yes", "--json");
}

/* More than 20 refusals: the count says how many, 20 are listed (the
 * first, in the order the action met them) and a last line says how many
 * more. Retrying the first of 23 tasks moves the other 22 out of error,
 * as another operator's retry would. */
static void bulk_lists_the_first_20_refusals_and_counts_the_rest(void **state) {
  cli *c = *state;
  char path[400];
  efx_write(c->dir, "many.toml",
            "name = \"many\"\nversion = \"1\"\n" EFX_STEP("m")
            "handler = { kind = \"builtin\", name = \"fail\" }\nretry = { max_attempts = 1 }\n",
            path, sizeof path);
  RUN_OK(c, "template", "add", path);
  RUN_OK(c, "submit", "many", "--count", "23"); /* tasks 12 to 34 */
  RUN_OK(c, "run", "--until-idle", "--workers", "0");
  efx_sql_expect(c->db, "23", "SELECT count(*) FROM steps WHERE name = 'm' AND state = 'error'");
  efx_exec(c->db, "CREATE TRIGGER meanwhile AFTER UPDATE OF state ON steps"
                  " WHEN NEW.name = 'm' AND OLD.state = 'error' BEGIN"
                  " UPDATE steps SET state = 'waiting_for_retry'"
                  " WHERE name = 'm' AND state = 'error' AND id <> NEW.id; END;");
  /* Newest first: task 34 is retried, 33 down to 12 refused. */
  char want[4096];
  size_t n = (size_t)snprintf(want, sizeof want,
                              "23 tasks matched; 1 failed step will be retried now; 22 refused "
                              "(state: 22)\n");
  for (int task = 33; task >= 14; task--)
    n += (size_t)snprintf(want + n, sizeof want - n,
                          "  task %d, step m: step \"m\" of task %d is waiting_for_retry: only a "
                          "step in error can be retried\n",
                          task, task);
  snprintf(want + n, sizeof want - n, "  (and 2 more)\n");
  EXPECT(c, 1, "", want, "retry", "--template", "many", "--yes");
  /* Only task 34's step got fresh attempts. */
  efx_sql_expect(c->db, "34", "SELECT task_id FROM steps WHERE name = 'm' AND attempts = 0");
}

static void no_filter_and_over_max_are_refused(void **state) {
  cli *c = *state;
  char *before = efx_snapshot(c->db);
  static const char no_filter[] = "no filter: that would act on every task; choose tasks with "
                                  "--state, --template, --since or --error, or give --all\n";
  char want[256];
  snprintf(want, sizeof want, "tasker retry: %s", no_filter);
  EXPECT(c, 2, "", want, "retry", "--yes");
  snprintf(want, sizeof want, "tasker cancel: %s", no_filter);
  EXPECT(c, 2, "", want, "cancel", "--max", "5", "--yes");
  EXPECT(c, 2, "",
         "tasker retry: expected a task id and a step name, or filter flags such as --state "
         "error (see tasker retry --help)\n",
         "retry", "--json");
  EXPECT(c, 2, "",
         "tasker retry: either a task id and a step name or filter flags, not both (see tasker "
         "retry --help)\n",
         "retry", "4", "open", "--state", "error");
  EXPECT(c, 3, "",
         "7 tasks match; cancel would cancel them. Run again with --yes to do it.\n",
         "cancel", "--all");
  EXPECT(c, 2, "", "tasker retry: 6 tasks match, more than --max 5: nothing done\n", "retry",
         "--state", "error", "--max", "5", "--yes");
  EXPECT(c, 2, "", "tasker retry: 6 tasks match, more than --max 5: nothing done\n", "retry",
         "--state", "error", "--max", "5");
  EXPECT(c, 2, "",
         "tasker retry: --max: invalid value \"0\": expected an integer from 1 to "
         "9223372036854775807\n",
         "retry", "--state", "error", "--max", "0");
  efx_unchanged(c->db, before);
  EXPECT(c, 0, "", "6 tasks matched; 6 failed steps will be retried now\n", "retry", "--state",
         "error", "--max", "6", "--yes");
}

/* Each test gets a fresh store holding the tasks above. */
#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(each_filter_selects_its_tasks_newest_first),
      TEST(json_prints_the_apis_page),
      TEST(the_table_shows_each_task_on_a_line),
      TEST(paging_with_cursor_sees_every_task_once),
      TEST(bad_values_name_the_flag_and_change_nothing),
      TEST(bulk_retry_counts_first_and_acts_with_yes),
      TEST(bulk_cancel_and_resolve),
      TEST(tasks_in_error_are_cancelled_by_id_and_by_filter),
      TEST(bulk_refusals_are_counted_by_reason_with_task_and_step),
      TEST(bulk_lists_the_first_20_refusals_and_counts_the_rest),
      TEST(no_filter_and_over_max_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
