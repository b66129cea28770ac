/* tasker serve's latency with 10^6 steps stored (issue 13: /metrics and
 * /api/v1/tasks?limit=50, goal p99 <= 20 ms), printed as a table.
 *
 * The store: BENCH_SERVE_TASKS tasks (default 50,000) of 20 independent
 * steps on SQLite, submitted, then run to the end by an inline engine on
 * a manual clock claiming 10,000 steps per transaction (recorded in group
 * commits): 17 noop steps, one failing once (a retry), one flaky (30%
 * per attempt, 3 attempts: about 2.7% of tasks end in error), one noop.
 * Then a server on port 0 over it (the snapshot thread refreshing every
 * 5 s) and BENCH_SERVE_REQUESTS requests (default 300) per endpoint over
 * one kept-alive connection: p50, p99 and max in ms. The last rows time
 * what a snapshot counts (the cost /metrics would pay per scrape without
 * one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/metrics.h>
#include <tasker/server.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#define STEPS 20

static char dir[256];

static void fail(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_serve: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && atoi(v) > 0 ? atoi(v) : dflt;
}

static double ms_since(int64_t t0) { return (double)(tk_monotonic_ns() - t0) / 1e6; }

static const char template_toml[] =
    "name = \"wide\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"once\"\nhandler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"
    "[[steps]]\nname = \"flaky\"\nhandler = { kind = \"builtin\", name = \"flaky\", probability = "
    "0.3 }\nretry = { max_attempts = 3 }\n";

/* Submit `tasks` tasks and run them to the end on the manual clock. */
static void fill(tk_store *s, tk_config *cfg, int tasks) {
  char path[300];
  snprintf(path, sizeof path, "%s/wide.toml", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) fail("template file", NULL);
  fputs(template_toml, f);
  for (int i = 0; i < STEPS - 2; i++)
    fprintf(f, "[[steps]]\nname = \"n%02d\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n", i);
  fclose(f);
  tk_manual_clock mc = {.now_ms = INT64_C(1767225600000)};
  tk_err err;
  if (tk_template_add_file(s, cfg, path, mc.now_ms, NULL, &err)) fail("template", &err);
  int64_t t0 = tk_monotonic_ns();
  tk_submit_request req = {.template_name = "wide"};
  for (int i = 0; i < tasks; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, mc.now_ms, &id, &existed, &err)) fail("submit", &err);
  }
  double submit_ms = ms_since(t0);
  tk_engine_options eo = {.store = s, .config = cfg, .clock = tk_clock_manual(&mc), .seed = 1,
                          .id = "bench", .workers = 0};
  tk_engine *e;
  if (tk_engine_new(&eo, &e, &err)) fail("engine", &err);
  t0 = tk_monotonic_ns();
  for (;;) {
    int64_t next;
    if (tk_engine_tick(e, &next, &err)) fail("tick", &err);
    if (next == INT64_MAX) break;
    if (next > mc.now_ms) mc.now_ms = next;
  }
  double run_ms = ms_since(t0);
  tk_engine_stats st = tk_engine_stats_get(e);
  tk_engine_free(e);
  tk_store_set_clock(s, tk_clock_system());
  printf("store: %d tasks x %d steps = %d steps; submitted in %.1f s, run in %.1f s "
         "(%lld attempts: %lld retries, %lld exhausted, %lld tasks in error)\n",
         tasks, STEPS, tasks * STEPS, submit_ms / 1e3, run_ms / 1e3, (long long)st.claimed,
         (long long)st.retried, (long long)st.exhausted, (long long)st.tasks_failed);
}

static size_t sink(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  *(size_t *)ud += size * n;
  return size * n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void row(const char *what, double *ms, int n, size_t bytes) {
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  printf("%-44s %6d %9.2f %9.2f %9.2f %9zu\n", what, n, ms[n / 2], ms[(n * 99) / 100], ms[n - 1],
         bytes);
}

/* n GETs of path (path_of(i) when given) on one connection. */
static void measure(CURL *c, const char *base, const char *label, const char *path,
                    void (*path_of)(int i, char *buf, size_t len), int n) {
  double *ms = malloc((size_t)n * sizeof *ms);
  size_t bytes = 0;
  for (int i = 0; i < n; i++) {
    char p[256], url[512];
    if (path_of) path_of(i, p, sizeof p);
    snprintf(url, sizeof url, "%s%s", base, path_of ? p : path);
    bytes = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &bytes);
    int64_t t0 = tk_monotonic_ns();
    CURLcode rc = curl_easy_perform(c);
    ms[i] = ms_since(t0);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
      fprintf(stderr, "bench_serve: GET %s: %s, status %ld\n", url, curl_easy_strerror(rc), status);
      exit(1);
    }
  }
  row(label, ms, n, bytes);
  free(ms);
}

static int tasks_total;

/* Tasks spread over the whole store (a fixed stride, no randomness). */
static void task_path(int i, char *buf, size_t len) {
  snprintf(buf, len, "/api/v1/tasks/%d", 1 + (int)(((int64_t)i * 7919) % tasks_total));
}

/* Pages deep in the list: a next_cursor is the id of the last row of the
 * page before (src/ops/query.c), so any id is the cursor of some page. */
static void deep_page(int i, char *buf, size_t len) {
  int pages = tasks_total / 50 > 1 ? tasks_total / 50 - 1 : 1;
  snprintf(buf, len, "/api/v1/tasks?limit=50&cursor=%d", tasks_total - 50 * (1 + (i * 37) % pages));
}

int main(void) {
  int tasks = tasks_total = env_int("BENCH_SERVE_TASKS", 50000);
  int n = env_int("BENCH_SERVE_REQUESTS", 300);
  snprintf(dir, sizeof dir, "/tmp/bench_serve.XXXXXX");
  if (mkdtemp(dir) == NULL) fail("mkdtemp", NULL);
  char url[320];
  snprintf(url, sizeof url, "sqlite:%s/serve.db", dir);
  static const char *const sets[] = {"engine.claim_batch=10000", "backoff.base=1s",
                                     "backoff.jitter=none"};
  tk_config_source src = {.sets = sets, .nsets = 3};
  tk_config *cfg;
  tk_store *s;
  tk_err err;
  tk_store_process_init();
  if (tk_config_load(&src, &cfg, &err)) fail("config", &err);
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) fail("store", &err);
  fill(s, cfg, tasks);

  tk_server_options so = {.listen = "127.0.0.1:0", .store = s, .store_url = url, .config = cfg};
  tk_server *srv;
  int64_t t0 = tk_monotonic_ns();
  if (tk_server_start(&so, &srv, &err)) fail("server", &err);
  printf("server started in %.0f ms (the first snapshot counted)\n\n", ms_since(t0));
  char base[128];
  snprintf(base, sizeof base, "http://%s", tk_server_address(srv));

  curl_global_init(CURL_GLOBAL_ALL);
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  printf("%-44s %6s %9s %9s %9s %9s\n", "GET (one kept-alive connection)", "n", "p50 ms",
         "p99 ms", "max ms", "bytes");
  measure(c, base, "/metrics", "/metrics", NULL, n);
  measure(c, base, "/api/v1/status", "/api/v1/status", NULL, n);
  measure(c, base, "/api/v1/tasks?limit=50", "/api/v1/tasks?limit=50", NULL, n);
  measure(c, base, "/api/v1/tasks?limit=50&cursor=(deep)", NULL, deep_page, n);
  measure(c, base, "/api/v1/tasks?state=error&limit=50", "/api/v1/tasks?state=error&limit=50",
          NULL, n);
  measure(c, base, "/api/v1/tasks?template=wide&limit=50", "/api/v1/tasks?template=wide&limit=50",
          NULL, n);
  measure(c, base, "/api/v1/tasks?q=flaky&state=error&limit=50",
          "/api/v1/tasks?q=flaky&state=error&limit=50", NULL, n);
  measure(c, base, "/api/v1/steps?limit=50 (failed steps)", "/api/v1/steps?limit=50", NULL, n);
  measure(c, base, "/api/v1/tasks/ID", NULL, task_path, n);
  measure(c, base, "/api/v1/activity?window=1h&bucket=1m", "/api/v1/activity?window=1h&bucket=1m",
          NULL, n);
  measure(c, base, "/api/v1/backoff", "/api/v1/backoff", NULL, n);
  curl_easy_cleanup(c);
  curl_global_cleanup();
  tk_server_stop(srv);

  /* What each scrape would cost without the snapshot. */
  int k = n < 20 ? n : 20;
  double *ms = malloc((size_t)k * sizeof *ms);
  size_t bytes = 0;
  tk_clock sys = tk_clock_system();
  for (int i = 0; i < k; i++) {
    char *text;
    t0 = tk_monotonic_ns();
    if (tk_metrics_render_store(s, tk_clock_now(&sys), &text, &bytes, &err))
      fail("render_store", &err);
    ms[i] = ms_since(t0);
    free(text);
  }
  printf("\n%-44s %6s %9s %9s %9s %9s\n", "counted on the spot (no snapshot)", "n", "p50 ms",
         "p99 ms", "max ms", "bytes");
  row("tk_metrics_render_store", ms, k, bytes);
  free(ms);
  tk_store_close(s);
  tk_config_free(cfg);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_serve: could not remove %s\n", dir);
  return 0;
}
