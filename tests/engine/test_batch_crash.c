/* A batch step across a crash, with real processes, on SQLite and (with
 * TK_TEST_PG_URL) on PostgreSQL: an orchestrator process (the library's
 * engine, 2 workers) makes the step's first call, in which its handler
 * rejects a quarter of the items and asks for a 60 s pause; the engine
 * stores the acks and sleeps before the next call, and the process is
 * killed with SIGKILL there. A second orchestrator process, run until idle,
 * reaps the lease, retries the step and offers only the items that were not
 * acked.
 *
 * What each handler was offered is appended to a file outside the engine
 * and the store, by both processes: an item acked before the crash appears
 * in it exactly once, and every item is acked exactly once. The store's
 * own counts are checked too. Synchronization is on the store's observable
 * state, never on a fixed sleep. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tasker/engine.h>

#include "common/engine_fixture.h"
#include "common/run_cli.h"

#define LIMIT_MS 30000 /* generous: the sanitizer build is slow */
#define NITEMS 1000

static const char template_toml[] =
    "name = \"deliveries\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"deliver\"\n"
    "handler = { kind = \"function\", name = \"deliver\" }\n"
    "batch = { items_from = \"items\", max_in_call_retries = 1, max_item_attempts = 3 }\n"
    "retry = { max_attempts = 3 }\n";

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"50ms\"\n"
                             "[engine]\nworkers = 2\nlease = \"500ms\"\nheartbeat = \"100ms\"\n";

typedef struct crash {
  char dir[256], cfg[400], log[400];
  char url[512];    /* the store: sqlite:DIR/tasker.db or a PostgreSQL database */
  char db[320];     /* the SQLite file, or "" on PostgreSQL */
  char pg_db[64];   /* the PostgreSQL database, or "" */
} crash;

/* ---- the orchestrator processes ---- */

/* What a handler process needs: where it logs, and whether it rejects. */
typedef struct deliverer {
  int log_fd;
  int reject;
  const char *run; /* the orchestrator's id, logged with each delivery */
} deliverer;

/* The batch handler: every 4th item (by position) is rejected when
 * d->reject, with a 60 s pause asked before the next call; the others are
 * acked. Each offered item is logged as "RUN KEY acked|rejected" before
 * the verdicts go back, in one append. */
static void deliver(const tk_batch_call *call, tk_item_report *reports, tk_handler_result *out,
                    void *ud) {
  const deliverer *d = ud;
  size_t cap = call->n * 64 + 1, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) _exit(3);
  for (size_t i = 0; i < call->n; i++) {
    int reject = d->reject && (call->items[i].index + 1) % 4 == 0;
    reports[i] = (tk_item_report){reject ? TK_ITEM_REJECTED : TK_ITEM_ACKED,
                                  reject ? "rejected on purpose" : NULL};
    if (reject) out->retry_after_ms = 60000;
    len += (size_t)snprintf(buf + len, cap - len, "%s %s %s\n", d->run, call->items[i].key,
                            reject ? "rejected" : "acked");
  }
  if (write(d->log_fd, buf, len) != (ssize_t)len) _exit(3);
  free(buf);
}

/* In the child: run orchestrator `id` on the crash store with the deliver
 * handler until killed (until_idle 0) or until idle; never returns. */
static void orchestrator(const crash *c, const char *id, int reject, int until_idle) {
  deliverer d = {open(c->log, O_WRONLY | O_APPEND | O_CREAT, 0644), reject, id};
  tk_config_source src = {.config_path = c->cfg};
  tk_config *cfg;
  tk_store *s;
  tk_engine *e;
  tk_err err;
  if (d.log_fd < 0 || tk_config_load(&src, &cfg, &err) != 0 ||
      tk_store_open(c->url, &s, &err) != 0) {
    fprintf(stderr, "%s: %s\n", id, d.log_fd < 0 ? "cannot open the log" : err.msg);
    _exit(2);
  }
  tk_engine_options o = {.store = s, .config = cfg, .id = id, .workers = -1};
  if (tk_engine_new(&o, &e, &err) != 0 ||
      tk_engine_register_batch(e, "deliver", deliver, &d, &err) != 0 ||
      tk_engine_run(e, until_idle, &err) != 0) {
    fprintf(stderr, "%s: %s\n", id, err.msg);
    _exit(1);
  }
  tk_engine_free(e);
  tk_store_close(s);
  tk_config_free(cfg);
  _exit(0);
}

static pid_t start_orchestrator(const crash *c, const char *id, int reject, int until_idle) {
  pid_t pid = fork();
  if (pid < 0) fail_msg("fork failed");
  if (pid == 0) orchestrator(c, id, reject, until_idle);
  return pid;
}

/* ---- the store, on either backend ---- */

/* The text of a query on the crash store, as efx_sql_text gives it. */
static char *store_text(const crash *c, const char *sql) {
  if (c->db[0]) return efx_sql_text(c->db, "%s", sql);
  return efx_pg_text(c->url, sql);
}

static void store_expect(const crash *c, const char *want, const char *sql) {
  char *got = store_text(c, sql);
  if (strcmp(got, want) != 0) {
    print_error("%s\ngot:\n%s\nwanted:\n%s\n", sql, got, want);
    free(got);
    fail();
  }
  free(got);
}

/* The first call's acks are stored: the run is now between calls. */
static int first_call_stored(void *ud) {
  char *n = store_text(ud, "SELECT COUNT(*) FROM items WHERE state = 'acked'");
  int stored = atoi(n) == NITEMS * 3 / 4;
  free(n);
  return stored;
}

/* Run a CLI command against the crash store; fails the test unless it
 * exits 0. */
static void cli(const crash *c, const char *a, const char *b, const char *d, const char *e) {
  const char *args[] = {"--config", c->cfg, "--db", c->url, a, b, d, e, NULL};
  run_result r;
  assert_int_equal(run_cli(&r, NULL, args), 0);
  if (r.status != 0) fail_msg("tasker %s: %s", a, r.err);
  run_result_free(&r);
}

/* ---- what the handlers received ---- */

/* Check the deliveries log: run-1 was offered every item once and rejected
 * every 4th; run-2 was offered exactly those, and acked them; so each item
 * acked before the crash was delivered exactly once, and every item acked
 * exactly once. */
static void expect_deliveries(const char *log) {
  int offered[2][NITEMS] = {{0}}, acked[NITEMS] = {0}, rejected[NITEMS] = {0};
  char *text = efx_read(log), *save = NULL;
  int lines = 0;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char run[16], verdict[16];
    int item;
    if (sscanf(line, "%15s parcel-%d %15s", run, &item, verdict) != 3 || item < 0 ||
        item >= NITEMS || (strcmp(run, "run-1") != 0 && strcmp(run, "run-2") != 0))
      fail_msg("%s: not a delivery: %s", log, line);
    lines++;
    if (acked[item]) fail_msg("parcel-%d was offered again (%s) after it was acked", item, run);
    offered[run[4] - '1'][item]++;
    if (strcmp(verdict, "acked") == 0) acked[item]++;
    else rejected[item]++;
  }
  free(text);
  int once = 0, twice = 0;
  for (int i = 0; i < NITEMS; i++) {
    int refused = (i + 1) % 4 == 0;
    if (offered[0][i] != 1) fail_msg("run-1 was offered parcel-%d %d times", i, offered[0][i]);
    if (offered[1][i] != refused)
      fail_msg("run-2 was offered parcel-%d %d times, expected %d", i, offered[1][i], refused);
    if (acked[i] != 1 || rejected[i] != refused)
      fail_msg("parcel-%d: acked %d times, rejected %d", i, acked[i], rejected[i]);
    once += !refused;
    twice += refused;
  }
  assert_int_equal(lines, once + 2 * twice);
  assert_int_equal(once, NITEMS * 3 / 4);
}

/* ---- the test ---- */

typedef struct param {
  const char *backend;
} param;

static void a_crash_between_calls_resends_only_unacked_items(void **state) {
  const param *p = *state;
  crash c = {0};
  efx_tmpdir(c.dir, sizeof c.dir);
  if (strcmp(p->backend, "postgres") == 0) {
    efx_pg_database(efx_pg_server(getenv("TK_TEST_PG_URL")), "tk_batch_crash", c.pg_db,
                    sizeof c.pg_db, c.url, sizeof c.url);
  } else {
    snprintf(c.db, sizeof c.db, "%s/tasker.db", c.dir);
    snprintf(c.url, sizeof c.url, "sqlite:%s", c.db);
  }
  snprintf(c.log, sizeof c.log, "%s/deliveries.log", c.dir);
  efx_write(c.dir, "tasker.toml", config, c.cfg, sizeof c.cfg);
  char tpath[400], ctx_path[400];
  efx_write(c.dir, "deliveries.toml", template_toml, tpath, sizeof tpath);
  char *ctx = efx_items_context("parcel", NITEMS);
  efx_write(c.dir, "context.json", ctx, ctx_path, sizeof ctx_path);
  free(ctx);
  char at_ctx[410];
  snprintf(at_ctx, sizeof at_ctx, "@%s", ctx_path);

  cli(&c, "init", NULL, NULL, NULL);
  cli(&c, "template", "add", tpath, NULL);
  cli(&c, "submit", "deliveries", "--context", at_ctx);

  pid_t pid = start_orchestrator(&c, "run-1", 1, 0);
  int between = efx_wait_for(first_call_stored, &c, LIMIT_MS);
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(efx_wait(pid), 128 + SIGKILL);
  if (!between) fail_msg("the first run never stored its first call's acks");

  /* Between the calls: the acks and the refusals of call 1 are stored, and
   * the dead run still holds the step. */
  store_expect(&c, "in_progress|1|run-1", "SELECT state, attempts, lease_owner FROM steps");
  store_expect(&c, "acked|1|750\npending|1|250",
               "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts"
               " ORDER BY state");

  assert_int_equal(efx_wait_limit(start_orchestrator(&c, "run-2", 0, 1), LIMIT_MS), 0);

  /* What the handlers were offered, as they logged it. */
  expect_deliveries(c.log);
  /* And what the store says. */
  store_expect(&c, "complete|complete",
               "SELECT t.state, s.state FROM tasks t JOIN steps s ON s.task_id = t.id");
  char *results = store_text(&c, "SELECT results FROM steps");
  json_t *r = json_loads(results, 0, NULL);
  if (r == NULL) fail_msg("the step's results are not JSON: %s", results);
  assert_int_equal(json_integer_value(json_object_get(r, "items")), NITEMS);
  assert_int_equal(json_integer_value(json_object_get(r, "acked")), NITEMS);
  assert_int_equal(json_integer_value(json_object_get(r, "gave_up")), 0);
  json_decref(r);
  free(results);
  store_expect(&c, "1|run-1|lease_expired\n2|run-2|success",
               "SELECT attempt, owner, outcome FROM attempts ORDER BY id");
  store_expect(&c, "acked|1|750\nacked|2|250",
               "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts"
               " ORDER BY state, attempts");
  if (c.pg_db[0]) efx_pg_drop(getenv("TK_TEST_PG_URL"), c.pg_db);
  efx_rmtree(c.dir);
}

int main(void) {
  static const param sqlite = {"sqlite"}, postgres = {"postgres"};
  const struct CMUnitTest tests[] = {
      {"a_crash_between_calls_resends_only_unacked_items_sqlite",
       a_crash_between_calls_resends_only_unacked_items, NULL, NULL, (void *)&sqlite},
      {"a_crash_between_calls_resends_only_unacked_items_postgres",
       a_crash_between_calls_resends_only_unacked_items, NULL, NULL, (void *)&postgres},
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
