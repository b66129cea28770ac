/* Batch step throughput on SQLite (DESIGN §9), printed as a table:
 * 100,000 items in total, every 10th rejected on its first delivery and
 * acked on the in-call retry, through an in-process C batch handler
 * (tk_engine_register_batch). Shapes: one task of 100,000 items, 100 tasks
 * of 1,000 and 1,000 tasks of 100; inline (0 workers) and on 4 workers.
 * "submit" is storing the tasks and their items (one transaction per
 * task); "run" is the engine from the first claim until idle; items/s is
 * over the run. Usage: bench_batch. BENCH_QUICK=1 for a tenth of the items. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

static char dir[256];

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_batch: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static const char template_toml[] =
    "name = \"deliveries\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"deliver\"\n"
    "handler = { kind = \"function\", name = \"deliver\" }\n"
    "batch = { items_from = \"items\", max_in_call_retries = 1, max_item_attempts = 5 }\n";

/* The downstream: refuses every 10th item the first time it sees it. */
static void deliver(const tk_batch_call *call, tk_item_report *reports, tk_handler_result *out,
                    void *ud) {
  (void)out, (void)ud;
  for (size_t i = 0; i < call->n; i++) {
    const tk_batch_item *it = &call->items[i];
    int refuse = (it->index + 1) % 10 == 0 && it->attempt == 1;
    reports[i] = (tk_item_report){refuse ? TK_ITEM_REJECTED : TK_ITEM_ACKED,
                                  refuse ? "throttled" : NULL};
  }
}

/* {"items": ["k0", ..., "k(n-1)"]}, malloc'd. */
static char *context(int n) {
  size_t cap = (size_t)n * 12 + 32, len = 0;
  char *s = malloc(cap);
  len += (size_t)snprintf(s, cap, "{\"items\":[");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s\"k%d\"", i ? "," : "", i);
  snprintf(s + len, cap - len, "]}");
  return s;
}

/* A fresh store with the template; `cfg` loaded with in-call delays of
 * 1 ms (the sleep between the two calls of each attempt). */
static tk_store *fresh_store(const char *name, tk_config **cfg) {
  const char *sets[] = {"backoff.jitter=\"none\"", "backoff.base=\"1ms\"",
                        "engine.claim_batch=256", "engine.lease=\"60s\""};
  tk_config_source src = {.sets = sets, .nsets = 4};
  tk_err err;
  if (tk_config_load(&src, cfg, &err)) die("config", &err);
  char path[512], url[600], tpl[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  unlink(path);
  snprintf(url, sizeof url, "sqlite:%s", path);
  tk_store *s;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) die("store", &err);
  snprintf(tpl, sizeof tpl, "%s/deliveries.toml", dir);
  FILE *f = fopen(tpl, "w");
  fputs(template_toml, f);
  fclose(f);
  tk_clock clock = tk_clock_system();
  if (tk_template_add_file(s, *cfg, tpl, tk_clock_now(&clock), NULL, &err)) die("template", &err);
  return s;
}

static void run(int tasks, int per_task, int workers) {
  char shape[32];
  snprintf(shape, sizeof shape, "%d x %d", tasks, per_task);
  tk_config *cfg;
  tk_store *s = fresh_store("batch", &cfg);
  char *ctx = context(per_task);
  tk_clock clock = tk_clock_system();
  tk_err err;
  int64_t t0 = tk_monotonic_ns();
  for (int i = 0; i < tasks; i++) {
    tk_submit_request req = {.template_name = "deliveries", .context_json = ctx};
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, tk_clock_now(&clock), &id, &existed, &err))
      die("submit", &err);
  }
  int64_t t1 = tk_monotonic_ns();
  tk_engine_options eo = {.store = s, .config = cfg, .workers = workers, .seed = 1};
  tk_engine *e;
  if (tk_engine_new(&eo, &e, &err)) die("engine", &err);
  if (tk_engine_register_batch(e, "deliver", deliver, NULL, &err)) die("register", &err);
  int64_t t2 = tk_monotonic_ns();
  if (tk_engine_run(e, 1, &err)) die("run", &err);
  int64_t t3 = tk_monotonic_ns();
  tk_engine_stats st = tk_engine_stats_get(e);
  tk_engine_free(e);
  int items = tasks * per_task;
  double submit_s = (double)(t1 - t0) / 1e9, run_s = (double)(t3 - t2) / 1e9;
  printf("%-12s %6d %9d %8d %10.3f %10.3f %12.0f %12.0f%s\n", shape, tasks, items, workers,
         submit_s, run_s, items / run_s, items / (submit_s + run_s),
         st.completed == tasks ? "" : "   (not all steps completed!)");
  free(ctx);
  tk_store_close(s);
  tk_config_free(cfg);
}

int main(void) {
  int quick = getenv("BENCH_QUICK") != NULL;
  snprintf(dir, sizeof dir, "%s/tasker-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  int total = quick ? 10000 : 100000;
  printf("batch steps: %d items, every 10th rejected once (acked on the in-call retry), "
         "in-process handler, SQLite\n", total);
  printf("%-12s %6s %9s %8s %10s %10s %12s %12s\n", "tasks x items", "tasks", "items", "workers",
         "submit s", "run s", "items/s", "incl. submit");
  const int workers[] = {0, 4};
  for (int w = 0; w < 2; w++) {
    run(1, total, workers[w]);
    run(100, total / 100, workers[w]);
    run(1000, total / 1000, workers[w]);
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_batch: could not remove %s\n", dir);
  return 0;
}
