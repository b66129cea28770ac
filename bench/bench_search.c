/* Search by error text and activity over long windows at scale (issue 19,
 * items 12 and 13), printed as a table.
 *
 * The store: BENCH_SEARCH_TASKS single-step tasks (default 1,000,000;
 * BENCH_QUICK=1: 100,000) created evenly over the last 24 hours, filled
 * with set-based INSERT ... SELECT (as a store of that age would hold
 * them, without running them): every tenth task in error with
 * "HTTP 503 from upstream-K: try later" (K = 0..999), the others complete;
 * one finished attempt per step (so as many attempts as tasks), and the
 * per-minute activity counts the engine would have written for them.
 * Then each query BENCH_SEARCH_RUNS times (default 20): median and max.
 *
 *   error text, rare     "upstream-777:" matches 1 task in 10,000
 *   error text, common   "HTTP 503" matches every task in error
 *   error text, none     "zzz" (3 characters: the trigram index), and
 *                        "zz" (2 characters: no trigram, every task
 *                        looked at: the cost every search had before)
 *   activity             24 h and 1 h in 1-minute buckets, through
 *                        tk_activity_json (whole minutes: the per-minute
 *                        counts; and the store's read alone, without the
 *                        JSON), and the same windows 1 ms off the minute
 *                        (read from the attempts, as every window was)
 *
 * SQLite by default (a file under TMPDIR); BENCH_PG_URL=URL: that
 * PostgreSQL database instead, whose public schema it drops and makes
 * again (sh bench/bench_pg.sh search does so on a private cluster). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TK_NO_POSTGRES
#include <libpq-fe.h>
#endif
#include <sqlite3.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/query.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "store/store.h" /* the activity op, read off the minute */

static char dir[256], db_path[400];
static const char *pg_url;

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_search: %s: %s\n", what, msg ? msg : "");
  exit(1);
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && atoi(v) > 0 ? atoi(v) : dflt;
}

static double ms_since(int64_t t0) { return (double)(tk_monotonic_ns() - t0) / 1e6; }

/* Run SQL on the bench's store outside tasker. */
static void raw_sql(const char *sql) {
  if (pg_url) {
#ifndef TK_NO_POSTGRES
    PGconn *c = PQconnectdb(pg_url);
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "%s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    if (!ok) die("sql", sql);
    return;
#else
    die("BENCH_PG_URL", "this build has no PostgreSQL backend");
#endif
  }
  sqlite3 *db;
  char *msg = NULL;
  int rc = sqlite3_open(db_path, &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) die(sql, msg ? msg : sqlite3_errmsg(db));
  sqlite3_close(db);
}

/* INSERT ... SELECT over i = 1..n, with the series written for the backend. */
static void fill(int n, const char *insert_select) {
  char sql[2048];
  if (pg_url)
    snprintf(sql, sizeof sql, "WITH n(i) AS (SELECT generate_series(1, %d)::bigint) %s", n,
             insert_select);
  else
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d) %s",
             n, insert_select);
  raw_sql(sql);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void row(const char *what, double *ms, int runs, long long found) {
  qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
  printf("%-46s %10.2f %10.2f %12lld\n", what, ms[runs / 2], ms[runs - 1], found);
}

/* A page of 50 and the count of the tasks whose errors hold `text`. */
static void search(tk_store *s, const char *label, const char *text, int runs) {
  tk_task_filter f = {.error_text = text};
  double *page = malloc((size_t)runs * sizeof *page), *count = malloc((size_t)runs * sizeof *count);
  int64_t n = 0;
  tk_err err;
  for (int i = 0; i < runs; i++) {
    char *json;
    int64_t t0 = tk_monotonic_ns();
    if (tk_tasks_json(s, &f, NULL, 50, &json, &err)) die("tasks", err.msg);
    page[i] = ms_since(t0);
    free(json);
    t0 = tk_monotonic_ns();
    if (tk_tasks_count(s, &f, &n, &err)) die("count", err.msg);
    count[i] = ms_since(t0);
  }
  char what[96];
  snprintf(what, sizeof what, "%s: a page of 50", label);
  row(what, page, runs, n);
  snprintf(what, sizeof what, "%s: count", label);
  row(what, count, runs, n);
  free(page);
  free(count);
}

/* The window ending at `end` (a whole minute) in 1-minute buckets: through
 * tk_activity_json (the per-minute counts), and the same window 1 ms later
 * through the store's op (not whole minutes: from the attempts). */
static void activity(tk_store *s, const char *label, int64_t end, int minutes, int runs) {
  double *counts = malloc((size_t)runs * sizeof *counts), *raw = malloc((size_t)runs * sizeof *raw),
         *op = malloc((size_t)runs * sizeof *op);
  tk__activity_bucket *b = calloc((size_t)minutes, sizeof *b);
  int64_t total_counts = 0, total_raw = 0;
  tk_err err;
  /* Each kind of read run after run (as a dashboard polls), not
   * interleaved: a read of every attempt leaves the next query a cold
   * page cache. */
  for (int i = 0; i < runs; i++) {
    char *json;
    int64_t t0 = tk_monotonic_ns();
    if (tk_activity_json(s, end, minutes * TK__MINUTE_MS, TK__MINUTE_MS, &json, &err))
      die("activity", err.msg);
    counts[i] = ms_since(t0);
    free(json);
  }
  for (int i = 0; i < runs; i++) {
    memset(b, 0, (size_t)minutes * sizeof *b);
    int64_t t0 = tk_monotonic_ns();
    if (s->ops->activity(s, end - minutes * TK__MINUTE_MS, TK__MINUTE_MS, minutes, b, &err))
      die("activity", err.msg);
    op[i] = ms_since(t0);
  }
  for (int k = 0; k < minutes; k++) total_counts += b[k].succeeded + b[k].failed;
  for (int i = 0; i < runs; i++) {
    memset(b, 0, (size_t)minutes * sizeof *b);
    int64_t t0 = tk_monotonic_ns();
    if (s->ops->activity(s, end - minutes * TK__MINUTE_MS + 1, TK__MINUTE_MS, minutes, b, &err))
      die("activity", err.msg);
    raw[i] = ms_since(t0);
  }
  for (int k = 0; k < minutes; k++) total_raw += b[k].succeeded + b[k].failed;
  char what[96];
  snprintf(what, sizeof what, "activity %s, 1m buckets: per-minute counts", label);
  row(what, counts, runs, total_counts);
  snprintf(what, sizeof what, "  of which the store's read (no JSON)");
  row(what, op, runs, total_counts);
  snprintf(what, sizeof what, "activity %s, 1m buckets, 1 ms off: attempts", label);
  row(what, raw, runs, total_raw);
  free(counts);
  free(raw);
  free(op);
  free(b);
}

int main(void) {
  tk_store_process_init();
  int quick = getenv("BENCH_QUICK") && strcmp(getenv("BENCH_QUICK"), "0") != 0;
  int tasks = env_int("BENCH_SEARCH_TASKS", quick ? 100000 : 1000000);
  int runs = env_int("BENCH_SEARCH_RUNS", 20);
  pg_url = getenv("BENCH_PG_URL");
  snprintf(dir, sizeof dir, "%s/tasker-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  snprintf(db_path, sizeof db_path, "%s/search.db", dir);
  char url[600];
  snprintf(url, sizeof url, "sqlite:%s", db_path);
  if (pg_url) {
    raw_sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public");
    snprintf(url, sizeof url, "%s", pg_url);
  }
  static const char *const sets[] = {"backoff.jitter=none"};
  tk_config_source src = {.sets = sets, .nsets = 1};
  tk_config *cfg;
  tk_store *s;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) die("config", err.msg);
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err))
    die("store", err.msg);
  char tpl[400];
  snprintf(tpl, sizeof tpl, "%s/one.toml", dir);
  FILE *f = fopen(tpl, "w");
  if (f == NULL) die("template file", tpl);
  fputs("name = \"one\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
        "handler = { kind = \"builtin\", name = \"noop\" }\n",
        f);
  fclose(f);
  tk_clock clock = tk_store_clock(s);
  int64_t now = tk_clock_now(&clock);
  tk_template_info info;
  if (tk_template_add_file(s, cfg, tpl, now, &info, &err)) die("template", err.msg);

  /* Created evenly over the 24 hours before the current minute's end. */
  int64_t end = now - now % TK__MINUTE_MS + TK__MINUTE_MS, day = 1440 * TK__MINUTE_MS;
  int64_t start = end - day, spacing = day / tasks;
  char created[96], sql[1536];
  snprintf(created, sizeof created, "(%lld + i * %lld)", (long long)start, (long long)spacing);
  int64_t t0 = tk_monotonic_ns();
  snprintf(sql, sizeof sql,
           "INSERT INTO tasks (id, template_id, context, state, steps_total, steps_done,"
           " steps_error, created_at, updated_at, finished_at) SELECT i, %lld, '{}',"
           " CASE WHEN i %% 10 = 0 THEN 'error' ELSE 'complete' END, 1,"
           " CASE WHEN i %% 10 = 0 THEN 0 ELSE 1 END, CASE WHEN i %% 10 = 0 THEN 1 ELSE 0 END,"
           " %s, %s, %s FROM n",
           (long long)info.id, created, created, created);
  fill(tasks, sql);
  snprintf(sql, sizeof sql,
           "INSERT INTO steps (id, task_id, idx, name, state, attempts, max_attempts, retryable,"
           " backoff, parents_remaining, run_at, last_error) SELECT i, i, 0, 's',"
           " CASE WHEN i %% 10 = 0 THEN 'error' ELSE 'complete' END, 1, 3, 1 = 1, 'default', 0,"
           " %s, CASE WHEN i %% 10 = 0 THEN 'HTTP 503 from upstream-' || (i / 10 %% 1000) ||"
           " ': try later' END FROM n",
           created);
  fill(tasks, sql);
  snprintf(sql, sizeof sql,
           "INSERT INTO attempts (id, step_id, attempt, owner, started_at, finished_at, outcome,"
           " due_at) SELECT i, i, 1, 'bench', %s, %s + 100,"
           " CASE WHEN i %% 10 = 0 THEN 'failure' ELSE 'success' END, %s FROM n",
           created, created, created);
  fill(tasks, sql);
  /* What the outcomes' transactions would have counted. */
  raw_sql("INSERT INTO activity_minutes (minute, orchestrator, succeeded, failed)"
          " SELECT started_at - started_at % 60000, owner,"
          " SUM(CASE WHEN outcome = 'success' THEN 1 ELSE 0 END),"
          " SUM(CASE WHEN outcome <> 'success' THEN 1 ELSE 0 END) FROM attempts GROUP BY 1, 2");
  /* As autovacuum keeps a store: statistics, and GIN's pending list of
   * new entries merged into the trigram index. */
  if (pg_url) raw_sql("VACUUM ANALYZE");
  printf("%s: %d tasks, %d steps, %d attempts (filled in %.1f s)\n\n",
         pg_url ? "PostgreSQL" : "SQLite", tasks, tasks, tasks, ms_since(t0) / 1000);

  printf("%-46s %10s %10s %12s\n", "query", "median ms", "max ms", "found");
  search(s, "error text, rare \"upstream-777:\"", "upstream-777:", runs);
  search(s, "error text, common \"HTTP 503\"", "HTTP 503", runs);
  search(s, "error text, none \"zzz\" (indexed)", "zzz", runs);
  search(s, "error text, none \"zz\" (2 chars: scan)", "zz", runs < 5 ? runs : 5);
  activity(s, "24h", end, 1440, runs);
  activity(s, "1h", end, 60, runs);

  tk_store_close(s);
  tk_config_free(cfg);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_search: could not remove %s\n", dir);
  return 0;
}
