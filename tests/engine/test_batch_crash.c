/* A batch step across a crash, with real processes: a `tasker run` makes
 * the step's first call (a quarter of the items rejected), stores its acks
 * and sleeps before the next call; it is killed with SIGKILL there. A
 * second `tasker run --until-idle` reaps the lease, retries the step and
 * offers only the items that were not acked: an acked item is delivered
 * exactly once. Synchronization is on the store's observable state, never
 * on a fixed sleep. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"
#include "common/run_cli.h"

#define LIMIT_MS 30000 /* generous: the sanitizer build is slow */
#define NITEMS 1000

/* Every 4th item is refused on its first delivery. The refusal asks for a
 * 60 s pause before the next call, the window in which the run is
 * killed. */
static const char template_toml[] =
    "name = \"deliveries\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"deliver\"\n"
    "handler = { kind = \"builtin\", name = \"batch\", reject_every = 4, reject_times = 1,"
    " retry_after = \"60s\" }\n"
    "batch = { items_from = \"items\", max_in_call_retries = 1, max_item_attempts = 3 }\n"
    "retry = { max_attempts = 3 }\n";

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"50ms\"\n"
                             "[engine]\nworkers = 2\nlease = \"500ms\"\nheartbeat = \"100ms\"\n";

typedef struct crash {
  char dir[256], db[320], url[340], cfg[400];
} crash;

/* Run a CLI command against the crash store; returns its exit status. */
static int cli(crash *c, const char *input, const char *a, const char *b, const char *d) {
  const char *args[] = {"--config", c->cfg, "--db", c->url, a, b, d, NULL};
  run_result r;
  assert_int_equal(run_cli(&r, input, args), 0);
  int status = r.status;
  if (status != 0) print_error("tasker %s: %s\n", a, r.err);
  run_result_free(&r);
  return status;
}

/* The first call's acks are stored: the run is now between calls. */
static int first_call_stored(void *ud) {
  crash *c = ud;
  return efx_sql_int(c->db, "SELECT COUNT(*) FROM items WHERE state = 'acked'") ==
         NITEMS * 3 / 4;
}

static void a_crash_between_calls_resends_only_unacked_items(void **state) {
  (void)state;
  crash c;
  efx_tmpdir(c.dir, sizeof c.dir);
  snprintf(c.db, sizeof c.db, "%s/tasker.db", c.dir);
  snprintf(c.url, sizeof c.url, "sqlite:%s", c.db);
  efx_write(c.dir, "tasker.toml", config, c.cfg, sizeof c.cfg);
  char tpath[400], ctx_path[400];
  efx_write(c.dir, "deliveries.toml", template_toml, tpath, sizeof tpath);
  char *ctx = efx_items_context("parcel", NITEMS);
  efx_write(c.dir, "context.json", ctx, ctx_path, sizeof ctx_path);
  free(ctx);
  char at_ctx[410];
  snprintf(at_ctx, sizeof at_ctx, "@%s", ctx_path);

  assert_int_equal(cli(&c, NULL, "init", NULL, NULL), 0);
  assert_int_equal(cli(&c, NULL, "template", "add", tpath), 0);
  const char *submit[] = {"--config", c.cfg, "--db", c.url, "submit", "deliveries",
                          "--context", at_ctx, NULL};
  run_result r;
  assert_int_equal(run_cli(&r, NULL, submit), 0);
  assert_int_equal(r.status, 0);
  run_result_free(&r);

  const char *run1[] = {"--config", c.cfg, "--db", c.url, "run", "--id", "run-1", NULL};
  pid_t pid = efx_spawn(run1, NULL, NULL);
  int between = efx_wait_for(first_call_stored, &c, LIMIT_MS);
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(efx_wait(pid), 128 + SIGKILL);
  if (!between) fail_msg("the first run never stored its first call's acks");

  /* Between the calls: the acks and the refusals of call 1 are stored, and
   * the dead run still holds the step. */
  efx_sql_expect(c.db, "in_progress|1|run-1",
                 "SELECT state, attempts, lease_owner FROM steps");
  efx_sql_expect(c.db, "acked|1|750\npending|1|250",
                 "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts");

  const char *run2[] = {"--config", c.cfg, "--db", c.url, "run", "--until-idle", "--id",
                        "run-2", NULL};
  assert_int_equal(efx_wait_limit(efx_spawn(run2, NULL, NULL), LIMIT_MS), 0);

  efx_sql_expect(c.db, "complete|complete|{\"items\":1000,\"acked\":1000,\"gave_up\":0}",
                 "SELECT t.state, s.state, s.results FROM tasks t JOIN steps s");
  efx_sql_expect(c.db, "1|run-1|lease_expired\n2|run-2|success",
                 "SELECT attempt, owner, outcome FROM attempts ORDER BY id");
  /* Only the unacked quarter was offered again: the items acked before the
   * crash were delivered once, the others twice. */
  efx_sql_expect(c.db, "acked|1|750\nacked|2|250",
                 "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts");
  assert_int_equal(efx_sql_int(c.db, "SELECT COUNT(*) FROM items WHERE attempts !="
                                     " CASE WHEN (seq + 1) %% 4 = 0 THEN 2 ELSE 1 END"),
                   0);
  efx_rmtree(c.dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_crash_between_calls_resends_only_unacked_items),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
