/* Benchmarks of wait steps and signals (DESIGN §18, issue 24), printed as
 * tables; no timed assertions:
 *   parked   the engine's idle pass (tk_engine_tick with nothing due) and a
 *            claim of 100 ready steps, median of several, with 0 and with
 *            100,000 wait steps parked (timeout 72h ahead): their ratio
 *            (the goal: within 2x of the empty store)
 *   signal   a signal (tk_step_signal on a connection of its own) until its
 *            wait step completed, which releases its child step ("step":
 *            the goal's measure), and until that child ran to completion
 *            ("+next": claimed and run too) on an engine running in a
 *            thread (their step.completed events), in ms: p50/p99 over a
 *            few hundred signals ("call": the signal call alone);
 *            "poll" leaves the engine to
 *            find the signal itself (as from another process), "wake" calls
 *            tk_engine_wake after it (as the server does in-process), at
 *            durability full, and "wake" again at fast (no flush at a
 *            commit: the rest is the transactions' work). The
 *            goal: p50 within 5 ms on SQLite, 10 ms on PostgreSQL. A step
 *            not completed within 2 s is counted ("> 2 s"), not timed.
 *   wide     a signal to a task whose map has 0, 1,000 and 10,000 instances
 *            (pending for a queue no worker polls) beside its wait step:
 *            the medians of 25 sends with one key (stored once, then
 *            answered as duplicates: each one checked and looked up whole),
 *            and of the wait-step check's read of the task's template (the
 *            task's row and tk__template_lookup) beside the task report it
 *            read before (task_report). The goal: flat in the instances.
 * Usage: bench_wait [parked|signal|wide]... (default all).
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

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/events.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "bench_util.h"
#include "store/store.h" /* the claim, timed without the engine */

static int quick;

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
      bench_die("submit_many", &err);
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

/* A fresh store named NAME on a manual clock (2026-01-01), the
 * benchmark's configuration, and an engine on that clock (workers 0: the
 * caller ticks it). Set up in place: the engine holds &w->c. */
typedef struct manual_world {
  tk_store *s;
  tk_config *cfg;
  tk_manual_clock c;
  tk_engine *e;
} manual_world;

static void world_open(manual_world *w, const char *pg, const char *name) {
  char url[600];
  bench_fresh_url(pg, name, url, sizeof url);
  w->s = bench_open(url);
  w->cfg = bench_config(NULL);
  w->c = (tk_manual_clock){.now_ms = INT64_C(1767225600000)};
  tk_store_set_clock(w->s, tk_clock_manual(&w->c));
  tk_engine_options eo = {.store = w->s, .config = w->cfg, .clock = tk_clock_manual(&w->c),
                          .seed = 1};
  tk_err err;
  if (tk_engine_new(&eo, &w->e, &err)) bench_die("engine", &err);
}

static void world_close(manual_world *w) {
  tk_engine_free(w->e);
  tk_store_close(w->s);
  tk_config_free(w->cfg);
}

/* ---- parked ---- */

/* Medians in ms of 25 idle passes, of 25 store looks for due waits
 * (wait_take with nothing due: what a pass costs when it does look) and
 * of 9 claims of 100 ready noop steps (900 submitted after the idle
 * passes: the claims take them). */
static void costs(tk_store *s, tk_config *cfg, tk_engine *e, int64_t now, double m[3]) {
  double t[25];
  for (int i = 0; i < 25; i++) {
    int64_t due;
    tk_err err;
    double t0 = bench_now_ms();
    if (tk_engine_tick(e, &due, &err)) bench_die("idle tick", &err);
    t[i] = bench_now_ms() - t0;
  }
  m[0] = bench_quantile(t, 25, 0.5);
  static tk__waited w[100];
  for (int i = 0; i < 25; i++) {
    int n;
    int64_t next;
    tk_err err;
    double t0 = bench_now_ms();
    if (s->ops->wait_take(s, now, "bench", 60000, 100, w, &n, &next, &err) || n != 0)
      bench_die("wait_take", &err);
    t[i] = bench_now_ms() - t0;
  }
  m[1] = bench_quantile(t, 25, 0.5);
  double *claim = &m[2];
  submit(s, cfg, "ready", 900);
  static tk__claimed out[100];
  for (int i = 0; i < 9; i++) {
    int n;
    tk_err err;
    double t0 = bench_now_ms();
    if (tk__store_claim(s, "bench", 60000, 100, out, &n, &err) || n != 100)
      bench_die("claim", &err);
    t[i] = bench_now_ms() - t0;
    tk__claimed_inputs_free(out, n);
  }
  *claim = bench_quantile(t, 9, 0.5);
}

static void parked(const char *pg) {
  int sizes[2] = {0, quick ? 10000 : 100000};
  double m[2][3];
  printf("%-10s %10s %14s %14s %14s %10s\n", "parked", "waiting", "idle pass ms",
         "wait_take ms", "claim 100 ms", "setup s");
  for (int k = 0; k < 2; k++) {
    manual_world w;
    world_open(&w, pg, "parked");
    bench_template(w.s, w.cfg, "w", wait_toml);
    bench_template(w.s, w.cfg, "ready", noop_toml);
    double t0 = bench_now_ms();
    /* The setup at durability fast; the timings at the default (full). */
    tk_err err;
    if (tk_store_set_durability(w.s, TK_DURABILITY_FAST, &err)) bench_die("durability", &err);
    submit(w.s, w.cfg, "w", sizes[k]);
    bench_run_now(w.e, &w.c); /* every wait step claimed and parked */
    if (tk_store_set_durability(w.s, TK_DURABILITY_FULL, &err)) bench_die("durability", &err);
    double setup = (bench_now_ms() - t0) / 1e3;
    costs(w.s, w.cfg, w.e, w.c.now_ms, m[k]);
    printf("%-10s %10d %14.3f %14.3f %14.3f %10.1f\n", pg ? "postgres" : "sqlite", sizes[k],
           m[k][0], m[k][1], m[k][2], setup);
    world_close(&w);
  }
  printf("%-10s %10s %14.2f %14.2f %14.2f   (goal <= 2x)\n", pg ? "postgres" : "sqlite",
         "ratio", m[1][0] / m[0][0], m[1][1] / m[0][1], m[1][2] / m[0][2]);
}

/* ---- signal ---- */

/* What the engine's observer reports to the timing thread: approve steps
 * claimed (then parked), and when (now_ms) each task's "approve" (the
 * signalled step: its completion releases "after") and "after" completed. */
enum { MAX_TASKS = 4096 };
static atomic_long claimed_approve;
static _Atomic double approve_done[MAX_TASKS], after_done[MAX_TASKS];

static void on_event(const tk_event *ev, void *ud) {
  (void)ud;
  if (ev->step == NULL) return;
  if (ev->type == TK_EV_STEP_CLAIMED && strcmp(ev->step, "approve") == 0)
    atomic_fetch_add(&claimed_approve, 1);
  if (ev->type != TK_EV_STEP_COMPLETED || ev->task <= 0 || ev->task >= MAX_TASKS) return;
  if (strcmp(ev->step, "approve") == 0) atomic_store(&approve_done[ev->task], bench_now_ms());
  if (strcmp(ev->step, "after") == 0) atomic_store(&after_done[ev->task], bench_now_ms());
}

static void *engine_thread(void *arg) {
  tk_err err;
  if (tk_engine_run(arg, 0, &err)) bench_die("engine run", &err);
  return NULL;
}

/* When task's "after" completed (now_ms), or 0 when not within limit ms. */
static double done_within(int64_t task, double limit) {
  double t0 = bench_now_ms(), d;
  while ((d = atomic_load(&after_done[task])) == 0) {
    if (bench_now_ms() - t0 > limit) return 0;
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
  return d;
}

static void signal_run(const char *pg) {
  int n = quick ? 50 : 300; /* two runs of n tasks: ids below MAX_TASKS */
  char url[600];
  bench_fresh_url(pg, "signal", url, sizeof url);
  tk_store *s = bench_open(url), *sender = bench_open(url);
  tk_config *cfg = bench_config(NULL);
  bench_template(s, cfg, "pair", pair_toml);
  static const tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_ALL, on_event};
  /* poll and wake at durability full; wake again at fast (no fsync at a
   * commit: what the commits' flushes cost of the figures). */
  for (int mode = 0; mode < 3; mode++) {
    int wake = mode > 0;
    tk_durability dur = mode == 2 ? TK_DURABILITY_FAST : TK_DURABILITY_FULL;
    tk_err derr;
    if (tk_store_set_durability(s, dur, &derr) || tk_store_set_durability(sender, dur, &derr))
      bench_die("durability", &derr);
    tk_engine_options eo = {.store = s, .config = cfg, .seed = 1};
    tk_engine *e;
    tk_err err;
    if (tk_engine_new(&eo, &e, &err) || tk_engine_observe(e, &obs, NULL, &err))
      bench_die("engine", &err);
    atomic_store(&claimed_approve, 0);
    for (int i = 0; i < MAX_TASKS; i++) { /* ids start over */
      atomic_store(&approve_done[i], 0);
      atomic_store(&after_done[i], 0);
    }
    int64_t first = 0;
    {
      tk_clock clock = tk_store_clock(s);
      tk_submit_request req = {.template_name = "pair"};
      int64_t ids[1];
      int failed;
      if (tk_task_submit_many(s, cfg, &req, 1, tk_clock_now(&clock), ids, NULL, &failed, &err))
        bench_die("submit", &err);
      first = ids[0];
    }
    submit(s, cfg, "pair", n - 1); /* ids first .. first+n-1 */
    pthread_t th;
    pthread_create(&th, NULL, engine_thread, e);
    double t0 = bench_now_ms();
    while (atomic_load(&claimed_approve) < n && bench_now_ms() - t0 < 60000) usleep(1000);
    usleep(300000); /* the last claimed are parked */
    double *lat = malloc(sizeof(double) * (size_t)n), *step = malloc(sizeof(double) * (size_t)n);
    double *call = malloc(sizeof(double) * (size_t)n);
    int got = 0, late = 0;
    for (int i = 0; i < n; i++) {
      int64_t task = first + i;
      tk_signal_request r = {.task_id = task, .step = "approve", .data_json = "{\"ok\":true}"};
      tk_signal_result res;
      tk_clock clock = tk_store_clock(sender);
      double a = bench_now_ms();
      if (tk_step_signal(sender, &r, tk_clock_now(&clock), &res, &err)) bench_die("signal", &err);
      double sent = bench_now_ms();
      if (wake) tk_engine_wake(e);
      double d = done_within(task, 2000);
      if (d == 0) late++; /* not within 2 s: counted, left out of the quantiles */
      else {
        step[got] = atomic_load(&approve_done[task]) - a; /* set before after's claim */
        call[got] = sent - a;
        lat[got++] = d - a;
      }
    }
    tk_engine_stop(e);
    pthread_join(th, NULL);
    tk_engine_free(e);
    if (got > 0) {
      printf("%-10s %-6s %-5s %8d %10.2f %10.2f %10.2f %10.2f %10.2f %8d\n",
             pg ? "postgres" : "sqlite", wake ? "wake" : "poll", tk_durability_name(dur), got,
             bench_quantile(call, got, 0.5), bench_quantile(step, got, 0.5),
             bench_quantile(step, got, 0.99), bench_quantile(lat, got, 0.5),
             bench_quantile(lat, got, 0.99), late);
    }
    free(call);
    free(step);
    free(lat);
  }
  tk_store_close(sender);
  tk_store_close(s);
  tk_config_free(cfg);
}

/* ---- wide ---- */

/* The function step "count": {"rows": N}, N the int ud points to. */
static void count_fn(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  char text[64];
  snprintf(text, sizeof text, "{\"rows\": %d}", *(const int *)ud);
  if ((out->results = strdup(text)) == NULL) out->status = TK_HANDLER_PERMANENT;
}

static const char wide_toml[] =
    "[[steps]]\nname = \"count\"\nhandler = { kind = \"function\", name = \"count\" }\n"
    "[[steps]]\nname = \"each\"\ndepends_on = [\"count\"]\n"
    "map = { range = \"{{parents.count.rows}}\" }\n"
    "handler = { kind = \"worker\", queue = \"nobody\" }\n"
    "[[steps]]\nname = \"approve\"\ndepends_on = [\"count\"]\n"
    "handler = { kind = \"wait\", timeout = \"72h\" }\n";

/* Medians in ms of 25 runs of: the signal (m[0]), the template read
 * (m[1]: the task's row, then its template) and the report (m[2]). */
static void wide_costs(tk_store *s, int64_t task, int64_t now, double m[3]) {
  double t[3][25];
  for (int i = 0; i < 25; i++) {
    tk_err err;
    tk_signal_request r = {.task_id = task, .step = "approve", .data_json = "{}", .key = "k"};
    tk_signal_result res;
    double t0 = bench_now_ms();
    if (tk_step_signal(s, &r, now, &res, &err)) bench_die("signal", &err);
    double t1 = bench_now_ms();
    tk__task_query q = {.task_id = task, .limit = 1};
    tk__task_row *rows;
    tk__template_rec tpl;
    int n;
    char name[300];
    if (s->ops->task_list(s, &q, &rows, &n, &err) || n != 1) bench_die("task_list", &err);
    snprintf(name, sizeof name, "%s/%s", rows[0].namespace_, rows[0].name);
    if (tk__template_lookup(s, name, rows[0].version, &tpl, &err)) bench_die("lookup", &err);
    tk__template_rec_free(&tpl);
    tk__task_rows_free(rows, n);
    double t2 = bench_now_ms();
    tk__task_report rep;
    if (s->ops->task_report(s, task, &rep, &err)) bench_die("task_report", &err);
    tk__task_report_free(&rep);
    double t3 = bench_now_ms();
    t[0][i] = t1 - t0;
    t[1][i] = t2 - t1;
    t[2][i] = t3 - t2;
  }
  for (int k = 0; k < 3; k++) m[k] = bench_quantile(t[k], 25, 0.5);
}

static void wide(const char *pg) {
  int sizes[3] = {0, quick ? 100 : 1000, quick ? 1000 : 10000};
  printf("%-10s %10s %12s %16s %16s %10s\n", "wide", "instances", "signal ms",
         "template read ms", "task_report ms", "setup s");
  for (int k = 0; k < 3; k++) {
    manual_world w;
    world_open(&w, pg, "wide");
    bench_template(w.s, w.cfg, "wide", wide_toml);
    tk_err err;
    if (tk_engine_register(w.e, "count", count_fn, &sizes[k], &err)) bench_die("count", &err);
    double t0 = bench_now_ms();
    submit(w.s, w.cfg, "wide", 1);
    bench_run_now(w.e, &w.c); /* count ran, the map has its instances, approve waits */
    tk__step_rec *inst;
    int n;
    int64_t total;
    if (w.s->ops->instance_list(w.s, 1, 1, -1, 1, &inst, &n, &total, &err) || total != sizes[k])
      bench_die("the map's instances are not all there", &err);
    tk__step_recs_free(inst, n);
    double setup = (bench_now_ms() - t0) / 1e3;
    double m[3];
    wide_costs(w.s, 1, w.c.now_ms, m);
    printf("%-10s %10d %12.3f %16.3f %16.3f %10.1f\n", pg ? "postgres" : "sqlite", sizes[k], m[0],
           m[1], m[2], setup);
    world_close(&w);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* each row as it comes: PostgreSQL's setup is long */
  quick = getenv("BENCH_QUICK") != NULL;
  const char *pg = getenv("BENCH_PG_URL");
  if (pg && !pg[0]) pg = NULL;
  bench_dir_make();
  int do_parked = argc < 2, do_signal = argc < 2, do_wide = argc < 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "parked") == 0) do_parked = 1;
    else if (strcmp(argv[i], "signal") == 0) do_signal = 1;
    else if (strcmp(argv[i], "wide") == 0) do_wide = 1;
    else bench_die("usage: bench_wait [parked|signal|wide]...", NULL);
  }
  const char *backends[2] = {NULL, pg};
  for (int b = 0; b < (pg ? 2 : 1); b++) {
    if (do_parked) {
      parked(backends[b]);
      printf("\n");
    }
    if (do_signal) {
      printf("%-10s %-6s %-5s %8s %10s %10s %10s %10s %10s %8s\n", "signal", "engine", "dur.",
             "signals", "call p50", "step p50", "step p99", "+next p50", "+next p99", "> 2 s");
      signal_run(backends[b]);
      printf("\n");
    }
    if (do_wide) {
      wide(backends[b]);
      printf("\n");
    }
  }
  if (!pg) printf("(PostgreSQL: set BENCH_PG_URL to run these tables there too)\n");
  return 0;
}
