/* Delayed starts (`submit --at`, `--in`), `tasker prune` and the durability
 * setting through the real binary on a real SQLite file (DESIGN §16): a
 * delayed task waits and says until when, bad times are refused (exit 2,
 * nothing stored), a dry run changes nothing and counts what a prune then
 * removes exactly, and unfinished tasks are never touched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/run_cli.h"

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"10ms\"\n";

static const char templates[] =
    "name = \"ok\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP EFX_STEP("b") EFX_NOOP
    "depends_on = [\"a\"]\n";
static const char broken[] = "name = \"broken\"\nversion = \"1\"\n" EFX_STEP("a")
    "handler = { kind = \"builtin\", name = \"fail\", permanent = true }\n";

#define OK(c, ...) cli_stdout((c), ARGS(__VA_ARGS__))

static int64_t submit(cli *c, const char *const *args) {
  char *out = cli_stdout(c, args);
  int64_t id = atoll(out);
  free(out);
  assert_true(id > 0);
  return id;
}

/* A usage error: exit 2, nothing on stdout, one line on stderr holding
 * `want`, and the store exactly as it was. */
static void refused(cli *c, const char *want, const char *const *args) {
  char *before = efx_snapshot(c->db);
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != 2 || r.out[0] != '\0' || strstr(r.err, want) == NULL ||
      strchr(r.err, '\n') != r.err + strlen(r.err) - 1)
    fail_msg("exit %d (want 2)\nstdout: %s\nstderr: %s(want one line with %s)", r.status, r.out,
             r.err, want);
  run_result_free(&r);
  char *after = efx_snapshot(c->db);
  assert_string_equal(before, after);
  free(before);
  free(after);
}
#define REFUSED(c, want, ...) refused((c), (want), ARGS(__VA_ARGS__))

static cli *setup_store(void) {
  cli *c = cli_store_open(config);
  char path[512];
  efx_write(c->dir, "ok.toml", templates, path, sizeof path);
  free(OK(c, "template", "add", path));
  efx_write(c->dir, "broken.toml", broken, path, sizeof path);
  free(OK(c, "template", "add", path));
  return c;
}

static void delayed_submit(void **state) {
  (void)state;
  cli *c = setup_store();
  int64_t at = submit(c, ARGS("submit", "ok", "--at", "2099-01-01T00:00:00Z"));
  int64_t in = submit(c, ARGS("submit", "ok", "--in", "3h", "--count", "2"));
  int64_t past = submit(c, ARGS("submit", "ok", "--at", "2000-01-01T01:00:00+01:00"));
  /* The start is the root's run_at; the others wait for their parents. */
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT run_at FROM steps WHERE task_id = %lld AND idx = 0",
           (long long)at);
  assert_int_equal(efx_sql_int(c->db, "%s", sql), INT64_C(4070908800000));
  char *out;
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)at);
  out = OK(c, "why", id, "a");
  assert_non_null(strstr(out, "a: scheduled (a delayed start) until 2099-01-01T00:00:00Z, in "));
  free(out);
  out = OK(c, "show", id);
  assert_non_null(strstr(out, "pending (scheduled)"));
  free(out);
  out = OK(c, "--json", "show", id);
  assert_non_null(strstr(out, "\"execution_status\": \"scheduled\""));
  free(out);
  /* The engine leaves them for later and runs the one whose time passed. */
  free(OK(c, "run", "--until-idle"));
  snprintf(sql, sizeof sql, "SELECT count(*) FROM tasks WHERE state = 'complete'");
  assert_int_equal(efx_sql_int(c->db, "%s", sql), 1);
  assert_int_equal(efx_sql_int(c->db, "SELECT state = 'complete' FROM tasks WHERE id = %lld",
                               (long long)past),
                   1);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM tasks WHERE state = 'pending' AND"
                                      " id IN (%lld, %lld, %lld)",
                               (long long)at, (long long)in, (long long)in + 1),
                   3);
  /* Bad times: refused, nothing stored. */
  REFUSED(c, "--at: invalid value \"5h\": expected an RFC 3339 time", "submit", "ok", "--at", "5h");
  REFUSED(c, "--at: invalid value \"2026-13-01T00:00:00Z\": expected an RFC 3339 time",
          "submit", "ok", "--at", "2026-13-01T00:00:00Z");
  REFUSED(c, "--at: invalid value \"2026-11-25T09:00:00\": expected an RFC 3339 time",
          "submit", "ok", "--at", "2026-11-25T09:00:00");
  REFUSED(c, "--in: invalid duration \"soon\": expected a number with a unit", "submit", "ok",
          "--in", "soon");
  REFUSED(c, "--in: invalid duration \"-5m\": must not be negative", "submit", "ok", "--in",
          "-5m");
  REFUSED(c, "--at and --in: give one start time", "submit", "ok", "--in", "1h", "--at",
          "2099-01-01T00:00:00Z");
  cli_store_close(c);
}

/* Rows of the finished tasks of states `in` (an SQL list), by table. */
static void finished_rows(cli *c, const char *in, char *out, size_t cap) {
  char *tasks = efx_sql_text(c->db,
                             "SELECT (SELECT count(*) FROM tasks WHERE state IN (%s)),"
                             " (SELECT count(*) FROM steps WHERE task_id IN (SELECT id FROM tasks"
                             " WHERE state IN (%s))),"
                             " (SELECT count(*) FROM attempts WHERE step_id IN (SELECT s.id FROM"
                             " steps s JOIN tasks t ON t.id = s.task_id WHERE t.state IN (%s))),"
                             " (SELECT count(*) FROM transitions WHERE task_id IN (SELECT id FROM"
                             " tasks WHERE state IN (%s)))",
                             in, in, in, in);
  int64_t t, s, a, tr;
  assert_int_equal(sscanf(tasks, "%lld|%lld|%lld|%lld", (long long *)&t, (long long *)&s,
                          (long long *)&a, (long long *)&tr),
                   4);
  snprintf(out, cap, "%lld tasks, %lld steps, %lld attempts, %lld transitions, 0 items\n",
           (long long)t, (long long)s, (long long)a, (long long)tr);
  free(tasks);
}

static void prune(void **state) {
  (void)state;
  cli *c = setup_store();
  for (int i = 0; i < 3; i++) submit(c, ARGS("submit", "ok"));
  submit(c, ARGS("submit", "broken"));
  int64_t gone = submit(c, ARGS("submit", "ok"));
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)gone);
  free(OK(c, "cancel", id));
  free(OK(c, "run", "--until-idle"));
  int64_t waiting = submit(c, ARGS("submit", "ok", "--in", "1h"));
  int64_t pending = submit(c, ARGS("submit", "broken"));
  char keep_sql[256];
  snprintf(keep_sql, sizeof keep_sql,
           "SELECT * FROM tasks t JOIN steps s ON s.task_id = t.id WHERE t.id IN (%lld, %lld)"
           " ORDER BY s.id",
           (long long)waiting, (long long)pending);
  char *kept = efx_sql_text(c->db, "%s", keep_sql);
  char want[256], line[300];

  /* A dry run counts and changes nothing. */
  finished_rows(c, "'complete', 'error', 'cancelled'", want, sizeof want);
  snprintf(line, sizeof line, "would remove %s", want);
  char *before = efx_snapshot(c->db);
  char *out = OK(c, "prune", "--finished-before", "0s", "--dry-run");
  assert_string_equal(out, line);
  free(out);
  char *after = efx_snapshot(c->db);
  assert_string_equal(before, after);
  free(before);
  free(after);
  /* Nothing finished an hour ago. */
  out = OK(c, "prune", "--finished-before", "1h");
  assert_string_equal(out, "removed 0 tasks, 0 steps, 0 attempts, 0 transitions, 0 items\n");
  free(out);
  /* complete only, in batches of 2: exact counts. */
  finished_rows(c, "'complete'", want, sizeof want);
  snprintf(line, sizeof line, "removed %s", want);
  out = OK(c, "prune", "--finished-before", "0s", "--state", "complete", "--batch", "2");
  assert_string_equal(out, line);
  free(out);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM tasks WHERE state = 'complete'"), 0);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM tasks WHERE state = 'error'"), 1);
  /* The rest, as JSON. */
  finished_rows(c, "'error', 'cancelled'", want, sizeof want);
  out = OK(c, "--json", "prune", "--finished-before", "0s", "--state", "error,cancelled");
  assert_non_null(strstr(out, "\"dry_run\": false"));
  assert_non_null(strstr(out, "\"tasks\": 2,"));
  free(out);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM tasks"), 2);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM attempts WHERE step_id NOT IN"
                                      " (SELECT id FROM steps)"),
                   0);
  assert_int_equal(efx_sql_int(c->db, "SELECT count(*) FROM transitions WHERE task_id NOT IN"
                                      " (SELECT id FROM tasks)"),
                   0);
  char *still = efx_sql_text(c->db, "%s", keep_sql);
  assert_string_equal(kept, still);
  free(kept);
  free(still);
  /* Bad values. */
  REFUSED(c, "--finished-before is required", "prune");
  REFUSED(c, "--state: invalid value \"done\": expected complete, error or cancelled", "prune",
          "--finished-before", "1h", "--state", "complete,done");
  REFUSED(c, "--finished-before: time \"soon\"", "prune", "--finished-before", "soon");
  REFUSED(c, "--batch", "prune", "--finished-before", "1h", "--batch", "0");
  cli_store_close(c);
}

/* The store's size is in `status`; a bad durability is a configuration
 * error that names the file, line and column. */
static void status_size_and_durability(void **state) {
  (void)state;
  cli *c = setup_store();
  char *out = OK(c, "status");
  assert_non_null(strstr(out, "store size: "));
  free(out);
  out = OK(c, "--json", "status");
  assert_non_null(strstr(out, "\"store_bytes\": "));
  free(out);
  char path[512];
  efx_write(c->dir, "fast.toml", "[engine]\ndurability = \"fast\"\n", path, sizeof path);
  const char *fast[] = {"--config", path, "--db", c->url, "status", NULL};
  run_result r;
  assert_int_equal(run_cli(&r, NULL, fast), 0);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  efx_write(c->dir, "bad.toml", "[engine]\ndurability = \"fsat\"\n", path, sizeof path);
  const char *bad[] = {"--config", path, "--db", c->url, "status", NULL};
  assert_int_equal(run_cli(&r, NULL, bad), 0);
  assert_int_equal(r.status, 78);
  char want[700];
  snprintf(want, sizeof want,
           "tasker: %s:2:14: engine.durability = \"fsat\": expected one of full, fast (did you "
           "mean \"fast\"?)\n",
           path);
  assert_string_equal(r.err, want);
  run_result_free(&r);
  cli_store_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(delayed_submit),
      cmocka_unit_test(prune),
      cmocka_unit_test(status_size_and_durability),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
