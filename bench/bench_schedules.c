/* Benchmark of schedules (DESIGN §16, docs/schedules.md), printed as a
 * table: with N schedules stored (every 5 minutes, in Europe/Berlin), what
 * one firing pass costs when no slot is due (an orchestrator's read at a
 * slot of another schedule, or after a change notification: "pass" is
 * tk_schedule_fire_due on its own, which parses each expression and reads
 * its zone file once per pass; "engine" is a pass with the engine's cache,
 * where that was done at its first pass) and when
 * every schedule's slot is due (N tasks, each in its own transaction with
 * its schedule's progress). SQLite in a temporary directory; with
 * BENCH_PG_URL=URL also that PostgreSQL database (which must be empty or
 * hold a tasker schema of its own).
 * Usage: bench_schedules [N...] (default 10 100 1000). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tasker/config.h>
#include <tasker/schedule.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "schedule/schedule_internal.h"

#define T0 INT64_C(1767225600000) /* 2026-01-01T00:00:00Z */
#define IDLE_PASSES 10

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, const tk_err *e) {
  fprintf(stderr, "bench_schedules: %s: %s\n", what, e->msg);
  exit(1);
}

/* One row: n schedules on the store at url (template "job" written from
 * dir), passes timed. Schedule names carry `run` so that rows on one
 * PostgreSQL database do not collide. */
static void row(const char *backend, const char *url, const char *dir, int n, int run) {
  tk_store *s;
  tk_config *cfg;
  tk_err e;
  if (tk_store_open(url, &s, &e) || tk_store_migrate(s, NULL, NULL, &e)) die(url, &e);
  if (tk_config_load(NULL, &cfg, &e)) die("configuration", &e);
  char path[512];
  snprintf(path, sizeof path, "%s/job.toml", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs("name = \"job\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
        "handler = { kind = \"builtin\", name = \"noop\" }\n", f);
  fclose(f);
  tk_template_info info;
  if (tk_template_add_file(s, cfg, path, T0, &info, &e)) die("template", &e);
  int64_t start = T0 + (int64_t)run * 86400000; /* a day of its own per row */
  for (int i = 0; i < n; i++) {
    char name[48];
    snprintf(name, sizeof name, "r%d-s%d", run, i);
    tk_schedule_def d = {.name = name, .cron = "*/5 * * * *", .zone = "Europe/Berlin",
                         .template_name = "job"};
    if (tk_schedule_add(s, cfg, &d, start, &e)) die("add", &e);
  }
  tk_schedule_pass p;
  double t = now_s();
  for (int k = 0; k < IDLE_PASSES; k++)
    if (tk_schedule_fire_due(s, cfg, start + 1000, NULL, NULL, &p, &e)) die("pass", &e);
  double idle = (now_s() - t) / IDLE_PASSES;
  /* As an engine does: the expressions (and zone files) from its cache,
   * read at its first pass (not timed). */
  tk__cron_cache *crons = tk__cron_cache_new();
  if (crons == NULL || tk__schedule_fire_due(s, cfg, crons, start + 1000, NULL, NULL, &p, &e))
    die("pass", &e);
  t = now_s();
  for (int k = 0; k < IDLE_PASSES; k++)
    if (tk__schedule_fire_due(s, cfg, crons, start + 1000, NULL, NULL, &p, &e)) die("pass", &e);
  double kept = (now_s() - t) / IDLE_PASSES;
  tk__cron_cache_free(crons);
  t = now_s();
  if (tk_schedule_fire_due(s, cfg, start + 5 * 60000, NULL, NULL, &p, &e)) die("pass", &e);
  double fire = now_s() - t;
  printf("| %-8s | %6d | %12.2f ms | %14.2f ms | %11.1f ms | %11.0f us |\n", backend, n,
         idle * 1e3, kept * 1e3, fire * 1e3, p.fired ? fire * 1e6 / p.fired : 0.0);
  tk_config_free(cfg);
  tk_store_close(s);
}

int main(int argc, char **argv) {
  int sizes[16] = {10, 100, 1000}, nsizes = 3;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = atoi(argv[i]);
  }
  char dir[] = "/tmp/bench-schedules-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  const char *pg = getenv("BENCH_PG_URL");
  printf("schedules: one firing pass with N schedules (*/5 * * * * in Europe/Berlin)\n");
  printf("| backend  |      N | none due (pass) | none due (engine) | all due (pass) | per slot "
         "fired |\n");
  printf("|----------|--------|-----------------|-------------------|----------------|---------"
         "-------|\n");
  for (int i = 0; i < nsizes; i++) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s/s%d.db", dir, i);
    row("sqlite", url, dir, sizes[i], i);
    if (pg) row("postgres", pg, dir, sizes[i], i);
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_schedules: could not remove %s\n", dir);
  return 0;
}
