/* How soon a step that becomes ready reaches a worker waiting in a
 * long-poll claim (issue 23: goal 5 ms p50), printed as two tables.
 *
 * A server on port 0 over a store holding a template of one worker step;
 * BENCH_WORKERS_ROUNDS times (default 200): a claim with wait = 30 s is
 * sent from a thread (libcurl, one kept-alive connection), the main thread
 * waits until /metrics shows it waiting, then submits a task on a store
 * connection of its own (as `tasker submit` from another process would:
 * the server learns of it by the store's signal, SQLite's change of its
 * -wal file, PostgreSQL's NOTIFY) and the time from the submit's call to
 * the claim's answer is one sample; the step is then completed.
 * Claim-to-start: the same through a real worker process of each client
 * library (bench/workers/noop.py and noop.mjs, one step at a time), until
 * the worker's function starts: the worker prints CLOCK_MONOTONIC then,
 * which is this process's clock too. Run from the top of the tree (the
 * workers' scripts are found there; a missing interpreter is said).
 * SQLite in a temporary directory; PostgreSQL too when BENCH_PG_URL names
 * a database (its tables are used as they are: give an empty one). */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/server.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

static void fail(const char *what, const char *why) {
  fprintf(stderr, "bench_workers: %s: %s\n", what, why ? why : "");
  exit(1);
}

typedef struct text {
  char buf[65536];
  size_t len;
} text;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
  text *t = ud;
  size_t k = size * n;
  if (t->len + k < sizeof t->buf) {
    memcpy(t->buf + t->len, p, k);
    t->len += k;
    t->buf[t->len] = '\0';
  }
  return k;
}

/* POST body to url on c (JSON); the answer in *t. */
static void post(CURL *c, const char *url, const char *body, text *t) {
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  t->len = 0;
  t->buf[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL); /* the handle is used again */
  curl_slist_free_all(h);
  if (rc != CURLE_OK || status != 200) fail(url, t->len ? t->buf : curl_easy_strerror(rc));
}

typedef struct claimer {
  CURL *c;
  char url[256];
  text answer;
  int64_t answered_ns;
} claimer;

static void *claim(void *arg) {
  claimer *k = arg;
  post(k->c, k->url, "{\"worker\": \"bench\", \"wait\": 30}", &k->answer);
  k->answered_ns = tk_monotonic_ns();
  return NULL;
}

/* Whether /metrics shows `waiting` claims waiting. */
static int waiting(CURL *c, const char *base, int n) {
  char url[256], want[64];
  text t = {.len = 0};
  snprintf(url, sizeof url, "%s/metrics", base);
  snprintf(want, sizeof want, "\ntasker_serve_claims_waiting %d\n", n);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (curl_easy_perform(c) != CURLE_OK) fail("GET /metrics", NULL);
  return strstr(t.buf, want) != NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* A server over the store at url holding the one-step template, and a
 * second connection to submit from. */
typedef struct rig {
  tk_config *cfg;
  tk_store *s, *submitter;
  tk_server *srv;
  char base[128];
  tk_clock clock;
} rig;

static void rig_start(rig *g, const char *url, const char *dir) {
  static const char *const sets[] = {"engine.lease=60s"};
  tk_config_source src = {.sets = sets, .nsets = 1};
  tk_err err;
  if (tk_config_load(&src, &g->cfg, &err)) fail("config", err.msg);
  if (tk_store_open(url, &g->s, &err) || tk_store_migrate(g->s, NULL, NULL, &err) ||
      tk_store_open(url, &g->submitter, &err))
    fail(url, err.msg);
  char path[300];
  snprintf(path, sizeof path, "%s/one.toml", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) fail("template file", path);
  fputs("name = \"bench_workers\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
        "handler = { kind = \"worker\", queue = \"bench\" }\n",
        f);
  fclose(f);
  g->clock = tk_clock_system();
  if (tk_template_add_file(g->s, g->cfg, path, tk_clock_now(&g->clock), NULL, &err))
    fail("template", err.msg);
  tk_server_options so = {.listen = "127.0.0.1:0", .store = g->s, .config = g->cfg,
                          .snapshot_ms = 3600000};
  if (tk_server_start(&so, &g->srv, &err)) fail("server", err.msg);
  snprintf(g->base, sizeof g->base, "http://%s", tk_server_address(g->srv));
}

static void rig_stop(rig *g) {
  tk_server_stop(g->srv);
  tk_store_close(g->submitter);
  tk_store_close(g->s);
  tk_config_free(g->cfg);
}

/* Submit one task from the rig's second connection. */
static void submit_one(rig *g) {
  tk_submit_request req = {.template_name = "bench_workers"};
  int64_t id;
  int existed;
  tk_err err;
  if (tk_task_submit(g->submitter, g->cfg, &req, tk_clock_now(&g->clock), &id, &existed, &err))
    fail("submit", err.msg);
}

/* Wait until a claim waits on the rig's server. */
static void until_waiting(CURL *c, rig *g) {
  while (!waiting(c, g->base, 1)) nanosleep(&(struct timespec){0, 200000}, NULL);
}

static void row(const char *label, double *v, int rounds) {
  qsort(v, (size_t)rounds, sizeof *v, cmp_double);
  printf("%-24s %6d %9.2f %9.2f %9.2f\n", label, rounds, v[rounds / 2], v[(rounds * 99) / 100],
         v[rounds - 1]);
}

/* The rounds on the store at url with curl as the worker; one row. */
static void bench(const char *label, const char *url, const char *dir, int rounds) {
  rig g;
  rig_start(&g, url, dir);
  claimer k = {.c = curl_easy_init()};
  snprintf(k.url, sizeof k.url, "%s/api/v1/queues/bench/claim", g.base);
  CURL *c = curl_easy_init();
  double *total = malloc((size_t)rounds * sizeof *total);
  double *after = malloc((size_t)rounds * sizeof *after);
  for (int i = 0; i < rounds; i++) {
    pthread_t th;
    pthread_create(&th, NULL, claim, &k);
    until_waiting(c, &g);
    int64_t t0 = tk_monotonic_ns();
    submit_one(&g);
    int64_t t1 = tk_monotonic_ns();
    pthread_join(th, NULL);
    total[i] = ms(k.answered_ns - t0);
    after[i] = ms(k.answered_ns - t1);
    json_t *j = json_loads(k.answer.buf, 0, NULL);
    json_t *first = json_array_get(json_object_get(j, "claims"), 0);
    const char *token = json_string_value(json_object_get(first, "token"));
    if (token == NULL) fail("claim: no step in the answer", k.answer.buf);
    char done[256];
    text t;
    snprintf(done, sizeof done, "%s/api/v1/claims/%s/complete", g.base, token);
    post(c, done, "{}", &t);
    json_decref(j);
  }
  qsort(total, (size_t)rounds, sizeof *total, cmp_double);
  qsort(after, (size_t)rounds, sizeof *after, cmp_double);
  printf("%-12s %6d %9.2f %9.2f %9.2f %9.2f %9.2f\n", label, rounds, total[rounds / 2],
         total[(rounds * 99) / 100], total[rounds - 1], after[rounds / 2],
         after[(rounds * 99) / 100]);
  free(total);
  free(after);
  curl_easy_cleanup(c);
  curl_easy_cleanup(k.c);
  rig_stop(&g);
}

/* Claim-to-start through a real worker process: argv[0] run with the
 * server's URL, mode "starts", the rounds and 1 (one step at a time);
 * one row, or a line saying why not. */
static void bench_client(const char *label, const char *store_label, const char *url,
                         const char *dir, int rounds, const char *interp, const char *script) {
  char row_label[64];
  snprintf(row_label, sizeof row_label, "%s %s", store_label, label);
  if (access(script, R_OK) != 0) {
    printf("%-24s (%s not found: run from the top of the tree)\n", row_label, script);
    return;
  }
  rig g;
  rig_start(&g, url, dir);
  char n[16];
  snprintf(n, sizeof n, "%d", rounds);
  char *argv[] = {(char *)interp, (char *)script, g.base, "starts", n, "1", NULL};
  int out[2];
  if (pipe(out) != 0) fail("pipe", NULL);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  pid_t pid;
  extern char **environ;
  if (posix_spawnp(&pid, interp, &fa, NULL, argv, environ) != 0) {
    printf("%-24s (%s not installed)\n", row_label, interp);
    posix_spawn_file_actions_destroy(&fa);
    close(out[0]);
    close(out[1]);
    rig_stop(&g);
    return;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  FILE *starts = fdopen(out[0], "r");
  CURL *c = curl_easy_init();
  double *v = malloc((size_t)rounds * sizeof *v);
  int done = 0;
  for (; done < rounds; done++) {
    until_waiting(c, &g);
    int64_t t0 = tk_monotonic_ns();
    submit_one(&g);
    long long started;
    if (fscanf(starts, "%lld", &started) != 1) break;
    v[done] = ms(started - t0);
  }
  if (done == rounds) row(row_label, v, rounds);
  else printf("%-24s (the worker stopped after %d steps)\n", row_label, done);
  /* After the last round it stops by itself (noop.py's, noop.mjs's count). */
  int status;
  if (done < rounds) kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
  fclose(starts);
  free(v);
  curl_easy_cleanup(c);
  rig_stop(&g);
}

int main(void) {
  const char *r = getenv("BENCH_WORKERS_ROUNDS");
  int rounds = r && atoi(r) > 0 ? atoi(r) : 200;
  char dir[] = "/tmp/bench_workers.XXXXXX";
  if (mkdtemp(dir) == NULL) fail("mkdtemp", NULL);
  tk_store_process_init();
  curl_global_init(CURL_GLOBAL_ALL);
  printf("a step made ready by a submit on another connection, to a worker waiting in a claim\n");
  printf("%-12s %6s %9s %9s %9s %9s %9s\n", "store", "rounds", "p50 ms", "p99 ms", "max ms",
         "p50 *", "p99 *");
  char url[320];
  snprintf(url, sizeof url, "sqlite:%s/workers.db", dir);
  bench("sqlite", url, dir, rounds);
  const char *pg = getenv("BENCH_PG_URL");
  if (pg && *pg) bench("postgresql", pg, dir, rounds);
  printf("(from the submit's call to the claim's answer; *: from the submit's return)\n\n");
  printf("claim-to-start: a step made ready (as above) while a real worker waits, until its\n"
         "function starts (bench/workers/noop.py, noop.mjs)\n");
  printf("%-24s %6s %9s %9s %9s\n", "store client", "rounds", "p50 ms", "p99 ms", "max ms");
  for (int k = 0; k < 2; k++) {
    const char *label = k == 0 ? "python" : "node";
    const char *interp = k == 0 ? "python3" : "node";
    const char *script = k == 0 ? "bench/workers/noop.py" : "bench/workers/noop.mjs";
    char sub[300];
    snprintf(sub, sizeof sub, "%s/%s", dir, label);
    if (mkdir(sub, 0700) != 0) fail("mkdir", sub);
    snprintf(url, sizeof url, "sqlite:%s/workers.db", sub);
    bench_client(label, "sqlite", url, sub, rounds, interp, script);
  }
  printf("(from the submit's call to the function's start, by CLOCK_MONOTONIC; PostgreSQL:\n"
         " the first table only)\n");
  curl_global_cleanup();
  return 0;
}
