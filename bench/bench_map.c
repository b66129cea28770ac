/* Map benchmarks (issue 21, DESIGN §17), printed as tables, on SQLite, or
 * on PostgreSQL with BENCH_PG_URL (bench_pg.sh map):
 *   create      the one transaction that completes a 10,000-wide map's
 *               parent and creates its instances: that parent's outcome
 *               recorded through the store's record op (commit included),
 *               for a map over a list of 10,000 objects and over a range of
 *               10,000; beside it the same outcome when the child is an
 *               ordinary step, so that the difference is the instances'
 *               creation alone; and this process's CPU in that call (on
 *               PostgreSQL the client's only). Goal: <= 100 ms on SQLite, 300 on PostgreSQL
 *   throughput  100 tasks x a 1,000-wide map of noop instances (a function
 *               step lists 1,000 elements, the map runs one noop instance
 *               per element) beside 100 tasks x 1,000 independent noop
 *               steps and 100 tasks x the same list step with 1,000
 *               ordinary noop children, in one run, with 0 and 4 workers;
 *               steps are handler runs (the list step counts); steps/s of
 *               the run alone (an independent step's row is made before
 *               it, an instance's during it), the process's CPU per step
 *               in the run (steadier on a busy machine), and steps/s of
 *               submit + run. Goal:
 *               the map within 10% of the independent steps' steps/s
 *   claims      claiming 100 ready steps (each claim its own transaction,
 *               25 of them: best and median) with 10^6 steps stored, half
 *               of them instances, beside today's shape (bench_engine
 *               scale's and bench_pg.sh scale's: 100 independent steps a
 *               task), both with 90% of the pending steps waiting for a
 *               retry an hour ahead. Goal: within 2x of today's shape
 * Usage: bench_map [create|throughput|claims]... (default all).
 * BENCH_QUICK=1: a tenth of the sizes (create stays 10,000 wide).
 * BENCH_REPEAT=N: each throughput row the median of N runs (default 1);
 * BENCH_SHAPE=independent, map or "list + children": that row alone, and
 * BENCH_WORKERS=N: the rows with N workers alone (for profiling).
 * BENCH_PG_URL=URL: on that PostgreSQL database, whose public schema each
 * store drops and makes again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef TK_NO_POSTGRES
#include <libpq-fe.h>
#endif
#include <sqlite3.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "store/store.h" /* the claim and record ops, timed without the engine */

static char dir[256];
static int quick;
static const char *pg_url;

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_map: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static int64_t store_now(tk_store *s) {
  tk_clock c = tk_store_clock(s);
  return tk_clock_now(&c);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- the store, and SQL on it outside tasker ---- */

/* A connection to the bench's store apart from tasker's: SQLite's
 * DIR/NAME.db, or BENCH_PG_URL. */
typedef struct raw_db {
  sqlite3 *lite;
#ifndef TK_NO_POSTGRES
  PGconn *pg;
#endif
} raw_db;

static void raw_exec(raw_db *r, const char *sql);

static raw_db raw_open(const char *name) {
  raw_db r = {0};
  if (pg_url) {
#ifndef TK_NO_POSTGRES
    r.pg = PQconnectdb(pg_url);
    if (PQstatus(r.pg) != CONNECTION_OK) die(PQerrorMessage(r.pg), NULL);
    raw_exec(&r, "SET client_min_messages = warning"); /* not DROP's cascade notices */
    return r;
#else
    die("BENCH_PG_URL: this build has no PostgreSQL backend", NULL);
#endif
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  if (sqlite3_open(path, &r.lite) != SQLITE_OK) die(path, NULL);
  sqlite3_busy_timeout(r.lite, 10000);
  return r;
}

static void raw_exec(raw_db *r, const char *sql) {
#ifndef TK_NO_POSTGRES
  if (r->pg) {
    PGresult *res = PQexec(r->pg, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok) die(sql, NULL);
    return;
  }
#endif
  if (sqlite3_exec(r->lite, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql, NULL);
}

static void raw_close(raw_db *r) {
#ifndef TK_NO_POSTGRES
  if (r->pg) PQfinish(r->pg);
#endif
  sqlite3_close(r->lite);
}

static tk_config *config(void) {
  const char *sets[] = {"backoff.jitter=\"none\"", "engine.claim_batch=256",
                        "engine.lease=\"60s\""};
  tk_config_source src = {.sets = sets, .nsets = 3};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) die("config", &err);
  return cfg;
}

/* A fresh store (SQLite's DIR/NAME.db, or BENCH_PG_URL's schema made
 * again) holding template `toml`, named NAME; at durability fast until
 * the caller sets it back (the set-up is not what is measured). */
static tk_store *fresh_store(const char *name, const char *toml, tk_config *cfg) {
  char path[512], url[600], tpl[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  unlink(path);
  snprintf(url, sizeof url, "sqlite:%s", path);
  if (pg_url) {
    raw_db r = raw_open(name);
    raw_exec(&r, "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
    raw_close(&r);
    snprintf(url, sizeof url, "%s", pg_url);
  }
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err) ||
      tk_store_set_durability(s, TK_DURABILITY_FAST, &err))
    die("store", &err);
  snprintf(tpl, sizeof tpl, "%s/%s.toml", dir, name);
  FILE *f = fopen(tpl, "w");
  if (f == NULL) die(tpl, NULL);
  fprintf(f, "name = \"%s\"\nversion = \"1\"\n%s", name, toml);
  fclose(f);
  if (tk_template_add_file(s, cfg, tpl, store_now(s), NULL, &err)) die("template", &err);
  return s;
}

static void durability_full(tk_store *s) {
  tk_err err;
  if (tk_store_set_durability(s, TK_DURABILITY_FULL, &err)) die("durability", &err);
}

static int64_t submit(tk_store *s, tk_config *cfg, const char *name, int tasks) {
  tk_submit_request req = {.template_name = name};
  tk_err err;
  int64_t id = 0;
  for (int i = 0; i < tasks; i++) {
    int existed;
    if (tk_task_submit(s, cfg, &req, store_now(s), &id, &existed, &err)) die("submit", &err);
  }
  return id;
}

/* ---- templates and results, as text ---- */

/* A malloc'd text written by fn into a memory stream. */
typedef void (*writer)(FILE *f, int n);
static char *text_of(writer fn, int n) {
  char *t = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&t, &len);
  if (f == NULL) die("open_memstream", NULL);
  fn(f, n);
  fclose(f);
  return t;
}

#define NOOP "handler = { kind = \"builtin\", name = \"noop\" }\n"

/* list -> process (a map over list's "items", at most n) -> sum. */
static void map_over_toml(FILE *f, int n) {
  fprintf(f, "[[steps]]\nname = \"list\"\n" NOOP
             "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n" NOOP
             "map = { over = \"{{parents.list.items}}\", max = %d }\n"
             "[[steps]]\nname = \"sum\"\ndepends_on = [\"process\"]\n" NOOP,
          n);
}

/* list -> process (a map over the range [0, list's "rows"), chunks of
 * one) -> sum. */
static void map_range_toml(FILE *f, int n) {
  fprintf(f, "[[steps]]\nname = \"list\"\n" NOOP
             "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n" NOOP
             "map = { range = \"{{parents.list.rows}}\", chunk = 1, max = %d }\n"
             "[[steps]]\nname = \"sum\"\ndepends_on = [\"process\"]\n" NOOP,
          n);
}

/* list -> process (an ordinary step) -> sum. */
static void no_map_toml(FILE *f, int n) {
  (void)n;
  fputs("[[steps]]\nname = \"list\"\n" NOOP
        "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n" NOOP
        "[[steps]]\nname = \"sum\"\ndepends_on = [\"process\"]\n" NOOP,
        f);
}

/* list (a function listing n elements) -> process, a map of noop
 * instances over them. */
static void mapped_toml(FILE *f, int n) {
  fprintf(f, "[[steps]]\nname = \"list\"\nhandler = { kind = \"function\", name = \"list\" }\n"
             "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n" NOOP
             "map = { over = \"{{parents.list.items}}\", max = %d }\n",
          n);
}

/* The same list step with n ordinary noop children. */
static void fanout_toml(FILE *f, int n) {
  fputs("[[steps]]\nname = \"list\"\nhandler = { kind = \"function\", name = \"list\" }\n", f);
  for (int i = 0; i < n; i++)
    fprintf(f, "[[steps]]\nname = \"s%d\"\ndepends_on = [\"list\"]\n" NOOP, i);
}

/* n independent noop steps. */
static void independent_toml(FILE *f, int n) {
  for (int i = 0; i < n; i++) fprintf(f, "[[steps]]\nname = \"s%d\"\n" NOOP, i);
}

/* {"items": [n objects such as a listing of files gives]}. */
static void objects_json(FILE *f, int n) {
  fputs("{\"items\": [", f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s{\"path\": \"in/part-%05d.csv\", \"bytes\": %d}", i ? ", " : "", i,
            1000 + i * 7);
  fputs("]}", f);
}

/* {"items": [0, 1, ..., n-1]}. */
static void numbers_json(FILE *f, int n) {
  fputs("{\"items\": [", f);
  for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", i);
  fputs("]}", f);
}

static void rows_json(FILE *f, int n) { fprintf(f, "{\"rows\": %d}", n); }

/* Seconds of CPU (user and system, all threads) this process used so far:
 * steadier than the time on a machine shared with other work. */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- the store ops, as the engine calls them ---- */

static tk__outcome success_of(const tk__claimed *c, const char *owner, int64_t now,
                              const char *results) {
  return (tk__outcome){.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                       .template_id = c->template_id, .idx = c->idx,
                       .instance = c->item_index + 1, .owner = owner, .attempt = c->attempt,
                       .now = now, .finished_at = now, .attempt_outcome = "success",
                       .next = TK__NEXT_COMPLETE, .results = results};
}

/* Record outcomes o[0..n) in one call; any refused one is fatal. */
static void record_all(tk_store *s, const tk__outcome *o, int n, tk__effects *fx) {
  tk_err errs[128], whole;
  if (n > 128) die("record_all: more than 128 outcomes", NULL);
  memset(errs, 0, sizeof errs);
  if (s->ops->record(s, o, n, fx, errs, NULL, &whole)) die("record", &whole);
  for (int i = 0; i < n; i++)
    if (errs[i].code) die("record", &errs[i]);
}

/* ---- create: the transaction that makes a 10,000-wide map ---- */

/* Best and median ms of recording the parent's outcome in `reps` tasks of
 * template `name`, each cancelled afterwards (so the next claim finds the
 * next task's parent, not these instances). */
static void create_row(const char *label, writer tpl, const char *results, int width,
                       int released, tk_config *cfg, double *p50_out) {
  char *toml = text_of(tpl, width);
  tk_store *s = fresh_store("create", toml, cfg);
  free(toml);
  durability_full(s);
  int reps = quick ? 3 : 7;
  double ms[16], cpu[16];
  for (int r = 0; r < reps; r++) {
    int64_t task = submit(s, cfg, "create", 1);
    tk__claimed c;
    int n = 0;
    tk_err err;
    if (tk__store_claim(s, "bench", 3600000, 1, &c, &n, &err) || n != 1 || c.task_id != task)
      die("claim the list step", n ? NULL : &err);
    tk__outcome o = success_of(&c, "bench", store_now(s), results);
    tk__effects fx;
    double c0 = cpu_seconds();
    int64_t t0 = tk_monotonic_ns();
    record_all(s, &o, 1, &fx);
    ms[r] = (double)(tk_monotonic_ns() - t0) / 1e6;
    cpu[r] = (cpu_seconds() - c0) * 1e3;
    if (fx.children_released != released) {
      fprintf(stderr, "bench_map: %s: %d children released, expected %d\n", label,
              fx.children_released, released);
      exit(1);
    }
    const char *ts;
    if (tk_task_operate(s, TK_OP_CANCEL, task, NULL, store_now(s), &ts, &err))
      die("cancel", &err);
  }
  tk_store_close(s);
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
  printf("%-44s %5d %10.1f %10.1f %10.1f\n", label, reps, ms[0], ms[reps / 2], cpu[reps / 2]);
  fflush(stdout);
  if (p50_out) *p50_out = ms[reps / 2];
}

static void create(void) {
  tk_config *cfg = config();
  const int width = 10000;
  char *objects = text_of(objects_json, width), *rows = text_of(rows_json, width);
  printf("\n%-44s %5s %10s %10s %10s\n",
         pg_url ? "create 10,000 instances (postgres)" : "create 10,000 instances (sqlite)",
         "reps", "best ms", "p50 ms", "cpu ms p50");
  double over, range, plain;
  create_row("map over 10,000 objects (parent's outcome)", map_over_toml, objects, width, width,
             cfg, &over);
  create_row("map over a range of 10,000, chunk 1", map_range_toml, rows, width, width, cfg,
             &range);
  create_row("no map: the same outcome, an ordinary child", no_map_toml, objects, width, 1, cfg,
             &plain);
  printf("%-44s %5s %10s %10.1f\n", "the instances alone (over - no map, p50)", "", "",
         over - plain);
  printf("%-44s %5s %10s %10d\n", "goal for the map's transaction", "", "", pg_url ? 300 : 100);
  free(objects);
  free(rows);
  tk_config_free(cfg);
}

/* ---- throughput: a map's instances against independent steps ---- */

/* The function step "list": its elements, the same text each call. */
static void list_fn(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  out->results = strdup(ud);
  if (out->results == NULL) {
    out->status = TK_HANDLER_PERMANENT;
    snprintf(out->error, sizeof out->error, "list: out of memory");
  }
}

typedef struct shape {
  const char *name;
  writer tpl;
} shape;

/* One run of a throughput row: seconds submitting its tasks (at
 * durability full, as the run), seconds running them until idle, and the
 * handler runs. */
typedef struct run_times {
  double submit, run, cpu; /* cpu: seconds of this process's CPU in the run */
  int64_t steps;
} run_times;

/* Submit `tasks` tasks of shape sh, `width` wide, and run them with
 * `workers` until idle. */
static run_times run_shape(const shape *sh, int tasks, int width, int workers,
                           const char *listing, tk_config *cfg) {
  char *toml = text_of(sh->tpl, width);
  tk_store *s = fresh_store(sh->name, toml, cfg);
  free(toml);
  durability_full(s);
  run_times t;
  int64_t t0 = tk_monotonic_ns();
  submit(s, cfg, sh->name, tasks);
  t.submit = (double)(tk_monotonic_ns() - t0) / 1e9;
  tk_engine_options eo = {.store = s, .config = cfg, .workers = workers, .seed = 1};
  tk_engine *e;
  tk_err err;
  if (tk_engine_new(&eo, &e, &err) || tk_engine_register(e, "list", list_fn, (void *)listing, &err))
    die("engine", &err);
  double c0 = cpu_seconds();
  t0 = tk_monotonic_ns();
  if (tk_engine_run(e, 1, &err)) die("run", &err);
  t.run = (double)(tk_monotonic_ns() - t0) / 1e9;
  t.cpu = cpu_seconds() - c0;
  tk_engine_stats st = tk_engine_stats_get(e);
  tk_engine_free(e);
  tk_store_close(s);
  if (st.tasks_completed != tasks) {
    fprintf(stderr, "bench_map: %s: %lld of %d tasks completed\n", sh->name,
            (long long)st.tasks_completed, tasks);
    exit(1);
  }
  t.steps = st.completed;
  return t;
}

static int cmp_run(const void *a, const void *b) {
  const run_times *x = a, *y = b;
  return (x->run > y->run) - (x->run < y->run);
}

/* Steps/s of the run alone (the independent steps' rows exist before it,
 * an instance is made during it), and of submit and run together (every
 * row made in the time). */
static void throughput(void) {
  tk_config *cfg = config();
  int tasks = quick ? 10 : 100, width = 1000;
  int repeat = getenv("BENCH_REPEAT") ? atoi(getenv("BENCH_REPEAT")) : 1;
  if (repeat < 1 || repeat > 15) repeat = 1;
  char *listing = text_of(numbers_json, width);
  static const shape shapes[] = {{"independent", independent_toml},
                                 {"mapped", mapped_toml},
                                 {"fanout", fanout_toml}};
  static const char *const labels[] = {"independent", "map", "list + children"};
  printf("\n%-16s %5s %7s %3s %7s %8s %8s %9s %8s %9s %8s\n",
         pg_url ? "throughput (pg)" : "throughput", "tasks", "steps", "wk", "run s", "steps/s",
         "vs ind.", "cpu us/st", "vs ind.", "+submit/s", "vs ind.");
  const int workers[] = {0, 4};
  const char *only = getenv("BENCH_SHAPE"); /* one row's shape, for profiling */
  for (int w = 0; w < 2; w++) {
    if (getenv("BENCH_WORKERS") && atoi(getenv("BENCH_WORKERS")) != workers[w]) continue;
    double base = 0, base_cpu = 0, base_all = 0;
    for (int k = 0; k < 3; k++) {
      if (only && strcmp(only, labels[k]) != 0) continue;
      run_times t[15];
      for (int r = 0; r < repeat; r++)
        t[r] = run_shape(&shapes[k], tasks, width, workers[w], listing, cfg);
      qsort(t, (size_t)repeat, sizeof *t, cmp_run);
      run_times *m = &t[repeat / 2];
      double rate = (double)m->steps / m->run, cpu = m->cpu * 1e6 / (double)m->steps,
             all = (double)m->steps / (m->submit + m->run);
      if (base == 0) base = rate, base_cpu = cpu, base_all = all;
      printf("%-16s %5d %7lld %3d %7.2f %8.0f %+7.1f%% %9.1f %+7.1f%% %9.0f %+7.1f%%\n",
             labels[k], tasks, (long long)m->steps, workers[w], m->run, rate,
             (rate - base) * 100 / base, cpu, (cpu - base_cpu) * 100 / base_cpu, all,
             (all - base_all) * 100 / base_all);
      fflush(stdout);
    }
  }
  free(listing);
  tk_config_free(cfg);
}

/* ---- claims: 10^6 steps stored, half of them instances ---- */

/* Complete the list step of every task (the only steps ready), 100 at a
 * time through the store ops, each making its map's 50 instances; what
 * that releases is pushed an hour ahead at once, so that the next claim
 * finds the next tasks' list steps, not those instances. */
static void make_instances(tk_store *s, raw_db *raw, int tasks, const char *listing) {
  static tk__claimed c[100];
  static tk__outcome o[100];
  static tk__effects fx[100];
  int done = 0;
  while (done < tasks) {
    int n = 0;
    tk_err err;
    if (tk__store_claim(s, "seed", 3600000, 100, c, &n, &err)) die("claim", &err);
    if (n == 0) die("make_instances: no list step left to claim", NULL);
    int64_t lo = c[0].task_id, hi = c[0].task_id, now = store_now(s);
    for (int i = 0; i < n; i++) {
      if (c[i].idx != 0 || c[i].item_index != -1) die("make_instances: claimed a step not a list", NULL);
      if (c[i].task_id < lo) lo = c[i].task_id;
      if (c[i].task_id > hi) hi = c[i].task_id;
      o[i] = success_of(&c[i], "seed", now, listing);
    }
    record_all(s, o, n, fx);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE steps SET run_at = %lld WHERE state = 'pending' AND parents_remaining = 0"
             " AND task_id BETWEEN %lld AND %lld",
             (long long)(now + 3600000), (long long)lo, (long long)hi);
    raw_exec(raw, sql);
    done += n;
  }
}

/* A store of `tasks` tasks of template toml (100 steps a task) ready to
 * be claimed from; with_map: each task's list step completed first. */
static tk_store *claims_store(const char *name, const char *toml, int tasks, int with_map,
                              tk_config *cfg) {
  tk_store *s = fresh_store(name, toml, cfg);
  submit(s, cfg, name, tasks);
  raw_db raw = raw_open(name);
  if (with_map) {
    char *listing = text_of(numbers_json, 50);
    make_instances(s, &raw, tasks, listing);
    free(listing);
  }
  /* 90% of the pending steps wait for a retry an hour ahead; the rest are
   * ready now (bench_engine scale's and bench_pg.sh scale's shape). */
  int64_t now = store_now(s);
  char sql[512];
  snprintf(sql, sizeof sql,
           "UPDATE steps SET state = 'waiting_for_retry', run_at = %lld"
           " WHERE state = 'pending' AND id %% 10 <> 0",
           (long long)(now + 3600000));
  raw_exec(&raw, sql);
  snprintf(sql, sizeof sql, "UPDATE steps SET run_at = %lld WHERE state = 'pending'",
           (long long)(now - 1000));
  raw_exec(&raw, sql);
  if (pg_url) raw_exec(&raw, "VACUUM ANALYZE steps");
  raw_close(&raw);
  durability_full(s);
  return s;
}

/* Ms of one claim of 100 ready steps (a transaction of its own). */
static double claim_100(tk_store *s) {
  static tk__claimed out[100];
  int n = 0;
  tk_err err;
  int64_t t0 = tk_monotonic_ns();
  int rc = tk__store_claim(s, "bench", 3600000, 100, out, &n, &err);
  double ms = (double)(tk_monotonic_ns() - t0) / 1e6;
  if (rc || n != 100) die("claim 100", rc ? &err : NULL);
  return ms;
}
/* 48 children of list beside its map of 50: 100 rows a task once mapped. */
static void half_instances_toml(FILE *f, int n) {
  fputs("[[steps]]\nname = \"list\"\n" NOOP
        "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n" NOOP
        "map = { over = \"{{parents.list.items}}\", max = 50 }\n",
        f);
  for (int i = 0; i < n; i++)
    fprintf(f, "[[steps]]\nname = \"c%d\"\ndepends_on = [\"list\"]\n" NOOP, i);
}

/* On PostgreSQL the two stores are one database in turn (the schema is
 * made again), so each is measured right after it is made; on SQLite both
 * are made first and their claims alternate, so that the machine's drift
 * weighs on both alike. */
static void claims(void) {
  tk_config *cfg = config();
  int tasks = quick ? 1000 : 10000;
  enum { REPS = 25 };
  char *today = text_of(independent_toml, 100), *half = text_of(half_instances_toml, 48);
  printf("\n%-36s %9s %22s\n", pg_url ? "claims (postgres)" : "claims (sqlite)", "stored",
         "claim 100: best / p50 ms");
  static const char *const labels[] = {"today's shape: 100 steps a task",
                                       "half of them instances"};
  double ms[2][REPS];
  tk_store *s[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    s[k] = claims_store(k ? "claims_map" : "claims_plain", k ? half : today, tasks, k, cfg);
    if (pg_url) {
      for (int r = 0; r < REPS; r++) ms[k][r] = claim_100(s[k]);
      tk_store_close(s[k]);
    }
  }
  if (!pg_url) {
    for (int r = 0; r < REPS; r++)
      for (int k = 0; k < 2; k++) ms[k][r] = claim_100(s[k]);
    for (int k = 0; k < 2; k++) tk_store_close(s[k]);
  }
  for (int k = 0; k < 2; k++) {
    qsort(ms[k], REPS, sizeof ms[k][0], cmp_double);
    printf("%-36s %9d %10.3f / %.3f\n", labels[k], tasks * 100, ms[k][0], ms[k][REPS / 2]);
  }
  printf("%-36s %9s %10.2fx / %.2fx\n", "instances / today's (goal <= 2x)", "",
         ms[1][0] / ms[0][0], ms[1][REPS / 2] / ms[0][REPS / 2]);
  free(today);
  free(half);
  tk_config_free(cfg);
}

int main(int argc, char **argv) {
  tk_store_process_init(); /* as the CLI does */
  quick = getenv("BENCH_QUICK") != NULL && atoi(getenv("BENCH_QUICK")) == 1;
  pg_url = getenv("BENCH_PG_URL");
  snprintf(dir, sizeof dir, "%s/tasker-bench-map-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  int all = argc == 1;
  for (int i = 1; i < argc || all; i++) {
    const char *what = all ? NULL : argv[i];
    if (all || !strcmp(what, "create")) create();
    if (all || !strcmp(what, "throughput")) throughput();
    if (all || !strcmp(what, "claims")) claims();
    if (all) break;
    if (strcmp(what, "create") && strcmp(what, "throughput") && strcmp(what, "claims"))
      die("usage: bench_map [create|throughput|claims]...", NULL);
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_map: could not remove %s\n", dir);
  return 0;
}
