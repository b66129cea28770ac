/* CLI tests on a store of their own: a temporary directory holding a SQLite
 * store (initialized) and a configuration file, and running the tasker
 * binary against both. Include after <cmocka.h>. */
#ifndef TESTS_CLI_STORE_H
#define TESTS_CLI_STORE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"
#include "common/run_cli.h"

typedef struct cli {
  char dir[256], db[320], url[340], cfg[400];
} cli;

/* Run tasker with this store and configuration into *r. */
#define CLI(c, r, ...)                                                                     \
  do {                                                                                     \
    const char *args_[] = {"--config", (c)->cfg, "--db", (c)->url, __VA_ARGS__, NULL};      \
    assert_int_equal(run_cli((r), NULL, args_), 0);                                        \
  } while (0)

/* A new directory with DIR/tasker.toml holding `config` and an initialized
 * store DIR/tasker.db. */
static inline cli *cli_store_open(const char *config) {
  cli *c = calloc(1, sizeof *c);
  assert_non_null(c);
  efx_tmpdir(c->dir, sizeof c->dir);
  snprintf(c->db, sizeof c->db, "%s/tasker.db", c->dir);
  snprintf(c->url, sizeof c->url, "sqlite:%s", c->db);
  efx_write(c->dir, "tasker.toml", config, c->cfg, sizeof c->cfg);
  run_result r;
  CLI(c, &r, "init");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  return c;
}

/* A NULL-terminated argument list: ARGS("tasks", "--json"). */
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Run tasker with this store and configuration and args (NULL-terminated,
 * at most 35) into *r. */
static inline void cli_run_args(cli *c, run_result *r, const char *const *args) {
  const char *all[40] = {"--config", c->cfg, "--db", c->url};
  size_t n = 4;
  while (*args && n < 39) all[n++] = *args++;
  all[n] = NULL;
  assert_int_equal(run_cli(r, NULL, all), 0);
}

/* Run as cli_run_args, expect exit 0 (else fail with stderr) and return
 * stdout (malloc'd). */
static inline char *cli_stdout(cli *c, const char *const *args) {
  run_result r;
  cli_run_args(c, &r, args);
  if (r.status != 0) fail_msg("%s: exit %d: %s", args[0], r.status, r.err);
  char *out = r.out;
  r.out = NULL;
  run_result_free(&r);
  return out;
}

/* A template `template add` must refuse: its text, and the place
 * ("LINE:COLUMN") and message it must name. */
typedef struct bad_template {
  const char *text;
  const char *where;
  const char *message;
} bad_template;

/* Add each of bad[0..n) as its own file: each must exit 78 with nothing on
 * stdout and "tasker template add: FILE:WHERE: MESSAGE" on stderr, and a
 * SQLite store (c->db; "" for another, which the caller checks) must be
 * unchanged after all of them. Every case that differs is printed before
 * the test fails. */
static inline void cli_expect_template_refusals(cli *c, const bad_template *bad, size_t n) {
  char *before = c->db[0] ? efx_snapshot(c->db) : NULL;
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) {
    char name[32], path[400], want[1024];
    snprintf(name, sizeof name, "bad%zu.toml", i);
    efx_write(c->dir, name, bad[i].text, path, sizeof path);
    snprintf(want, sizeof want, "tasker template add: %s:%s: %s\n", path, bad[i].where,
             bad[i].message);
    run_result r;
    CLI(c, &r, "template", "add", path);
    if (r.status != 78 || strcmp(r.out, "") != 0 || strcmp(r.err, want) != 0) {
      print_error("case %zu: exit %d (want 78)\nstdout: %s\nstderr: %s(want %s)", i, r.status,
                  r.out, r.err, want);
      failed++;
    }
    run_result_free(&r);
  }
  if (failed) fail_msg("%zu of %zu refusals differ", failed, n);
  if (before) efx_unchanged(c->db, before);
}

/* Remove the directory and free c. */
static inline void cli_store_close(cli *c) {
  efx_rmtree(c->dir);
  free(c);
}

#endif
