/* Upgrading a store that holds attempts counts them into the per-minute
 * activity counts (issue 19: the migration search_and_activity): a store
 * migrated to the version before it, given attempts of every kind by SQL
 * (a claim at that version fails: it needs the counts' table), then
 * migrated to the newest, answers an activity window of whole minutes
 * (from the counts) with the numbers the attempts give (two half-minute
 * buckets a minute: counted from the attempts themselves). On SQLite, and
 * on PostgreSQL in a database of its own on TK_TEST_PG_URL (skipped
 * without it). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include <tasker/config.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "store/migration.h"
#include "store/store.h"

#define M 60000

/* Attempts of the one step of tasks 1 and 2 (step ids 1 and 2), minute by
 * minute from EFX_T0: a success; a failure, its retry 20 s late that
 * fails, a first attempt after an operator's retry 50 s after its run_at;
 * a lease_expired of another owner; a fenced_out; one still running; one
 * from before due_at was written. */
static const char ATTEMPTS[] =
    "INSERT INTO attempts (id, step_id, attempt, owner, started_at, finished_at, outcome,"
    " due_at) VALUES"
    " (1, 1, 1, 'A', %1$lld + 10000, %1$lld + 20000, 'success', %1$lld),"
    " (2, 2, 1, 'A', %1$lld + 10000, %1$lld + 15000, 'failure', %1$lld),"
    " (3, 2, 2, 'A', %1$lld + 70000, %1$lld + 75000, 'failure', %1$lld + 50000),"
    " (4, 2, 1, 'A', %1$lld + 130000, %1$lld + 132000, 'success', %1$lld + 80000),"
    " (5, 1, 2, 'B', %1$lld + 135000, %1$lld + 145000, 'lease_expired', %1$lld + 130000),"
    " (6, 1, 3, 'A', %1$lld + 185000, %1$lld + 187000, 'fenced_out', %1$lld + 180000),"
    " (7, 2, 2, 'A', %1$lld + 250000, NULL, NULL, %1$lld + 240000),"
    " (8, 1, 4, 'A', %1$lld + 260000, %1$lld + 261000, 'success', NULL)";

typedef void (*exec_fn)(void *conn, const char *sql);

static void sqlite_exec(void *conn, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(conn, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
}

static void pg_exec(void *conn, const char *sql) {
  PGresult *r = PQexec(conn, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(conn));
  PQclear(r);
}

static int latest(const tk__migration *m) {
  int n = 0;
  while (m[n].number) n++;
  return m[n - 1].number;
}

/* The number of the migration that counts activity per minute. */
static int backfilling(const tk__migration *m) {
  for (int n = 0; m[n].number; n++)
    if (strcmp(m[n].name, "search_and_activity") == 0) return m[n].number;
  fail_msg("no migration search_and_activity");
  return 0;
}

/* The store at url: migrated to the version before the backfill, a template
 * and two tasks through the API, the attempts by SQL (exec on conn), then
 * migrated; the counts must equal the attempts' numbers. */
static void check(const char *url, const tk__migration *migrations, void *conn, exec_fn exec) {
  tk_store *s;
  tk_err err;
  int applied, version;
  int target = latest(migrations);
  assert_int_equal(tk_store_open(url, &s, &err), 0);
  assert_int_equal(tk_store_migrate_to(s, backfilling(migrations) - 1, &applied, &version, &err),
                   0);
  char dir[256], path[512];
  efx_tmpdir(dir, sizeof dir);
  efx_write(dir, "one.toml",
            "name = \"one\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
            "handler = { kind = \"builtin\", name = \"noop\" }\n",
            path, sizeof path);
  tk_config *cfg;
  tk_config_source src = {0};
  assert_int_equal(tk_config_load(&src, &cfg, &err), 0);
  assert_int_equal(tk_template_add_file(s, cfg, path, EFX_T0, NULL, &err), 0);
  tk_submit_request req = {.template_name = "one"};
  int64_t id;
  int existed;
  for (int i = 0; i < 2; i++)
    assert_int_equal(tk_task_submit(s, cfg, &req, EFX_T0, &id, &existed, &err), 0);
  char sql[2048];
  snprintf(sql, sizeof sql, ATTEMPTS, (long long)EFX_T0);
  exec(conn, sql);
  assert_int_equal(tk_store_migrate(s, &applied, &version, &err), 0);
  assert_int_equal(version, target);

  tk__activity_bucket minutes[6], halves[12];
  assert_int_equal(s->ops->activity(s, EFX_T0, M, 6, minutes, &err), 0);
  assert_int_equal(s->ops->activity(s, EFX_T0, M / 2, 12, halves, &err), 0);
  int64_t finished = 0;
  for (int i = 0; i < 6; i++) {
    const tk__activity_bucket *a = &halves[2 * i], *b = &halves[2 * i + 1], *m = &minutes[i];
    assert_int_equal(m->start, a->start);
    assert_int_equal(m->succeeded, a->succeeded + b->succeeded);
    assert_int_equal(m->failed, a->failed + b->failed);
    assert_int_equal(m->retries, a->retries + b->retries);
    assert_int_equal(m->lateness_n, a->lateness_n + b->lateness_n);
    assert_int_equal(m->lateness_sum_ms, a->lateness_sum_ms + b->lateness_sum_ms);
    assert_int_equal(m->lateness_max_ms,
                     a->lateness_max_ms > b->lateness_max_ms ? a->lateness_max_ms
                                                              : b->lateness_max_ms);
    finished += m->succeeded + m->failed;
  }
  assert_int_equal(finished, 7);
  assert_int_equal(minutes[1].lateness_max_ms, 20000);
  assert_int_equal(minutes[2].retries, 2);     /* after an operator's retry; B's second */
  assert_int_equal(minutes[4].retries, 2);     /* one running; one without due_at */
  assert_int_equal(minutes[4].lateness_n, 1);  /* only the one with a due_at */
  tk_config_free(cfg);
  tk_store_close(s);
  efx_rmtree(dir);
}

static void sqlite_backfill(void **state) {
  (void)state;
  char dir[256], url[400], file[300];
  efx_tmpdir(dir, sizeof dir);
  snprintf(file, sizeof file, "%s/t.db", dir);
  snprintf(url, sizeof url, "sqlite:%s", file);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(file, &db), SQLITE_OK);
  check(url, tk__sqlite_migrations, db, sqlite_exec);
  sqlite3_close(db);
  efx_rmtree(dir);
}

#ifndef TK_NO_POSTGRES
static void postgres_backfill(void **state) {
  (void)state;
  const char *base = getenv("TK_TEST_PG_URL");
  if (base == NULL || *base == '\0') skip();
  /* A database of its own: the URL's database name replaced. */
  const char *db = strstr(base, ":///"), *rest = db ? strpbrk(db + 4, "?") : NULL;
  if (db == NULL || rest == NULL) fail_msg("TK_TEST_PG_URL %s: expected postgresql:///DB?...", base);
  char name[64], url[1024];
  snprintf(name, sizeof name, "backfill_%d", (int)getpid());
  snprintf(url, sizeof url, "%.*s:///%s%s", (int)(db - base), base, name, rest);
  PGconn *admin = PQconnectdb(base);
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  pg_exec(admin, sql);
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  check(url, tk__postgres_migrations, c, pg_exec);
  PQfinish(c);
  snprintf(sql, sizeof sql, "DROP DATABASE %s", name);
  pg_exec(admin, sql);
  PQfinish(admin);
}
#else
static void postgres_backfill(void **state) {
  (void)state;
  skip(); /* a build without the PostgreSQL backend */
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sqlite_backfill),
      cmocka_unit_test(postgres_backfill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
