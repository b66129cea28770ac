/* How long a retry budget takes to drain an outage's backlog: the outage
 * simulation (tasker simulate outage, src/retry/simulate.c) against the
 * engine itself (DESIGN §14, docs/retry.md), on the same scenario. The goal:
 * they agree within 10%.
 *
 * The engine runs on a real SQLite store and a manual clock: tasks of one
 * step, whose function handler fails while the clock is inside the outage,
 * are submitted at the scenario's rate, each at its arrival time, and the
 * engine is ticked through every due time in between (handlers inline). Its
 * drain is the time from the outage's end to the last retry it started,
 * read from the attempt rows; the simulation's is the same quantity
 * (tk_sim_outage_stats.drain_ms). Both use the configuration's default
 * backoff profile (1 s, doubling, no jitter) and the budget named below.
 *
 * Rows per scenario: the simulation; the engine; and the engine with its
 * store's retry_earlier removed, which is the engine before deferred
 * retries were brought earlier (reservations only: the queue drains at the
 * floor its reservations were given). Times are simulated; "wall" is what
 * the engine run took on this machine. */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/engine.h>
#include <tasker/simulate.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "store/store.h"

/* The manual clock's time 0: a multiple of every window, so that budget
 * slots fall where the simulation's do. */
#define BASE_MS 1000000000LL

typedef struct scenario {
  const char *name;
  double rate;          /* first attempts per second */
  int64_t duration_ms;  /* arrivals stop */
  int64_t outage_start_ms, outage_ms;
  int max_attempts;
  double ratio, floor; /* the budget, over a 10 s window */
} scenario;

static const scenario scenarios[] = {
    {"10/s, 30s down", 10, 400000, 10000, 30000, 3, 0.1, 0.5},
    {"20/s, 20s down", 20, 300000, 10000, 20000, 3, 0.2, 1},
};

typedef struct run {
  tk_manual_clock clock;
  const scenario *sc;
} run;

static void fail(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_budget_drain: %s: %s\n", what, err->msg);
  exit(1);
}

/* The downstream: down while the clock is inside the outage. */
static void downstream(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  const run *r = ud;
  int64_t t = r->clock.now_ms - BASE_MS;
  if (t >= r->sc->outage_start_ms && t < r->sc->outage_start_ms + r->sc->outage_ms) {
    out->status = TK_HANDLER_RETRY;
    snprintf(out->error, sizeof out->error, "503 from the downstream");
  } else {
    out->status = TK_HANDLER_SUCCESS;
  }
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static tk_config *config_of(const scenario *sc) {
  char sets[6][64];
  snprintf(sets[0], sizeof sets[0], "backoff.jitter=none");
  snprintf(sets[1], sizeof sets[1], "budgets.api.ratio=%g", sc->ratio);
  snprintf(sets[2], sizeof sets[2], "budgets.api.window=10s");
  snprintf(sets[3], sizeof sets[3], "budgets.api.min_per_second=%g", sc->floor);
  snprintf(sets[4], sizeof sets[4], "engine.max_attempts=%d", sc->max_attempts);
  const char *v[] = {sets[0], sets[1], sets[2], sets[3], sets[4]};
  tk_config_source src = {NULL, NULL, NULL, v, 5};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err) != 0) fail("config", &err);
  return cfg;
}

/* Tick until nothing is due at or before t, then set the clock to t. */
static void run_until(tk_engine *e, run *r, int64_t t) {
  for (long guard = 0; guard < 100000000L; guard++) {
    int64_t due;
    tk_err err;
    if (tk_engine_tick(e, &due, &err) != 0) fail("tick", &err);
    if (due <= r->clock.now_ms) continue; /* more due now */
    if (due > t) break;
    r->clock.now_ms = due;
  }
  r->clock.now_ms = t;
}

typedef struct engine_figures {
  int64_t drain_ms, deferred, brought_earlier;
  double wall_s;
} engine_figures;

/* One engine run of sc; reservations_only removes retry_earlier. */
static engine_figures run_engine(const scenario *sc, tk_config *cfg, int reservations_only) {
  engine_figures out = {0};
  char dir[256], db[300], url[320], path[320];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/tasker-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(db, sizeof db, "%s/tasker.db", dir);
  snprintf(url, sizeof url, "sqlite:%s", db);
  snprintf(path, sizeof path, "%s/down.toml", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs("name = \"call\"\nversion = \"1\"\n[retry]\nbudget = \"api\"\n[[steps]]\nname = \"s\"\n"
        "handler = { kind = \"function\", name = \"downstream\" }\n",
        f);
  fclose(f);
  run r = {.clock = {.now_ms = BASE_MS}, .sc = sc};
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) != 0) fail("open", &err);
  tk_store_set_clock(s, tk_clock_manual(&r.clock));
  if (tk_store_migrate(s, NULL, NULL, &err) != 0) fail("migrate", &err);
  if (tk_store_set_durability(s, TK_DURABILITY_FAST, &err) != 0) fail("durability", &err);
  tk__store_ops without;
  if (reservations_only) {
    without = *s->ops;
    without.retry_earlier = NULL;
    s->ops = &without;
  }
  if (tk_template_add_file(s, cfg, path, r.clock.now_ms, NULL, &err) != 0) fail("template", &err);
  tk_engine_options o = {.store = s, .config = cfg, .clock = tk_clock_manual(&r.clock),
                         .seed = 1, .id = "bench", .workers = 0};
  tk_engine *e;
  if (tk_engine_new(&o, &e, &err) != 0) fail("engine", &err);
  if (tk_engine_register(e, "downstream", downstream, &r, &err) != 0) fail("register", &err);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tk_submit_request req = {.template_name = "call"};
  for (int64_t i = 0;; i++) {
    int64_t at = (int64_t)((double)i * 1000.0 / sc->rate);
    if (at >= sc->duration_ms) break;
    run_until(e, &r, BASE_MS + at);
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, r.clock.now_ms, &id, &existed, &err) != 0)
      fail("submit", &err);
  }
  run_until(e, &r, INT64_MAX / 2);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  out.wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  tk_engine_stats st = tk_engine_stats_get(e);
  out.deferred = st.retries_deferred;
  out.brought_earlier = st.retries_brought_earlier;
  tk_engine_free(e);
  tk_store_close(s);
  sqlite3 *q;
  sqlite3_stmt *stmt;
  int64_t end = BASE_MS + sc->outage_start_ms + sc->outage_ms;
  if (sqlite3_open(db, &q) == SQLITE_OK &&
      sqlite3_prepare_v2(q, "SELECT max(started_at) FROM attempts WHERE attempt > 1", -1, &stmt,
                         NULL) == SQLITE_OK) {
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      int64_t last = sqlite3_column_int64(stmt, 0);
      out.drain_ms = last > end ? last - end : 0;
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(q);
  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  return out;
}

static void row(const char *scenario, const char *run, int64_t drain_ms, int64_t sim_ms,
                int64_t deferred, const char *earlier, const char *wall) {
  char d[32];
  tk_duration_format(drain_ms, d, sizeof d);
  printf("%-16s %-26s %10s %8.2f %9lld %8s %7s\n", scenario, run, d,
         sim_ms > 0 ? (double)drain_ms / (double)sim_ms : 0.0, (long long)deferred, earlier,
         wall);
}

int main(void) {
  printf("drain after an outage: retry budget ratio R of first attempts + floor F/s over 10s;"
         " backoff 1s doubling, no jitter\n");
  printf("%-16s %-26s %10s %8s %9s %8s %7s\n", "scenario", "run", "drain", "vs sim", "deferred",
         "earlier", "wall");
  int bad = 0;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
    const scenario *sc = &scenarios[i];
    tk_config *cfg = config_of(sc);
    tk_sim_outage_config c;
    tk_sim_outage_config_default(&c);
    c.rate_per_s = sc->rate;
    c.duration_ms = sc->duration_ms;
    c.outage_start_ms = sc->outage_start_ms;
    c.outage_ms = sc->outage_ms;
    c.max_attempts = sc->max_attempts;
    c.budget = tk_config_budget(cfg, "api")->budget;
    tk_sim_outage_stats sim;
    tk_err err;
    if (tk_simulate_outage(&c, tk_config_profile(cfg, "default"), 1, &sim, &err) != 0)
      fail("simulate", &err);
    char label[64], wall[16];
    snprintf(label, sizeof label, "simulation R=%g F=%g", sc->ratio, sc->floor);
    row(sc->name, label, sim.drain_ms, sim.drain_ms, sim.deferred, "-", "-");
    for (int only = 0; only < 2; only++) {
      engine_figures en = run_engine(sc, cfg, only);
      char earlier[24];
      snprintf(earlier, sizeof earlier, "%lld", (long long)en.brought_earlier);
      snprintf(wall, sizeof wall, "%.1fs", en.wall_s);
      row(sc->name, only ? "engine, reservations only" : "engine", en.drain_ms, sim.drain_ms,
          en.deferred, earlier, wall);
      double off = sim.drain_ms > 0 ? (double)en.drain_ms / (double)sim.drain_ms - 1 : 0;
      if (!only && (off > 0.10 || off < -0.10)) bad = 1;
    }
    tk_sim_outage_stats_free(&sim);
    tk_config_free(cfg);
  }
  printf("goal: the engine's drain within 10%% of the simulation's: %s\n", bad ? "MISSED" : "met");
  return 0;
}
