/* The engine's side of the worker protocol (engine/remote.h, DESIGN §19)
 * on a real SQLite store under a manual clock: an orchestrator's engine
 * never runs a worker step and does not spin while one waits; a serving
 * engine hands it out, and its outcome goes through the same path as any
 * step's (children released and run by the orchestrator, events, the
 * attempt row, a retry under the policy). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/engine_fixture.h"
#include "engine/remote.h"

static const char *const sets[] = {"backoff.jitter=none", "backoff.base=1s", NULL};

/* fetch (a worker step of queue "pages") -> index (an orchestrator's). */
static const char crawl_toml[] =
    "name = \"crawl\"\nversion = \"1\"\n" EFX_STEP("fetch")
    "handler = { kind = \"worker\", queue = \"pages\" }\n"
    "retry = { max_attempts = 3 }\n" EFX_STEP("index") EFX_NOOP "depends_on = [\"fetch\"]\n";

static int setup(void **state) {
  *state = efx_new(sets, "orch-1");
  return 0;
}

/* The orchestrator drives until idle: the worker step was never claimed
 * (no attempt, no event), and nothing was due for it. */
static void an_orchestrator_leaves_worker_steps_alone(void **state) {
  efx *f = *state;
  efx_template(f, crawl_toml);
  int64_t t = efx_submit(f, "crawl", "{\"url\": \"https://example.org/\"}");
  int passes = efx_drive(f, 20);
  assert_true(passes <= 3);
  efx_expect(f, t, "pending", "fetch", "pending", "index", "pending", NULL);
  assert_int_equal(efx_events(f, "step.claimed", "fetch"), 0);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts"), 0);
  int64_t due = efx_tick(f);
  assert_true(due == INT64_MAX || due > f->clock.now_ms);
}

/* Claim, heartbeat and complete through a serving engine: the
 * orchestrator then runs index with fetch's results; a failure retries
 * under the policy, with the worker's retry_after as the hint. */
static void a_worker_step_runs_through_the_engine(void **state) {
  efx *f = *state;
  efx_template(f, crawl_toml);
  int64_t t = efx_submit(f, "crawl", "{\"url\": \"https://example.org/\"}");
  tk_engine *serve = efx_engine_on(f, f->store, "serve-1");
  tk__remote_claimed c[4];
  int n = 0;
  tk_err err;
  assert_int_equal(tk__remote_claim(serve, "other", "w-1", 4, c, &n, NULL, &err), 0);
  assert_int_equal(n, 0);
  assert_int_equal(tk__remote_claim(serve, "pages", "w-1", 0, c, &n, NULL, &err), TK_ERANGE);
  assert_int_equal(tk__remote_claim(serve, "pages", "w-1", 101, c, &n, NULL, &err), TK_ERANGE);
  assert_int_equal(tk__remote_claim(serve, "pages", "w-1", 4, c, &n, NULL, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(c[0].step, "fetch");
  assert_int_equal(c[0].task_id, t);
  assert_string_equal(json_string_value(json_object_get(json_object_get(c[0].input, "context"),
                                                        "url")),
                      "https://example.org/");
  assert_int_equal(efx_events(f, "step.claimed", "fetch"), 1);

  /* A retry: 1.5 s asked, under the default policy's bounds. */
  f->clock.now_ms += 100;
  tk__remote_result res;
  assert_int_equal(tk__remote_fail(serve, c[0].token, "503 from origin", 1, 1500, &res, &err), 0);
  assert_string_equal(res.state, "waiting_for_retry");
  assert_int_equal(res.run_at, f->clock.now_ms + 1500);
  assert_int_equal(efx_events(f, "step.retry_scheduled", "fetch"), 1);
  tk__remote_claims_free(c, n);
  efx_drive(f, 5); /* the orchestrator does not take the retry */
  efx_expect(f, t, "in_progress", "fetch", "waiting_for_retry", "index", "pending", NULL);

  f->clock.now_ms = res.run_at;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-2", 4, c, &n, NULL, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(c[0].attempt, 2);
  int64_t until;
  f->clock.now_ms += 50;
  assert_int_equal(tk__remote_heartbeat(serve, c[0].token, &until, &err), 0);
  assert_true(until > c[0].lease_expires_at);
  assert_int_equal(tk__remote_complete(serve, c[0].token, "{\"bytes\": 512}", &res, &err), 0);
  assert_string_equal(res.state, "complete");
  assert_int_equal(efx_events(f, "step.completed", "fetch"), 1);
  tk__remote_claims_free(c, n);

  efx_drive(f, 10);
  efx_expect(f, t, "complete", "fetch", "complete", "index", "complete", NULL);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts WHERE owner = 'w-2'"
                                      " AND outcome = 'success'"),
                   1);
  /* The store keeps a hash of each token, 32 bytes, never the token. */
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts"
                                      " WHERE length(token_hash) = 32"),
                   2);
  tk_engine_free(serve);
}

/* With no orchestrator running, the serving engine's next claim reaps a
 * dead worker's lease: the step waits for its retry under the policy, the
 * dead worker's token is fenced, and the retry is claimed when due. */
static void a_dead_workers_lease_is_reaped_by_the_server(void **state) {
  efx *f = *state;
  efx_template(f, crawl_toml);
  int64_t t = efx_submit(f, "crawl", NULL);
  tk_engine *serve = efx_engine_on(f, f->store, "serve-1");
  tk__remote_claimed c[2], d[2];
  int n = 0, m = 0;
  tk_err err;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-dead", 2, c, &n, NULL, &err), 0);
  assert_int_equal(n, 1);
  f->clock.now_ms = c[0].lease_expires_at;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-2", 2, d, &m, NULL, &err), 0);
  assert_int_equal(m, 0);
  efx_expect(f, t, "in_progress", "fetch", "waiting_for_retry", "index", "pending", NULL);
  assert_int_equal(efx_events(f, "step.lease_expired", "fetch"), 1);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts WHERE owner = 'w-dead'"
                                      " AND outcome = 'lease_expired'"),
                   1);
  tk__remote_result res;
  assert_int_equal(tk__remote_complete(serve, c[0].token, "{}", &res, &err), TK_EFENCED);
  int64_t run_at = efx_sql_int(f->db, "SELECT run_at FROM steps WHERE name = 'fetch'");
  assert_true(run_at > f->clock.now_ms);
  f->clock.now_ms = run_at;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-2", 2, d, &m, NULL, &err), 0);
  assert_int_equal(m, 1);
  assert_int_equal(d[0].attempt, 2);
  tk__remote_claims_free(c, n);
  tk__remote_claims_free(d, m);
  tk_engine_free(serve);
}

/* Outcomes recorded as one group (tk__remote_record, the server's group
 * commit): each is fenced by its own token and answered on its own: a
 * stale token and a claim's second outcome in the same group are fenced
 * and change nothing, a malformed token is refused, the others are
 * recorded (a complete, a retryable failure with its retry_after). */
static void a_group_of_outcomes_is_fenced_one_by_one(void **state) {
  efx *f = *state;
  efx_template(f, crawl_toml);
  int64_t t[3];
  for (int i = 0; i < 3; i++) t[i] = efx_submit(f, "crawl", NULL);
  tk_engine *serve = efx_engine_on(f, f->store, "serve-1");
  tk__remote_claimed c[4];
  int n = 0;
  tk_err err;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-1", 4, c, &n, NULL, &err), 0);
  assert_int_equal(n, 3);
  tk__remote_result res;
  assert_int_equal(tk__remote_complete(serve, c[0].token, "1", &res, &err), 0);
  tk__remote_outcome o[] = {
      {.token = c[0].token, .results = "2"},  /* its claim ended: fenced */
      {.token = c[1].token, .results = "{\"n\": 1}"},
      {.token = c[2].token, .failed = 1, .error = "503", .retryable = 1, .retry_after_ms = 2000},
      {.token = c[1].token, .results = "3"},  /* the second of its claim: fenced */
      {.token = "not-a-token", .results = "4"},
  };
  tk__remote_record(serve, o, 5);
  assert_int_equal(o[0].err.code, TK_EFENCED);
  assert_int_equal(o[1].err.code, 0);
  assert_string_equal(o[1].result.state, "complete");
  assert_int_equal(o[2].err.code, 0);
  assert_string_equal(o[2].result.state, "waiting_for_retry");
  assert_int_equal(o[2].result.run_at, f->clock.now_ms + 2000);
  assert_int_equal(o[3].err.code, TK_EFENCED);
  assert_int_equal(o[4].err.code, TK_EINVAL);
  /* What each recorded, and nothing of the refused ones. */
  char *r = efx_sql_text(f->db, "SELECT group_concat(results, ' ') FROM (SELECT results FROM"
                                " steps WHERE name = 'fetch' ORDER BY task_id)");
  assert_string_equal(r, "1 {\"n\":1}");
  free(r);
  efx_expect(f, t[2], "in_progress", "fetch", "waiting_for_retry", "index", "pending", NULL);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts WHERE outcome = 'success'"),
                   2);
  assert_int_equal(efx_sql_int(f->db, "SELECT count(*) FROM attempts WHERE outcome = 'failure'"),
                   1);
  tk__remote_claims_free(c, n);
  tk_engine_free(serve);
}

/* pages: a -> b, both a worker's. */
static const char chain_toml[] =
    "name = \"chain\"\nversion = \"1\"\n" EFX_STEP("a")
    "handler = { kind = \"worker\", queue = \"pages\" }\n" EFX_STEP("b")
    "handler = { kind = \"worker\", queue = \"pages\" }\ndepends_on = [\"a\"]\n";

/* Outcomes and a claim in one call (tk__remote_record_claim): the
 * outcomes are recorded, each answered, and the claim takes the step the
 * complete released; a claim refused for its arguments records none. */
static void outcomes_and_a_claim_in_one_call(void **state) {
  efx *f = *state;
  efx_template(f, chain_toml);
  int64_t t = efx_submit(f, "chain", NULL);
  tk_engine *serve = efx_engine_on(f, f->store, "serve-1");
  tk__remote_claimed c[4], next[4];
  int n = 0, m = 0;
  tk_err err;
  assert_int_equal(tk__remote_claim(serve, "pages", "w-1", 4, c, &n, NULL, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(c[0].step, "a");
  tk__remote_outcome o[] = {{.token = c[0].token, .results = "{\"page\": 1}"},
                            {.token = "not-a-token", .results = "2"}};
  /* Refused for its max: nothing recorded, each outcome says why. */
  assert_int_equal(
      tk__remote_record_claim(serve, o, 2, "pages", "w-1", 0, next, &m, NULL, &err), TK_ERANGE);
  assert_int_equal(o[0].err.code, TK_ERANGE);
  efx_expect(f, t, "in_progress", "a", "in_progress", "b", "pending", NULL);
  int64_t due = 0;
  assert_int_equal(
      tk__remote_record_claim(serve, o, 2, "pages", "w-1", 4, next, &m, &due, &err), 0);
  assert_int_equal(o[0].err.code, 0);
  assert_string_equal(o[0].result.state, "complete");
  assert_int_equal(o[1].err.code, TK_EINVAL);
  assert_int_equal(m, 1);
  assert_string_equal(next[0].step, "b");
  char *in = json_dumps(next[0].input, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(in, "{\"context\":{},\"parents\":{\"a\":{\"page\":1}}}");
  free(in);
  efx_expect(f, t, "in_progress", "a", "complete", "b", "in_progress", NULL);
  /* No outcomes at all: a claim alone. */
  tk__remote_outcome done = {.token = next[0].token};
  tk__remote_claimed more[1];
  int k = -1;
  assert_int_equal(
      tk__remote_record_claim(serve, &done, 1, "pages", "w-1", 1, more, &k, NULL, &err), 0);
  assert_int_equal(done.err.code, 0);
  assert_int_equal(k, 0);
  assert_int_equal(tk__remote_record_claim(serve, NULL, 0, "pages", "w-1", 1, more, &k, NULL, &err),
                   0);
  assert_int_equal(k, 0);
  efx_expect(f, t, "complete", "a", "complete", "b", "complete", NULL);
  tk__remote_claims_free(c, n);
  tk__remote_claims_free(next, m);
  tk_engine_free(serve);
}

/* A worker step handed to an orchestrator anyway (a row written by hand
 * without its queue) fails for good, saying why, instead of pretending. */
static void a_worker_step_without_its_queue_fails_for_good(void **state) {
  efx *f = *state;
  efx_template(f, crawl_toml);
  int64_t t = efx_submit(f, "crawl", NULL);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
  /* Both of its queue's columns (steps.queue too, since ops version 12). */
  assert_int_equal(sqlite3_exec(db,
                                "UPDATE steps SET worker_queue = NULL, queue = NULL"
                                " WHERE name = 'fetch'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(db);
  efx_drive(f, 10);
  efx_expect(f, t, "error", "fetch", "error", "index", "pending", NULL);
  char *why = efx_sql_text(f->db, "SELECT last_error FROM steps WHERE name = 'fetch'");
  assert_non_null(strstr(why, "outside workers"));
  free(why);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(an_orchestrator_leaves_worker_steps_alone, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(a_worker_step_runs_through_the_engine, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_worker_step_without_its_queue_fails_for_good, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(a_dead_workers_lease_is_reaped_by_the_server, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(outcomes_and_a_claim_in_one_call, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_group_of_outcomes_is_fenced_one_by_one, setup,
                                      efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
