/* Batch steps in the engine on a real SQLite store (DESIGN §9): items are
 * stored with the task, each call offers only pending items, per-item
 * attempts are exact, in-call retries sleep the step's backoff on the
 * injected clock, an exhausted in-call budget is a retry with source
 * "in_call", poison items give up once with an event and a log line, and
 * bad templates and submissions are refused with nothing stored. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "store/store.h" /* the operator action of a second orchestrator */

/* No jitter, base 100ms doubling: in-call sleeps of 100, 200, 400 ms. */
static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms", NULL};

/* Template NAME: one batch step "s" with `handler` and `batch` (inline
 * TOML tables) and max_attempts. */
static void batch_template(efx *f, const char *name, const char *handler, const char *batch,
                           int max_attempts) {
  char toml[1024];
  snprintf(toml, sizeof toml,
           "name = \"%s\"\nversion = \"1\"\n" EFX_STEP("s") "handler = %s\nbatch = %s\n"
           "retry = { max_attempts = %d }\n",
           name, handler, batch, max_attempts);
  efx_template(f, toml);
}

/* Submit a task of `name` with n items. */
static int64_t submit_items(efx *f, const char *name, int n) {
  char *ctx = efx_items_context("item", n);
  int64_t id = efx_submit(f, name, ctx);
  free(ctx);
  return id;
}

/* The step's results object (decref'd by the caller). */
static json_t *step_results(efx *f, int64_t id) {
  json_t *t = efx_task(f, id);
  json_t *r = json_incref(json_object_get(efx_step(t, "s"), "results"));
  json_decref(t);
  return r;
}

static void expect_counts(efx *f, int64_t id, int items, int acked, int gave_up) {
  json_t *r = step_results(f, id);
  assert_int_equal(json_integer_value(json_object_get(r, "items")), items);
  assert_int_equal(json_integer_value(json_object_get(r, "acked")), acked);
  assert_int_equal(json_integer_value(json_object_get(r, "gave_up")), gave_up);
  json_decref(r);
}

/* The n-th event of `type` (from 0), borrowed. */
static json_t *event(efx *f, const char *type, int n) {
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0 && n-- == 0) return e;
  }
  fail_msg("no event %s", type);
  return NULL;
}

#define REJECT_10_TWICE \
  "{ kind = \"builtin\", name = \"batch\", reject_every = 10, reject_times = 2 }"

static void thousand_items_rejected_twice_end_acked_within_one_attempt(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b", REJECT_10_TWICE,
                 "{ items_from = \"items\", max_in_call_retries = 2, max_item_attempts = 5 }", 3);
  int64_t id = submit_items(f, "b", 1000);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM items WHERE state = 'pending'"),
                   1000);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  expect_counts(f, id, 1000, 1000, 0);
  /* Three calls in one attempt, sleeping 100 ms and 200 ms between them. */
  assert_int_equal(f->clock.now_ms, EFX_T0 + 300);
  assert_int_equal(f->clock.sleeps, 2);
  efx_sql_expect(f->db, "1|success", "SELECT attempt, outcome FROM attempts");
  /* Every 10th item was delivered three times, every other one once. */
  efx_sql_expect(f->db, "acked|1|900\nacked|3|100",
                 "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts");
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM items WHERE attempts !="
                                      " CASE WHEN (seq + 1) %% 10 = 0 THEN 3 ELSE 1 END"),
                   0);
  efx_sql_expect(f->db, "item-9|builtin batch: rejected on purpose (reject_every/reject_times)",
                 "SELECT key, last_error FROM items WHERE last_error IS NOT NULL LIMIT 1");
  assert_int_equal(efx_events(f, "item.gave_up", NULL), 0);
}

static void with_no_in_call_retries_each_attempt_is_one_call(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b", REJECT_10_TWICE,
                 "{ items_from = \"items\", max_in_call_retries = 0, max_item_attempts = 5 }", 5);
  int64_t id = submit_items(f, "b", 1000);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  expect_counts(f, id, 1000, 1000, 0);
  /* The budget ends each attempt with the delay after its one call. */
  efx_sql_expect(f->db,
                 "1|failure|0|100|in_call|100|100 of 1000 items still pending after 1 call"
                 " (max_in_call_retries 0)\n"
                 "2|failure|100|100|in_call|200|100 of 1000 items still pending after 1 call"
                 " (max_in_call_retries 0)\n"
                 "3|success|200|NULL|NULL|NULL|NULL",
                 "SELECT attempt, outcome, started_at - %1$lld, delay_ms, delay_source,"
                 " next_run_at - %1$lld, error FROM attempts ORDER BY id",
                 (long long)EFX_T0);
  assert_int_equal(f->clock.sleeps, 0);
  json_t *e = event(f, "step.retry_scheduled", 1);
  assert_string_equal(json_string_value(json_object_get(e, "source")), "in_call");
  assert_int_equal(json_integer_value(json_object_get(e, "delay_ms")), 100);
  /* Acked items were never sent again across claims. */
  efx_sql_expect(f->db, "acked|1|900\nacked|3|100",
                 "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts");
}

/* A C batch handler that logs what it was offered and acks an item from
 * its `ack_on`-th delivery (items with "slow" in their key: the third). */
typedef struct recorder {
  char log[1024];
  int calls;
} recorder;

static void deliver(const tk_batch_call *call, tk_item_report *reports, tk_handler_result *out,
                    void *ud) {
  recorder *r = ud;
  r->calls++;
  size_t len = strlen(r->log);
  len += (size_t)snprintf(r->log + len, sizeof r->log - len, "%s%d:", r->calls > 1 ? " " : "",
                          call->call);
  for (size_t i = 0; i < call->n; i++) {
    const tk_batch_item *it = &call->items[i];
    len += (size_t)snprintf(r->log + len, sizeof r->log - len, "%s%s#%lld@%d%s", i ? "," : "",
                            it->key, (long long)it->index, it->attempt, it->data ? "+" : "");
    int slow = strstr(it->key, "slow") != NULL;
    reports[i] = (tk_item_report){slow && it->attempt < 3 ? TK_ITEM_REJECTED : TK_ITEM_ACKED,
                                  slow ? "not yet" : NULL};
  }
  expect_contains(call->step->input, "\"context\"");
  out->retry_after_ms = -1;
}

static void a_function_handler_is_offered_only_pending_items(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  recorder r = {.calls = 0};
  assert_int_equal(tk_engine_register_batch(f->engine, "deliver", deliver, &r, NULL), 0);
  batch_template(f, "b", "{ kind = \"function\", name = \"deliver\" }",
                 "{ items_from = \"orders\", max_in_call_retries = 1 }", 3);
  int64_t id = efx_submit(f, "b", "{\"orders\": [\"a\", {\"key\": \"slow-b\", \"qty\": 2},"
                                  " \"c\", \"slow-d\"]}");
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  /* Attempt 1: two calls; attempt 2 (after the budget): the last one. */
  assert_string_equal(r.log, "1:a#0@1,slow-b#1@1+,c#2@1,slow-d#3@1 2:slow-b#1@2+,slow-d#3@2 "
                             "1:slow-b#1@3+,slow-d#3@3");
  efx_sql_expect(f->db,
                 "a|1|NULL\nslow-b|3|{\"key\":\"slow-b\",\"qty\":2}\nc|1|NULL\nslow-d|3|NULL",
                 "SELECT key, attempts, data FROM items ORDER BY seq");
  expect_counts(f, id, 4, 4, 0);
  /* A batch handler is not a plain one, and the other way round. */
  tk_err err;
  assert_int_equal(tk_engine_register(f->engine, "deliver", NULL, NULL, &err), TK_EEXIST);
}

static void a_poison_item_gives_up_once_and_the_step_completes(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b", "{ kind = \"builtin\", name = \"batch\", poison = [\"item-7\"] }",
                 "{ items_from = \"items\", max_in_call_retries = 5, max_item_attempts = 3 }", 3);
  int64_t id = submit_items(f, "b", 20);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  expect_counts(f, id, 20, 19, 1);
  /* Rejected on calls 1, 2 and 3, then never offered again. */
  assert_int_equal(f->clock.now_ms, EFX_T0 + 300);
  efx_sql_expect(f->db, "item-7|gave_up|3|builtin batch: poison item, always rejected",
                 "SELECT key, state, attempts, last_error FROM items WHERE state != 'acked'");
  assert_int_equal(efx_events(f, "item.gave_up", "s"), 1);
  json_t *e = event(f, "item.gave_up", 0);
  assert_string_equal(json_string_value(json_object_get(e, "item")), "item-7");
  assert_int_equal(json_integer_value(json_object_get(e, "item_attempts")), 3);
  assert_int_equal(json_integer_value(json_object_get(e, "attempt")), 1);
  assert_string_equal(json_string_value(json_object_get(e, "error")),
                      "builtin batch: poison item, always rejected");
  assert_true(efx_logs(f, "step s: item \"item-7\" gave up after 3 attempts: builtin batch: poison"));
  /* show reports the items: counts by state, and the one that gave up. */
  json_t *t = efx_task(f, id);
  json_t *items = json_object_get(efx_step(t, "s"), "items");
  json_t *want = json_pack("{s:i, s:i, s:i, s:i, s:[{s:s, s:i, s:s}]}", "total", 20, "pending", 0,
                           "acked", 19, "gave_up", 1, "given_up", "key", "item-7", "attempts", 3,
                           "last_error", "builtin batch: poison item, always rejected");
  if (!json_equal(items, want)) {
    char *got = json_dumps(items, JSON_SORT_KEYS);
    fail_msg("show's items: %s", got ? got : "(none)");
  }
  json_decref(want);
  json_decref(t);
}

/* show lists the first 100 items that gave up, in submission order, and
 * counts them all. */
static void show_lists_the_first_hundred_items_that_gave_up(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b",
                 "{ kind = \"builtin\", name = \"batch\", reject_every = 1, reject_times = 9 }",
                 "{ items_from = \"items\", max_in_call_retries = 0, max_item_attempts = 1 }", 3);
  int64_t id = submit_items(f, "b", 120);
  efx_drive(f, 10);
  json_t *t = efx_task(f, id);
  json_t *items = json_object_get(efx_step(t, "s"), "items");
  assert_int_equal(json_integer_value(json_object_get(items, "total")), 120);
  assert_int_equal(json_integer_value(json_object_get(items, "gave_up")), 120);
  json_t *list = json_object_get(items, "given_up");
  assert_int_equal(json_array_size(list), 100);
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "key")), "item-0");
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 99), "key")),
                      "item-99");
  json_decref(t);
}

static void a_poison_item_gives_up_across_claims(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b", "{ kind = \"builtin\", name = \"batch\", poison = [\"item-2\"] }",
                 "{ items_from = \"items\", max_in_call_retries = 0, max_item_attempts = 2 }", 5);
  int64_t id = submit_items(f, "b", 5);
  efx_drive(f, 10);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  efx_sql_expect(f->db, "1|failure|in_call\n2|success|NULL",
                 "SELECT attempt, outcome, delay_source FROM attempts ORDER BY id");
  efx_sql_expect(f->db, "item-0|acked|1\nitem-1|acked|1\nitem-2|gave_up|2\nitem-3|acked|1\n"
                        "item-4|acked|1",
                 "SELECT key, state, attempts FROM items ORDER BY seq");
  assert_int_equal(efx_events(f, "item.gave_up", NULL), 1);
  assert_int_equal(json_integer_value(json_object_get(event(f, "item.gave_up", 0), "attempt")), 2);
}

/* A task of 10 items whose poison item-7 gives up after `max_item_attempts`
 * under fail_if_any_gave_up, driven until the step is an error. */
static int64_t poisoned_task_in_error(efx *f, int max_item_attempts) {
  char batch[128];
  snprintf(batch, sizeof batch,
           "{ items_from = \"items\", max_item_attempts = %d, fail_if_any_gave_up = true }",
           max_item_attempts);
  batch_template(f, "b", "{ kind = \"builtin\", name = \"batch\", poison = [\"item-7\"] }", batch,
                 3);
  int64_t id = submit_items(f, "b", 10);
  efx_drive(f, 10);
  efx_expect(f, id, "error", "s", "error", NULL);
  return id;
}

static void fail_if_any_gave_up_makes_the_step_an_error(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  poisoned_task_in_error(f, 1);
  efx_sql_expect(f->db,
                 "1|failure|1 of 10 items gave up (fail_if_any_gave_up); first \"item-7\" after 1 "
                 "attempts: builtin batch: poison item, always rejected",
                 "SELECT attempt, outcome, error FROM attempts");
  efx_sql_expect(f->db, "acked|9\ngave_up|1",
                 "SELECT state, COUNT(*) FROM items GROUP BY state");
  assert_int_equal(efx_events(f, "item.gave_up", NULL), 1);
  assert_int_equal(efx_events(f, "task.failed", NULL), 1);
}

/* An operator's retry gives the step fresh attempts and its given-up items
 * a fresh budget; acked items are still never re-sent. */
static void an_operator_retry_re_offers_items_that_gave_up(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  int64_t id = poisoned_task_in_error(f, 2);
  tk__effects fx;
  tk_err err;
  assert_int_equal(f->store->ops->operator(f->store, TK__OP_RETRY, id, "s", f->clock.now_ms, &fx,
                                           &err),
                   0);
  efx_sql_expect(f->db, "item-7|pending|0",
                 "SELECT key, state, attempts FROM items WHERE key = 'item-7'");
  efx_drive(f, 10);
  efx_expect(f, id, "error", "s", "error", NULL);
  /* Only the poison item was offered again, and it gave up again. */
  efx_sql_expect(f->db, "acked|9|1\ngave_up|1|2",
                 "SELECT state, COUNT(*), MAX(attempts) FROM items GROUP BY state");
  assert_int_equal(efx_events(f, "item.gave_up", NULL), 2);
}

static void the_steps_attempts_bound_the_retries_of_pending_items(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b",
                 "{ kind = \"builtin\", name = \"batch\", reject_every = 2, reject_times = 9 }",
                 "{ items_from = \"items\", max_in_call_retries = 1, max_item_attempts = 9 }", 2);
  int64_t id = submit_items(f, "b", 4);
  efx_drive(f, 10);
  efx_expect(f, id, "error", "s", "error", NULL);
  assert_int_equal(efx_events(f, "step.exhausted", "s"), 1);
  /* Two attempts of two calls: the rejected items were offered 4 times and
   * stay pending; the acked ones once. */
  efx_sql_expect(f->db, "item-0|acked|1\nitem-1|pending|4\nitem-2|acked|1\nitem-3|pending|4",
                 "SELECT key, state, attempts FROM items ORDER BY seq");
}

static void defaults_come_from_the_batch_configuration(void **state) {
  static const char *const conf[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "batch.max_in_call_retries=1", "batch.max_item_attempts=2",
                                     NULL};
  efx *f = *state = efx_new(conf, "orch-1");
  batch_template(f, "b", "{ kind = \"builtin\", name = \"batch\", poison = [\"item-1\"] }",
                 "{ items_from = \"items\" }", 3);
  submit_items(f, "b", 3);
  efx_sql_expect(f->db, "1|2|0", "SELECT max_in_call_retries, max_item_attempts,"
                                 " fail_if_any_gave_up FROM batch_steps");
  efx_drive(f, 10);
  /* Two calls within one attempt, and item-1 gave up at its second. */
  assert_int_equal(f->clock.sleeps, 1);
  efx_sql_expect(f->db, "item-1|gave_up|2", "SELECT key, state, attempts FROM items"
                                            " WHERE state != 'acked'");
}

/* On its first call, a second orchestrator cancels the task: the claim no
 * longer holds the step, so the acks of that call are refused and no second
 * call is made. */
typedef struct cancel_once {
  efx *f;
  tk_store *other;
  int64_t task;
  int calls;
} cancel_once;

static void cancel_then_reject(const tk_batch_call *call, tk_item_report *reports,
                               tk_handler_result *out, void *ud) {
  cancel_once *c = ud;
  c->calls++;
  tk__effects fx;
  tk_err err;
  if (c->calls == 1 && c->other->ops->operator(c->other, TK__OP_CANCEL, c->task, NULL,
                                               c->f->clock.now_ms, &fx, &err) != 0)
    fail_msg("cancel: %s", err.msg);
  for (size_t i = 0; i < call->n; i++)
    reports[i] = (tk_item_report){i == 0 ? TK_ITEM_REJECTED : TK_ITEM_ACKED, "later"};
  (void)out;
}

static void writes_between_calls_are_fenced_by_the_claim(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  cancel_once c = {.f = f};
  tk_err err;
  if (tk_store_open(f->url, &c.other, &err) != 0) fail_msg("open: %s", err.msg);
  assert_int_equal(tk_engine_register_batch(f->engine, "x", cancel_then_reject, &c, NULL), 0);
  batch_template(f, "b", "{ kind = \"function\", name = \"x\" }",
                 "{ items_from = \"items\", max_in_call_retries = 3 }", 3);
  c.task = submit_items(f, "b", 5);
  efx_drive(f, 10);
  assert_int_equal(c.calls, 1);
  efx_expect(f, c.task, "cancelled", "s", "cancelled", NULL);
  efx_sql_expect(f->db, "pending|0|5", "SELECT state, attempts, COUNT(*) FROM items GROUP BY 1, 2");
  assert_int_equal(efx_events(f, "step.fenced_out", "s"), 1);
  tk_store_close(c.other);
}

/* ---- bad templates and submissions --------------------------------------- */

static void bad_batch_templates_name_the_place(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  static const struct { const char *step, *want; } cases[] = {
      {"handler = { kind = \"builtin\", name = \"batch\" }\n",
       ":5:38: steps[1].handler.name: the builtin \"batch\" runs only in a batch step: add "
       "batch = { items_from = \"KEY\" }"},
      {"handler = { kind = \"command\", argv = [\"true\"] }\nbatch = { items_from = \"i\" }\n",
       ":6:9: steps[1].batch: a command handler does not take batches yet: use the builtin "
       "\"batch\" or a function handler (tk_engine_register_batch)"},
      {"handler = { kind = \"builtin\", name = \"noop\" }\nbatch = { items_from = \"i\" }\n",
       ":6:9: steps[1].batch: the builtin \"noop\" does not take batches: use the builtin "
       "\"batch\" or a function handler (tk_engine_register_batch)"},
      {"handler = { kind = \"builtin\", name = \"batch\" }\nbatch = { max_item_attempts = 2 }\n",
       ":6:9: steps[1].batch.items_from: missing: a batch step needs items_from = \"KEY\", the "
       "context key whose array holds its items"},
      {"handler = { kind = \"builtin\", name = \"batch\" }\n"
       "batch = { items_from = \"i\", max_item_attempt = 2 }\n",
       ":6:29: unknown key \"steps[1].batch.max_item_attempt\" (did you mean "
       "\"max_item_attempts\"?)"},
      {"handler = { kind = \"builtin\", name = \"batch\" }\n"
       "batch = { items_from = \"i\", max_in_call_retries = 1001 }\n",
       ":6:51: steps[1].batch.max_in_call_retries = 1001: must be an integer from 0 to 1000"},
      {"handler = { kind = \"builtin\", name = \"batch\", reject_every = 0 }\n"
       "batch = { items_from = \"i\" }\n",
       ":5:62: steps[1].handler.reject_every = 0: must be an integer from 1 to 2147483647"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char toml[512], path[512], name[32];
    snprintf(toml, sizeof toml, "name = \"bad\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n%s",
             cases[i].step);
    snprintf(name, sizeof name, "bad%zu.toml", i);
    efx_write(f->dir, name, toml, path, sizeof path);
    char *before = efx_snapshot(f->db);
    tk_err err;
    assert_int_equal(tk_template_add_file(f->store, f->cfg, path, EFX_T0, NULL, &err), TK_ECONFIG);
    char want[512];
    snprintf(want, sizeof want, "%s%s", path, cases[i].want);
    assert_string_equal(err.msg, want);
    efx_unchanged(f->db, before);
  }
}

static void bad_submissions_store_nothing(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  batch_template(f, "b", "{ kind = \"builtin\", name = \"batch\" }", "{ items_from = \"items\" }",
                 3);
  static const struct { const char *context, *want; } cases[] = {
      {"{}", "context: batch step \"s\" takes its items from context.items, which is missing "
             "(expected an array such as [\"a\", \"b\"])"},
      {"{\"items\": {\"a\": 1}}", "context.items: expected an array of item keys or {\"key\": "
                                   "...} objects for batch step \"s\", got an object"},
      {"{\"items\": [\"a\", 3]}", "context.items[1]: expected a non-empty string key or an "
                                   "object with a \"key\", got a number"},
      {"{\"items\": [\"\"]}", "context.items[0]: expected a non-empty string key or an object "
                               "with a \"key\", got an empty string"},
      {"{\"items\": [{\"id\": 1}]}", "context.items[0].key: expected a non-empty string, got "
                                      "nothing"},
      {"{\"items\": [\"a\", \"b\", \"c\", \"b\", {\"key\": \"a\"}]}",
       "context.items[3]: duplicate item key \"b\" (first at [1]): item keys must be unique "
       "within a step"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *before = efx_snapshot(f->db);
    tk_submit_request req = {.template_name = "b", .context_json = cases[i].context};
    int64_t id;
    int existed;
    tk_err err;
    assert_int_equal(tk_task_submit(f->store, f->cfg, &req, EFX_T0, &id, &existed, &err),
                     TK_EINVAL);
    assert_string_equal(err.msg, cases[i].want);
    efx_unchanged(f->db, before);
  }
  /* An empty batch completes at once. */
  int64_t id = efx_submit(f, "b", "{\"items\": []}");
  efx_drive(f, 5);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  expect_counts(f, id, 0, 0, 0);
}

/* ---- on worker threads ---------------------------------------------------- */

static void workers_hand_item_writes_to_the_engine_thread(void **state) {
  /* Real time here (worker threads and the manual clock do not mix), with
   * 1 ms delays; nothing is timed. */
  static const char *const fast[] = {"backoff.jitter=none", "backoff.base=1ms", NULL};
  efx *f = *state = efx_new(fast, "orch-1");
  batch_template(f, "b", REJECT_10_TWICE,
                 "{ items_from = \"items\", max_in_call_retries = 2, max_item_attempts = 5 }", 3);
  int64_t ids[4];
  for (int i = 0; i < 4; i++) ids[i] = submit_items(f, "b", 1000);
  efx_run_workers(f, "orch-w", 3);
  for (int i = 0; i < 4; i++) expect_counts(f, ids[i], 1000, 1000, 0);
  efx_sql_expect(f->db, "acked|1|3600\nacked|3|400",
                 "SELECT state, attempts, COUNT(*) FROM items GROUP BY state, attempts");
  efx_sql_expect(f->db, "4", "SELECT COUNT(*) FROM attempts WHERE outcome = 'success'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(thousand_items_rejected_twice_end_acked_within_one_attempt,
                                efx_teardown),
      cmocka_unit_test_teardown(with_no_in_call_retries_each_attempt_is_one_call, efx_teardown),
      cmocka_unit_test_teardown(a_function_handler_is_offered_only_pending_items, efx_teardown),
      cmocka_unit_test_teardown(a_poison_item_gives_up_once_and_the_step_completes, efx_teardown),
      cmocka_unit_test_teardown(a_poison_item_gives_up_across_claims, efx_teardown),
      cmocka_unit_test_teardown(show_lists_the_first_hundred_items_that_gave_up, efx_teardown),
      cmocka_unit_test_teardown(fail_if_any_gave_up_makes_the_step_an_error, efx_teardown),
      cmocka_unit_test_teardown(an_operator_retry_re_offers_items_that_gave_up, efx_teardown),
      cmocka_unit_test_teardown(the_steps_attempts_bound_the_retries_of_pending_items,
                                efx_teardown),
      cmocka_unit_test_teardown(defaults_come_from_the_batch_configuration, efx_teardown),
      cmocka_unit_test_teardown(writes_between_calls_are_fenced_by_the_claim, efx_teardown),
      cmocka_unit_test_teardown(bad_batch_templates_name_the_place, efx_teardown),
      cmocka_unit_test_teardown(bad_submissions_store_nothing, efx_teardown),
      cmocka_unit_test_teardown(workers_hand_item_writes_to_the_engine_thread, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
