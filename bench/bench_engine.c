/* Engine benchmarks on SQLite (issue 5), printed as tables:
 *   throughput  100,000 noop steps as 1,000 x 100 independent steps and as
 *               10,000 x a chain of 10, with 1 and 4 workers; each row
 *               also shows how long a fixed CPU loop took just before it
 *               (the yardstick: on a shared VM it drifts by 2x)
 *   latency     linear 4-step noop workflow, submit to complete, p50/p99
 *   precision   10,000 steps failing once with a 50 ms delay: how late each
 *               retry starts after its run_at; first, how late a plain 2 ms
 *               sleep wakes on this machine, the floor under those figures
 *   scale       claiming 100 ready steps with 10^4..10^6 steps stored, 90%
 *               waiting for a retry in the future; peak RSS of `tasker run`
 * Usage: bench_engine [throughput|latency|precision|scale]... (default all)
 * Set BENCH_QUICK=1 for a tenth of the sizes, BENCH_SHAPE=chain or
 * independent for one throughput shape, BENCH_WORKERS=N for its rows with N
 * workers only, BENCH_REPEAT=N for the median of N runs of each row,
 * BENCH_METRICS=1 for the throughput and precision runs with the metrics
 * observer on (bench_metrics compares on and off). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/metrics.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "store/store.h" /* the claim itself, timed without the engine */

static char dir[256];
static int quick;

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_engine: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static int64_t now_ms(void) {
  tk_clock c = tk_clock_system();
  return tk_clock_now(&c);
}

static tk_config *config(void) {
  const char *sets[] = {"backoff.jitter=\"none\"", "backoff.base=\"50ms\"",
                        "engine.claim_batch=256", "engine.lease=\"60s\""};
  tk_config_source src = {.sets = sets, .nsets = 4};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) die("config", &err);
  return cfg;
}

/* A fresh store at DIR/NAME.db with the template `toml` added. */
static tk_store *fresh_store(const char *name, const char *toml, tk_config *cfg) {
  char path[512], url[600], tpl[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  unlink(path);
  snprintf(url, sizeof url, "sqlite:%s", path);
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) die("store", &err);
  snprintf(tpl, sizeof tpl, "%s/%s.toml", dir, name);
  FILE *f = fopen(tpl, "w");
  fputs(toml, f);
  fclose(f);
  if (tk_template_add_file(s, cfg, tpl, now_ms(), NULL, &err)) die("template", &err);
  return s;
}

/* A template of n noop steps, independent or chained. */
static char *noop_template(const char *name, int n, int chain, const char *handler) {
  size_t cap = (size_t)n * 200 + 256;
  char *t = malloc(cap);
  size_t len = (size_t)snprintf(t, cap, "name = \"%s\"\nversion = \"1\"\n", name);
  for (int i = 0; i < n; i++) {
    len += (size_t)snprintf(t + len, cap - len, "[[steps]]\nname = \"s%d\"\nhandler = %s\n", i,
                            handler);
    if (chain && i > 0) len += (size_t)snprintf(t + len, cap - len, "depends_on = [\"s%d\"]\n", i - 1);
  }
  return t;
}

static void submit(tk_store *s, tk_config *cfg, const char *name, int tasks) {
  tk_err err;
  tk_submit_request req = {.template_name = name};
  for (int i = 0; i < tasks; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, now_ms(), &id, &existed, &err)) die("submit", &err);
  }
}

/* Seconds of CPU (user and system, all threads) this process used so far. */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double run_until_idle(tk_store *s, tk_config *cfg, int workers, tk_event_sink sink,
                             void *ud) {
  tk_engine_options eo = {.store = s, .config = cfg, .workers = workers, .seed = 1,
                          .on_event = sink, .event_ud = ud};
  tk_engine *e;
  tk_err err;
  if (tk_engine_new(&eo, &e, &err)) die("engine", &err);
  tk_metrics *m = NULL;
  const char *with_metrics = getenv("BENCH_METRICS");
  if (with_metrics && atoi(with_metrics) == 1 &&
      (tk_metrics_new(&m, &err) || tk_metrics_attach(m, e, &err)))
    die("metrics", &err);
  int64_t t0 = tk_monotonic_ns();
  if (tk_engine_run(e, 1, &err)) die("run", &err);
  int64_t t1 = tk_monotonic_ns();
  tk_engine_free(e);
  tk_metrics_free(m);
  return (double)(t1 - t0) / 1e9;
}

/* Copy file `from` to `to` (the seeded store, so that every run of a shape
 * starts from the same submitted tasks without submitting them again). */
static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  if (in == NULL || out == NULL) die("copy store", NULL);
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) die("copy store", NULL);
  fclose(in);
  if (fclose(out) != 0) die("copy store", NULL);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Milliseconds a fixed integer loop takes: a yardstick printed with the
 * figures, because a shared VM's speed drifts by a fifth from one minute
 * to the next (compare runs by it before comparing their steps/s). */
static double yardstick_ms(void) {
  int64_t t0 = tk_monotonic_ns();
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 100000000u; i++) x += i;
  return (double)(tk_monotonic_ns() - t0) / 1e6;
}

static void throughput(void) {
  tk_config *cfg = config();
  int total = quick ? 10000 : 100000;
  struct { const char *shape; int tasks, steps, chain; } shapes[] = {
      {"independent", total / 100, 100, 0}, {"chain", total / 10, 10, 1}};
  /* BENCH_REPEAT=N runs each row N times and prints the median. */
  int repeat = getenv("BENCH_REPEAT") ? atoi(getenv("BENCH_REPEAT")) : 1;
  if (repeat < 1 || repeat > 15) repeat = 1;
  printf("\n%-12s %7s %7s %8s %10s %12s %10s %10s\n", "throughput", "tasks", "steps", "workers",
         "seconds", "steps/s", "cpu µs/step", "yardstick");
  const char *only = getenv("BENCH_SHAPE"); /* e.g. "chain", for profiling */
  for (int k = 0; k < 2; k++) {
    if (only && strcmp(only, shapes[k].shape) != 0) continue;
    char *t = noop_template(shapes[k].shape, shapes[k].steps, shapes[k].chain,
                            "{ kind = \"builtin\", name = \"noop\" }");
    char seed_name[64], seed[512], path[512];
    snprintf(seed_name, sizeof seed_name, "%s-seed", shapes[k].shape);
    tk_store *s = fresh_store(seed_name, t, cfg);
    submit(s, cfg, shapes[k].shape, shapes[k].tasks);
    tk_store_close(s); /* the last close folds the log into the file */
    snprintf(seed, sizeof seed, "%s/%s.db", dir, seed_name);
    snprintf(path, sizeof path, "%s/%s.db", dir, shapes[k].shape);
    /* 0 workers: handlers run inline on the engine's thread. */
    const int workers[] = {0, 1, 4};
    for (int w = 0; w < 3; w++) {
      /* BENCH_WORKERS=N runs only the rows with N workers. */
      if (getenv("BENCH_WORKERS") && atoi(getenv("BENCH_WORKERS")) != workers[w]) continue;
      double secs[15], cpu[15], yard = yardstick_ms();
      for (int r = 0; r < repeat; r++) {
        copy_file(seed, path);
        char url[600];
        snprintf(url, sizeof url, "sqlite:%s", path);
        tk_err err;
        if (tk_store_open(url, &s, &err)) die("store", &err);
        double c0 = cpu_seconds();
        secs[r] = run_until_idle(s, cfg, workers[w], NULL, NULL);
        tk_store_close(s);
        cpu[r] = cpu_seconds() - c0;
      }
      qsort(secs, (size_t)repeat, sizeof *secs, cmp_double);
      qsort(cpu, (size_t)repeat, sizeof *cpu, cmp_double);
      double med = secs[repeat / 2];
      int steps = shapes[k].tasks * shapes[k].steps;
      printf("%-12s %7d %7d %8d %10.2f %12.0f %11.1f %8.0f ms\n", shapes[k].shape,
             shapes[k].tasks, steps, workers[w], med, steps / med, cpu[repeat / 2] * 1e6 / steps,
             yard);
    }
    free(t);
  }
  tk_config_free(cfg);
}

/* ---- latency: submit from this thread, run the engine in another ---- */

typedef struct latency_run {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t done_at_ns; /* set when the task completes */
} latency_run;

static void latency_sink(const char *line, void *ud) {
  latency_run *r = ud;
  if (strstr(line, "\"type\":\"task.completed\"")) {
    pthread_mutex_lock(&r->mu);
    r->done_at_ns = tk_monotonic_ns();
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
  }
}

static void *engine_thread(void *arg) {
  tk_err err;
  if (tk_engine_run(arg, 0, &err)) die("run", &err);
  return NULL;
}

/* An engine running on a thread of its own until engine_stop. */
typedef struct running_engine {
  tk_engine *e;
  pthread_t thread;
} running_engine;

static running_engine engine_start(tk_store *s, tk_config *cfg, int workers, tk_event_sink sink,
                                   void *ud) {
  tk_engine_options eo = {.store = s, .config = cfg, .workers = workers, .seed = 1,
                          .on_event = sink, .event_ud = ud};
  running_engine r;
  tk_err err;
  if (tk_engine_new(&eo, &r.e, &err)) die("engine", &err);
  if (pthread_create(&r.thread, NULL, engine_thread, r.e) != 0) die("engine thread", NULL);
  return r;
}

static void engine_stop(running_engine *r) {
  tk_engine_stop(r->e);
  pthread_join(r->thread, NULL);
  tk_engine_free(r->e);
}

/* Wait on cv (mu held) until woken, or give up with `what` once `deadline`
 * (CLOCK_REALTIME) has passed: a benchmark that hangs measures nothing. */
static void wait_before(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline,
                        const char *what) {
  if (pthread_cond_timedwait(cv, mu, deadline) == ETIMEDOUT) die(what, NULL);
}

/* A minute from now, for wait_before. */
static struct timespec a_minute_from_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += 60;
  return t;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void latency(void) {
  tk_config *cfg = config();
  char *t = noop_template("linear4", 4, 1, "{ kind = \"builtin\", name = \"noop\" }");
  tk_store *engine_store = fresh_store("latency", t, cfg);
  free(t);
  char url[600];
  snprintf(url, sizeof url, "sqlite:%s/latency.db", dir);
  tk_store *submit_store;
  tk_err err;
  if (tk_store_open(url, &submit_store, &err)) die("open", &err);
  latency_run r = {.done_at_ns = 0};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  const int workers[] = {0, 1};
  printf("\n%-28s %6s %8s %10s %10s %10s\n", "latency (submit->complete)", "tasks", "workers",
         "p50 ms", "p99 ms", "max ms");
  for (int w = 0; w < 2; w++) {
    running_engine run = engine_start(engine_store, cfg, workers[w], latency_sink, &r);
    int n = quick ? 200 : 1000;
    int64_t *lat = malloc((size_t)n * sizeof *lat);
    tk_submit_request req = {.template_name = "linear4"};
    for (int i = 0; i < n; i++) {
      pthread_mutex_lock(&r.mu);
      r.done_at_ns = 0;
      pthread_mutex_unlock(&r.mu);
      int64_t t0 = tk_monotonic_ns();
      int64_t id;
      int existed;
      if (tk_task_submit(submit_store, cfg, &req, now_ms(), &id, &existed, &err)) die("submit", &err);
      /* In one process the submitter wakes the engine directly; across
       * processes the engine notices the commit through the store. */
      tk_engine_wake(run.e);
      struct timespec deadline = a_minute_from_now();
      pthread_mutex_lock(&r.mu);
      while (r.done_at_ns == 0)
        wait_before(&r.cv, &r.mu, &deadline, "latency: a task did not complete within a minute");
      lat[i] = r.done_at_ns - t0;
      pthread_mutex_unlock(&r.mu);
    }
    engine_stop(&run);
    qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
    printf("%-28s %6d %8d %10.3f %10.3f %10.3f\n", "linear 4 noop steps", n, workers[w],
           lat[n / 2] / 1e6, lat[(n * 99) / 100] / 1e6, lat[n - 1] / 1e6);
    free(lat);
  }
  tk_store_close(submit_store);
  tk_store_close(engine_store);
  tk_config_free(cfg);
}

/* ---- precision: how late retries start ---- */

typedef struct lateness {
  int64_t *late;
  int n, cap;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} lateness;

static void precision_sink(const char *line, void *ud) {
  lateness *l = ud;
  /* The outcome's late_ms: when the handler started, queueing included. */
  if (!strstr(line, "\"type\":\"step.completed\"") || !strstr(line, "\"attempt\":2")) return;
  const char *p = strstr(line, "\"late_ms\":");
  pthread_mutex_lock(&l->mu);
  if (p && l->n < l->cap) l->late[l->n++] = atoll(p + 10);
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static void precision_row(const char *name, lateness *l, double secs) {
  qsort(l->late, (size_t)l->n, sizeof *l->late, cmp_i64);
  if (l->n > 0)
    printf("%-36s %7d %8lld %8lld %8lld %8.2f\n", name, l->n, (long long)l->late[l->n / 2],
           (long long)l->late[(l->n * 99) / 100], (long long)l->late[l->n - 1], secs);
}

/* Steps that fail once asking for a 50 ms delay (the hint path: no
 * jitter), 4 workers; lateness is taken when the handler starts (the
 * outcome's late_ms), queueing for a worker included. Two arrival patterns:
 * every step submitted before the run (the retries come due while a
 * backlog of first attempts is still being worked off), and tasks of 10
 * steps submitted every 2 ms while the engine runs (5,000 steps/s, under
 * capacity: lateness measures how exactly the engine wakes for a run_at). */
/* The floor under every precision figure: how late this machine wakes a
 * thread from a 2 ms sleep, with no engine running (a shared VM's vCPU may
 * not be scheduled for several milliseconds). */
static void wakeup_reference(void) {
  int n = quick ? 100 : 500;
  int64_t *late = malloc((size_t)n * sizeof *late);
  for (int i = 0; i < n; i++) {
    int64_t t0 = tk_monotonic_ns();
    struct timespec d = {0, 2000000};
    nanosleep(&d, NULL);
    late[i] = tk_monotonic_ns() - t0 - 2000000;
  }
  qsort(late, (size_t)n, sizeof *late, cmp_i64);
  printf("%-36s %7d %8.1f %8.1f %8.1f %8s\n", "reference: a 2 ms sleep, no engine", n,
         late[n / 2] / 1e6, late[(n * 99) / 100] / 1e6, late[n - 1] / 1e6, "-");
  free(late);
}

static void precision(void) {
  tk_config *cfg = config();
  int steps = quick ? 1000 : 10000;
  printf("\n%-36s %7s %8s %8s %8s %8s\n", "retry precision (50 ms delay)", "retries",
         "p50 ms", "p99 ms", "max ms", "run s");
  wakeup_reference();
  char *t = noop_template("fail_once", 100, 0,
                          "{ kind = \"builtin\", name = \"fail\", times = 1, retry_after = \"50ms\" }");
  tk_store *s = fresh_store("precision", t, cfg);
  free(t);
  submit(s, cfg, "fail_once", steps / 100);
  lateness l = {.late = calloc((size_t)steps, sizeof(int64_t)), .cap = steps};
  pthread_mutex_init(&l.mu, NULL);
  pthread_cond_init(&l.cv, NULL);
  double secs = run_until_idle(s, cfg, 4, precision_sink, &l);
  precision_row("burst: all submitted first", &l, secs);
  tk_store_close(s);

  t = noop_template("fail_once10", 10, 0,
                    "{ kind = \"builtin\", name = \"fail\", times = 1, retry_after = \"50ms\" }");
  tk_store *es = fresh_store("precision_paced", t, cfg);
  free(t);
  char url[600];
  snprintf(url, sizeof url, "sqlite:%s/precision_paced.db", dir);
  tk_err err;
  if (tk_store_open(url, &s, &err)) die("open", &err);
  l.n = 0;
  int64_t t0 = tk_monotonic_ns();
  running_engine run = engine_start(es, cfg, 4, precision_sink, &l);
  tk_submit_request req = {.template_name = "fail_once10"};
  for (int i = 0; i < steps / 10; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, now_ms(), &id, &existed, &err)) die("submit", &err);
    tk_engine_wake(run.e);
    int64_t next = t0 + (int64_t)(i + 1) * 2000000;
    while (tk_monotonic_ns() < next) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
  struct timespec deadline = a_minute_from_now();
  pthread_mutex_lock(&l.mu);
  while (l.n < steps)
    wait_before(&l.cv, &l.mu, &deadline, "precision: the retries did not all run within a minute");
  pthread_mutex_unlock(&l.mu);
  engine_stop(&run);
  precision_row("paced: 5,000 steps/s arriving", &l, (tk_monotonic_ns() - t0) / 1e9);
  free(l.late);
  tk_store_close(s);
  tk_store_close(es);
  tk_config_free(cfg);
}

/* ---- scale: claim cost against stored steps; RSS of tasker run ---- */

/* Time one claim of 100 ready steps (one transaction). Each repetition
 * takes 100 more of the ready ones; there are at least 1,000. */
static int bench_claim_100(tk_store *s, int64_t now, double *ms) {
  static tk__claimed out[100];
  int n = 0;
  tk_err err;
  tk_manual_clock at = {.now_ms = now}; /* the claim reads the store's clock */
  tk_clock saved = tk_store_clock(s);
  tk_store_set_clock(s, tk_clock_manual(&at));
  int64_t t0 = tk_monotonic_ns();
  int rc = tk__store_claim(s, "bench", 60000, 100, out, &n, &err);
  *ms = (tk_monotonic_ns() - t0) / 1e6;
  tk_store_set_clock(s, saved);
  if (rc || n != 100) {
    fprintf(stderr, "claim: %d steps, %s\n", n, rc ? err.msg : "");
    return -1;
  }
  return 0;
}

static void scale(const char *tasker) {
  tk_config *cfg = config();
  char *t = noop_template("wide", 100, 0, "{ kind = \"builtin\", name = \"noop\" }");
  printf("\n%-10s %10s %10s %15s %14s\n", "scale", "stored", "ready", "claim 100: best / p50 ms",
         "tasker run RSS");
  int max_exp = quick ? 5 : 6;
  for (int exp = 4; exp <= max_exp; exp++) {
    int stored = 1;
    for (int i = 0; i < exp; i++) stored *= 10;
    char name[32];
    snprintf(name, sizeof name, "scale%d", exp);
    tk_store *s = fresh_store(name, t, cfg);
    submit(s, cfg, "wide", stored / 100);
    tk_store_close(s);
    /* 90% of the steps wait for a retry an hour from now. */
    char path[512];
    snprintf(path, sizeof path, "%s/%s.db", dir, name);
    sqlite3 *db;
    sqlite3_open(path, &db);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE steps SET state = 'waiting_for_retry', run_at = %lld WHERE id %% 10 != 0",
             (long long)(now_ms() + 3600000));
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    /* Claim 100 ready steps nine times (the smallest store has 1,000
     * ready): the best and the median, each claim a transaction of its own. */
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    tk_err err;
    if (tk_store_open(url, &s, &err)) die("open", &err);
    double ms[9];
    for (int rep = 0; rep < 9; rep++)
      if (bench_claim_100(s, now_ms(), &ms[rep])) die("claim", NULL);
    qsort(ms, 9, sizeof *ms, cmp_double);
    tk_store_close(s);
    /* Peak RSS of the real binary working on this store for 3 seconds. */
    long rss_kb = -1;
    if (tasker) {
      pid_t pid = fork();
      if (pid == 0) {
        char db[700];
        snprintf(db, sizeof db, "--db=%s", url);
        execl(tasker, tasker, "run", db, "--workers", "4", "--set", "engine.lease=\"10m\"",
              (char *)NULL);
        _exit(127);
      }
      sleep(3);
      kill(pid, SIGINT);
      int st;
      struct rusage ru;
      wait4(pid, &st, 0, &ru);
      rss_kb = ru.ru_maxrss;
    }
    printf("%-10s %10d %10d %7.3f / %.3f %11.1f MiB\n", name, stored, stored / 10, ms[0], ms[4],
           rss_kb / 1024.0);
  }
  free(t);
  tk_config_free(cfg);
}

int main(int argc, char **argv) {
  tk_store_process_init(); /* as the CLI does */

  quick = getenv("BENCH_QUICK") != NULL;
  snprintf(dir, sizeof dir, "%s/tasker-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  const char *tasker = getenv("TASKER");
  if (tasker == NULL && access("build/bin/tasker", X_OK) == 0) tasker = "build/bin/tasker";
  int all = argc == 1;
  for (int i = 1; i < argc || all; i++) {
    const char *what = all ? NULL : argv[i];
    if (all || !strcmp(what, "throughput")) throughput();
    if (all || !strcmp(what, "latency")) latency();
    if (all || !strcmp(what, "precision")) precision();
    if (all || !strcmp(what, "scale")) scale(tasker);
    if (all) break;
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_engine: could not remove %s\n", dir);
  return 0;
}
