/* Which commands make a store, through the real binary: only `tasker
 * init`. Every other command on a path where no store is (a mistyped
 * name, a missing directory) says so, naming the store and `tasker init`,
 * exits 1 and leaves no file behind; an empty --db is a usage error, not
 * ./tasker.db. (The PostgreSQL side, a database without the schema, is
 * tests/postgres/cli_uninitialized.sh.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli_expect.h"
#include "common/engine_fixture.h"
#include "common/run_cli.h"

/* The names in dir (but . and ..), sorted, space-separated, into out. */
static void entries(const char *dir, char *out, size_t cap) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort);
  assert_true(n >= 0);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    const char *name = list[i]->d_name;
    size_t used = strlen(out);
    if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
      snprintf(out + used, cap - used, "%s%s", used ? " " : "", name);
    free(list[i]);
  }
  free(list);
}

/* The commands that need a store, with a path in `dir` holding none:
 * each says `why` of the path, and the files of dir stay `files`. */
static void commands_refuse_missing(const char *dir, const char *url, const char *tpl,
                                    const char *why, const char *files) {
  static const char *const cmds[][6] = {
      {"status"},
      {"--json", "status"},
      {"show", "1"},
      {"show", "1", "--history"},
      {"why", "1", "a"},
      {"tasks"},
      {"tasks", "--state", "error"},
      {"template", "list"},
      {"template", "add", "@TPL"}, /* a template file that exists */
      {"schedule", "list"},
      {"schedule", "remove", "nightly"},
      {"submit", "ok"},
      {"run", "--until-idle"},
      {"prune", "--finished-before", "1h", "--dry-run"},
      {"retry", "1", "a"},
      {"resolve", "1", "a"},
      {"cancel", "1"},
      {"serve", "--listen", "127.0.0.1:0"},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    const char *args[10] = {"--db", url};
    size_t n = 2;
    for (size_t k = 0; k < 6 && cmds[i][k]; k++)
      args[n++] = strcmp(cmds[i][k], "@TPL") == 0 ? tpl : cmds[i][k];
    args[n] = NULL;
    run_result r;
    assert_int_equal(run_cli(&r, NULL, args), 0);
    /* One line: "tasker CMD: sqlite store PATH does not exist: ...". */
    const char *path = strncmp(url, "sqlite:", 7) == 0 ? url + 7 : url;
    char want[700];
    snprintf(want, sizeof want, ": sqlite store %s %s: run `tasker init` to create it\n", path,
             why);
    size_t el = strlen(r.err), wl = strlen(want);
    if (r.status != 1 || r.out[0] != '\0' || strncmp(r.err, "tasker ", 7) != 0 || el < wl ||
        strcmp(r.err + el - wl, want) != 0 || strchr(r.err, '\n') != r.err + el - 1)
      fail_msg("%s: exit %d (want 1)\nstdout: %s\nstderr: %s(want one line ending %s)", args[2],
               r.status, r.out, r.err, want);
    run_result_free(&r);
    char left[512];
    entries(dir, left, sizeof left);
    if (strcmp(left, files) != 0) fail_msg("after %s: %s holds \"%s\"", args[2], dir, left);
  }
}

static void only_init_creates(void **state) {
  (void)state;
  char dir[256], tpl[400], url[400], nested[400];
  efx_tmpdir(dir, sizeof dir);
  efx_write(dir, "ok.toml",
            "name = \"ok\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP, tpl, sizeof tpl);
  /* A file not there, and one in a directory not there. */
  snprintf(url, sizeof url, "sqlite:%s/notinit.db", dir);
  commands_refuse_missing(dir, url, tpl, "does not exist", "ok.toml");
  snprintf(nested, sizeof nested, "sqlite:%s/missing/notinit.db", dir);
  commands_refuse_missing(dir, nested, tpl, "does not exist", "ok.toml");
  /* A bare path is SQLite's too. */
  snprintf(url, sizeof url, "%s/bare.db", dir);
  commands_refuse_missing(dir, url, tpl, "does not exist", "ok.toml");
  /* An empty file stays empty: no header, no WAL written into it. */
  char empty[400];
  efx_write(dir, "empty.db", "", empty, sizeof empty);
  commands_refuse_missing(dir, empty, tpl, "is an empty file", "empty.db ok.toml");
  char *still = efx_read(empty);
  assert_string_equal(still, "");
  free(still);
  remove(empty);

  /* init makes it; then the same commands work on it. */
  snprintf(url, sizeof url, "sqlite:%s/notinit.db", dir);
  run_result r;
  RUN(&r, "--db", url, "init");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  char left[512];
  entries(dir, left, sizeof left);
  assert_non_null(strstr(left, "notinit.db"));
  RUN(&r, "--db", url, "status");
  if (r.status != 0) fail_msg("status after init: %s", r.err);
  assert_non_null(strstr(r.out, "tasks:"));
  run_result_free(&r);
  efx_rmtree(dir);
}

/* `--db ""` is not "the default store": exit 2, and no ./tasker.db. */
static void empty_db_is_a_usage_error(void **state) {
  (void)state;
  char dir[256], old[2048], bin[4200];
  efx_tmpdir(dir, sizeof dir);
  /* The binary by its absolute path: the test moves to an empty directory. */
  assert_non_null(getcwd(old, sizeof old));
  const char *path = tasker_path();
  if (path[0] == '/') snprintf(bin, sizeof bin, "%s", path);
  else snprintf(bin, sizeof bin, "%.2000s/%.2000s", old, path);
  setenv("TASKER", bin, 1);
  unsetenv("TASKER_DB");
  assert_int_equal(chdir(dir), 0);
  static const char *const want =
      "tasker: --db: empty value: expected a store URL (sqlite:PATH or postgresql://...)\n";
  expect_usage_error(want, (const char *const[]){"--db", "", "status", NULL});
  expect_usage_error(want, (const char *const[]){"--db=", "status", NULL});
  expect_usage_error(want, (const char *const[]){"tasks", "--db", "", NULL});
  expect_usage_error(want, (const char *const[]){"--db", "", "init", NULL});
  char left[512];
  entries(dir, left, sizeof left);
  assert_string_equal(left, "");
  assert_int_equal(chdir(old), 0);
  efx_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(only_init_creates),
      cmocka_unit_test(empty_db_is_a_usage_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
