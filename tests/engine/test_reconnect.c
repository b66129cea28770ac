/* A lost store connection (issue 11, on any backend): the store's ops are
 * wrapped so that recording fails with TK_EDISCONNECTED, as PostgreSQL's
 * do when the server restarts, and `reconnect` fails a few times before it
 * works. The engine keeps the finished outcomes, tries again under
 * engine.reconnect_backoff, says what happened, and records each outcome
 * exactly once afterwards; past engine.reconnect_give_up it stops with
 * TK_EDISCONNECTED. (tests/postgres/server_restart.sh does the same with
 * a real server.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"

static const char *const sets[] = {"backoff.profiles.quick.base=1ms",
                                   "backoff.profiles.quick.max_delay=4ms",
                                   "backoff.profiles.quick.jitter=none",
                                   "engine.reconnect_backoff=quick",
                                   "engine.reconnect_give_up=3s", NULL};

/* The wrapped store: how many recordings of outcomes still fail, how many
 * reconnects still fail, and what was called. */
static const tk__store_ops *real_ops;
static tk__store_ops lossy_ops;
static int records_to_fail, reconnects_to_fail, reconnects, records_failed;

static int lossy_record(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                        tk__claim_request *next, tk_err *err) {
  if (n > 0 && records_to_fail != 0) {
    if (records_to_fail > 0) records_to_fail--;
    records_failed++;
    if (next) next->n = 0;
    return tk_err_set(err, TK_EDISCONNECTED, "server closed the connection unexpectedly");
  }
  return real_ops->record(s, o, n, fx, errs, next, err);
}

static int lossy_reconnect(tk_store *s, tk_err *err) {
  (void)s;
  reconnects++;
  if (reconnects_to_fail != 0) {
    if (reconnects_to_fail > 0) reconnects_to_fail--;
    return tk_err_set(err, TK_EDISCONNECTED, "connection refused");
  }
  return 0;
}

static int setup(void **state) {
  efx *f = efx_new(sets, "orch-1");
  real_ops = f->store->ops;
  lossy_ops = *real_ops;
  lossy_ops.record = lossy_record;
  lossy_ops.reconnect = lossy_reconnect;
  records_to_fail = reconnects_to_fail = reconnects = records_failed = 0;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  efx *f = *state;
  f->store->ops = real_ops;
  return efx_teardown(state);
}

/* Three tasks of two steps; the first two recordings of outcomes find the
 * connection lost and the first two reconnects are refused. */
static void outcomes_wait_for_the_reconnection_and_are_recorded_once(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"pair\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
                  EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP);
  for (int i = 0; i < 3; i++) efx_submit(f, "pair", NULL);
  f->store->ops = &lossy_ops;
  records_to_fail = 2;
  reconnects_to_fail = 2;
  tk_err err;
  int rc = tk_engine_run(f->engine, 1, &err);
  f->store->ops = real_ops;
  if (rc != 0) fail_msg("run: %s", err.msg);
  assert_int_equal(records_failed, 2);
  /* The first loss: two refusals, then a success; the second: a success. */
  assert_int_equal(reconnects, 4);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM tasks WHERE state = 'complete'"), 3);
  /* Each step ran and was recorded once: one attempt row each, a success. */
  efx_sql_expect(f->db, "6|6|0",
                 "SELECT count(*), sum(outcome = 'success'), sum(finished_at IS NULL)"
                 " FROM attempts");
  efx_sql_expect(f->db, "0", "SELECT count(*) FROM steps WHERE attempts <> 1");
  char *logs = json_dumps(f->logs, 0);
  expect_contains(logs, "lost the store: server closed the connection unexpectedly; "
                        "reconnecting (backoff profile \\\"quick\\\", giving up after 3s)");
  expect_contains(logs, "reconnect try 1 failed: connection refused");
  expect_contains(logs, "reconnected to the store after");
  expect_contains(logs, "(3 tries)");
  free(logs);
}

/* The store stays gone: after reconnect_give_up the run stops with
 * TK_EDISCONNECTED, saying so; the claimed steps keep their leases (the
 * reaper of another orchestrator would retry them). */
static void past_the_give_up_time_the_run_stops(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"one\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP);
  efx_submit(f, "one", NULL);
  tk_config_free(f->cfg);
  const char *const short_give_up[] = {"backoff.profiles.quick.base=1ms",
                                       "backoff.profiles.quick.jitter=none",
                                       "engine.reconnect_backoff=quick",
                                       "engine.reconnect_give_up=30ms", NULL};
  tk_config_source src = {NULL, NULL, NULL, short_give_up, 4};
  tk_err err;
  if (tk_config_load(&src, &f->cfg, &err) != 0) fail_msg("config: %s", err.msg);
  efx_engine(f, "orch-1");
  f->store->ops = &lossy_ops;
  records_to_fail = -1;
  reconnects_to_fail = -1;
  int rc = tk_engine_run(f->engine, 1, &err);
  f->store->ops = real_ops;
  assert_int_equal(rc, TK_EDISCONNECTED);
  expect_contains(err.msg, "gave up reconnecting to the store after 30ms");
  expect_contains(err.msg, "connection refused");
  assert_true(reconnects >= 2);
  efx_sql_expect(f->db, "in_progress", "SELECT state FROM steps");
}

/* A backend with no connection to lose has no reconnect op: the error is
 * the run's at once. */
static void without_a_reconnect_op_the_error_is_returned(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"one\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP);
  efx_submit(f, "one", NULL);
  lossy_ops.reconnect = NULL;
  f->store->ops = &lossy_ops;
  records_to_fail = -1;
  tk_err err;
  int rc = tk_engine_run(f->engine, 1, &err);
  f->store->ops = real_ops;
  assert_int_equal(rc, TK_EDISCONNECTED);
  expect_contains(err.msg, "server closed the connection unexpectedly");
  assert_int_equal(reconnects, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(outcomes_wait_for_the_reconnection_and_are_recorded_once,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(past_the_give_up_time_the_run_stops, setup, teardown),
      cmocka_unit_test_setup_teardown(without_a_reconnect_op_the_error_is_returned, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
