/* The real binary: `tasker config check|show`, `tasker backoff --profile`,
 * exit 78 for bad configuration, origins, $TASKER_ENV and the default
 * config/tasker.toml. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/run_cli.h"

#define EXAMPLE "examples/config/tasker.toml"
#define LAYERS "tests/config/fixtures/layers/tasker.toml"
#define CI "tests/config/fixtures/layers/environments/ci.toml"

#define RUN(r, ...)                                                  \
  do {                                                               \
    const char *args_[] = {__VA_ARGS__, NULL};                       \
    assert_int_equal(run_cli((r), NULL, args_), 0);                  \
  } while (0)

/* Run the binary; expect this exit status and, unless err is NULL,
 * exactly this on stderr. */
static void expect_run(int status, const char *err, const char *const *args) {
  run_result r;
  assert_int_equal(run_cli(&r, NULL, args), 0);
  assert_int_equal(r.status, status);
  if (err != NULL) assert_string_equal(r.err, err);
  run_result_free(&r);
}
#define EXPECT(status, err, ...) expect_run((status), (err), (const char *const[]){__VA_ARGS__, NULL})

/* The line of `out` that starts with "KEY = ", without its newline. */
static const char *line_of(const char *out, const char *key, char *buf, size_t len) {
  size_t klen = strlen(key);
  for (const char *p = out; *p; p = strchr(p, '\n') + 1) {
    const char *end = strchr(p, '\n');
    if (end == NULL) break;
    if (strncmp(p, key, klen) == 0 && strncmp(p + klen, " = ", 3) == 0) {
      snprintf(buf, len, "%.*s", (int)(end - p), p);
      return buf;
    }
  }
  fail_msg("no line for %s in:\n%s", key, out);
  return NULL;
}

/* `config show` prints KEY = VALUE, padding, then "# ORIGIN". */
static void assert_shown(const char *out, const char *key, const char *value, const char *origin) {
  char line[1024], want[512];
  line_of(out, key, line, sizeof line);
  snprintf(want, sizeof want, "%s = %s ", key, value);
  if (strncmp(line, want, strlen(want)) != 0) fail_msg("line \"%s\": want \"%s\"", line, want);
  const char *hash = strstr(line, "  # ");
  assert_non_null(hash);
  assert_string_equal(hash + 4, origin);
}

static void check_accepts_the_examples(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "config", "check", EXAMPLE);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "examples/config/tasker.toml: ok (4 profiles)\n");
  assert_string_equal(r.err, "");
  run_result_free(&r);
  EXPECT(0, "", "--env", "production", "config", "check", EXAMPLE);
  EXPECT(0, "", "config", "check", "examples/config/environments/test.toml");
}

static void check_rejects_with_78(void **state) {
  (void)state;
  EXPECT(78,
         "tasker: tests/config/fixtures/bad_multiplier.toml:4:14: backoff.multiplier = 0.5: "
         "must be a number >= 1\n",
         "config", "check", "tests/config/fixtures/bad_multiplier.toml");
  EXPECT(78, "tasker: config file tests/config/fixtures/nowhere.toml not found\n", "config",
         "check", "tests/config/fixtures/nowhere.toml");
  EXPECT(78,
         "tasker: --set backoff.jitter=fuzzy: expected one of none, proportional, full, equal, "
         "decorrelated\n",
         "--set", "backoff.jitter=fuzzy", "config", "check", EXAMPLE);
}

static void usage_errors_exit_2(void **state) {
  (void)state;
  EXPECT(2, "tasker config: expected a subcommand: check [FILE] or show\n", "config");
  EXPECT(2, "tasker config: unknown subcommand \"frob\" (expected check or show)\n", "config",
         "frob");
  EXPECT(2, "tasker config: show: unexpected argument \"x\"\n", "config", "show", "x");
}

static void show_names_every_origin(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--config", LAYERS, "--env", "ci", "--set", "engine.workers=7", "config", "show");
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  assert_shown(r.out, "backoff.multiplier", "2.0", "default");
  assert_shown(r.out, "backoff.base", "\"2s\"", LAYERS ":3");
  assert_shown(r.out, "backoff.max_delay", "\"30s\"", CI ":2");
  assert_shown(r.out, "engine.workers", "7", "--set");
  assert_shown(r.out, "backoff.profiles.payments.schedule", "[\"1s\", \"5s\"]", LAYERS ":8");
  assert_shown(r.out, "backoff.profiles.quick.max_delay", "\"30s\"",
               "inherited from backoff.max_delay (" CI ":2)");
  assert_shown(r.out, "batch.max_item_attempts", "5", "default");
  run_result_free(&r);
}

static void show_json(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--config", LAYERS, "--set", "backoff.profiles.payments.max_delay=45s", "config",
      "show", "--json");
  assert_int_equal(r.status, 0);
  json_error_t jerr;
  json_t *all = json_loads(r.out, 0, &jerr);
  assert_non_null(all);
  assert_int_equal(json_object_size(all), 3 * 8 + 10 + 2 + 6 + 1 + 1); /* + [retention], [limits], [server] */
  json_t *s = json_object_get(all, "backoff.profiles.payments.max_delay");
  assert_string_equal(json_string_value(json_object_get(s, "value")), "45s");
  assert_int_equal(json_integer_value(json_object_get(s, "ms")), 45000);
  assert_string_equal(json_string_value(json_object_get(s, "origin")), "--set");
  s = json_object_get(all, "backoff.profiles.quick.max_delay");
  assert_string_equal(json_string_value(json_object_get(s, "origin")), LAYERS ":4");
  assert_string_equal(json_string_value(json_object_get(s, "inherited_from")),
                      "backoff.max_delay");
  s = json_object_get(all, "backoff.jitter_fraction");
  assert_true(json_real_value(json_object_get(s, "value")) == 0.1);
  assert_string_equal(json_string_value(json_object_get(s, "origin")), "default");
  s = json_object_get(all, "backoff.profiles.payments.schedule");
  assert_int_equal(json_integer_value(json_array_get(json_object_get(s, "ms"), 1)), 5000);
  assert_null(json_object_get(s, "inherited_from"));
  json_decref(all);
  run_result_free(&r);
}

/* Write text to dir/name. */
static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* config show lists each budget's and each configured schedule's keys
 * with where each came from (issue 19: schedules were missing), in text
 * and in --json; a key no layer set shows its default, a version not set
 * is not shown. */
static void show_lists_schedules_and_budgets(void **state) {
  (void)state;
  char dir[] = "/tmp/tasker-config-show-XXXXXX", cfg[600], cmd[600];
  assert_non_null(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "mkdir %s/environments", dir);
  assert_int_equal(system(cmd), 0);
  write_file(dir, "tasker.toml",
             "[budgets.api]\nratio = 0.2\n\n"
             "[schedules.nightly]\ncron = \"0 2 * * *\"\nzone = \"Europe/Berlin\"\n"
             "template = \"etl\"\ncontext = { source = \"orders\", n = 2 }\n\n"
             "[schedules.hourly]\ncron = \"@hourly\"\ntemplate = \"ping\"\nversion = \"3\"\n");
  write_file(dir, "environments/ci.toml", "[schedules.nightly]\nmissed = \"catch_up\"\n");
  snprintf(cfg, sizeof cfg, "%s/tasker.toml", dir);
  char file[640], overlay[640];
  snprintf(file, sizeof file, "%s/tasker.toml", dir);
  snprintf(overlay, sizeof overlay, "%s/environments/ci.toml", dir);
  char at[700];
  run_result r;
  RUN(&r, "--config", cfg, "--env", "ci", "--set", "schedules.hourly.zone=Asia/Tokyo", "config",
      "show");
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  snprintf(at, sizeof at, "%s:2", file);
  assert_shown(r.out, "budgets.api.ratio", "0.2", at);
  assert_shown(r.out, "budgets.api.window", "\"10s\"", "default");
  snprintf(at, sizeof at, "%s:5", file);
  assert_shown(r.out, "schedules.nightly.cron", "\"0 2 * * *\"", at);
  snprintf(at, sizeof at, "%s:6", file);
  assert_shown(r.out, "schedules.nightly.zone", "\"Europe/Berlin\"", at);
  snprintf(at, sizeof at, "%s:7", file);
  assert_shown(r.out, "schedules.nightly.template", "\"etl\"", at);
  snprintf(at, sizeof at, "%s:8", file);
  assert_shown(r.out, "schedules.nightly.context", "{\"source\":\"orders\",\"n\":2}", at);
  snprintf(at, sizeof at, "%s:2", overlay);
  assert_shown(r.out, "schedules.nightly.missed", "\"catch_up\"", at);
  assert_null(strstr(r.out, "schedules.nightly.version"));
  assert_shown(r.out, "schedules.hourly.zone", "\"Asia/Tokyo\"", "--set");
  snprintf(at, sizeof at, "%s:13", file);
  assert_shown(r.out, "schedules.hourly.version", "\"3\"", at);
  assert_shown(r.out, "schedules.hourly.missed", "\"skip\"", "default");
  run_result_free(&r);

  RUN(&r, "--config", cfg, "config", "show", "--json");
  assert_int_equal(r.status, 0);
  json_t *all = json_loads(r.out, 0, NULL);
  assert_non_null(all);
  json_t *s = json_object_get(all, "schedules.nightly.context");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "value"), "n")), 2);
  snprintf(at, sizeof at, "%s:8", file);
  assert_string_equal(json_string_value(json_object_get(s, "origin")), at);
  s = json_object_get(all, "schedules.hourly.zone");
  assert_string_equal(json_string_value(json_object_get(s, "value")), "UTC");
  assert_string_equal(json_string_value(json_object_get(s, "origin")), "default");
  assert_non_null(json_object_get(all, "budgets.api.per_host"));
  assert_null(json_object_get(all, "schedules.nightly.version"));
  json_decref(all);
  run_result_free(&r);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* The delays `tasker backoff --json` prints for attempts 1..n, unjittered. */
static void expect_delays(const char *const *args, const long long *want, size_t n) {
  run_result r;
  assert_int_equal(run_cli(&r, NULL, args), 0);
  if (r.status != 0) fail_msg("exit %d: %s", r.status, r.err);
  json_t *rows = json_loads(r.out, 0, NULL);
  assert_non_null(rows);
  assert_int_equal(json_array_size(rows), n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, i), "max_ms")),
                     want[i]);
  json_decref(rows);
  run_result_free(&r);
}

static void backoff_uses_a_configured_profile(void **state) {
  (void)state;
  const char *a1[] = {"--config", EXAMPLE, "--env", "test", "backoff", "--profile", "payments",
                      "--jitter", "none", "--attempts", "5", "--json", NULL};
  const long long w1[] = {10, 20, 50, 150, 200};
  expect_delays(a1, w1, 5);
  /* --set changes one field of the profile; the rest stays. */
  const char *a2[] = {"--config", EXAMPLE, "--env", "test", "--set",
                      "backoff.profiles.payments.max_delay=30ms", "backoff", "--profile",
                      "payments", "--jitter", "none", "--attempts", "4", "--json", NULL};
  const long long w2[] = {10, 20, 30, 30};
  expect_delays(a2, w2, 4);
  /* Flags still override fields of the profile. */
  const char *a3[] = {"--config", EXAMPLE, "--env", "test", "backoff", "--profile", "fast",
                      "--jitter", "none", "--base", "4ms", "--multiplier", "2", "--attempts", "4",
                      "--json", NULL};
  const long long w3[] = {4, 8, 16, 20};
  expect_delays(a3, w3, 4);
  /* Without --profile: the configured default profile. */
  const char *a4[] = {"--config", EXAMPLE, "--env", "test", "backoff", "--attempts", "3",
                      "--json", NULL};
  const long long w4[] = {10, 20, 40};
  expect_delays(a4, w4, 3);
}

static void backoff_unknown_profile_exits_2(void **state) {
  (void)state;
  EXPECT(2,
         "tasker backoff: unknown profile \"paymnts\" (known profiles: default, payments, fast, "
         "contended)\n",
         "--config", EXAMPLE, "backoff", "--profile", "paymnts");
  EXPECT(78, NULL, "--config", "tests/config/fixtures/bad_multiplier.toml", "backoff");
}

static void tasker_env_selects_the_overlay(void **state) {
  (void)state;
  run_result r;
  setenv("TASKER_ENV", "test", 1);
  RUN(&r, "--config", EXAMPLE, "config", "show");
  assert_shown(r.out, "backoff.base", "\"10ms\"", "examples/config/environments/test.toml:6");
  run_result_free(&r);
  /* --env wins; --env '' turns the overlay off. */
  RUN(&r, "--config", EXAMPLE, "--env", "production", "config", "show");
  assert_shown(r.out, "engine.workers", "32", "examples/config/environments/production.toml:17");
  run_result_free(&r);
  RUN(&r, "--config", EXAMPLE, "--env", "", "config", "show");
  assert_shown(r.out, "backoff.base", "\"1s\"", EXAMPLE ":16");
  run_result_free(&r);
  setenv("TASKER_ENV", "staging", 1);
  EXPECT(78,
         "tasker: environment \"staging\": overlay file "
         "examples/config/environments/staging.toml not found\n",
         "--config", EXAMPLE, "config", "show");
  unsetenv("TASKER_ENV");
}

/* With no --config, config/tasker.toml in the working directory is used. */
static void default_config_path(void **state) {
  (void)state;
  char bin[2 * PATH_MAX], top[PATH_MAX];
  assert_non_null(getcwd(top, sizeof top));
  const char *t = tasker_path();
  snprintf(bin, sizeof bin, "%s%s%s", t[0] == '/' ? "" : top, t[0] == '/' ? "" : "/", t);
  setenv("TASKER", bin, 1);
  assert_int_equal(chdir("examples"), 0);
  run_result r;
  RUN(&r, "--env", "test", "config", "show");
  assert_int_equal(r.status, 0);
  assert_shown(r.out, "backoff.multiplier", "2.0", "config/tasker.toml:17");
  assert_shown(r.out, "backoff.base", "\"10ms\"", "config/environments/test.toml:6");
  run_result_free(&r);
  assert_int_equal(chdir(top), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(check_accepts_the_examples),
      cmocka_unit_test(check_rejects_with_78),
      cmocka_unit_test(usage_errors_exit_2),
      cmocka_unit_test(show_names_every_origin),
      cmocka_unit_test(show_json),
      cmocka_unit_test(show_lists_schedules_and_budgets),
      cmocka_unit_test(backoff_uses_a_configured_profile),
      cmocka_unit_test(backoff_unknown_profile_exits_2),
      cmocka_unit_test(tasker_env_selects_the_overlay),
      cmocka_unit_test(default_config_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
