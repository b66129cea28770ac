/* Readiness and finalization (DESIGN §3-5) on a real SQLite store with the
 * inline engine and a manual clock: linear chains, a diamond, a tree that
 * fans in, a failing branch beside a finishing one, exhaustion,
 * non-retryable failures, and the operator's retry, resolve and cancel. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "store/store.h"

static const char *const no_jitter[] = {"backoff.jitter=none", "backoff.base=1s",
                                        "backoff.multiplier=2", NULL};

static int setup(void **state) {
  *state = efx_new(no_jitter, "orch-1");
  return 0;
}

static json_int_t step_int(json_t *task, const char *step, const char *key) {
  return json_integer_value(json_object_get(efx_step(task, step), key));
}

static const char *why_reason(json_t *task, const char *step) {
  return json_string_value(json_object_get(json_object_get(efx_step(task, step), "why"), "reason"));
}

/* Assert that `step` waits for exactly one parent, in state `state`. */
static void expect_blocked_by(json_t *task, const char *step, const char *parent,
                              const char *state) {
  json_t *why = json_object_get(efx_step(task, step), "why");
  assert_string_equal(json_string_value(json_object_get(why, "reason")),
                      "waiting_for_dependencies");
  json_t *blocking = json_object_get(why, "blocking");
  assert_int_equal(json_array_size(blocking), 1);
  json_t *b = json_array_get(blocking, 0);
  assert_string_equal(json_string_value(json_object_get(b, "step")), parent);
  assert_string_equal(json_string_value(json_object_get(b, "state")), state);
}

/* The operator action through the store, as `tasker retry|resolve|cancel`. */
static int op(efx *f, tk__operator_action a, int64_t task, const char *step, tk_err *err) {
  tk__effects fx;
  return f->store->ops->operator(f->store, a, task, step, f->clock.now_ms, &fx, err);
}

/* The names of claimed steps, in order, "a,b,c". */
static void claimed_order(efx *f, char *out, size_t len) {
  size_t i, used = 0;
  json_t *e;
  out[0] = '\0';
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), "step.claimed") == 0)
      used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "",
                               json_string_value(json_object_get(e, "step")));
  }
}

/* A function handler that looks at its own task while it runs. */
typedef struct observer {
  efx *f;
  char status[32], why[32];
  json_int_t until;
} observer;

static void observe(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)out;
  observer *o = ud;
  json_t *t = efx_task(o->f, call->task_id);
  snprintf(o->status, sizeof o->status, "%s",
           json_string_value(json_object_get(t, "execution_status")));
  json_t *why = json_object_get(efx_step(t, call->step), "why");
  snprintf(o->why, sizeof o->why, "%s", json_string_value(json_object_get(why, "reason")));
  o->until = json_integer_value(json_object_get(why, "until"));
  json_decref(t);
}

static void linear_chain_runs_one_step_per_pass(void **state) {
  efx *f = *state;
  observer obs = {.f = f};
  assert_int_equal(tk_engine_register(f->engine, "observe", observe, &obs, NULL), 0);
  efx_template(f, "name = \"linear\"\nversion = \"1\"\n"
                  EFX_STEP("a") EFX_NOOP
                  EFX_STEP("b") "depends_on = [\"a\"]\n"
                  "handler = { kind = \"function\", name = \"observe\" }\n"
                  EFX_STEP("c") "depends_on = [\"b\"]\n" EFX_NOOP);
  int64_t id = efx_submit(f, "linear", "{\"n\": 1}");
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")), "has_ready_steps");
  assert_string_equal(why_reason(t, "a"), "ready");
  assert_string_equal(why_reason(t, "b"), "waiting_for_dependencies");
  expect_blocked_by(t, "c", "b", "pending");
  json_decref(t);

  f->clock.now_ms = EFX_T0 + 500;
  assert_int_equal(efx_tick(f), EFX_T0 + 500); /* b became ready now */
  efx_expect(f, id, "in_progress", "a", "complete", "b", "pending", "c", "pending", NULL);
  t = efx_task(f, id);
  /* A child that reaches zero parents is due at the time its parent completed. */
  assert_int_equal(step_int(t, "b", "parents_remaining"), 0);
  assert_int_equal(step_int(t, "b", "run_at"), EFX_T0 + 500);
  assert_int_equal(step_int(t, "c", "parents_remaining"), 1);
  json_decref(t);

  f->clock.now_ms = EFX_T0 + 700;
  efx_tick(f);
  /* While b ran, its task was processing and b was held by a lease. */
  assert_string_equal(obs.status, "processing");
  assert_string_equal(obs.why, "running");
  assert_int_equal(obs.until, EFX_T0 + 700 + tk_config_engine(f->cfg)->lease_ms);
  efx_expect(f, id, "in_progress", "a", "complete", "b", "complete", "c", "pending", NULL);

  efx_tick(f);
  efx_expect(f, id, "complete", "a", "complete", "b", "complete", "c", "complete", NULL);
  t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")), "all_complete");
  assert_int_equal(json_integer_value(json_object_get(t, "finished_at")), EFX_T0 + 700);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_done")), 3);
  json_decref(t);
  assert_int_equal(efx_tick(f), INT64_MAX);

  char order[64];
  claimed_order(f, order, sizeof order);
  assert_string_equal(order, "a,b,c");
  assert_int_equal(efx_events(f, "task.completed", NULL), 1);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM attempts WHERE outcome = 'success'"), 3);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM attempts"), 3);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.claimed, 3);
  assert_int_equal(st.completed, 3);
  assert_int_equal(st.tasks_completed, 1);
  assert_int_equal(st.tasks_failed, 0);
}

/* A function handler returning {"from": STEP} and keeping its input. */
typedef struct recorder {
  char *input;
  int calls;
} recorder;

static void record_input(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  recorder *r = ud;
  r->calls++;
  free(r->input);
  r->input = strdup(call->input);
  json_t *res = json_pack("{s:s}", "from", call->step);
  out->results = json_dumps(res, JSON_COMPACT);
  json_decref(res);
}

static void diamond_claims_both_branches_together_and_fans_in(void **state) {
  efx *f = *state;
  recorder rec = {0};
  assert_int_equal(tk_engine_register(f->engine, "rec", record_input, &rec, NULL), 0);
  efx_template(f, "name = \"diamond\"\nversion = \"1\"\n"
                  EFX_STEP("a") EFX_NOOP
                  EFX_STEP("b") "depends_on = [\"a\"]\n"
                  "handler = { kind = \"function\", name = \"rec\" }\n"
                  EFX_STEP("c") "depends_on = [\"a\"]\n"
                  "handler = { kind = \"function\", name = \"rec\" }\n"
                  EFX_STEP("d") "depends_on = [\"b\", \"c\"]\n"
                  "handler = { kind = \"function\", name = \"rec\" }\n");
  int64_t id = efx_submit(f, "diamond", "{\"order\": 7}");
  efx_tick(f);
  efx_expect(f, id, "in_progress", "a", "complete", "b", "pending", "c", "pending", "d",
             "pending", NULL);
  json_t *t = efx_task(f, id);
  assert_int_equal(step_int(t, "d", "parents_remaining"), 2);
  json_decref(t);
  /* One pass claims both branches in one claim. */
  efx_tick(f);
  efx_expect(f, id, "in_progress", "b", "complete", "c", "complete", "d", "pending", NULL);
  assert_int_equal(efx_events(f, "step.claimed", NULL), 3);
  assert_int_equal(rec.calls, 2);
  /* a released both branches; exactly one of the branches released d. */
  int released[2] = {0, 0};
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    const char *step = json_string_value(json_object_get(e, "step"));
    json_int_t n = json_integer_value(json_object_get(e, "children_released"));
    if (strcmp(json_string_value(json_object_get(e, "type")), "step.completed") == 0)
      released[strcmp(step, "a") != 0] += (int)n;
  }
  assert_int_equal(released[0], 2);
  assert_int_equal(released[1], 1);
  efx_tick(f);
  efx_expect(f, id, "complete", "d", "complete", NULL);
  /* d saw the context and both parents' results. */
  json_t *in = json_loads(rec.input, 0, NULL);
  assert_non_null(in);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(in, "context"), "order")), 7);
  json_t *parents = json_object_get(in, "parents");
  assert_int_equal(json_object_size(parents), 2);
  static const char *const branches[] = {"b", "c"};
  for (int k = 0; k < 2; k++) {
    json_t *p = json_object_get(parents, branches[k]);
    assert_string_equal(json_string_value(json_object_get(p, "from")), branches[k]);
  }
  json_decref(in);
  free(rec.input);
  assert_int_equal(efx_events(f, "step.claimed", "d"), 1);
  assert_int_equal(efx_events(f, "task.completed", NULL), 1);
}

/* One step with 300 children: every child is released by the one parent's
 * completion, and the task completes once they all ran. */
static void a_wide_fan_out_releases_every_child(void **state) {
  efx *f = *state;
  size_t cap = 64 * 1024, len = 0;
  char *t = malloc(cap);
  assert_non_null(t);
  len += (size_t)snprintf(t + len, cap - len, "name = \"wide\"\nversion = \"1\"\n" EFX_STEP("root")
                          EFX_NOOP);
  for (int i = 0; i < 300; i++)
    len += (size_t)snprintf(t + len, cap - len,
                            "[[steps]]\nname = \"c%d\"\ndepends_on = [\"root\"]\n" EFX_NOOP, i);
  efx_template(f, t);
  free(t);
  int64_t id = efx_submit(f, "wide", "{}");
  efx_tick(f);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM steps WHERE parents_remaining = 0"
                                      " AND state = 'pending'"),
                   300);
  json_t *root_done = NULL;
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) if (strcmp(json_string_value(json_object_get(e, "type")),
                                                 "step.completed") == 0) root_done = e;
  assert_non_null(root_done);
  assert_int_equal(json_integer_value(json_object_get(root_done, "children_released")), 300);
  efx_drive(f, 10);
  json_t *task = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(task, "state")), "complete");
  json_decref(task);
}

/* The store finds a finished step's children by id: a task's steps are
 * numbered consecutively in template order, whichever connection submits
 * and whatever else is submitted between. Both templates declare a child
 * before one of its parents, so idx order is not run order. */
static void a_tasks_steps_are_numbered_in_template_order(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"diamond\"\nversion = \"1\"\n"
                  EFX_STEP("join") "depends_on = [\"left\", \"right\"]\n" EFX_NOOP
                  EFX_STEP("left") "depends_on = [\"top\"]\n" EFX_NOOP
                  EFX_STEP("top") EFX_NOOP
                  EFX_STEP("right") "depends_on = [\"top\"]\n" EFX_NOOP);
  efx_template(f, "name = \"pair\"\nversion = \"1\"\n"
                  EFX_STEP("second") "depends_on = [\"first\"]\n" EFX_NOOP
                  EFX_STEP("first") EFX_NOOP);
  tk_store *other, *mine = f->store;
  tk_err err;
  if (tk_store_open(f->url, &other, &err) != 0) fail_msg("open: %s", err.msg);
  for (int i = 0; i < 6; i++) {
    f->store = i % 2 ? other : mine;
    efx_submit(f, i % 3 ? "diamond" : "pair", "{}");
  }
  f->store = mine;
  tk_store_close(other);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM steps s WHERE s.id - s.idx <>"
                                      " (SELECT MIN(id) FROM steps o WHERE o.task_id = s.task_id)"),
                   0);
  efx_drive(f, 20);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM tasks WHERE state = 'complete'"), 6);
  /* Every join was claimed only after both its parents completed. The
   * manual clock gives them all one time, so this compares the order of
   * the transition rows. */
  assert_int_equal(efx_sql_int(f->db,
                               "SELECT COUNT(*) FROM transitions tj JOIN steps j ON j.id = tj.step_id"
                               " JOIN steps p ON p.task_id = j.task_id"
                               " JOIN transitions tp ON tp.step_id = p.id"
                               " WHERE j.name = 'join' AND tj.reason = 'claimed'"
                               " AND p.name IN ('left', 'right') AND tp.to_state = 'complete'"
                               " AND tj.id < tp.id"),
                   0);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM transitions t JOIN steps j"
                                      " ON j.id = t.step_id WHERE j.name = 'join'"
                                      " AND t.reason = 'claimed'"),
                   4);
}

static void tree_fans_in_only_after_every_leaf(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"tree\"\nversion = \"1\"\n"
                  EFX_STEP("l1") EFX_NOOP
                  EFX_STEP("l2") EFX_NOOP
                  EFX_STEP("l3")
                  "handler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"
                  EFX_STEP("l4") EFX_NOOP
                  EFX_STEP("m1") "depends_on = [\"l1\", \"l2\"]\n" EFX_NOOP
                  EFX_STEP("m2") "depends_on = [\"l3\", \"l4\"]\n" EFX_NOOP
                  EFX_STEP("root") "depends_on = [\"m1\", \"m2\"]\n" EFX_NOOP);
  int64_t id = efx_submit(f, "tree", NULL);
  efx_tick(f);
  efx_tick(f);
  assert_int_equal(efx_tick(f), EFX_T0 + 1000); /* only l3's retry is left to wait for */
  efx_expect(f, id, "in_progress", "l1", "complete", "l2", "complete", "l3", "waiting_for_retry",
             "l4", "complete", "m1", "complete", "m2", "pending", "root", "pending", NULL);
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")),
                      "waiting_for_retry");
  assert_int_equal(step_int(t, "m2", "parents_remaining"), 1);
  assert_int_equal(step_int(t, "root", "parents_remaining"), 1);
  assert_string_equal(why_reason(t, "l3"), "waiting_for_retry");
  expect_blocked_by(t, "root", "m2", "pending");
  expect_blocked_by(t, "m2", "l3", "waiting_for_retry");
  json_decref(t);
  /* Nothing runs before l3's retry time. */
  f->clock.now_ms = EFX_T0 + 999;
  efx_tick(f);
  assert_int_equal(efx_events(f, "step.claimed", NULL), 5);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "l3", "complete", "m2", "complete", "root", "complete", NULL);
  assert_int_equal(efx_events(f, "step.claimed", "root"), 1);
  assert_int_equal(efx_sql_int(f->db, "SELECT started_at FROM attempts a JOIN steps s ON"
                                      " s.id = a.step_id WHERE s.name = 'root'"),
                   EFX_T0 + 1000);
}

static void failed_branch_blocks_its_descendants_while_the_other_finishes(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"branches\"\nversion = \"1\"\n"
                  EFX_STEP("a") EFX_NOOP
                  EFX_STEP("b") "depends_on = [\"a\"]\n"
                  "handler = { kind = \"builtin\", name = \"fail\", permanent = true }\n"
                  EFX_STEP("e") "depends_on = [\"b\"]\n" EFX_NOOP
                  EFX_STEP("c") "depends_on = [\"a\"]\n"
                  "handler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"
                  EFX_STEP("d") "depends_on = [\"c\"]\n" EFX_NOOP);
  int64_t id = efx_submit(f, "branches", NULL);
  efx_tick(f);
  efx_tick(f);
  /* b failed for good, c waits for its retry: the task is not over. */
  efx_expect(f, id, "in_progress", "b", "error", "c", "waiting_for_retry", "e", "pending", NULL);
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")),
                      "blocked_by_failures");
  assert_int_equal(json_integer_value(json_object_get(t, "steps_error")), 1);
  json_decref(t);
  assert_int_equal(efx_events(f, "task.failed", NULL), 0);

  efx_drive(f, 10);
  efx_expect(f, id, "error", "a", "complete", "b", "error", "c", "complete", "d", "complete", "e",
             "pending", NULL);
  t = efx_task(f, id);
  /* The task failed when d, the last step that could run, completed. */
  assert_int_equal(json_integer_value(json_object_get(t, "finished_at")), EFX_T0 + 1000);
  expect_blocked_by(t, "e", "b", "error");
  json_decref(t);
  assert_int_equal(efx_events(f, "step.claimed", "e"), 0);
  assert_int_equal(efx_events(f, "task.failed", NULL), 1);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM transitions WHERE step_id IS NULL"
                                      " AND to_state = 'error'"),
                   1);
}

/* An order whose step "charge" (handler, max_attempts) fails for good:
 * run until nothing is scheduled; "ship", its child, never runs. */
static int64_t failed_order(efx *f, const char *handler, int max_attempts) {
  char toml[512];
  snprintf(toml, sizeof toml,
           "name = \"order\"\nversion = \"1\"\n" EFX_STEP("charge")
           "handler = %s\nretry = { max_attempts = %d }\n"
           EFX_STEP("ship") "depends_on = [\"charge\"]\n" EFX_NOOP,
           handler, max_attempts);
  efx_template(f, toml);
  int64_t id = efx_submit(f, "order", NULL);
  efx_drive(f, 10);
  efx_expect(f, id, "error", "charge", "error", "ship", "pending", NULL);
  return id;
}

static void exhaustion_errors_after_max_attempts(void **state) {
  efx *f = *state;
  int64_t id = failed_order(f, "{ kind = \"builtin\", name = \"fail\" }", 3);
  json_t *t = efx_task(f, id);
  assert_int_equal(step_int(t, "charge", "attempts"), 3);
  expect_contains(json_string_value(json_object_get(efx_step(t, "charge"), "last_error")),
                         "attempt 3");
  json_decref(t);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.claimed, 3);
  assert_int_equal(st.retried, 2);
  assert_int_equal(st.exhausted, 1);
  assert_int_equal(st.failed, 0);
  assert_int_equal(efx_events(f, "step.exhausted", "charge"), 1);
  assert_int_equal(efx_events(f, "step.retry_scheduled", "charge"), 2);
  efx_sql_expect(f->db, "1|failure|1000|computed\n2|failure|2000|computed\n"
                 "3|failure|NULL|NULL",
                 "SELECT attempt, outcome, delay_ms, delay_source FROM attempts"
                 " ORDER BY attempt");
}

static void non_retryable_failures_error_at_once(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"strict\"\nversion = \"1\"\n[retry]\nmax_attempts = 5\n"
                  EFX_STEP("permanent")
                  "handler = { kind = \"builtin\", name = \"fail\", permanent = true }\n"
                  EFX_STEP("not_retryable")
                  "handler = { kind = \"builtin\", name = \"fail\" }\n"
                  "retry = { retryable = false }\n");
  int64_t id = efx_submit(f, "strict", NULL);
  assert_int_equal(efx_drive(f, 10), 2); /* one pass runs both, the next finds nothing */
  assert_int_equal(f->clock.now_ms, EFX_T0);
  efx_expect(f, id, "error", "permanent", "error", "not_retryable", "error", NULL);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.claimed, 2);
  assert_int_equal(st.failed, 2);
  assert_int_equal(st.exhausted, 0);
  assert_int_equal(st.retried, 0);
  assert_int_equal(efx_events(f, "step.failed", NULL), 2);
  assert_int_equal(efx_events(f, "step.retry_scheduled", NULL), 0);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM attempts"), 2);
}

/* A handler that fails while *fail is set. */
static void switchable(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  int *fail = ud;
  if (*fail) {
    out->status = TK_HANDLER_RETRY;
    snprintf(out->error, sizeof out->error, "down (attempt %d)", call->attempt);
  }
}

static void manual_retry_gives_fresh_attempts(void **state) {
  efx *f = *state;
  int fail = 1;
  assert_int_equal(tk_engine_register(f->engine, "switchable", switchable, &fail, NULL), 0);
  int64_t id = failed_order(f, "{ kind = \"function\", name = \"switchable\" }", 2);
  tk_err err;
  /* Only a step in error can be retried; a refusal changes nothing. */
  char *before = efx_snapshot(f->db);
  assert_int_equal(op(f, TK__OP_RETRY, id, "ship", &err), TK_ESTATE);
  assert_int_equal(op(f, TK__OP_RETRY, id, "nosuch", &err), TK_ENOENT);
  assert_int_equal(op(f, TK__OP_RETRY, id + 1, "charge", &err), TK_ENOENT);
  efx_unchanged(f->db, before);

  f->clock.now_ms += 60000;
  int64_t retried_at = f->clock.now_ms;
  assert_int_equal(op(f, TK__OP_RETRY, id, "charge", &err), 0);
  efx_expect(f, id, "in_progress", "charge", "waiting_for_retry", NULL);
  json_t *t = efx_task(f, id);
  assert_int_equal(step_int(t, "charge", "attempts"), 0);
  assert_int_equal(step_int(t, "charge", "run_at"), retried_at);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_error")), 0);
  json_decref(t);

  fail = 0;
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "charge", "complete", "ship", "complete", NULL);
  /* The retry ran at once, as attempt 1 of a fresh budget; every claim has its row. */
  efx_sql_expect(f->db, "1|failure|0\n2|failure|1000\n1|success|61000",
                 "SELECT a.attempt, a.outcome, a.started_at - %lld FROM attempts a"
                 " JOIN steps s ON s.id = a.step_id WHERE s.name = 'charge'"
                 " ORDER BY a.id",
                 (long long)EFX_T0);
  assert_int_equal(efx_events(f, "task.failed", NULL), 1);
  assert_int_equal(efx_events(f, "task.completed", NULL), 1);
}

static void resolve_counts_as_complete_for_children(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"order\"\nversion = \"1\"\n"
                  EFX_STEP("validate") EFX_NOOP
                  EFX_STEP("charge") "depends_on = [\"validate\"]\n"
                  "handler = { kind = \"builtin\", name = \"fail\", permanent = true }\n"
                  EFX_STEP("ship") "depends_on = [\"charge\"]\n" EFX_NOOP
                  EFX_STEP("notify") "depends_on = [\"validate\"]\n" EFX_NOOP);
  int64_t id = efx_submit(f, "order", NULL);
  efx_drive(f, 10);
  efx_expect(f, id, "error", "charge", "error", "ship", "pending", "notify", "complete", NULL);
  tk_err err;
  assert_int_equal(op(f, TK__OP_RESOLVE, id, "notify", &err), TK_ESTATE);
  f->clock.now_ms += 5000;
  assert_int_equal(op(f, TK__OP_RESOLVE, id, "charge", &err), 0);
  efx_expect(f, id, "in_progress", "charge", "resolved_manually", "ship", "pending", NULL);
  json_t *t = efx_task(f, id);
  assert_int_equal(step_int(t, "ship", "parents_remaining"), 0);
  assert_int_equal(step_int(t, "ship", "run_at"), f->clock.now_ms);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_error")), 0);
  assert_string_equal(why_reason(t, "charge"), "done");
  json_decref(t);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "ship", "complete", NULL);
  t = efx_task(f, id);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_done")), 4);
  json_decref(t);
  /* charge never ran again. */
  assert_int_equal(efx_events(f, "step.claimed", "charge"), 1);
}

static void resolve_a_blocked_step_releases_its_children(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"skip\"\nversion = \"1\"\n"
                  EFX_STEP("slow") "handler = { kind = \"builtin\", name = \"fail\" }\n"
                  EFX_STEP("after") "depends_on = [\"slow\"]\n" EFX_NOOP);
  int64_t id = efx_submit(f, "skip", NULL);
  efx_tick(f);
  efx_expect(f, id, "in_progress", "slow", "waiting_for_retry", NULL);
  tk_err err;
  assert_int_equal(op(f, TK__OP_RESOLVE, id, "slow", &err), 0);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "slow", "resolved_manually", "after", "complete", NULL);
  assert_int_equal(efx_events(f, "step.claimed", "slow"), 1);
}

static void cancel_stops_every_unfinished_step(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"cancel\"\nversion = \"1\"\n"
                  EFX_STEP("a") "handler = { kind = \"builtin\", name = \"fail\" }\n"
                  EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP
                  EFX_STEP("c") EFX_NOOP);
  int64_t id = efx_submit(f, "cancel", NULL);
  efx_tick(f);
  efx_expect(f, id, "in_progress", "a", "waiting_for_retry", "b", "pending", "c", "complete", NULL);
  tk_err err;
  assert_int_equal(op(f, TK__OP_CANCEL, id, NULL, &err), 0);
  efx_expect(f, id, "cancelled", "a", "cancelled", "b", "cancelled", "c", "complete", NULL);
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")), "cancelled");
  json_decref(t);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM transitions WHERE to_state ="
                                      " 'cancelled' AND step_id IS NOT NULL"),
                   2);
  /* Nothing of a cancelled task runs, even once its retry time has come. */
  f->clock.now_ms += 3600000;
  int64_t claimed = tk_engine_stats_get(f->engine).claimed;
  assert_int_equal(efx_tick(f), INT64_MAX);
  assert_int_equal(tk_engine_stats_get(f->engine).claimed, claimed);
  char *before = efx_snapshot(f->db);
  assert_int_equal(op(f, TK__OP_CANCEL, id, NULL, &err), TK_ESTATE);
  assert_int_equal(op(f, TK__OP_RESOLVE, id, "a", &err), TK_ESTATE);
  assert_int_equal(op(f, TK__OP_RETRY, id, "a", &err), TK_ESTATE);
  efx_unchanged(f->db, before);
}

/* Each test gets a fresh store and engine. */
#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, efx_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(linear_chain_runs_one_step_per_pass),
      TEST(diamond_claims_both_branches_together_and_fans_in),
      TEST(a_wide_fan_out_releases_every_child),
      TEST(a_tasks_steps_are_numbered_in_template_order),
      TEST(tree_fans_in_only_after_every_leaf),
      TEST(failed_branch_blocks_its_descendants_while_the_other_finishes),
      TEST(exhaustion_errors_after_max_attempts),
      TEST(non_retryable_failures_error_at_once),
      TEST(manual_retry_gives_fresh_attempts),
      TEST(resolve_counts_as_complete_for_children),
      TEST(resolve_a_blocked_step_releases_its_children),
      TEST(cancel_stops_every_unfinished_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
