/* One test per class of configuration error, each with its exact message:
 * FILE:LINE:COLUMN (or --set KEY=VALUE), the key, the value and what is
 * allowed. Files are written to a scratch directory that is the cwd, so
 * messages name "x.toml". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tasker/config.h>

static char scratch[] = "/tmp/tasker-config-XXXXXX";
static char top[4096];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* Load x.toml holding `toml` (NULL: no file), with an optional overlay
 * environments/ci.toml holding `overlay`, then the flags; expect failure
 * with exactly `want` and code TK_ECONFIG. */
static void expect_layers(const char *toml, const char *overlay, const char *const *sets,
                          int nsets, const char *want) {
  if (toml) write_file("x.toml", toml);
  if (overlay) write_file("environments/ci.toml", overlay);
  tk_config_source src = {toml ? "x.toml" : NULL, NULL, overlay ? "ci" : NULL, sets, nsets};
  tk_config *c = (tk_config *)1;
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_config_load(&src, &c, &err);
  assert_null(c);
  assert_string_equal(err.msg, want);
  assert_int_equal(rc, TK_ECONFIG);
}

static void expect(const char *toml, const char *want) { expect_layers(toml, NULL, NULL, 0, want); }

static void expect_set(const char *set, const char *want) {
  const char *sets[] = {set};
  expect_layers(NULL, NULL, sets, 1, want);
}

static int setup(void **state) {
  (void)state;
  if (getcwd(top, sizeof top) == NULL || mkdtemp(scratch) == NULL || chdir(scratch) != 0 ||
      mkdir("environments", 0700) != 0)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unlink("x.toml");
  unlink("environments/ci.toml");
  rmdir("environments");
  if (chdir(top) != 0) return -1;
  return rmdir(scratch);
}

static void unknown_key_suggests(void **state) {
  (void)state;
  expect("# tuning\n"
         "[backoff]\n"
         "base = \"1s\"\n"
         "multiplier = 2\n"
         "max_delay = \"1m\"\n"
         "min_delay = \"1s\"\n"
         "max_dealy = \"2m\"\n",
         "x.toml:7:1: unknown key \"backoff.max_dealy\" (did you mean \"max_delay\"?)");
  expect("[engnie]\nworkers = 2\n", "x.toml:1:2: unknown key \"engnie\" (did you mean \"engine\"?)");
  expect("[backoff.profiles.fast]\nmultiplyer = 3\n",
         "x.toml:2:1: unknown key \"backoff.profiles.fast.multiplyer\" (did you mean "
         "\"multiplier\"?)");
  expect("[backoff]\nprofile.fast.base = 1\n",
         "x.toml:2:1: unknown key \"backoff.profile\" (did you mean \"profiles\"?)");
}

static void unknown_key_lists_known_keys(void **state) {
  (void)state;
  expect("[engine]\ncolour = \"blue\"\n",
         "x.toml:2:1: unknown key \"engine.colour\" (known keys: max_attempts, lease, heartbeat, "
         "claim_batch, workers, max_async, db, reconnect_backoff, reconnect_give_up, "
         "durability)");
  expect("title = \"x\"\n", "x.toml:1:1: unknown key \"title\" (known keys: backoff, engine, batch, "
                           "budgets, schedules, retention, limits, queues, server)");
}

static void wrong_type(void **state) {
  (void)state;
  expect("[engine]\nworkers = \"four\"\n",
         "x.toml:2:11: engine.workers = \"four\": expected an integer from 1 to 1024, got a string");
  expect("[engine]\nlease = true\n",
         "x.toml:2:9: engine.lease = true: expected a duration such as \"150ms\", \"2s\", \"5m\", "
         "\"1h\" or a number of seconds, got a boolean");
  expect("[backoff]\nmultiplier = \"2\"\n",
         "x.toml:2:14: backoff.multiplier = \"2\": expected a number >= 1, got a string");
  expect("[backoff]\njitter = 3\n",
         "x.toml:2:10: backoff.jitter = 3: expected one of none, proportional, full, equal, "
         "decorrelated, got an integer");
  expect("[engine]\nmax_attempts = 2.0\n",
         "x.toml:2:16: engine.max_attempts = 2.0: expected an integer from 1 to 2147483647, got a "
         "float");
  expect("[engine]\ndb = 5\n", "x.toml:2:6: engine.db = 5: expected a non-empty string, got an "
                               "integer");
}

static void wrong_type_for_a_table(void **state) {
  (void)state;
  expect("backoff = 3\n", "x.toml:1:11: backoff = 3: expected a table, got an integer");
  expect("[[engine]]\nworkers = 2\n",
         "x.toml:1:1: engine = [...]: expected a table, got an array");
  expect("[backoff]\nprofiles = 1\n",
         "x.toml:2:12: backoff.profiles = 1: expected a table, got an integer");
  expect("[backoff.profiles]\nfast = \"quick\"\n",
         "x.toml:2:8: backoff.profiles.fast = \"quick\": expected a table, got a string");
}

static void negative_delay(void **state) {
  (void)state;
  expect("[backoff]\nbase = -1\n", "x.toml:2:8: backoff.base = -1: must be a duration >= 0");
  expect("[backoff]\nmin_delay = \"-2s\"\n",
         "x.toml:2:13: backoff.min_delay = \"-2s\": must be a duration >= 0");
  expect("[backoff]\nmax_server_delay = -0.5\n",
         "x.toml:2:20: backoff.max_server_delay = -0.5: must be a duration >= 0");
  expect("[engine]\nlease = 0\n", "x.toml:2:9: engine.lease = 0: must be a duration > 0");
}

static void bad_duration(void **state) {
  (void)state;
  expect("[engine]\nlease = \"30 secs\"\n",
         "x.toml:2:9: engine.lease = \"30 secs\": expected a duration such as \"150ms\", \"2s\", "
         "\"5m\", \"1h\" or a number of seconds");
  expect("[backoff]\nschedule = [\"1s\", \"soon\"]\n",
         "x.toml:2:19: backoff.schedule[2] = \"soon\": expected a duration such as \"150ms\", "
         "\"2s\", \"5m\", \"1h\" or a number of seconds");
  expect("[backoff]\nmax_delay = 1e300\n",
         "x.toml:2:13: backoff.max_delay = 1e+300: is too large: must be at most "
         "\"2562047788015h12m55.807s\"");
  expect("[engine]\nlease = \"9999999999999999h\"\n",
         "x.toml:2:9: engine.lease = \"9999999999999999h\": is too large: must be at most "
         "\"2562047788015h12m55.807s\"");
}

static void multiplier_below_one(void **state) {
  (void)state;
  expect("[backoff]\nmultiplier = 0.5\n",
         "x.toml:2:14: backoff.multiplier = 0.5: must be a number >= 1");
  expect("[backoff]\nmultiplier = inf\n",
         "x.toml:2:14: backoff.multiplier = inf: must be a number >= 1");
}

static void jitter_out_of_range(void **state) {
  (void)state;
  expect("[backoff]\njitter_fraction = 1.5\n",
         "x.toml:2:19: backoff.jitter_fraction = 1.5: must be a number from 0 to 1");
  expect("[backoff]\njitter_fraction = -0.1\n",
         "x.toml:2:19: backoff.jitter_fraction = -0.1: must be a number from 0 to 1");
  expect("[backoff]\njitter = \"fuzzy\"\n",
         "x.toml:2:10: backoff.jitter = \"fuzzy\": expected one of none, proportional, full, "
         "equal, decorrelated");
}

static void integer_out_of_range(void **state) {
  (void)state;
  expect("[engine]\nworkers = 0\n",
         "x.toml:2:11: engine.workers = 0: must be an integer from 1 to 1024");
  expect("[engine]\nclaim_batch = 10001\n",
         "x.toml:2:15: engine.claim_batch = 10001: must be an integer from 1 to 10000");
  expect("[batch]\nmax_in_call_retries = -1\n",
         "x.toml:2:23: batch.max_in_call_retries = -1: must be an integer from 0 to 1000");
  expect("[limits]\nmap_max = 0\n",
         "x.toml:2:11: limits.map_max = 0: must be an integer from 1 to 1000000000");
  expect("[engine]\ndb = \"\"\n", "x.toml:2:6: engine.db = \"\": must be a non-empty string");
}

static void schedule_too_long(void **state) {
  (void)state;
  char toml[512] = "[backoff]\nschedule = [";
  for (int i = 0; i < 33; i++) strcat(toml, i ? ", 1" : "1");
  strcat(toml, "]\n");
  expect(toml, "x.toml:2:12: backoff.schedule = [...]: must be an array of at most 32 durations");
}

static void max_delay_below_min_delay(void **state) {
  (void)state;
  expect("# delays\n"
         "[backoff]\n"
         "base = \"1s\"\n"
         "jitter = \"none\"\n"
         "max_delay = \"1s\"\n"
         "min_delay = \"2s\"\n",
         "x.toml:5:13: backoff.max_delay = \"1s\" is below min_delay = \"2s\" (x.toml:6:13)");
  /* A profile's own value is blamed over an inherited one. */
  expect("[backoff]\nmax_delay = \"10s\"\n[backoff.profiles.slow]\nmin_delay = \"1m\"\n",
         "x.toml:4:13: backoff.profiles.slow.min_delay = \"1m\" is above max_delay = \"10s\" "
         "(x.toml:2:13)");
  /* Otherwise the later layer is blamed. */
  expect_layers("[backoff]\nmax_delay = \"10s\"\n", "[backoff]\nmin_delay = \"20s\"\n", NULL, 0,
                "environments/ci.toml:2:13: backoff.min_delay = \"20s\" is above max_delay = "
                "\"10s\" (x.toml:2:13)");
  expect_layers("[backoff]\nmin_delay = \"1s\"\n", "[backoff]\nmax_delay = 0.5\n", NULL, 0,
                "environments/ci.toml:2:13: backoff.max_delay = \"500ms\" is below min_delay = "
                "\"1s\" (x.toml:2:13)");
  /* The overlay's cap is inherited by a profile that only sets a floor. */
  expect_layers("[backoff.profiles.p]\nmin_delay = \"1m\"\n", "[backoff]\nmax_delay = \"30s\"\n",
                NULL, 0,
                "x.toml:2:13: backoff.profiles.p.min_delay = \"1m\" is above max_delay = \"30s\" "
                "(environments/ci.toml:2:13)");
}

static void heartbeat_not_below_lease(void **state) {
  (void)state;
  expect("[engine]\nheartbeat = \"30s\"\n",
         "x.toml:2:13: engine.heartbeat = \"30s\" must be below lease = \"30s\" (default)");
  expect("[engine]\nlease = \"5s\"\n",
         "x.toml:2:9: engine.lease = \"5s\" must be above heartbeat = \"10s\" (default)");
}

static void profile_names(void **state) {
  (void)state;
  expect("[backoff.profiles.default]\nbase = \"1s\"\n",
         "x.toml:1:19: backoff.profiles.default: the default profile is [backoff]; set its keys "
         "there");
  expect("[backoff.profiles.\"a b\"]\nbase = \"1s\"\n",
         "x.toml:1:19: backoff.profiles.\"a b\": a profile name must be 1 to 64 letters, digits, "
         "\"_\" or \"-\"");
  /* The name is shown escaped, whatever it holds. */
  expect("[backoff.profiles.\"a\\\"b\\u0000\"]\nbase = \"1s\"\n",
         "x.toml:1:19: backoff.profiles.\"a\\\"b\\u0000\": a profile name must be 1 to 64 "
         "letters, digits, \"_\" or \"-\"");
}

/* [budgets.NAME] (DESIGN §14): each key's type and range, the window's
 * 100 ms steps and the floor of one retry per window, placed at the value
 * to blame; names as for profiles. */
static void budget_errors(void **state) {
  (void)state;
  expect("[budgets.api]\nratio = -0.5\n",
         "x.toml:2:9: budgets.api.ratio = -0.5: must be a number from 0 to 1000 (retries per "
         "first attempt)");
  expect("[budgets.api]\nratio = \"10%\"\n",
         "x.toml:2:9: budgets.api.ratio = \"10%\": expected a number from 0 to 1000 (retries per "
         "first attempt), got a string");
  expect("[budgets.api]\nwindow = \"50ms\"\n",
         "x.toml:2:10: budgets.api.window = \"50ms\": must be a duration from 100ms to 24h");
  expect("[budgets.api]\nwindow = \"25h\"\n",
         "x.toml:2:10: budgets.api.window = \"25h\": must be a duration from 100ms to 24h");
  expect("[budgets.api]\nratio = 0.2\nwindow = \"150ms\"\nmin_per_second = 10\n",
         "x.toml:3:10: budgets.api.window = \"150ms\": must be a multiple of 100ms (the window "
         "slides in 100 equal steps)");
  expect("[budgets.api]\nmin_per_second = 0.05\n",
         "x.toml:2:18: budgets.api.min_per_second = 0.05: with window = \"10s\" (default) the "
         "floor allows 0.5 retries per window; min_per_second x window must be at least 1, or a "
         "deferred retry could wait for first attempts that never come");
  /* The later layer's value is blamed: here the window, set by the flag. */
  const char *sets[] = {"budgets.api.window=500ms"};
  expect_layers("[budgets.api]\nmin_per_second = 1\n", NULL, sets, 1,
                "--set budgets.api.window=500ms: budgets.api.window = \"500ms\": with "
                "min_per_second = 1.0 (x.toml:2:18) the floor allows 0.5 retries per window; "
                "min_per_second x window must be at least 1, or a deferred retry could wait for "
                "first attempts that never come");
  expect("[budgets.api]\nmin_per_second = -1\n",
         "x.toml:2:18: budgets.api.min_per_second = -1: must be a number from 0 to 1000000");
  expect("[budgets.api]\nper_host = \"yes\"\n",
         "x.toml:2:12: budgets.api.per_host = \"yes\": expected true or false, got a string");
  expect("[budgets.api]\nratoi = 0.1\n",
         "x.toml:2:1: unknown key \"budgets.api.ratoi\" (did you mean \"ratio\"?)");
  expect("[budgets.api]\nburst = 3\n",
         "x.toml:2:1: unknown key \"budgets.api.burst\" (known keys: ratio, window, "
         "min_per_second, per_host)");
  expect("[budgets]\napi = 0.1\n",
         "x.toml:2:7: budgets.api = 0.1: expected a table, got a float");
  expect("budgets = 1\n", "x.toml:1:11: budgets = 1: expected a table, got an integer");
  expect("[budgets.\"a b\"]\nratio = 1\n",
         "x.toml:1:10: budgets.\"a b\": a budget name must be 1 to 64 letters, digits, \"_\" or "
         "\"-\"");
  expect("[budget.api]\nratio = 1\n",
         "x.toml:1:2: unknown key \"budget\" (did you mean \"budgets\"?)");
}

static void syntax_error_names_the_file(void **state) {
  (void)state;
  write_file("x.toml", "[backoff\nbase = 1\n");
  tk_config_source src = {"x.toml", NULL, NULL, NULL, 0};
  tk_config *c = NULL;
  tk_err err;
  assert_int_equal(tk_config_load(&src, &c, &err), TK_ESYNTAX);
  assert_null(c);
  assert_true(strncmp(err.msg, "x.toml:1:", 9) == 0);
}

static void set_errors(void **state) {
  (void)state;
  expect_set("backoff.jitter=fuzzy",
             "--set backoff.jitter=fuzzy: expected one of none, proportional, full, equal, "
             "decorrelated");
  expect_set("backoff.max_dealy=1s",
             "--set backoff.max_dealy=1s: unknown key \"backoff.max_dealy\" (did you mean "
             "\"max_delay\"?)");
  expect_set("engine.workers=four",
             "--set engine.workers=four: expected an integer from 1 to 1024, got a string");
  expect_set("backoff.multiplier=0.5", "--set backoff.multiplier=0.5: must be a number >= 1");
  expect_set("backoff.schedule=[\"1s\",true]",
             "--set backoff.schedule=[\"1s\",true]: backoff.schedule[2] = true: expected a "
             "duration such as \"150ms\", \"2s\", \"5m\", \"1h\" or a number of seconds, got a "
             "boolean");
  expect_set("backoff.min_delay=10m",
             "--set backoff.min_delay=10m: backoff.min_delay = \"10m\" is above max_delay = "
             "\"5m\" (default)");
  expect_set("engine workers=4", "--set engine workers=4: invalid key \"engine workers\": "
                                 "expected a dotted name such as backoff.max_delay");
  expect_set("engine.workers", "--set engine.workers: expected KEY=VALUE");
  /* A value the parser refuses is located by its column in the flag. */
  expect_set("engine.workers=99999999999999999999",
             "--set engine.workers=99999999999999999999: invalid value: line 1, column 16: "
             "integer 99999999999999999999 does not fit in a 64-bit signed integer "
             "(9223372036854775807 is the largest)");
  expect_set("backoff.profiles.default.base=1s",
             "--set backoff.profiles.default.base=1s: backoff.profiles.default: the default "
             "profile is [backoff]; set its keys there");
}

/* A line break cannot smuggle in a second key: such a value is a string. */
static void set_value_with_a_line_break_is_a_string(void **state) {
  (void)state;
  const char *sets[] = {"engine.db=x\nengine.workers = 0"};
  tk_config_source src = {NULL, NULL, NULL, sets, 1};
  tk_config *c = NULL;
  assert_int_equal(tk_config_load(&src, &c, NULL), 0);
  assert_string_equal(tk_config_engine(c)->db, "x\nengine.workers = 0");
  assert_int_equal(tk_config_engine(c)->workers, 4);
  tk_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unknown_key_suggests),
      cmocka_unit_test(unknown_key_lists_known_keys),
      cmocka_unit_test(wrong_type),
      cmocka_unit_test(wrong_type_for_a_table),
      cmocka_unit_test(negative_delay),
      cmocka_unit_test(bad_duration),
      cmocka_unit_test(multiplier_below_one),
      cmocka_unit_test(jitter_out_of_range),
      cmocka_unit_test(integer_out_of_range),
      cmocka_unit_test(schedule_too_long),
      cmocka_unit_test(max_delay_below_min_delay),
      cmocka_unit_test(heartbeat_not_below_lease),
      cmocka_unit_test(profile_names),
      cmocka_unit_test(budget_errors),
      cmocka_unit_test(syntax_error_names_the_file),
      cmocka_unit_test(set_errors),
      cmocka_unit_test(set_value_with_a_line_break_is_a_string),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
