/* What the benchmarks share: errors, timing, a fresh store (SQLite's file
 * or BENCH_PG_URL's schema), their configuration and templates, and the
 * engine run until nothing is due. Included, not linked: the Makefile's
 * bench rule builds each bench/bench_*.c alone against the library, so
 * these are static inline (a benchmark that uses few leaves the rest
 * unused without a warning). Needs _GNU_SOURCE defined before any include
 * (program_invocation_short_name names the benchmark in its errors). */
#ifndef TASKER_BENCH_UTIL_H
#define TASKER_BENCH_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TK_NO_POSTGRES
#include <libpq-fe.h>
#endif

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

/* The benchmark's scratch directory (main makes it with mkdtemp): its
 * SQLite files and template files. */
static char bench_dir[256];

/* Say what failed (and the library's message) and exit 1. */
static inline void bench_die(const char *what, const tk_err *err) {
  fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, err ? err->msg : "");
  exit(1);
}

static inline double bench_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile of v[n] (sorted in place). */
static inline double bench_quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[(int)(q * (n - 1) + 0.5)];
}

/* Run sql (commands, no rows) on PostgreSQL database url, outside tasker. */
static inline void bench_pg_exec(const char *url, const char *sql) {
#ifndef TK_NO_POSTGRES
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  if (!ok) bench_die(sql, NULL);
#else
  (void)url;
  (void)sql;
  bench_die("BENCH_PG_URL: this build has no PostgreSQL backend", NULL);
#endif
}

/* The URL of a fresh store: bench_dir/NAME.db removed, or PostgreSQL
 * database pg (NULL: SQLite) with its public schema dropped and made
 * again. */
static inline void bench_fresh_url(const char *pg, const char *name, char *url, size_t len) {
  if (pg) {
    bench_pg_exec(pg, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS public CASCADE;"
                      " CREATE SCHEMA public");
    snprintf(url, len, "%s", pg);
    return;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s.db", bench_dir, name);
  unlink(path);
  snprintf(url, len, "sqlite:%s", path);
}

/* Store url opened and migrated. */
static inline tk_store *bench_open(const char *url) {
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err))
    bench_die("store", &err);
  return s;
}

/* The benchmarks' configuration: no jitter, claims of 256, leases of 60 s,
 * then the settings of extra (NULL-terminated; NULL: none). */
static inline tk_config *bench_config(const char *const *extra) {
  const char *sets[16] = {"backoff.jitter=\"none\"", "engine.claim_batch=256",
                          "engine.lease=\"60s\""};
  int n = 3;
  while (extra && *extra && n < 15) sets[n++] = *extra++;
  tk_config_source src = {.sets = sets, .nsets = n};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) bench_die("config", &err);
  return cfg;
}

/* Template NAME, version 1, of steps toml, written to bench_dir/NAME.toml
 * and added to s. */
static inline void bench_template(tk_store *s, tk_config *cfg, const char *name,
                                  const char *toml) {
  char tpl[512];
  snprintf(tpl, sizeof tpl, "%s/%s.toml", bench_dir, name);
  FILE *f = fopen(tpl, "w");
  if (f == NULL) bench_die("template file", NULL);
  fprintf(f, "name = \"%s\"\nversion = \"1\"\n%s", name, toml);
  fclose(f);
  tk_clock clock = tk_store_clock(s);
  tk_err err;
  if (tk_template_add_file(s, cfg, tpl, tk_clock_now(&clock), NULL, &err))
    bench_die("template", &err);
}

/* Run the engine at the manual clock's time until it has nothing due now. */
static inline void bench_run_now(tk_engine *e, tk_manual_clock *c) {
  tk_err err;
  for (int i = 0; i < 100000; i++) {
    int64_t due;
    if (tk_engine_tick(e, &due, &err)) bench_die("tick", &err);
    if (due > c->now_ms) return;
  }
  bench_die("the engine did not settle", NULL);
}

/* bench_dir made under $TMPDIR (or /tmp), and removed at exit. */
static inline void bench_dir_remove(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", bench_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "%s: could not remove %s\n", program_invocation_short_name, bench_dir);
}

static inline void bench_dir_make(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(bench_dir, sizeof bench_dir, "%s/tasker-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(bench_dir) == NULL) bench_die("mkdtemp", NULL);
  atexit(bench_dir_remove);
}

#endif
