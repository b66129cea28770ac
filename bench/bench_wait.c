/* Benchmarks of wait steps and signals (DESIGN §18, issue 24), printed as
 * tables; no timed assertions:
 *   parked   the engine's idle pass (tk_engine_tick with nothing due) and a
 *            claim of 100 ready steps, median of several, with 0 and with
 *            100,000 wait steps parked (timeout 72h ahead): their ratio
 *            (the goal: within 2x of the empty store)
 *   signal   a signal (tk_step_signal on a connection of its own) until its
 *            wait step completed and its child step ran to completion on an
 *            engine running in a thread (the child's step.completed event):
 *            p50/p99 over a few hundred signals; "poll" leaves the engine to
 *            find the signal itself (as from another process), "wake" calls
 *            tk_engine_wake after it (as the server does in-process). The
 *            goal: p50 within 5 ms on SQLite, 10 ms on PostgreSQL. A step
 *            not completed within 2 s is counted ("> 2 s"), not timed.
 * Usage: bench_wait [parked|signal]... (default both).
 * BENCH_PG_URL=URL: the same tables on that PostgreSQL database too (its
 * public schema is dropped and made again), as bench_lifecycle takes it.
 * BENCH_QUICK=1: a tenth of the sizes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
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
#include <tasker/events.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "store/store.h" /* the claim, timed without the engine */

static char dir[256];
static int quick;

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_wait: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile of v[n] (sorted in place). */
static double quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)(q * (n - 1) + 0.5);
  return v[i];
}

/* Drop and make again the public schema of PostgreSQL database url. */
static void pg_reset(const char *url) {
#ifndef TK_NO_POSTGRES
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQexec(c, "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  if (!ok) die("BENCH_PG_URL: cannot reset the public schema", NULL);
#else
  (void)url;
  die("BENCH_PG_URL: this build has no PostgreSQL backend", NULL);
#endif
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

/* The store's URL: DIR/NAME.db made fresh, or pg (its schema reset). */
static void store_url(const char *pg, const char *name, char *url, size_t len) {
  if (pg) {
    pg_reset(pg);
    snprintf(url, len, "%s", pg);
    return;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  unlink(path);
  snprintf(url, len, "sqlite:%s", path);
}

static tk_store *open_store(const char *url) {
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) die("store", &err);
  return s;
}

/* Template NAME (steps toml) added to s. */
static void add_template(tk_store *s, tk_config *cfg, const char *name, const char *toml) {
  char tpl[512];
  snprintf(tpl, sizeof tpl, "%s/%s.toml", dir, name);
  FILE *f = fopen(tpl, "w");
  if (f == NULL) die("template file", NULL);
  fprintf(f, "name = \"%s\"\nversion = \"1\"\n%s", name, toml);
  fclose(f);
  tk_clock clock = tk_store_clock(s);
  tk_err err;
  if (tk_template_add_file(s, cfg, tpl, tk_clock_now(&clock), NULL, &err)) die("template", &err);
}

/* n tasks of template name, in bulk submits of up to 5,000. */
static void submit(tk_store *s, tk_config *cfg, const char *name, int n) {
  enum { CHUNK = 5000 };
  static tk_submit_request reqs[CHUNK];
  static int64_t ids[CHUNK];
  tk_clock clock = tk_store_clock(s);
  for (int i = 0; i < CHUNK; i++) reqs[i] = (tk_submit_request){.template_name = name};
  for (int done = 0; done < n;) {
    int k = n - done < CHUNK ? n - done : CHUNK, failed;
    tk_err err;
    if (tk_task_submit_many(s, cfg, reqs, k, tk_clock_now(&clock), ids, NULL, &failed, &err))
      die("submit_many", &err);
    done += k;
  }
}

static const char wait_toml[] =
    "[[steps]]\nname = \"approve\"\nhandler = { kind = \"wait\", timeout = \"72h\" }\n";
static const char noop_toml[] =
    "[[steps]]\nname = \"s\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n";
static const char pair_toml[] =
    "[[steps]]\nname = \"approve\"\nhandler = { kind = \"wait\", timeout = \"72h\" }\n"
    "[[steps]]\nname = \"after\"\ndepends_on = [\"approve\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n";

/* ---- parked ---- */

/* Run the engine at the clock's time until it has nothing due now. */
static void run_now(tk_engine *e, tk_manual_clock *c) {
  for (;;) {
    int64_t due;
    tk_err err;
    if (tk_engine_tick(e, &due, &err)) die("tick", &err);
    if (due > c->now_ms) return;
  }
}

/* Medians in ms of 25 idle passes, of 25 store looks for due waits
 * (wait_take with nothing due: what a pass costs when it does look) and
 * of 9 claims of 100 ready noop steps (900 submitted after the idle
 * passes: the claims take them). */
static void costs(tk_store *s, tk_config *cfg, tk_engine *e, int64_t now, double m[3]) {
  double t[25];
  for (int i = 0; i < 25; i++) {
    int64_t due;
    tk_err err;
    double t0 = now_ms();
    if (tk_engine_tick(e, &due, &err)) die("idle tick", &err);
    t[i] = now_ms() - t0;
  }
  m[0] = quantile(t, 25, 0.5);
  static tk__waited w[100];
  for (int i = 0; i < 25; i++) {
    int n;
    int64_t next;
    tk_err err;
    double t0 = now_ms();
    if (s->ops->wait_take(s, now, "bench", 60000, 100, w, &n, &next, &err) || n != 0)
      die("wait_take", &err);
    t[i] = now_ms() - t0;
  }
  m[1] = quantile(t, 25, 0.5);
  double *claim = &m[2];
  submit(s, cfg, "ready", 900);
  static tk__claimed out[100];
  for (int i = 0; i < 9; i++) {
    int n;
    tk_err err;
    double t0 = now_ms();
    if (tk__store_claim(s, "bench", 60000, 100, out, &n, &err) || n != 100) die("claim", &err);
    t[i] = now_ms() - t0;
    tk__claimed_inputs_free(out, n);
  }
  *claim = quantile(t, 9, 0.5);
}

static void parked(const char *pg) {
  int sizes[2] = {0, quick ? 10000 : 100000};
  double m[2][3];
  printf("%-10s %10s %14s %14s %14s %10s\n", "parked", "waiting", "idle pass ms",
         "wait_take ms", "claim 100 ms", "setup s");
  for (int k = 0; k < 2; k++) {
    char url[600];
    store_url(pg, "parked", url, sizeof url);
    tk_store *s = open_store(url);
    tk_config *cfg = config();
    tk_manual_clock c = {.now_ms = INT64_C(1767225600000)};
    tk_store_set_clock(s, tk_clock_manual(&c));
    add_template(s, cfg, "w", wait_toml);
    add_template(s, cfg, "ready", noop_toml);
    tk_engine_options eo = {.store = s, .config = cfg, .clock = tk_clock_manual(&c), .seed = 1};
    tk_engine *e;
    tk_err err;
    if (tk_engine_new(&eo, &e, &err)) die("engine", &err);
    double t0 = now_ms();
    /* The setup at durability fast; the timings at the default (full). */
    if (tk_store_set_durability(s, TK_DURABILITY_FAST, &err)) die("durability", &err);
    submit(s, cfg, "w", sizes[k]);
    run_now(e, &c); /* every wait step claimed and parked */
    if (tk_store_set_durability(s, TK_DURABILITY_FULL, &err)) die("durability", &err);
    double setup = (now_ms() - t0) / 1e3;
    costs(s, cfg, e, c.now_ms, m[k]);
    printf("%-10s %10d %14.3f %14.3f %14.3f %10.1f\n", pg ? "postgres" : "sqlite", sizes[k],
           m[k][0], m[k][1], m[k][2], setup);
    tk_engine_free(e);
    tk_store_close(s);
    tk_config_free(cfg);
  }
  printf("%-10s %10s %14.2f %14.2f %14.2f   (goal <= 2x)\n", pg ? "postgres" : "sqlite",
         "ratio", m[1][0] / m[0][0], m[1][1] / m[0][1], m[1][2] / m[0][2]);
}

/* ---- signal ---- */

/* What the engine's observer reports to the timing thread: approve steps
 * claimed (then parked), and when (now_ms) each task's "after" completed. */
enum { MAX_TASKS = 4096 };
static atomic_long claimed_approve;
static _Atomic double after_done[MAX_TASKS];

static void on_event(const tk_event *ev, void *ud) {
  (void)ud;
  if (ev->step == NULL) return;
  if (ev->type == TK_EV_STEP_CLAIMED && strcmp(ev->step, "approve") == 0)
    atomic_fetch_add(&claimed_approve, 1);
  if (ev->type == TK_EV_STEP_COMPLETED && strcmp(ev->step, "after") == 0 && ev->task > 0 &&
      ev->task < MAX_TASKS)
    atomic_store(&after_done[ev->task], now_ms());
}

static void *engine_thread(void *arg) {
  tk_err err;
  if (tk_engine_run(arg, 0, &err)) die("engine run", &err);
  return NULL;
}

/* When task's "after" completed (now_ms), or 0 when not within limit ms. */
static double done_within(int64_t task, double limit) {
  double t0 = now_ms(), d;
  while ((d = atomic_load(&after_done[task])) == 0) {
    if (now_ms() - t0 > limit) return 0;
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
  return d;
}

static void signal_run(const char *pg) {
  int n = quick ? 50 : 300; /* two runs of n tasks: ids below MAX_TASKS */
  char url[600];
  store_url(pg, "signal", url, sizeof url);
  tk_store *s = open_store(url), *sender = open_store(url);
  tk_config *cfg = config();
  add_template(s, cfg, "pair", pair_toml);
  static const tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_ALL, on_event};
  for (int wake = 0; wake < 2; wake++) {
    tk_engine_options eo = {.store = s, .config = cfg, .seed = 1};
    tk_engine *e;
    tk_err err;
    if (tk_engine_new(&eo, &e, &err) || tk_engine_observe(e, &obs, NULL, &err))
      die("engine", &err);
    atomic_store(&claimed_approve, 0);
    for (int i = 0; i < MAX_TASKS; i++) atomic_store(&after_done[i], 0); /* ids start over */
    int64_t first = 0;
    {
      tk_clock clock = tk_store_clock(s);
      tk_submit_request req = {.template_name = "pair"};
      int64_t ids[1];
      int failed;
      if (tk_task_submit_many(s, cfg, &req, 1, tk_clock_now(&clock), ids, NULL, &failed, &err))
        die("submit", &err);
      first = ids[0];
    }
    submit(s, cfg, "pair", n - 1); /* ids first .. first+n-1 */
    pthread_t th;
    pthread_create(&th, NULL, engine_thread, e);
    double t0 = now_ms();
    while (atomic_load(&claimed_approve) < n && now_ms() - t0 < 60000) usleep(1000);
    usleep(300000); /* the last claimed are parked */
    double *lat = malloc(sizeof(double) * (size_t)n);
    int got = 0, late = 0;
    for (int i = 0; i < n; i++) {
      int64_t task = first + i;
      tk_signal_request r = {.task_id = task, .step = "approve", .data_json = "{\"ok\":true}"};
      tk_signal_result res;
      tk_clock clock = tk_store_clock(sender);
      double a = now_ms();
      if (tk_step_signal(sender, &r, tk_clock_now(&clock), &res, &err)) die("signal", &err);
      if (wake) tk_engine_wake(e);
      double d = done_within(task, 2000);
      if (d == 0) late++; /* not within 2 s: counted, left out of the quantiles */
      else lat[got++] = d - a;
    }
    tk_engine_stop(e);
    pthread_join(th, NULL);
    tk_engine_free(e);
    if (got > 0) {
      double p50 = quantile(lat, got, 0.5), p99 = quantile(lat, got, 0.99);
      printf("%-10s %-6s %8d %10.2f %10.2f %10.2f %8d\n", pg ? "postgres" : "sqlite",
             wake ? "wake" : "poll", got, p50, p99, lat[got - 1], late);
    }
    free(lat);
  }
  tk_store_close(sender);
  tk_store_close(s);
  tk_config_free(cfg);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each row as it comes: PostgreSQL's setup is long */
  quick = getenv("BENCH_QUICK") != NULL;
  const char *pg = getenv("BENCH_PG_URL");
  if (pg && !pg[0]) pg = NULL;
  snprintf(dir, sizeof dir, "/tmp/bench_wait.XXXXXX");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  int do_parked = argc < 2, do_signal = argc < 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "parked") == 0) do_parked = 1;
    else if (strcmp(argv[i], "signal") == 0) do_signal = 1;
    else die("usage: bench_wait [parked|signal]...", NULL);
  }
  const char *backends[2] = {NULL, pg};
  for (int b = 0; b < (pg ? 2 : 1); b++) {
    if (do_parked) {
      parked(backends[b]);
      printf("\n");
    }
    if (do_signal) {
      printf("%-10s %-6s %8s %10s %10s %10s %8s\n", "signal", "engine", "signals", "p50 ms",
             "p99 ms", "max ms", "> 2 s");
      signal_run(backends[b]);
      printf("\n");
    }
  }
  if (!pg) printf("(PostgreSQL: set BENCH_PG_URL to run these tables there too)\n");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  return 0;
}
