/* The engine test fixture: see engine_fixture.h. */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include "engine_fixture.h"
#include "skip_missing.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include <tasker/workflow.h>

#include "run_cli.h"

void efx_tmpdir(char *dir, size_t len) {
  const char *base = getenv("TMPDIR");
  snprintf(dir, len, "%s/tasker-test-XXXXXX", base && *base ? base : "/tmp");
  if (mkdtemp(dir) == NULL) fail_msg("mkdtemp %s failed", dir);
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void efx_rmtree(const char *dir) {
  if (dir[0] != '\0') nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void efx_write(const char *dir, const char *name, const char *text, char *path, size_t len) {
  snprintf(path, len, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (f == NULL) fail_msg("cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

char *efx_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  size_t cap = 4096, len = 0, n;
  char *buf = malloc(cap);
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

void efx_open(efx *f, const char *const *sets) {
  memset(f, 0, sizeof *f);
  efx_tmpdir(f->dir, sizeof f->dir);
  snprintf(f->db, sizeof f->db, "%s/tasker.db", f->dir);
  snprintf(f->url, sizeof f->url, "sqlite:%s", f->db);
  tk_err err;
  if (tk_store_open(f->url, &f->store, &err) != 0) fail_msg("open: %s", err.msg);
  tk_store_set_clock(f->store, tk_clock_manual(&f->clock));
  if (tk_store_migrate(f->store, NULL, NULL, &err) != 0) fail_msg("migrate: %s", err.msg);
  int nsets = 0;
  while (sets && sets[nsets]) nsets++;
  tk_config_source src = {NULL, NULL, NULL, sets, nsets};
  if (tk_config_load(&src, &f->cfg, &err) != 0) fail_msg("config: %s", err.msg);
  f->clock.now_ms = EFX_T0;
  f->events = json_array();
  f->logs = json_array();
}

void efx_use_postgres(efx *f, const char *server, const char *prefix) {
  server = efx_pg_server(server);
  snprintf(f->pg_server, sizeof f->pg_server, "%s", server);
  efx_pg_database(server, prefix, f->pg_db, sizeof f->pg_db, f->url, sizeof f->url);
  tk_store_close(f->store);
  tk_err err;
  if (tk_store_open(f->url, &f->store, &err) != 0) fail_msg("open: %s", err.msg);
  tk_store_set_clock(f->store, tk_clock_manual(&f->clock));
  if (tk_store_migrate(f->store, NULL, NULL, &err) != 0) fail_msg("migrate: %s", err.msg);
}

void efx_close(efx *f) {
  tk_engine_free(f->engine);
  tk_store_close(f->store);
  tk_config_free(f->cfg);
  json_decref(f->events);
  json_decref(f->logs);
  efx_rmtree(f->dir);
  if (f->pg_db[0]) efx_pg_drop(f->pg_server, f->pg_db);
  memset(f, 0, sizeof *f);
}

efx *efx_new(const char *const *sets, const char *id) {
  efx *f = calloc(1, sizeof *f);
  efx_open(f, sets);
  efx_engine(f, id);
  return f;
}

efx *efx_new_pg(const char *prefix) {
  efx *f = calloc(1, sizeof *f);
  efx_open(f, NULL);
  efx_use_postgres(f, getenv("TK_TEST_PG_URL"), prefix);
  return f;
}

void efx_must(int rc, const tk_err *err, const char *what) {
  if (rc != 0) fail_msg("%s: %s (%s)", what, err->msg, tk_err_name(rc));
}

int efx_teardown(void **state) {
  efx_close(*state);
  free(*state);
  return 0;
}

void efx_on_event(const char *line, void *ud) {
  efx *f = ud;
  json_error_t e;
  json_t *v = json_loads(line, 0, &e);
  if (v == NULL) fail_msg("event is not JSON (%s): %s", e.text, line);
  json_array_append_new(f->events, v);
}

static void on_log(tk_log_level level, const char *msg, void *ud) {
  (void)level;
  efx *f = ud;
  json_array_append_new(f->logs, json_string(msg));
}

tk_engine *efx_engine_on(efx *f, tk_store *s, const char *id) {
  tk_engine_options o = {
      .store = s, .config = f->cfg, .clock = tk_clock_manual(&f->clock),
      .seed = f->seed ? f->seed : 42, .id = id, .workers = 0, .on_event = efx_on_event,
      .event_ud = f, .on_log = on_log, .log_ud = f,
  };
  tk_engine *e;
  tk_err err;
  if (tk_engine_new(&o, &e, &err) != 0) fail_msg("engine: %s", err.msg);
  return e;
}

void efx_run_workers(efx *f, const char *id, int workers) {
  efx_run_workers_sink(f, id, workers, efx_on_event, f);
}

tk_engine *efx_workers_engine(efx *f, const char *id, int workers, tk_event_sink sink,
                              void *ud) {
  tk_engine_options o = {.store = f->store, .config = f->cfg, .seed = f->seed ? f->seed : 42,
                         .id = id, .workers = workers, .on_event = sink, .event_ud = ud,
                         .on_log = on_log, .log_ud = f};
  tk_engine *e;
  tk_err err;
  /* This run is on real time: the store's clock is the system's for it. */
  tk_store_set_clock(f->store, tk_clock_system());
  if (tk_engine_new(&o, &e, &err) != 0) fail_msg("engine: %s", err.msg);
  return e;
}

void efx_workers_end(efx *f, tk_engine *e) {
  tk_engine_free(e);
  tk_store_set_clock(f->store, tk_clock_manual(&f->clock));
}

void efx_run_workers_sink(efx *f, const char *id, int workers, tk_event_sink sink, void *ud) {
  tk_engine *e = efx_workers_engine(f, id, workers, sink, ud);
  tk_err err;
  int rc = tk_engine_run(e, 1, &err);
  efx_workers_end(f, e);
  if (rc != 0) fail_msg("run with %d workers: %s", workers, err.msg);
}

void efx_engine(efx *f, const char *id) {
  tk_engine_free(f->engine);
  f->engine = efx_engine_on(f, f->store, id);
}

int64_t efx_template(efx *f, const char *toml) {
  char name[32], path[512];
  snprintf(name, sizeof name, "template%d.toml", ++f->files);
  efx_write(f->dir, name, toml, path, sizeof path);
  tk_template_info info;
  tk_err err;
  if (tk_template_add_file(f->store, f->cfg, path, f->clock.now_ms, &info, &err) != 0)
    fail_msg("template: %s", err.msg);
  return info.id;
}

void efx_one_step(efx *f, const char *name, const char *handler, const char *retry) {
  char toml[1024];
  snprintf(toml, sizeof toml, "name = \"%s\"\nversion = \"1\"\n" EFX_STEP("s")
           "handler = %s\nretry = %s\n", name, handler, retry);
  efx_template(f, toml);
}

int64_t efx_submit(efx *f, const char *name, const char *context) {
  tk_submit_request req = {.template_name = name, .context_json = context};
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  if (tk_task_submit(f->store, f->cfg, &req, f->clock.now_ms, &id, &existed, &err) != 0)
    fail_msg("submit %s: %s", name, err.msg);
  assert_int_equal(existed, 0);
  return id;
}

int64_t efx_tick(efx *f) {
  int64_t due = 0;
  tk_err err;
  if (tk_engine_tick(f->engine, &due, &err) != 0) fail_msg("tick: %s", err.msg);
  return due;
}

int efx_drive(efx *f, int max_ticks) {
  for (int i = 1; i <= max_ticks; i++) {
    int64_t due = efx_tick(f);
    if (due == INT64_MAX) return i;
    if (due > f->clock.now_ms) f->clock.now_ms = due;
  }
  fail_msg("the engine still had work after %d passes", max_ticks);
  return max_ticks;
}

json_t *efx_task(efx *f, int64_t task_id) {
  char *text = NULL;
  tk_err err;
  if (tk_engine_task_json(f->store, task_id, f->clock.now_ms, &text, &err) != 0)
    fail_msg("task %lld: %s", (long long)task_id, err.msg);
  json_t *t = json_loads(text, 0, NULL);
  free(text);
  assert_non_null(t);
  return t;
}

json_t *efx_step(json_t *task, const char *name) {
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(task, "steps"), i, s) {
    if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0) return s;
  }
  fail_msg("no step %s", name);
  return NULL;
}

void efx_expect(efx *f, int64_t task_id, const char *task_state, ...) {
  json_t *t = efx_task(f, task_id);
  assert_string_equal(json_string_value(json_object_get(t, "state")), task_state);
  va_list ap;
  va_start(ap, task_state);
  const char *step;
  while ((step = va_arg(ap, const char *)) != NULL) {
    const char *want = va_arg(ap, const char *);
    const char *got = json_string_value(json_object_get(efx_step(t, step), "state"));
    if (strcmp(got, want) != 0) {
      json_decref(t);
      va_end(ap);
      fail_msg("step %s is %s, expected %s", step, got, want);
    }
  }
  va_end(ap);
  json_decref(t);
}

int efx_events(efx *f, const char *type, const char *step) {
  int n = 0;
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    const char *s = json_string_value(json_object_get(e, "step"));
    if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0 &&
        (step == NULL || (s && strcmp(s, step) == 0)))
      n++;
  }
  return n;
}

int efx_logs(efx *f, const char *text) {
  int n = 0;
  size_t i;
  json_t *l;
  json_array_foreach(f->logs, i, l) n += strstr(json_string_value(l), text) != NULL;
  return n;
}

/* Run sql on db, appending rows to *out as text. */
static void query(const char *db, const char *sql, char **out, int64_t *first) {
  sqlite3 *h;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    fail_msg("open %s: %s", db, sqlite3_errmsg(h));
  sqlite3_busy_timeout(h, 10000);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(h));
  size_t len = 0, cap = 256;
  char *buf = malloc(cap);
  buf[0] = '\0';
  int rc, row = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (row++ == 0 && first)
      *first = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const char *v = (const char *)sqlite3_column_text(st, c);
      size_t need = len + (v ? strlen(v) : 4) + 3;
      if (need > cap) buf = realloc(buf, cap = need * 2);
      len += (size_t)sprintf(buf + len, "%s%s", c ? "|" : (row > 1 ? "\n" : ""), v ? v : "NULL");
    }
  }
  if (rc != SQLITE_DONE) fail_msg("%s: %s", sql, sqlite3_errmsg(h));
  sqlite3_finalize(st);
  sqlite3_close(h);
  if (out) *out = buf;
  else free(buf);
}

/* query() with printf-style SQL. */
static char *vquery(const char *db, int64_t *first, const char *fmt, va_list ap) {
  char sql[2048], *out;
  vsnprintf(sql, sizeof sql, fmt, ap);
  query(db, sql, &out, first);
  return out;
}

int64_t efx_sql_int(const char *db, const char *fmt, ...) {
  int64_t v = -1;
  va_list ap;
  va_start(ap, fmt);
  free(vquery(db, &v, fmt, ap));
  va_end(ap);
  return v;
}

char *efx_sql_text(const char *db, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = vquery(db, NULL, fmt, ap);
  va_end(ap);
  return out;
}

void efx_sql_expect(const char *db, const char *want, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *got = vquery(db, NULL, fmt, ap);
  va_end(ap);
  if (strcmp(got, want) != 0) {
    print_error("%s\ngot:\n%s\nwanted:\n%s\n", fmt, got, want);
    free(got);
    fail();
  }
  free(got);
}

void efx_exec(const char *db, const char *sql) {
  sqlite3 *h;
  char *msg = NULL;
  if (sqlite3_open(db, &h) != SQLITE_OK) fail_msg("open %s: %s", db, sqlite3_errmsg(h));
  sqlite3_busy_timeout(h, 10000);
  if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
  sqlite3_close(h);
}

char *efx_snapshot(const char *db) {
  char *tables = efx_sql_text(db, "SELECT name FROM sqlite_master WHERE type = 'table'"
                                  " ORDER BY name");
  size_t len = 0, cap = 1024;
  char *snap = malloc(cap);
  snap[0] = '\0';
  for (char *name = strtok(tables, "\n"); name; name = strtok(NULL, "\n")) {
    char *rows = efx_sql_text(db, "SELECT * FROM \"%s\" ORDER BY 1", name);
    size_t need = len + strlen(name) + strlen(rows) + 8;
    if (need > cap) snap = realloc(snap, cap = need * 2);
    len += (size_t)sprintf(snap + len, "[%s]\n%s\n", name, rows);
    free(rows);
  }
  free(tables);
  return snap;
}

char *efx_items_context(const char *prefix, int n) {
  size_t cap = (size_t)n * (strlen(prefix) + 16) + 32, len = 0;
  char *s = malloc(cap);
  if (s == NULL) fail_msg("out of memory");
  len += (size_t)snprintf(s, cap, "{\"items\": [");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s\"%s-%d\"", i ? ", " : "", prefix, i);
  snprintf(s + len, cap - len, "]}");
  return s;
}

void efx_unchanged(const char *db, char *before) {
  char *after = efx_snapshot(db);
  int same = strcmp(before, after) == 0;
  if (!same) fprintf(stderr, "the store changed:\n%s\n---- became ----\n%s\n", before, after);
  free(before);
  free(after);
  assert_true(same);
}

pid_t efx_spawn(const char *const *args, const char *out_path, const char *err_path) {
  int nargs = 0;
  while (args[nargs]) nargs++;
  char **argv = calloc((size_t)nargs + 2, sizeof *argv);
  argv[0] = (char *)tasker_path();
  for (int i = 0; i < nargs; i++) argv[i + 1] = (char *)args[i];
  pid_t pid = fork();
  if (pid < 0) fail_msg("fork failed");
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  free(argv);
  return pid;
}

int efx_wait(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct exited {
  pid_t pid;
  int status;
} exited;

static int has_exited(void *ud) {
  exited *x = ud;
  return waitpid(x->pid, &x->status, WNOHANG) == x->pid;
}

int efx_wait_limit(pid_t pid, int64_t timeout_ms) {
  exited x = {pid, 0};
  if (!efx_wait_for(has_exited, &x, timeout_ms)) {
    kill(pid, SIGKILL);
    efx_wait(pid);
    fail_msg("process %d did not finish within %lld ms", (int)pid, (long long)timeout_ms);
  }
  return WIFEXITED(x.status) ? WEXITSTATUS(x.status) : 128 + WTERMSIG(x.status);
}

int efx_wait_for(int (*cond)(void *ud), void *ud, int64_t timeout_ms) {
  int64_t deadline = tk_monotonic_ns() + timeout_ms * 1000000;
  while (!cond(ud)) {
    if (tk_monotonic_ns() > deadline) return 0;
    struct timespec ts = {0, 5 * 1000000}; /* between looks, not a wait for the event */
    nanosleep(&ts, NULL);
  }
  return 1;
}

int efx_claim_at(tk_store *s, const char *owner, int64_t now, int64_t lease_ms, int limit,
                 tk__claimed *out, int *n, tk_err *err) {
  tk_clock saved = tk_store_clock(s);
  tk_manual_clock at = {.now_ms = now};
  tk_store_set_clock(s, tk_clock_manual(&at));
  int rc = tk__store_claim(s, owner, lease_ms, limit, out, n, err);
  tk_store_set_clock(s, saved);
  return rc;
}

const char *efx_pg_server(const char *url) {
  if (url != NULL && *url != '\0') return url;
  const char *why = getenv("TK_TEST_PG_UNAVAILABLE");
  skip_missing("pg", "no PostgreSQL server (%s)",
               why && *why ? why : "the harness's URL is unset; scripts/run-tests starts one");
  return NULL;
}

/* Run one statement on a connection to url that must succeed. */
static void pg_exec(const char *url, const char *sql) {
  PGconn *c = PQconnectdb(url);
  if (PQstatus(c) != CONNECTION_OK) fail_msg("%s: %s", url, PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQfinish(c);
}

void efx_pg_database(const char *server, const char *prefix, char *name, size_t nlen, char *url,
                     size_t ulen) {
  static int made;
  snprintf(name, nlen, "%s_%ld_%d", prefix, (long)getpid(), ++made);
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  pg_exec(server, sql);
  /* The server's connection options with the database replaced (the URL
   * is turned into libpq's key=value form). */
  PQconninfoOption *opts = PQconninfoParse(server, NULL);
  if (opts == NULL) fail_msg("not a libpq connection string: %s", server);
  size_t len = 0;
  for (PQconninfoOption *o = opts; o->keyword; o++)
    if (o->val && strcmp(o->keyword, "dbname") != 0)
      len += (size_t)snprintf(url + len, ulen - len, "%s='%s' ", o->keyword, o->val);
  snprintf(url + len, ulen - len, "dbname='%s'", name);
  PQconninfoFree(opts);
}

void efx_pg_drop(const char *server, const char *name) {
  char sql[160];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
  pg_exec(server, sql);
}

char *efx_pg_text(const char *url, const char *sql) {
  PGconn *c = PQconnectdb(url);
  if (PQstatus(c) != CONNECTION_OK) fail_msg("%s: %s", url, PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
  size_t len = 0, cap = 256;
  char *buf = malloc(cap);
  buf[0] = '\0';
  for (int row = 0; row < PQntuples(r); row++)
    for (int col = 0; col < PQnfields(r); col++) {
      const char *v = PQgetisnull(r, row, col) ? "NULL" : PQgetvalue(r, row, col);
      size_t need = len + strlen(v) + 3;
      if (need > cap) buf = realloc(buf, cap = need * 2);
      len += (size_t)sprintf(buf + len, "%s%s", col ? "|" : (row ? "\n" : ""), v);
    }
  PQclear(r);
  PQfinish(c);
  return buf;
}

void efx_pg_expect(const char *url, const char *want, const char *fmt, ...) {
  char sql[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  char *got = efx_pg_text(url, sql);
  if (strcmp(got, want) != 0) {
    print_error("query: %s\n got: [%s]\nwant: [%s]\n", sql, got, want);
    free(got);
    fail_msg("unexpected rows");
  }
  free(got);
}
