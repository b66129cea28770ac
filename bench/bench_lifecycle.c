/* Benchmarks of time-based work and data lifecycle (DESIGN §16, issue 14),
 * printed as tables:
 *   delayed     a claim of 100 ready steps and the engine's next_due look,
 *               with 0 and with 100,000 tasks delayed to tomorrow stored:
 *               the backlog must cost a claim nothing (migration 0009)
 *   retention   a steady load on the manual clock (each simulated minute
 *               200 tasks of 3 steps submitted and run) for 2 simulated
 *               hours, with [retention] finished_after = 10m and without:
 *               the database file's size and the store's size (file + WAL,
 *               tk_store_size) every 10 simulated minutes; the WAL's size
 *               is about the checkpoint threshold (8,000 frames,
 *               sqlite_checkpoint.c) whatever is stored, cut back to 64 MiB
 *               (journal_size_limit) each time the log starts over
 *   durability  engine throughput (the independent shape of bench_engine:
 *               noop steps, 0 and 4 workers) at durability full and fast
 * Usage: bench_lifecycle [delayed|retention|durability]... (default all).
 * BENCH_PG_URL=URL: the delayed table on that PostgreSQL database (whose
 * public schema it drops and makes again; bench_pg.sh delayed does so).
 * BENCH_QUICK=1: a tenth of the sizes (the retention run: 1 hour). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/retention.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "bench_util.h"
#include "store/store.h" /* the claim and next_due, timed without the engine */

static int quick;

/* BENCH_PG_URL: the delayed table on this PostgreSQL database instead
 * (bench_pg.sh delayed); its public schema is dropped and made again. */
static const char *pg_url;

/* Run SQL on the bench's store outside tasker: SQLite's DIR/NAME.db, or
 * BENCH_PG_URL. */
static void raw_sql(const char *name, const char *sql) {
  if (pg_url) {
    bench_pg_exec(pg_url, sql);
    return;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s.db", bench_dir, name);
  sqlite3 *db;
  int rc = sqlite3_open(path, &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_close(db);
  if (rc != SQLITE_OK) bench_die(sql, NULL);
}

/* A fresh store (bench_dir/NAME.db, or BENCH_PG_URL's schema made again)
 * at `durability` holding template `toml` (named NAME), on clock c (NULL:
 * the machine's). */
static tk_store *fresh_store(const char *name, const char *toml, tk_config *cfg,
                             tk_durability durability, tk_manual_clock *c) {
  char url[600];
  bench_fresh_url(pg_url, name, url, sizeof url);
  tk_store *s = bench_open(url);
  tk_err err;
  if (tk_store_set_durability(s, durability, &err)) bench_die("durability", &err);
  if (c) tk_store_set_clock(s, tk_clock_manual(c));
  bench_template(s, cfg, name, toml);
  return s;
}

static void submit(tk_store *s, tk_config *cfg, const char *name, int tasks, int64_t start_at) {
  tk_clock clock = tk_store_clock(s);
  tk_submit_request req = {.template_name = name, .start_at = start_at};
  tk_err err;
  for (int i = 0; i < tasks; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, tk_clock_now(&clock), &id, &existed, &err))
      bench_die("submit", &err);
  }
}

static const char noop[] = "handler = { kind = \"builtin\", name = \"noop\" }\n";

/* n independent noop steps. */
static char *steps_toml(int n) {
  static char buf[1 << 16];
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "[[steps]]\nname = \"s%d\"\n%s", i,
                            noop);
  return buf;
}

/* ---- delayed ---- */

/* The median of 9 runs of a claim of 100 (each on ready work that is left)
 * and of next_due, in ms. */
static void claim_costs(tk_store *s, double *claim_ms, double *due_ms) {
  double c[9], d[9];
  static tk__claimed out[100];
  tk_err err;
  for (int r = 0; r < 9; r++) {
    int n = 0;
    int64_t t0 = tk_monotonic_ns();
    if (tk__store_claim(s, "bench", 60000, 100, out, &n, &err) || n != 100)
      bench_die("claim", &err);
    int64_t t1 = tk_monotonic_ns();
    int64_t ready, lease;
    if (s->ops->next_due(s, &ready, &lease, &err)) bench_die("next_due", &err);
    int64_t t2 = tk_monotonic_ns();
    c[r] = (double)(t1 - t0) / 1e6;
    d[r] = (double)(t2 - t1) / 1e6;
  }
  for (int i = 1; i < 9; i++) /* insertion sort: 9 values */
    for (int j = i; j > 0 && c[j] < c[j - 1]; j--) {
      double t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
      t = d[j]; d[j] = d[j - 1]; d[j - 1] = t;
    }
  *claim_ms = c[4];
  *due_ms = d[4];
}

static void delayed(void) {
  tk_config *cfg = bench_config(NULL);
  int backlog = quick ? 10000 : 100000;
  printf("\n%-36s %10s %14s %14s\n", pg_url ? "delayed backlog (postgres)" : "delayed backlog",
         "delayed", "claim 100 ms", "next_due ms");
  const int sizes[] = {0, backlog};
  for (int k = 0; k < 2; k++) {
    tk_store *s = fresh_store("delayed", steps_toml(1), cfg, TK_DURABILITY_FAST, NULL);
    tk_clock clock = tk_store_clock(s);
    int64_t tomorrow = tk_clock_now(&clock) + 24 * 3600 * 1000;
    /* The delayed tasks first: the oldest ids, ahead of the ready work in
     * the fresh steps' task order if they were among them. */
    submit(s, cfg, "delayed", sizes[k], tomorrow);
    submit(s, cfg, "delayed", 2000, 0);
    double claim_ms, due_ms;
    claim_costs(s, &claim_ms, &due_ms);
    printf("%-36s %10d %14.3f %14.3f\n", k ? "delayed to tomorrow, then ready" : "ready only",
           sizes[k], claim_ms, due_ms);
    if (k == 1) {
      /* What the backlog would cost in the fresh steps' index, as if a
       * delayed root were an ordinary pending one with a future run_at. */
      raw_sql("delayed", "UPDATE steps SET parents_remaining = 0 WHERE parents_remaining = -1");
      claim_costs(s, &claim_ms, &due_ms);
      printf("%-36s %10d %14.3f %14.3f\n", "the same among fresh steps (not so)", sizes[k],
             claim_ms, due_ms);
    }
    tk_store_close(s);
  }
  tk_config_free(cfg);
}

/* ---- retention ---- */

/* The bytes of bench_dir/NAME.db alone (without its log). */
static int64_t file_size(const char *name) {
  char path[512];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s.db", bench_dir, name);
  return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

static const char *minute_label(int m) {
  static char buf[32];
  snprintf(buf, sizeof buf, "minute %d", m);
  return buf;
}

static void retention(void) {
  const char *on[] = {"retention.finished_after=\"10m\"", "retention.interval=\"1m\"",
                      "retention.batch=500", NULL};
  int minutes = quick ? 60 : 120, per_minute = 200;
  int64_t sizes[2][13], file_sizes[2][13];
  int64_t tasks_left[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    tk_config *cfg = bench_config(k ? on : NULL);
    tk_manual_clock c = {.now_ms = INT64_C(1767225600000)};
    tk_store *s = fresh_store(k ? "kept" : "grown", steps_toml(3), cfg, TK_DURABILITY_FAST, &c);
    tk_engine_options eo = {.store = s, .config = cfg, .clock = tk_clock_manual(&c), .seed = 1};
    tk_engine *e;
    tk_err err;
    if (tk_engine_new(&eo, &e, &err)) bench_die("engine", &err);
    for (int m = 0; m <= minutes; m++) {
      if (m % 10 == 0) {
        if (tk_store_size(s, &sizes[k][m / 10], &err)) bench_die("size", &err);
        file_sizes[k][m / 10] = file_size(k ? "kept" : "grown");
      }
      submit(s, cfg, k ? "kept" : "grown", per_minute, 0);
      bench_run_now(e, &c);
      c.now_ms += 60000;
      /* A real minute has idle time in it: the checkpointer's thread
       * (sqlite_checkpoint.c) gets to finish, and the log starts over. */
      usleep(20000);
    }
    tk__status_report st;
    if (s->ops->status(s, c.now_ms, &st, &err)) bench_die("status", &err);
    for (int i = 0; i < st.ntasks; i++) tasks_left[k] += st.tasks[i].n;
    tk_engine_free(e);
    tk_store_close(s);
    tk_config_free(cfg);
  }
  printf("\n%-22s %28s %28s\n", "retention (simulated)", "no retention: file, +WAL MiB",
         "finished_after 10m: file, +WAL");
  for (int i = 0; i <= minutes / 10; i++)
    printf("%-22s %18.2f %9.2f %18.2f %9.2f\n", minute_label(i * 10), file_sizes[0][i] / 1048576.0,
           sizes[0][i] / 1048576.0, file_sizes[1][i] / 1048576.0, sizes[1][i] / 1048576.0);
  printf("%-22s %28lld %28lld\n", "tasks stored at end", (long long)tasks_left[0],
         (long long)tasks_left[1]);
}

/* ---- durability ---- */

static void durability(void) {
  tk_config *cfg = bench_config(NULL);
  int tasks = quick ? 100 : 1000;
  printf("\n%-12s %8s %8s %8s %10s %12s\n", "durability", "steps", "workers", "", "seconds",
         "steps/s");
  const int workers[] = {0, 4};
  for (int w = 0; w < 2; w++)
    for (int d = 0; d < 2; d++) {
      tk_durability level = d ? TK_DURABILITY_FAST : TK_DURABILITY_FULL;
      tk_store *s = fresh_store("durable", steps_toml(100), cfg, TK_DURABILITY_FAST, NULL);
      submit(s, cfg, "durable", tasks, 0);
      tk_err err;
      if (tk_store_set_durability(s, level, &err)) bench_die("durability", &err);
      tk_engine_options eo = {.store = s, .config = cfg, .workers = workers[w], .seed = 1};
      tk_engine *e;
      if (tk_engine_new(&eo, &e, &err)) bench_die("engine", &err);
      int64_t t0 = tk_monotonic_ns();
      if (tk_engine_run(e, 1, &err)) bench_die("run", &err);
      double secs = (double)(tk_monotonic_ns() - t0) / 1e9;
      tk_engine_free(e);
      tk_store_close(s);
      printf("%-12s %8d %8d %8s %10.2f %12.0f\n", tk_durability_name(level), tasks * 100,
             workers[w], "", secs, tasks * 100 / secs);
    }
  tk_config_free(cfg);
}

int main(int argc, char **argv) {
  tk_store_process_init();
  quick = getenv("BENCH_QUICK") != NULL && strcmp(getenv("BENCH_QUICK"), "0") != 0;
  pg_url = getenv("BENCH_PG_URL");
  bench_dir_make();
  for (int i = 1; i < argc || argc == 1; i++) {
    const char *what = argc == 1 ? NULL : argv[i];
    if (!what || !strcmp(what, "delayed")) delayed();
    if (!what || !strcmp(what, "retention")) retention();
    if (!what || !strcmp(what, "durability")) durability();
    if (!what) break;
  }
  return 0;
}
