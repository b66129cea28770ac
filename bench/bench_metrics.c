/* Metrics benchmarks (issue 13: the metrics observer on against off, goal
 * within 3%), printed as tables:
 *   overhead  the engine's throughput on SQLite (independent noop steps,
 *             0 and 4 workers) with no observer ("off"), with the metrics
 *             observer ("on"), and with it while another thread renders
 *             every 10 ms ("scraped"); the modes' runs interleaved, in a
 *             rotating order, median of BENCH_REPEAT (default 5)
 *   observer  nanoseconds per event of tk_observer_metrics alone
 *   render    microseconds per tk_metrics_render and per
 *             tk_metrics_render_store (one status read of a store)
 * Usage: bench_metrics [overhead|observer|render]... (default all).
 * BENCH_QUICK=1 for a quarter of the steps; BENCH_WORKERS=N for the rows
 * with N workers only. Instruction counts, steadier than time on a shared
 * machine: docs/metrics.md (callgrind on bench_engine with BENCH_METRICS). */
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
#include <tasker/metrics.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "core/buf.h"

/* Modes: 0 off, 1 on, 2 on while scraped. */
enum { STEPS_PER_TASK = 100, MODES = 3 };

static char dir[256];
static int quick;

static void fail(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_metrics: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static double seconds_since(int64_t t0_ns) { return (double)(tk_monotonic_ns() - t0_ns) / 1e9; }

/* A new store at DIR/run.db holding `tasks` tasks of STEPS_PER_TASK
 * independent noop steps each, all ready. */
static tk_store *seeded_store(const tk_config *cfg, int tasks) {
  char db[300], url[320], toml[300];
  snprintf(db, sizeof db, "%s/run.db", dir);
  snprintf(url, sizeof url, "sqlite:%s", db);
  snprintf(toml, sizeof toml, "%s/wide.toml", dir);
  unlink(db);
  tk__buf t = {0};
  tk__buf_adds(&t, "name = \"wide\"\nversion = \"1\"\n");
  for (int i = 0; i < STEPS_PER_TASK; i++)
    tk__buf_addf(&t, "[[steps]]\nname = \"n%d\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n",
                 i);
  FILE *f = fopen(toml, "w");
  if (f == NULL || fputs(t.p, f) < 0 || fclose(f) != 0) fail("template file", NULL);
  tk__buf_free(&t);
  tk_store *s;
  tk_err err;
  tk_clock clock = tk_clock_system();
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) fail("store", &err);
  if (tk_template_add_file(s, cfg, toml, tk_clock_now(&clock), NULL, &err)) fail("template", &err);
  tk_submit_request req = {.template_name = "wide"};
  for (int i = 0; i < tasks; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, tk_clock_now(&clock), &id, &existed, &err))
      fail("submit", &err);
  }
  return s;
}

typedef struct scraper {
  tk_metrics *m;
  atomic_int stop;
  int renders;
} scraper;

/* Render every 10 ms until stopped, as a very eager Prometheus would. */
static void *scrape(void *ud) {
  scraper *sc = ud;
  struct timespec pause = {0, 10 * 1000 * 1000};
  while (!atomic_load(&sc->stop)) {
    char *text;
    tk_err err;
    if (tk_metrics_render(sc->m, &text, NULL, &err)) fail("render", &err);
    free(text);
    sc->renders++;
    nanosleep(&pause, NULL);
  }
  return NULL;
}

/* Steps per second of one run until idle in `mode`. */
static double one_run(const tk_config *cfg, int tasks, int workers, int mode) {
  tk_store *s = seeded_store(cfg, tasks);
  tk_engine_options eo = {.store = s, .config = cfg, .workers = workers, .seed = 1};
  tk_engine *e;
  tk_metrics *m = NULL;
  tk_err err;
  if (tk_engine_new(&eo, &e, &err)) fail("engine", &err);
  if (mode > 0 && (tk_metrics_new(&m, &err) || tk_metrics_attach(m, e, &err)))
    fail("metrics", &err);
  scraper sc = {.m = m};
  pthread_t t;
  if (mode == 2 && pthread_create(&t, NULL, scrape, &sc)) fail("thread", NULL);
  int64_t t0 = tk_monotonic_ns();
  if (tk_engine_run(e, 1, &err)) fail("run", &err);
  double secs = seconds_since(t0);
  if (mode == 2) {
    atomic_store(&sc.stop, 1);
    pthread_join(t, NULL);
  }
  tk_engine_free(e);
  tk_metrics_free(m);
  tk_store_close(s);
  return (double)tasks * STEPS_PER_TASK / secs;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void overhead(void) {
  const char *sets[] = {"backoff.jitter=\"none\"", "engine.claim_batch=256",
                        "engine.lease=\"60s\""};
  tk_config_source src = {.sets = sets, .nsets = 3};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) fail("config", &err);
  int tasks = quick ? 50 : 200;
  int repeat = getenv("BENCH_REPEAT") ? atoi(getenv("BENCH_REPEAT")) : 5;
  if (repeat < 1 || repeat > 15) repeat = 5;
  printf("\n%-10s %7s %8s %7s %12s %12s %12s %9s %9s\n", "overhead", "steps", "workers", "runs",
         "off steps/s", "on steps/s", "scraped", "on/off", "scr/off");
  const int workers[] = {0, 4};
  for (int w = 0; w < 2; w++) {
    if (getenv("BENCH_WORKERS") && atoi(getenv("BENCH_WORKERS")) != workers[w]) continue;
    double rate[MODES][15];
    for (int r = 0; r < repeat; r++)
      for (int k = 0; k < MODES; k++) {
        int mode = (k + r) % MODES; /* a drifting machine favours no mode */
        rate[mode][r] = one_run(cfg, tasks, workers[w], mode);
      }
    double med[MODES];
    for (int k = 0; k < MODES; k++) {
      qsort(rate[k], (size_t)repeat, sizeof rate[k][0], cmp_double);
      med[k] = rate[k][repeat / 2];
    }
    printf("%-10s %7d %8d %7d %12.0f %12.0f %12.0f %9.3f %9.3f\n", "noop", tasks * STEPS_PER_TASK,
           workers[w], repeat, med[0], med[1], med[2], med[1] / med[0], med[2] / med[0]);
  }
  tk_config_free(cfg);
}

static void observer(void) {
  tk_metrics *m;
  tk_err err;
  if (tk_metrics_new(&m, &err)) fail("metrics", &err);
  /* The events of one attempt that fails and of one that succeeds. */
  tk_event evs[5] = {
      {.type = TK_EV_STEP_CLAIMED, .has_late_ms = 1, .late_ms = 3},
      {.type = TK_EV_STEP_FAILED, .has_late_ms = 1, .late_ms = 3, .has_duration_us = 1,
       .duration_us = 1500},
      {.type = TK_EV_STEP_RETRY_SCHEDULED},
      {.type = TK_EV_STEP_COMPLETED, .has_late_ms = 1, .late_ms = 40, .has_duration_us = 1,
       .duration_us = 250000},
      {.type = TK_EV_TASK_COMPLETED},
  };
  evs[0].u.claimed.claim_us = 180;
  evs[1].u.failed.outcome = "failure";
  evs[2].u.retry.delay_ms = 2000;
  evs[4].u.finished.state = "complete";
  long n = quick ? 2000000 : 20000000;
  int64_t t0 = tk_monotonic_ns();
  for (long i = 0; i < n; i++) tk_observer_metrics.on_event(&evs[i % 5], m);
  double secs = seconds_since(t0);
  printf("\n%-36s %12s %10s\n", "observer", "events", "ns/event");
  printf("%-36s %12ld %10.1f\n", "tk_observer_metrics.on_event", n, secs * 1e9 / (double)n);
  tk_metrics_free(m);
}

static void render(void) {
  tk_metrics *m;
  tk_err err;
  if (tk_metrics_new(&m, &err)) fail("metrics", &err);
  int n = quick ? 2000 : 20000;
  size_t len = 0;
  int64_t t0 = tk_monotonic_ns();
  for (int i = 0; i < n; i++) {
    char *text;
    if (tk_metrics_render(m, &text, &len, &err)) fail("render", &err);
    free(text);
  }
  double secs = seconds_since(t0);
  printf("\n%-36s %8s %10s %10s\n", "render", "renders", "bytes", "µs each");
  printf("%-36s %8d %10zu %10.1f\n", "tk_metrics_render", n, len, secs * 1e6 / n);
  tk_metrics_free(m);

  tk_config_source src = {0};
  tk_config *cfg;
  if (tk_config_load(&src, &cfg, &err)) fail("config", &err);
  int tasks = quick ? 50 : 200;
  tk_store *s = seeded_store(cfg, tasks);
  tk_clock clock = tk_clock_system();
  n = quick ? 100 : 500;
  t0 = tk_monotonic_ns();
  for (int i = 0; i < n; i++) {
    char *text;
    if (tk_metrics_render_store(s, tk_clock_now(&clock), &text, &len, &err))
      fail("render_store", &err);
    free(text);
  }
  secs = seconds_since(t0);
  char what[64];
  snprintf(what, sizeof what, "tk_metrics_render_store, %d steps", tasks * STEPS_PER_TASK);
  printf("%-36s %8d %10zu %10.1f\n", what, n, len, secs * 1e6 / n);
  tk_store_close(s);
  tk_config_free(cfg);
}

int main(int argc, char **argv) {
  tk_store_process_init();
  quick = getenv("BENCH_QUICK") != NULL;
  snprintf(dir, sizeof dir, "%s/tasker-bench-metrics-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) fail("mkdtemp", NULL);
  for (int i = 1; i < argc || argc == 1; i++) {
    const char *what = argc == 1 ? NULL : argv[i];
    if (!what || !strcmp(what, "overhead")) overhead();
    if (!what || !strcmp(what, "observer")) observer();
    if (!what || !strcmp(what, "render")) render();
    if (argc == 1) break;
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_metrics: could not remove %s\n", dir);
  return 0;
}
