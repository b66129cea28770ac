/* Retry budgets through the engine (DESIGN §14) on a real SQLite store and
 * the injected clock: first attempts are never refused; a retry over its
 * step's budget is deferred, not failed, to exactly the time the budget
 * gives, with source "budget", its whole delay, a step.retry_deferred
 * event and a counter; deferred retries are spread as the budget allows
 * instead of all coming due at once; each step counts in the budget it
 * names (its own, else its template's), per host when per_host is set
 * (also for many hosts new in one group, on both backends); a
 * deferred retry is brought earlier when the budget has room (on SQLite
 * and, with TK_TEST_PG_URL, PostgreSQL); and a template naming a budget
 * the configuration lacks is refused whole. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/workflow.h>

#include "common/engine_fixture.h"

#define ALWAYS_FAILS "{ kind = \"builtin\", name = \"fail\" }"

/* Every attempt row, one line each: task, attempt, outcome, started_at,
 * delay_ms, delay_source and next_run_at, times relative to EFX_T0. */
#define ATTEMPTS_SQL                                                                            \
  "SELECT s.task_id, a.attempt, a.outcome, a.started_at - %1$lld, a.delay_ms, a.delay_source,"  \
  " a.next_run_at - %1$lld FROM attempts a JOIN steps s ON s.id = a.step_id"                    \
  " ORDER BY s.task_id, a.attempt"

/* The event of `type` about attempt `attempt` of task `task`, failing
 * when there is none (borrowed). */
static json_t *event_of(efx *f, const char *type, int64_t task, int attempt) {
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0 &&
        json_integer_value(json_object_get(e, "task")) == task &&
        json_integer_value(json_object_get(e, "attempt")) == attempt)
      return e;
  }
  fail_msg("no %s event for task %lld attempt %d", type, (long long)task, attempt);
  return NULL;
}

/* The events of `type`, in order (a new array of borrowed events). */
static json_t *events_of(efx *f, const char *type) {
  json_t *out = json_array(), *e;
  size_t i;
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0)
      json_array_append(out, e);
  }
  return out;
}

static int64_t int_of(json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

static const char *str_of(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

/* A floor of 2 retries per 1 s window and nothing for first attempts
 * (ratio 0), so every figure is the floor's: slots of 10 ms. The backoff
 * is a constant 100 ms. Four tasks fail at once, three attempts each.
 *
 * At 0: four first attempts, never refused; two retries fit (due at 100),
 * two are deferred to 1000, when the two spent at 0 have left the window.
 * At 100 the first two fail again: the budget is full until 1000 and the
 * two reserved at 1000 fill that window, so they go at 2000, not 1000
 * (without reservations all four would be due at 1000, twice the budget).
 * At 1000 the other two: 3000. Third attempts exhaust the steps. */
static void deferred_retries_are_spread_as_the_budget_allows(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "backoff.multiplier=1", "budgets.api.ratio=0",
                                     "budgets.api.window=1s", "budgets.api.min_per_second=2",
                                     NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "down", ALWAYS_FAILS, "{ max_attempts = 3, budget = \"api\" }");
  int64_t id[4];
  for (int i = 0; i < 4; i++) id[i] = efx_submit(f, "down", NULL);
  efx_drive(f, 40);
  for (int i = 0; i < 4; i++) efx_expect(f, id[i], "error", "s", "error", NULL);
  char want[1024];
  snprintf(want, sizeof want,
           "%1$lld|1|failure|0|100|computed|100\n"
           "%1$lld|2|failure|100|1900|budget|2000\n"
           "%1$lld|3|failure|2000|NULL|NULL|NULL\n"
           "%2$lld|1|failure|0|100|computed|100\n"
           "%2$lld|2|failure|100|1900|budget|2000\n"
           "%2$lld|3|failure|2000|NULL|NULL|NULL\n"
           "%3$lld|1|failure|0|1000|budget|1000\n"
           "%3$lld|2|failure|1000|2000|budget|3000\n"
           "%3$lld|3|failure|3000|NULL|NULL|NULL\n"
           "%4$lld|1|failure|0|1000|budget|1000\n"
           "%4$lld|2|failure|1000|2000|budget|3000\n"
           "%4$lld|3|failure|3000|NULL|NULL|NULL",
           (long long)id[0], (long long)id[1], (long long)id[2], (long long)id[3]);
  efx_sql_expect(f->db, want, ATTEMPTS_SQL, (long long)EFX_T0);

  /* One step.retry_deferred per deferral, before its retry_scheduled, with
   * what the policy chose and what the budget gave. */
  json_t *deferred = events_of(f, "step.retry_deferred");
  assert_int_equal(json_array_size(deferred), 6);
  json_decref(deferred);
  json_t *d = event_of(f, "step.retry_deferred", id[2], 1);
  assert_string_equal(str_of(d, "budget"), "api");
  assert_true(json_is_null(json_object_get(d, "host")));
  assert_int_equal(int_of(d, "computed_delay_ms"), 100);
  assert_string_equal(str_of(d, "computed_source"), "computed");
  assert_int_equal(int_of(d, "computed_run_at"), EFX_T0 + 100);
  assert_int_equal(int_of(d, "deferred_until"), EFX_T0 + 1000);
  d = event_of(f, "step.retry_deferred", id[0], 2);
  assert_int_equal(int_of(d, "computed_run_at"), EFX_T0 + 200);
  assert_int_equal(int_of(d, "deferred_until"), EFX_T0 + 2000);
  size_t i;
  json_t *e, *prev = NULL;
  int scheduled_budget = 0;
  json_array_foreach(f->events, i, e) {
    if (strcmp(str_of(e, "type"), "step.retry_scheduled") == 0 &&
        strcmp(str_of(e, "source"), "budget") == 0) {
      scheduled_budget++;
      assert_string_equal(str_of(prev, "type"), "step.retry_deferred");
      assert_int_equal(int_of(prev, "deferred_until"), int_of(e, "run_at"));
    }
    prev = e;
  }
  assert_int_equal(scheduled_budget, 6);
  /* The counter, and the log line that says why. */
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.retried, 8);
  assert_int_equal(st.retries_deferred, 6);
  assert_int_equal(efx_logs(f, "retry in 1s (retry budget api deferred it from 100ms)"), 2);
}

/* A budget with no room at all for retries defers them, but first
 * attempts run the moment they are due: tasks submitted while retries
 * wait start at once, every time. */
static void first_attempts_are_never_refused(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=10ms",
                                     "backoff.multiplier=1", "budgets.api.ratio=0",
                                     "budgets.api.window=10s", "budgets.api.min_per_second=0.1",
                                     NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "down", ALWAYS_FAILS, "{ max_attempts = 2, budget = \"api\" }");
  for (int k = 0; k < 5; k++) {
    f->clock.now_ms = EFX_T0 + 100 * k;
    efx_submit(f, "down", NULL);
    efx_submit(f, "down", NULL);
    efx_tick(f);
  }
  /* Every first attempt ran when submitted; one retry fits per 10 s, the
   * first at once (10 ms), the others a window apart, in order. */
  efx_sql_expect(f->db,
                 "0|computed|10\n0|budget|10000\n100|budget|20000\n100|budget|30000\n"
                 "200|budget|40000\n200|budget|50000\n300|budget|60000\n300|budget|70000\n"
                 "400|budget|80000\n400|budget|90000",
                 "SELECT a.started_at - %1$lld, a.delay_source, a.next_run_at - %1$lld"
                 " FROM attempts a WHERE a.attempt = 1 ORDER BY a.id",
                 (long long)EFX_T0);
  efx_drive(f, 40);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM attempts"), 20);
  assert_int_equal(tk_engine_stats_get(f->engine).retries_deferred, 9);
}

/* Each step counts in the budget it names, else in its template's: "x"
 * takes the template's budget a, "y" its own budget b, "z" (another
 * template) none. With a floor of 1 retry per window each, one retry of x
 * and one of y go at once and the second of each waits; z's never wait. */
static void each_step_counts_in_the_budget_it_names(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "budgets.a.ratio=0", "budgets.a.window=1s",
                                     "budgets.b.ratio=0", "budgets.b.window=1s", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_template(f, "name = \"two\"\nversion = \"1\"\n"
                  "[retry]\nmax_attempts = 2\nbudget = \"a\"\n" EFX_STEP("x")
                  "handler = " ALWAYS_FAILS "\n" EFX_STEP("y") "handler = " ALWAYS_FAILS "\n"
                  "retry = { budget = \"b\" }\n");
  efx_template(f, "name = \"free\"\nversion = \"1\"\n[retry]\nmax_attempts = 2\n" EFX_STEP("z")
                  "handler = " ALWAYS_FAILS "\n");
  for (int i = 0; i < 2; i++) {
    efx_submit(f, "two", NULL);
    efx_submit(f, "free", NULL);
  }
  efx_tick(f);
  efx_sql_expect(f->db,
                 "x|computed|100\ny|computed|100\nz|computed|100\n"
                 "x|budget|1000\ny|budget|1000\nz|computed|100",
                 "SELECT s.name, a.delay_source, a.next_run_at - %lld FROM attempts a"
                 " JOIN steps s ON s.id = a.step_id ORDER BY s.task_id, s.idx",
                 (long long)EFX_T0);
  /* The stored definition carries the names. */
  char *def = efx_sql_text(f->db, "SELECT definition FROM templates WHERE name = 'two'");
  assert_non_null(strstr(def, "\"retry\":{\"budget\":\"a\",\"max_attempts\":2}"));
  assert_non_null(strstr(def, "\"retry\":{\"budget\":\"b\"}"));
  free(def);
}

/* A handler that fails and names the host it called: tasks with an odd id
 * call a.example, even ones b.example. */
static void fail_on_host(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)ud;
  out->status = TK_HANDLER_RETRY;
  snprintf(out->error, sizeof out->error, "down");
  snprintf(out->downstream, sizeof out->downstream, "%s",
           call->task_id % 2 ? "a.example" : "b.example");
}

/* per_host: one state per host the handler names. Four tasks, two per
 * host, a floor of one retry per window: the first retry to each host goes
 * at once, the second waits. The same without per_host: one goes. */
static void per_host_budgets_keep_a_state_per_host(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "budgets.h.ratio=0",   "budgets.h.window=1s",
                                     "budgets.h.per_host=true",
                                     "budgets.one.ratio=0", "budgets.one.window=1s", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  tk_err err;
  if (tk_engine_register(f->engine, "fail_on_host", fail_on_host, NULL, &err) != 0)
    fail_msg("%s", err.msg);
  efx_one_step(f, "hosts", "{ kind = \"function\", name = \"fail_on_host\" }",
               "{ max_attempts = 2, budget = \"h\" }");
  efx_one_step(f, "shared", "{ kind = \"function\", name = \"fail_on_host\" }",
               "{ max_attempts = 2, budget = \"one\" }");
  int64_t id[8];
  for (int i = 0; i < 4; i++) id[i] = efx_submit(f, "hosts", NULL);
  for (int i = 4; i < 8; i++) id[i] = efx_submit(f, "shared", NULL);
  efx_tick(f);
  char want[512];
  snprintf(want, sizeof want,
           "%lld|computed\n%lld|computed\n%lld|budget\n%lld|budget\n"
           "%lld|computed\n%lld|budget\n%lld|budget\n%lld|budget",
           (long long)id[0], (long long)id[1], (long long)id[2], (long long)id[3],
           (long long)id[4], (long long)id[5], (long long)id[6], (long long)id[7]);
  efx_sql_expect(f->db, want,
                 "SELECT s.task_id, a.delay_source FROM attempts a JOIN steps s"
                 " ON s.id = a.step_id ORDER BY s.task_id");
  json_t *deferred = events_of(f, "step.retry_deferred");
  assert_int_equal(json_array_size(deferred), 5);
  json_decref(deferred);
  json_t *d = event_of(f, "step.retry_deferred", id[2], 1);
  assert_string_equal(str_of(d, "budget"), "h");
  assert_string_equal(str_of(d, "host"), id[2] % 2 ? "a.example" : "b.example");
  d = event_of(f, "step.retry_deferred", id[3], 1);
  assert_string_equal(str_of(d, "host"), id[3] % 2 ? "a.example" : "b.example");
  /* Without per_host the host is not a state of its own. */
  d = event_of(f, "step.retry_deferred", id[5], 1);
  assert_string_equal(str_of(d, "budget"), "one");
  assert_true(json_is_null(json_object_get(d, "host")));
}

/* Step s's attempts in task `task`, one line each: attempt, outcome,
 * started_at, delay_ms, delay_source, next_run_at (times relative to
 * EFX_T0, "-" for null), read through the task report as the API shows it. */
static char *history_of(efx *f, int64_t task) {
  json_t *t = efx_task(f, task), *a;
  size_t i;
  char *out = calloc(1, 1024);
  size_t len = 0;
  json_array_foreach(json_object_get(efx_step(t, "s"), "history"), i, a) {
    json_t *next = json_object_get(a, "next_run_at");
    const char *src = str_of(a, "delay_source");
    len += (size_t)snprintf(out + len, 1024 - len, "%s%lld|%s|%lld|%lld|%s|%lld", i ? "\n" : "",
                            (long long)int_of(a, "attempt"), str_of(a, "outcome"),
                            (long long)(int_of(a, "started_at") - EFX_T0),
                            (long long)int_of(a, "delay_ms"), src ? src : "-",
                            (long long)(json_is_integer(next) ? json_integer_value(next) - EFX_T0
                                                              : -1));
  }
  json_decref(t);
  return out;
}

static void expect_history(efx *f, int64_t task, const char *want) {
  char *got = history_of(f, task);
  if (strcmp(got, want) != 0) fail_msg("task %lld:\n%s\nwanted:\n%s", (long long)task, got, want);
  free(got);
}

/* The test's world on the backend *state names ("sqlite", or "postgres"
 * when TK_TEST_PG_URL is set, else skipped), with engine orch-1. */
static efx *on_backend(void **state, const char *const *sets) {
  const char *backend = *state;
  efx *f = calloc(1, sizeof *f);
  *state = f;
  efx_open(f, sets);
  if (strcmp(backend, "postgres") == 0)
    efx_use_postgres(f, getenv("TK_TEST_PG_URL"), "tk_retry_budget");
  efx_engine(f, "orch-1");
  return f;
}

/* A budget first attempts make room in: 0.5 retry each, plus 1 per 1 s
 * window; retries 100 ms apart. */
static const char *const room_sets[] = {"backoff.jitter=none",   "backoff.base=100ms",
                                        "backoff.multiplier=1",  "budgets.api.ratio=0.5",
                                        "budgets.api.window=1s", "budgets.api.min_per_second=1",
                                        NULL};

/* A handler that fails and names one host per pair of tasks:
 * h<(task_id + 1) / 2>.example. */
static void fail_on_pair_host(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)ud;
  out->status = TK_HANDLER_RETRY;
  snprintf(out->error, sizeof out->error, "down");
  snprintf(out->downstream, sizeof out->downstream, "h%lld.example",
           (long long)(call->task_id + 1) / 2);
}

/* Many hosts new in one group of outcomes (the host table grows several
 * times while the group's states are looked up): each outcome's state is
 * looked up once and holds, so every host's budget limits the group. 20
 * hosts, two tasks each, a floor of one retry per window: per host the
 * first task's retry goes at once and the second's waits, and each host
 * has its row in the store (on SQLite and, with TK_TEST_PG_URL,
 * PostgreSQL). */
static void a_group_of_many_new_hosts_is_limited_per_host(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "budgets.h.ratio=0",   "budgets.h.window=1s",
                                     "budgets.h.per_host=true", "engine.claim_batch=64", NULL};
  efx *f = on_backend(state, sets);
  tk_err err;
  if (tk_engine_register(f->engine, "fail_on_pair_host", fail_on_pair_host, NULL, &err) != 0)
    fail_msg("%s", err.msg);
  efx_one_step(f, "s", "{ kind = \"function\", name = \"fail_on_pair_host\" }",
               "{ max_attempts = 2, budget = \"h\" }");
  int64_t id[40];
  for (int i = 0; i < 40; i++) id[i] = efx_submit(f, "s", NULL);
  efx_tick(f);
  for (int i = 0; i < 40; i++) {
    char *h = history_of(f, id[i]);
    const char *want = i % 2 ? "1|failure|0|1000|budget|1000" : "1|failure|0|100|computed|100";
    if (strcmp(h, want) != 0) fail_msg("task %lld: %s, want %s", (long long)id[i], h, want);
    free(h);
  }
  assert_int_equal(tk_engine_stats_get(f->engine).retries_deferred, 20);
  tk__budget_rec *v;
  int n;
  if (f->store->ops->budget_list(f->store, &v, &n, &err) != 0) fail_msg("%s", err.msg);
  int hosts = 0;
  for (int i = 0; i < n; i++) hosts += strncmp(v[i].key, "1:h@h", 5) == 0;
  tk__budget_recs_free(v, n);
  assert_int_equal(hosts, 20);
}

/* A retry deferred by the budget is brought earlier when first attempts
 * recorded since make room, but never before its backoff's run_at. Ratio
 * 0.5 and a floor of 1 per 1 s window; a constant 100 ms backoff. At 0
 * three steps fail: 1.5 + 1 pays for two retries (due at 100); the third
 * is deferred to 1000, when the window has emptied. At 50 two tasks of a
 * template that succeeds add 1: room for one more, but the deferred retry
 * may not go before 100, so it stays. At 100 it is brought to 100 (the
 * store's run_at and its attempt row's next_run_at, no attempt spent) and
 * claimed with the other two: the queue drained at the rate the first
 * attempts paid for, not at the floor's 1000. On SQLite and PostgreSQL. */
static void a_deferred_retry_is_brought_earlier_when_the_budget_has_room(void **state) {
  const char *const *sets = room_sets;
  efx *f = on_backend(state, sets);
  efx_one_step(f, "down", ALWAYS_FAILS, "{ max_attempts = 2, budget = \"api\" }");
  efx_one_step(f, "up", "{ kind = \"builtin\", name = \"noop\" }", "{ budget = \"api\" }");
  int64_t id[3];
  for (int i = 0; i < 3; i++) id[i] = efx_submit(f, "down", NULL);
  efx_tick(f);
  efx_tick(f);
  expect_history(f, id[2], "1|failure|0|1000|budget|1000");
  f->clock.now_ms = EFX_T0 + 50;
  efx_submit(f, "up", NULL);
  efx_submit(f, "up", NULL);
  efx_tick(f);
  efx_tick(f);
  assert_int_equal(tk_engine_stats_get(f->engine).retries_brought_earlier, 0);
  expect_history(f, id[2], "1|failure|0|1000|budget|1000");
  f->clock.now_ms = EFX_T0 + 100;
  efx_drive(f, 20);
  for (int i = 0; i < 2; i++)
    expect_history(f, id[i], "1|failure|0|100|computed|100\n2|failure|100|0|-|-1");
  expect_history(f, id[2], "1|failure|0|100|budget|100\n2|failure|100|0|-|-1");
  efx_expect(f, id[2], "error", "s", "error", NULL);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.retries_deferred, 1);
  assert_int_equal(st.retries_brought_earlier, 1);
}

/* Two orchestrators hold reservations of one budget (ratio 0.5, a 1 s
 * window, 1/s): A's (task 3, at 1000) comes before B's (task 4, later).
 * First attempts recorded by A make room: A brings its own earlier when
 * its backoff ran out (100), B's later reservation being no reason to
 * wait; then B, holding the only live one, brings its own earlier at
 * its backoff's end (110). Four retries in the window then, as the
 * budget allows (1 + 0.5 x 6 first attempts). On SQLite and, with
 * TK_TEST_PG_URL, PostgreSQL. */
static void two_orchestrators_bring_their_deferred_retries_earlier_in_order(void **state) {
  const char *const *sets = room_sets;
  efx *f = on_backend(state, sets);
  tk_store *second;
  tk_err err;
  if (tk_store_open(f->url, &second, &err) != 0) fail_msg("second store: %s", err.msg);
  tk_store_set_clock(second, tk_clock_manual(&f->clock));
  tk_engine *b = efx_engine_on(f, second, "orch-B");
  efx_one_step(f, "down", ALWAYS_FAILS, "{ max_attempts = 2, budget = \"api\" }");
  efx_one_step(f, "up", "{ kind = \"builtin\", name = \"noop\" }", "{ budget = \"api\" }");
  int64_t id[4], due;
  for (int i = 0; i < 3; i++) id[i] = efx_submit(f, "down", NULL);
  efx_tick(f); /* A: 3 first attempts; 2 retries at once, the third reserved at 1000 */
  expect_history(f, id[2], "1|failure|0|1000|budget|1000");
  f->clock.now_ms = EFX_T0 + 10;
  id[3] = efx_submit(f, "down", NULL);
  if (tk_engine_tick(b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  json_t *t = efx_task(f, id[3]);
  json_t *a = json_array_get(json_object_get(efx_step(t, "s"), "history"), 0);
  int64_t b_at = int_of(a, "next_run_at") - EFX_T0;
  assert_string_equal(str_of(a, "delay_source"), "budget");
  if (b_at <= 1000) fail_msg("B's retry reserved at %lld, after A's (1000) expected", (long long)b_at);
  json_decref(t);
  f->clock.now_ms = EFX_T0 + 50;
  efx_submit(f, "up", NULL);
  efx_submit(f, "up", NULL);
  efx_tick(f); /* A: 2 first attempts make room; A's backoff runs to 100 */
  expect_history(f, id[2], "1|failure|0|1000|budget|1000");
  f->clock.now_ms = EFX_T0 + 100;
  efx_tick(f); /* A brings its own earlier (B's comes later) and runs it */
  expect_history(f, id[2], "1|failure|0|100|budget|100\n2|failure|100|0|-|-1");
  assert_int_equal(tk_engine_stats_get(f->engine).retries_brought_earlier, 1);
  f->clock.now_ms = EFX_T0 + 110;
  if (tk_engine_tick(b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  expect_history(f, id[3], "1|failure|10|100|budget|110\n2|failure|110|0|-|-1");
  assert_int_equal(tk_engine_stats_get(b).retries_brought_earlier, 1);
  tk_engine_free(b);
  tk_store_close(second);
}

/* A budget that is not configured: the template is refused at add with
 * FILE:LINE:COLUMN, and nothing is stored, in whichever table names it. */
static void an_unknown_budget_is_refused_at_template_add(void **state) {
  static const char *const sets[] = {"budgets.api.ratio=0.1", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  static const struct {
    const char *toml, *want;
  } cases[] = {
      {"name = \"t\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
       "retry = { max_attempts = 3, budget = \"apii\" }\n",
       ":6:38: steps[1].retry.budget: unknown retry budget \"apii\" (configured: api; a budget "
       "is a [budgets.NAME] table of the configuration)"},
      {"name = \"t\"\nversion = \"1\"\n[retry]\nbudget = \"nope\"\n" EFX_STEP("a") EFX_NOOP,
       ":4:10: retry.budget: unknown retry budget \"nope\" (configured: api; a budget is a "
       "[budgets.NAME] table of the configuration)"},
      {"name = \"t\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP "retry = { budget = 3 }\n",
       ":6:20: steps[1].retry.budget = 3: expected a retry budget name, got an integer"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[512], name[32];
    snprintf(name, sizeof name, "bad%zu.toml", i);
    efx_write(f->dir, name, cases[i].toml, path, sizeof path);
    char *before = efx_snapshot(f->db);
    tk_err err;
    assert_int_equal(tk_template_add_file(f->store, f->cfg, path, f->clock.now_ms, NULL, &err),
                     TK_ECONFIG);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", path, cases[i].want);
    assert_string_equal(err.msg, want);
    efx_unchanged(f->db, before);
  }
}

/* A budget that left the configuration after its template was added:
 * the engine says so once and lets the retries go. */
static void a_budget_no_longer_configured_limits_nothing(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "budgets.gone.ratio=0", "budgets.gone.window=1s", NULL};
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "old", ALWAYS_FAILS, "{ max_attempts = 2, budget = \"gone\" }");
  for (int i = 0; i < 3; i++) efx_submit(f, "old", NULL);
  /* The same store under a configuration without the budget. */
  tk_config *old = f->cfg;
  tk_err err;
  if (tk_config_load(NULL, &f->cfg, &err) != 0) fail_msg("%s", err.msg);
  efx_engine(f, "orch-2");
  tk_config_free(old);
  efx_drive(f, 20);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM attempts WHERE delay_source ="
                                      " 'budget'"),
                   0);
  assert_int_equal(efx_logs(f, "retry budget \"gone\" is not configured; the retries of "
                              "steps naming it are not limited"),
                   1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(deferred_retries_are_spread_as_the_budget_allows, efx_teardown),
      cmocka_unit_test_teardown(first_attempts_are_never_refused, efx_teardown),
      cmocka_unit_test_teardown(each_step_counts_in_the_budget_it_names, efx_teardown),
      cmocka_unit_test_teardown(per_host_budgets_keep_a_state_per_host, efx_teardown),
      {"sqlite: a_group_of_many_new_hosts_is_limited_per_host",
       a_group_of_many_new_hosts_is_limited_per_host, NULL, efx_teardown, (void *)"sqlite"},
      {"postgres: a_group_of_many_new_hosts_is_limited_per_host",
       a_group_of_many_new_hosts_is_limited_per_host, NULL, efx_teardown, (void *)"postgres"},
      {"sqlite: a_deferred_retry_is_brought_earlier_when_the_budget_has_room",
       a_deferred_retry_is_brought_earlier_when_the_budget_has_room, NULL, efx_teardown,
       (void *)"sqlite"},
      {"postgres: a_deferred_retry_is_brought_earlier_when_the_budget_has_room",
       a_deferred_retry_is_brought_earlier_when_the_budget_has_room, NULL, efx_teardown,
       (void *)"postgres"},
      {"sqlite: two_orchestrators_bring_their_deferred_retries_earlier_in_order",
       two_orchestrators_bring_their_deferred_retries_earlier_in_order, NULL, efx_teardown,
       (void *)"sqlite"},
      {"postgres: two_orchestrators_bring_their_deferred_retries_earlier_in_order",
       two_orchestrators_bring_their_deferred_retries_earlier_in_order, NULL, efx_teardown,
       (void *)"postgres"},
      cmocka_unit_test_teardown(an_unknown_budget_is_refused_at_template_add, efx_teardown),
      cmocka_unit_test_teardown(a_budget_no_longer_configured_limits_nothing, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
