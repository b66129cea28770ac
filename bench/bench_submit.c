/* Bulk submit (issue 22 item 3), printed as a table: tasks/s created by
 * tk_task_submit_many on SQLite and, with BENCH_PG_URL, on PostgreSQL,
 * beside tk_task_submit (one transaction per task), at the default
 * durability (full: every commit synced). Each row is timed around the
 * C API calls alone (the contexts' text is made before), on a fresh store,
 * best and median of BENCH_REPEAT runs (3), and the median of this
 * process's CPU per task (on PostgreSQL the client's alone, so that the
 * rest of the time is the server's):
 *   bulk 1 step          100,000 single-step tasks in one call
 *   bulk 1 step, 1,000   the same in calls of 1,000 (a transaction each)
 *   bulk 1 step, ids     100,000 in one call, each with an identity
 *   bulk 4-step chain    25,000 tasks of 4 steps in one call
 *   single 1 step        5,000 tasks, one tk_task_submit each
 * Goals: >= 50,000 tasks/s in bulk on SQLite, >= 20,000/s on PostgreSQL.
 * BENCH_QUICK=1: a tenth of the sizes. BENCH_PG_URL=URL: also on that
 * PostgreSQL database, whose public schema each run drops and makes
 * again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef TK_NO_POSTGRES
#include <libpq-fe.h>
#endif

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

static char dir[256];

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_submit: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* This process's CPU seconds so far (user and system). */
static double cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
         (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static int64_t store_now(tk_store *s) {
  tk_clock c = tk_store_clock(s);
  return tk_clock_now(&c);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A fresh store on `url` (a PostgreSQL one has its public schema made
 * again) holding template "t" of `steps` chained noop steps. */
static tk_store *fresh_store(const char *url, int steps, tk_config *cfg) {
  char path[512];
  if (strncmp(url, "sqlite:", 7) == 0) {
    unlink(url + 7);
    snprintf(path, sizeof path, "%s-wal", url + 7);
    unlink(path);
  } else {
#ifndef TK_NO_POSTGRES
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) die(PQerrorMessage(c), NULL);
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    PGresult *r = PQexec(c, "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) die(PQerrorMessage(c), NULL);
    PQclear(r);
    PQfinish(c);
#else
    die("BENCH_PG_URL: this build has no PostgreSQL backend", NULL);
#endif
  }
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) die("store", &err);
  snprintf(path, sizeof path, "%s/t.toml", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) die(path, NULL);
  fprintf(f, "name = \"t\"\nversion = \"1\"\n");
  for (int i = 1; i <= steps; i++) {
    fprintf(f, "[[steps]]\nname = \"s%d\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n", i);
    if (i > 1) fprintf(f, "depends_on = [\"s%d\"]\n", i - 1);
  }
  fclose(f);
  if (tk_template_add_file(s, cfg, path, store_now(s), NULL, &err)) die("template", &err);
  return s;
}

typedef struct row {
  const char *label;
  int steps, tasks, per_call; /* per_call 0: tk_task_submit, one at a time */
  int identities;
} row;

/* Seconds for one run of r on a fresh store at url; *cpu_s this
 * process's CPU seconds in it. */
static double run_once(const char *url, const row *r, tk_config *cfg, char **contexts,
                       char **identities, double *cpu_s) {
  tk_store *s = fresh_store(url, r->steps, cfg);
  tk_submit_request *reqs = calloc((size_t)r->tasks, sizeof *reqs);
  int64_t *ids = calloc((size_t)r->tasks, sizeof *ids);
  int *existed = calloc((size_t)r->tasks, sizeof *existed);
  if (!reqs || !ids || !existed) die("out of memory", NULL);
  for (int i = 0; i < r->tasks; i++)
    reqs[i] = (tk_submit_request){.template_name = "t", .context_json = contexts[i],
                                  .identity = r->identities ? identities[i] : NULL};
  tk_err err;
  int failed;
  double t0 = mono(), c0 = cpu();
  for (int done = 0; done < r->tasks;) {
    int n = r->per_call ? r->per_call : 1;
    if (n > r->tasks - done) n = r->tasks - done;
    int rc = r->per_call
                 ? tk_task_submit_many(s, cfg, reqs + done, n, store_now(s), ids + done,
                                       existed + done, &failed, &err)
                 : tk_task_submit(s, cfg, &reqs[done], store_now(s), &ids[done], &existed[done],
                                  &err);
    if (rc) die("submit", &err);
    done += n;
  }
  double secs = mono() - t0;
  *cpu_s = cpu() - c0;
  if (ids[r->tasks - 1] - ids[0] != r->tasks - 1) die("the tasks' ids are not consecutive", NULL);
  free(reqs);
  free(ids);
  free(existed);
  tk_store_close(s);
  return secs;
}

static void backend(const char *name, const char *url, const row *rows, int nrows, int repeat,
                    tk_config *cfg, char **contexts, char **identities) {
  for (int k = 0; k < nrows; k++) {
    const row *r = &rows[k];
    double secs[16], cpus[16];
    for (int i = 0; i < repeat; i++) secs[i] = run_once(url, r, cfg, contexts, identities, &cpus[i]);
    qsort(secs, (size_t)repeat, sizeof *secs, cmp_double);
    qsort(cpus, (size_t)repeat, sizeof *cpus, cmp_double);
    printf("%-11s %-26s %8d %10.0f %10.0f %12.0f %10.1f\n", name, r->label, r->tasks,
           r->tasks / secs[0], r->tasks / secs[repeat / 2],
           (double)r->tasks * r->steps / secs[repeat / 2], cpus[repeat / 2] * 1e6 / r->tasks);
    fflush(stdout);
  }
}

int main(void) {
  int quick = getenv("BENCH_QUICK") && strcmp(getenv("BENCH_QUICK"), "1") == 0;
  int repeat = getenv("BENCH_REPEAT") ? atoi(getenv("BENCH_REPEAT")) : 3;
  if (repeat < 1 || repeat > 16) repeat = 3;
  const char *pg_url = getenv("BENCH_PG_URL");
  int div = quick ? 10 : 1;
  row rows[] = {
      {"bulk 1 step", 1, 100000 / div, 100000 / div, 0},
      {"bulk 1 step, calls of 1000", 1, 100000 / div, 1000, 0},
      {"bulk 1 step, identities", 1, 100000 / div, 100000 / div, 1},
      {"bulk 4-step chain", 4, 25000 / div, 25000 / div, 0},
      {"single 1 step", 1, 5000 / div, 0, 0},
  };
  int nrows = (int)(sizeof rows / sizeof rows[0]);
  int most = 100000 / div;
  char **contexts = calloc((size_t)most, sizeof *contexts);
  char **identities = calloc((size_t)most, sizeof *identities);
  if (!contexts || !identities) die("out of memory", NULL);
  for (int i = 0; i < most; i++)
    if (asprintf(&contexts[i], "{\"order\": %d, \"customer\": \"c-%d\"}", i, i % 977) < 0 ||
        asprintf(&identities[i], "order-%d", i) < 0)
      die("out of memory", NULL);
  snprintf(dir, sizeof dir, "/tmp/tasker-bench-submit.XXXXXX");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  tk_config *cfg;
  tk_err err;
  tk_config_source src = {0};
  if (tk_config_load(&src, &cfg, &err)) die("config", &err);
  char url[600];
  snprintf(url, sizeof url, "sqlite:%s/store.db", dir);
  printf("tasks submitted per second, durability full, best and median of %d runs "
         "(a busy machine: compare rows of one run)\n", repeat);
  printf("%-11s %-26s %8s %10s %10s %12s %10s\n", "backend", "mode", "tasks", "best/s", "median/s",
         "steps/s(med)", "cpu us/task");
  backend("sqlite", url, rows, nrows, repeat, cfg, contexts, identities);
  if (pg_url) backend("postgresql", pg_url, rows, nrows, repeat, cfg, contexts, identities);
  else printf("(postgresql: set BENCH_PG_URL, or run sh bench/bench_pg.sh submit)\n");
  printf("goals: bulk >= 50,000 tasks/s on sqlite, >= 20,000/s on postgresql\n");
  tk_config_free(cfg);
  for (int i = 0; i < most; i++) {
    free(contexts[i]);
    free(identities[i]);
  }
  free(contexts);
  free(identities);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_submit: could not remove %s\n", dir);
  return 0;
}
