/* The lists over the whole store (include/tasker/query.h) on SQLite, with
 * the engine running tasks on the manual clock: time arguments, filter and
 * cursor errors, the JSON of task and step pages (docs/api.md), counts,
 * bulk actions (counted, refused whole above the maximum, each action),
 * and activity buckets with exact numbers. The store ops behind them are
 * the conformance suite's (tests/store/test_conformance.c), on both
 * backends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/query.h>

#include "common/engine_fixture.h"

static const char *const plain[] = {"backoff.jitter=none", NULL};
/* Retries after 1 s, then 2 s. */
static const char *const timed[] = {"backoff.profiles.x.schedule=[\"1s\", \"2s\"]",
                                    "backoff.jitter=none", NULL};

#define FAIL_FOR_GOOD "{ kind = \"builtin\", name = \"fail\", times = 100, permanent = true }"
#define FAIL_ALWAYS "{ kind = \"builtin\", name = \"fail\", times = 100 }"

/* Parse JSON text (freeing it); fails the test when it is not JSON. */
static json_t *parsed(char *text) {
  json_error_t e;
  json_t *v = json_loads(text, 0, &e);
  if (v == NULL) fail_msg("not JSON (%s): %s", e.text, text);
  free(text);
  return v;
}

/* A page of tasks as JSON; fails on an error. */
static json_t *tasks_page(efx *f, const tk_task_filter *flt, const char *cursor, int limit) {
  char *text;
  tk_err err;
  if (tk_tasks_json(f->store, flt, cursor, limit, &text, &err) != 0)
    fail_msg("tk_tasks_json: %s", err.msg);
  return parsed(text);
}

static json_int_t num(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}
static const char *str(json_t *o, const char *k) {
  return json_string_value(json_object_get(o, k));
}

/* Assert rc is TK_EINVAL with a message containing each of the strings
 * that follow (NULL-terminated). */
static void expect_einval(int rc, const tk_err *err, ...) {
  if (rc != TK_EINVAL) fail_msg("got %s (%s), expected TK_EINVAL", tk_err_name(rc), err->msg);
  va_list ap;
  va_start(ap, err);
  const char *s;
  while ((s = va_arg(ap, const char *)) != NULL)
    if (strstr(err->msg, s) == NULL) fail_msg("\"%s\" does not say \"%s\"", err->msg, s);
  va_end(ap);
}

/* ---- Time arguments ---- */

static void time_args(void **state) {
  (void)state;
  const int64_t now = EFX_T0 + 7200000; /* 2026-01-01T02:00:00Z */
  int64_t ms = 0;
  tk_err err;
  assert_int_equal(tk_time_arg_parse("90s", now, &ms, &err), 0);
  assert_int_equal(ms, now - 90000);
  assert_int_equal(tk_time_arg_parse("1h30m", now, &ms, &err), 0);
  assert_int_equal(ms, now - 5400000);
  assert_int_equal(tk_time_arg_parse("2026-01-01T00:00:00Z", now, &ms, &err), 0);
  assert_int_equal(ms, EFX_T0);
  assert_int_equal(tk_time_arg_parse("2026-01-01T01:00:00+01:00", now, &ms, &err), 0);
  assert_int_equal(ms, EFX_T0);
  assert_int_equal(tk_time_arg_parse("2025-12-31t19:30:00.25-04:30", now, &ms, &err), 0);
  assert_int_equal(ms, EFX_T0 + 250);
  assert_int_equal(tk_time_arg_parse("2024-02-29 12:00:00Z", now, &ms, &err), 0);
  ms = 42;
  const char *bad_dates[] = {"2026-01-01T00:00:00",      "2026-13-01T00:00:00Z",
                             "2025-02-29T00:00:00Z",     "2026-01-01T24:00:00Z",
                             "2026-01-01T00:00:00+1:00", "2026-01-01T00:00:00Zjunk"};
  for (size_t i = 0; i < sizeof bad_dates / sizeof bad_dates[0]; i++) {
    expect_einval(tk_time_arg_parse(bad_dates[i], now, &ms, &err), &err, bad_dates[i], "RFC 3339",
                  "offset or Z", NULL);
    assert_int_equal(ms, 42);
  }
  expect_einval(tk_time_arg_parse("yesterday", now, &ms, &err), &err, "\"yesterday\"", "90s",
                "RFC 3339", NULL);
  expect_einval(tk_time_arg_parse("", now, &ms, &err), &err, "duration", NULL);
  expect_einval(tk_time_arg_parse(NULL, now, &ms, &err), &err, "duration", NULL);
  expect_einval(tk_time_arg_parse("-5m", now, &ms, &err), &err, "-5m", NULL);
  assert_int_equal(ms, 42);
}

/* ---- Filters and cursors ---- */

static void filter_errors(void **state) {
  efx *f = *state = efx_new(plain, "orch-1");
  tk_err err;
  tk_task_filter ok = {.state = "error", .template_name = "ops/etl", .error_text = "%_"};
  assert_int_equal(tk_task_filter_check(&ok, &err), 0);
  tk_task_filter none = {0};
  assert_int_equal(tk_task_filter_check(&none, &err), 0);
  tk_task_filter st = {.state = "failed"};
  expect_einval(tk_task_filter_check(&st, &err), &err, "state \"failed\"",
                "pending, in_progress, complete, error, cancelled", NULL);
  const char *bad_names[] = {"a/b/c", "/etl", "ops/"};
  for (size_t i = 0; i < 3; i++) {
    tk_task_filter t = {.template_name = bad_names[i]};
    expect_einval(tk_task_filter_check(&t, &err), &err, bad_names[i], "namespace/name", NULL);
  }
  tk_task_filter old = {.created_since = -1};
  expect_einval(tk_task_filter_check(&old, &err), &err, "created_since", NULL);

  /* Every list checks its filter, its cursor and its limit, and a
   * template that does not exist matches nothing. */
  char *json = (char *)1;
  expect_einval(tk_tasks_json(f->store, &st, NULL, 10, &json, &err), &err, "failed", NULL);
  assert_null(json);
  int64_t n = -1;
  expect_einval(tk_tasks_count(f->store, &st, &n, &err), &err, "failed", NULL);
  expect_einval(tk_steps_json(f->store, "error", &st, NULL, 10, &json, &err), &err, "failed", NULL);
  expect_einval(tk_steps_json(f->store, "broken", NULL, NULL, 10, &json, &err), &err,
                "step state \"broken\"", "waiting_for_retry", "resolved_manually", NULL);
  const char *bad_cursors[] = {"abc", "-1", "0", "12x", " 12", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad_cursors / sizeof bad_cursors[0]; i++) {
    expect_einval(tk_tasks_json(f->store, NULL, bad_cursors[i], 10, &json, &err), &err, "cursor",
                  "next_cursor", NULL);
    expect_einval(tk_steps_json(f->store, "error", NULL, bad_cursors[i], 10, &json, &err), &err,
                  "cursor", NULL);
  }
  expect_einval(tk_tasks_json(f->store, NULL, NULL, 0, &json, &err), &err, "limit 0", "1 to 1000",
                NULL);
  expect_einval(tk_tasks_json(f->store, NULL, NULL, TK_PAGE_MAX + 1, &json, &err), &err,
                "limit 1001", NULL);
  efx_one_step(f, "etl", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  efx_submit(f, "etl", NULL);
  tk_task_filter missing = {.template_name = "nothing"};
  json_t *page = tasks_page(f, &missing, NULL, 10);
  assert_int_equal(json_array_size(json_object_get(page, "tasks")), 0);
  assert_true(json_is_null(json_object_get(page, "next_cursor")));
  json_decref(page);
  assert_int_equal(tk_tasks_count(f->store, &missing, &n, &err), 0);
  assert_int_equal(n, 0);
}

/* ---- Task and step pages ---- */

/* Five tasks: two of "bad" fail for good (one exhausts its attempts), one
 * of "good" completes, one of "slow" waits for a retry, one of "good"
 * stays pending (submitted after the run). */
static void five_tasks(efx *f, int64_t id[5]) {
  efx_one_step(f, "bad", FAIL_ALWAYS, "{ max_attempts = 1 }");
  efx_one_step(f, "perm", FAIL_FOR_GOOD, "{ max_attempts = 3 }");
  efx_one_step(f, "good", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  efx_one_step(f, "slow", FAIL_ALWAYS, "{ max_attempts = 3, backoff = \"x\" }");
  id[0] = efx_submit(f, "bad", NULL);
  id[1] = efx_submit(f, "perm", NULL);
  id[2] = efx_submit(f, "good", NULL);
  id[3] = efx_submit(f, "slow", NULL);
  efx_tick(f);
  f->clock.now_ms = EFX_T0 + 10;
  id[4] = efx_submit(f, "good", NULL);
}

static void task_pages(void **state) {
  efx *f = *state = efx_new(timed, "orch-1");
  int64_t id[5];
  five_tasks(f, id);
  json_t *page = tasks_page(f, NULL, NULL, 2);
  json_t *tasks = json_object_get(page, "tasks");
  assert_int_equal(json_array_size(tasks), 2);
  json_t *pending = json_array_get(tasks, 0), *slow = json_array_get(tasks, 1);
  assert_int_equal(num(pending, "id"), id[4]);
  assert_string_equal(str(pending, "state"), "pending");
  assert_int_equal(num(pending, "created_at"), EFX_T0 + 10);
  assert_true(json_is_null(json_object_get(pending, "finished_at")));
  assert_true(json_is_null(json_object_get(pending, "last_error")));
  assert_true(json_is_null(json_object_get(pending, "identity")));
  assert_int_equal(num(slow, "id"), id[3]);
  assert_string_equal(str(slow, "state"), "in_progress");
  assert_int_equal(num(slow, "next_run_at"), EFX_T0 + 1000);
  assert_string_equal(str(json_object_get(slow, "template"), "name"), "slow");
  assert_string_equal(str(json_object_get(slow, "template"), "namespace"), "default");
  assert_string_equal(str(json_object_get(slow, "template"), "version"), "1");
  assert_int_equal(num(slow, "steps_total"), 1);
  assert_int_equal(num(slow, "steps_done"), 0);
  assert_int_equal(num(slow, "steps_error"), 0);
  assert_non_null(strstr(str(slow, "last_error"), "fail"));
  /* Every member docs/api.md lists, and no other. */
  const char *keys[] = {"id",         "state",       "template",    "identity",
                        "created_at", "updated_at",  "finished_at", "steps_total",
                        "steps_done", "steps_error", "last_error",  "next_run_at",
                        "priority"};
  assert_int_equal(json_object_size(slow), sizeof keys / sizeof keys[0]);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    assert_non_null(json_object_get(slow, keys[i]));
  char cursor[32];
  snprintf(cursor, sizeof cursor, "%s", str(page, "next_cursor"));
  assert_int_equal(strtoll(cursor, NULL, 10), id[3]);
  json_decref(page);

  /* The next pages, to the last, whose next_cursor is null. */
  page = tasks_page(f, NULL, cursor, 2);
  tasks = json_object_get(page, "tasks");
  assert_int_equal(num(json_array_get(tasks, 0), "id"), id[2]);
  assert_string_equal(str(json_array_get(tasks, 0), "state"), "complete");
  assert_int_equal(num(json_array_get(tasks, 1), "id"), id[1]);
  assert_string_equal(str(json_array_get(tasks, 1), "state"), "error");
  assert_int_equal(num(json_array_get(tasks, 1), "finished_at"), EFX_T0);
  snprintf(cursor, sizeof cursor, "%s", str(page, "next_cursor"));
  json_decref(page);
  page = tasks_page(f, NULL, cursor, 2);
  tasks = json_object_get(page, "tasks");
  assert_int_equal(json_array_size(tasks), 1);
  assert_int_equal(num(json_array_get(tasks, 0), "id"), id[0]);
  assert_true(json_is_null(json_object_get(page, "next_cursor")));
  json_decref(page);
  /* A page that holds exactly the rest says so too. */
  page = tasks_page(f, NULL, NULL, 5);
  assert_int_equal(json_array_size(json_object_get(page, "tasks")), 5);
  assert_true(json_is_null(json_object_get(page, "next_cursor")));
  json_decref(page);

  /* Filters and counts. */
  tk_task_filter failed = {.state = "error"};
  page = tasks_page(f, &failed, NULL, 10);
  tasks = json_object_get(page, "tasks");
  assert_int_equal(json_array_size(tasks), 2);
  assert_int_equal(num(json_array_get(tasks, 0), "id"), id[1]);
  assert_int_equal(num(json_array_get(tasks, 1), "id"), id[0]);
  json_decref(page);
  int64_t n;
  tk_err err;
  assert_int_equal(tk_tasks_count(f->store, &failed, &n, &err), 0);
  assert_int_equal(n, 2);
  tk_task_filter good = {.template_name = "default/good", .created_since = EFX_T0 + 5};
  assert_int_equal(tk_tasks_count(f->store, &good, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(tk_tasks_count(f->store, NULL, &n, &err), 0);
  assert_int_equal(n, 5);
}

static void step_pages(void **state) {
  efx *f = *state = efx_new(timed, "orch-1");
  int64_t id[5];
  five_tasks(f, id);
  char *text;
  tk_err err;
  assert_int_equal(tk_steps_json(f->store, "error", NULL, NULL, 1, &text, &err), 0);
  json_t *page = parsed(text);
  json_t *steps = json_object_get(page, "steps");
  assert_int_equal(json_array_size(steps), 1);
  json_t *perm = json_array_get(steps, 0);
  assert_int_equal(num(perm, "task"), id[1]);
  assert_string_equal(str(perm, "step"), "s");
  assert_string_equal(str(perm, "state"), "error");
  assert_int_equal(num(perm, "attempts"), 1);
  assert_int_equal(num(perm, "max_attempts"), 3);
  assert_true(json_is_false(json_object_get(perm, "exhausted"))); /* failed for good */
  assert_true(json_is_true(json_object_get(perm, "retryable")));
  assert_non_null(str(perm, "last_error"));
  assert_string_equal(str(json_object_get(perm, "template"), "name"), "perm");
  assert_int_equal(num(perm, "updated_at"), EFX_T0);
  const char *keys[] = {"id",         "task",         "step",      "state",
                        "attempts",   "max_attempts", "exhausted", "retryable",
                        "last_error", "template",     "updated_at"};
  assert_int_equal(json_object_size(perm), sizeof keys / sizeof keys[0]);
  char cursor[32];
  snprintf(cursor, sizeof cursor, "%s", str(page, "next_cursor"));
  assert_int_equal(strtoll(cursor, NULL, 10), num(perm, "id"));
  json_decref(page);
  assert_int_equal(tk_steps_json(f->store, "error", NULL, cursor, 1, &text, &err), 0);
  page = parsed(text);
  json_t *bad = json_array_get(json_object_get(page, "steps"), 0);
  assert_int_equal(num(bad, "task"), id[0]);
  assert_true(json_is_true(json_object_get(bad, "exhausted"))); /* 1 of 1 attempts */
  assert_true(json_is_null(json_object_get(page, "next_cursor")));
  json_decref(page);
  tk_task_filter perm_only = {.template_name = "perm"};
  assert_int_equal(tk_steps_json(f->store, "waiting_for_retry", NULL, NULL, 10, &text, &err), 0);
  page = parsed(text);
  assert_int_equal(json_array_size(json_object_get(page, "steps")), 1);
  assert_int_equal(num(json_array_get(json_object_get(page, "steps"), 0), "task"), id[3]);
  json_decref(page);
  assert_int_equal(tk_steps_json(f->store, "error", &perm_only, NULL, 10, &text, &err), 0);
  page = parsed(text);
  assert_int_equal(json_array_size(json_object_get(page, "steps")), 1);
  json_decref(page);
}

/* ---- Bulk actions ---- */

/* n tasks of "bad" that failed for good, run at the clock's time. */
static void failed_tasks(efx *f, int n, int64_t *ids) {
  for (int i = 0; i < n; i++) ids[i] = efx_submit(f, "bad", NULL);
  efx_tick(f);
}

static void bulk_retry_refused_above_max(void **state) {
  efx *f = *state = efx_new(plain, "orch-1");
  efx_one_step(f, "bad", FAIL_ALWAYS, "{ max_attempts = 1 }");
  int64_t ids[5];
  failed_tasks(f, 5, ids);
  tk_task_filter failed = {.state = "error"};
  char *before = efx_snapshot(f->db);
  tk_bulk_result r;
  tk_err err;
  int rc = tk_tasks_operate(f->store, TK_OP_RETRY, &failed, 4, EFX_T0 + 5, &r, &err);
  assert_int_equal(rc, TK_ERANGE);
  assert_non_null(strstr(err.msg, "more than 4 tasks"));
  assert_non_null(strstr(err.msg, "nothing done"));
  char *after = efx_snapshot(f->db);
  assert_string_equal(before, after);
  free(before);
  free(after);
  expect_einval(
      tk_tasks_operate(f->store, TK_OP_RETRY, &(tk_task_filter){.state = "x"}, 0, EFX_T0, &r, &err),
      &err, "state \"x\"", NULL);

  /* Five may be retried with a maximum of five: each failed step is due
   * again with fresh attempts. */
  f->clock.now_ms = EFX_T0 + 5;
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_RETRY, &failed, 5, EFX_T0 + 5, &r, &err), 0);
  assert_int_equal(r.tasks, 5);
  assert_int_equal(r.done, 5);
  assert_int_equal(r.failed, 0);
  assert_string_equal(err.msg, "");
  for (int i = 0; i < 5; i++) efx_expect(f, ids[i], "in_progress", "s", "waiting_for_retry", NULL);
  int64_t n;
  assert_int_equal(tk_tasks_count(f->store, &failed, &n, &err), 0);
  assert_int_equal(n, 0);
}

static void bulk_resolve_and_cancel(void **state) {
  efx *f = *state = efx_new(plain, "orch-1");
  efx_one_step(f, "bad", FAIL_ALWAYS, "{ max_attempts = 1 }");
  efx_one_step(f, "good", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  int64_t ids[3];
  failed_tasks(f, 3, ids);
  int64_t done = efx_submit(f, "good", NULL);
  efx_tick(f);
  int64_t waiting[2] = {efx_submit(f, "good", NULL), efx_submit(f, "good", NULL)};

  /* Resolve, by template: the failed steps of "bad"; "good" has none. */
  tk_bulk_result r;
  tk_err err;
  tk_task_filter bad = {.template_name = "bad"};
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_RESOLVE, &bad, 0, EFX_T0 + 1, &r, &err), 0);
  assert_int_equal(r.tasks, 3);
  assert_int_equal(r.done, 3);
  for (int i = 0; i < 3; i++) efx_expect(f, ids[i], "complete", "s", "resolved_manually", NULL);

  /* No condition is refused, changing nothing, unless every task is
   * asked for (issue 19: the API cancelled every task for {"filter": {}}). */
  char *before = efx_snapshot(f->db);
  expect_einval(tk_tasks_operate(f->store, TK_OP_CANCEL, NULL, 0, EFX_T0 + 2, &r, &err), &err,
                "no filter", "every task", NULL);
  expect_einval(tk_tasks_operate(f->store, TK_OP_CANCEL, &(tk_task_filter){0}, 0, EFX_T0 + 2, &r,
                                 &err),
                &err, "no filter", NULL);
  expect_einval(tk_bulk_filter_check(&(tk_task_filter){.state = ""}, &err), &err, "no filter",
                NULL);
  char *after = efx_snapshot(f->db);
  assert_string_equal(before, after);
  free(before);
  free(after);
  assert_int_equal(tk_bulk_filter_check(&(tk_task_filter){.created_since = 1}, &err), 0);
  /* Cancel every task: only those not complete (nor cancelled) are
   * taken; the complete ones are passed over, not refused. */
  const tk_task_filter every = {.all = 1};
  int64_t n, actions;
  assert_int_equal(tk_tasks_preview(f->store, TK_OP_CANCEL, &every, &n, &actions, &err), 0);
  assert_int_equal(n, 2);
  assert_int_equal(actions, 2);
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_CANCEL, &every, 0, EFX_T0 + 2, &r, &err), 0);
  assert_int_equal(r.tasks, 2);
  assert_int_equal(r.done, 2);
  assert_int_equal(r.failed, 0);
  efx_expect(f, waiting[0], "cancelled", "s", "cancelled", NULL);
  efx_expect(f, waiting[1], "cancelled", "s", "cancelled", NULL);
  efx_expect(f, done, "complete", "s", "complete", NULL);
  /* Again: nothing is left to cancel; a retry of steps no longer failed
   * does nothing either. */
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_CANCEL, &every, 0, EFX_T0 + 3, &r, &err), 0);
  assert_int_equal(r.done, 0);
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_RETRY, &bad, 0, EFX_T0 + 3, &r, &err), 0);
  assert_int_equal(r.tasks, 0);
  assert_int_equal(r.done, 0);
  expect_einval(tk_tasks_operate(f->store, (tk_operator_action)9, NULL, 0, EFX_T0, &r, &err), &err,
                "action 9", NULL);
}

/* Retry by filter takes a task still in progress that has a step in error
 * (as the failed list shows it), and a bulk result counts every refusal by
 * reason and keeps the first TK_BULK_KEPT with their task and step (issue
 * 19). */
static void bulk_reaches_in_progress_tasks_and_counts_refusals(void **state) {
  efx *f = *state = efx_new(timed, "orch-1");
  efx_template(f, "name = \"par\"\nversion = \"1\"\n" EFX_STEP("bad")
                  "handler = " FAIL_FOR_GOOD "\nretry = { max_attempts = 1 }\n" EFX_STEP("slow")
                  "handler = " FAIL_ALWAYS "\nretry = { max_attempts = 5, backoff = \"x\" }\n");
  int64_t par = efx_submit(f, "par", NULL);
  efx_tick(f);
  efx_expect(f, par, "in_progress", "bad", "error", "slow", "waiting_for_retry", NULL);

  tk_bulk_result r;
  tk_err err;
  int64_t n, actions;
  const tk_task_filter every = {.all = 1}, in_error = {.state = "error"};
  assert_int_equal(tk_tasks_preview(f->store, TK_OP_RETRY, &in_error, &n, &actions, &err), 0);
  assert_int_equal(n, 0);
  assert_int_equal(tk_tasks_preview(f->store, TK_OP_RETRY, &every, &n, &actions, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(actions, 1);
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_RETRY, &every, 1, EFX_T0, &r, &err), 0);
  assert_int_equal(r.tasks, 1);
  assert_int_equal(r.done, 1);
  assert_int_equal(r.failed, 0);
  tk_bulk_result_free(&r);
  efx_expect(f, par, "in_progress", "bad", "waiting_for_retry", "slow", "waiting_for_retry", NULL);

  /* A list: a step not in error, a task with none, 25 tasks that do not
   * exist. */
  tk_bulk_target t[27] = {{par, "slow"}, {par, NULL}};
  for (int i = 2; i < 27; i++) t[i] = (tk_bulk_target){100000 + i, NULL};
  char *before = efx_snapshot(f->db);
  assert_int_equal(tk_bulk_operate(f->store, TK_OP_RETRY, t, 27, EFX_T0, &r, &err), 0);
  efx_unchanged(f->db, before);
  assert_int_equal(r.tasks, 27);
  assert_int_equal(r.done, 0);
  assert_int_equal(r.failed, 27);
  assert_int_equal(r.refused[TK_BULK_STATE], 1);
  assert_int_equal(r.refused[TK_BULK_NO_FAILED_STEP], 1);
  assert_int_equal(r.refused[TK_BULK_NOT_FOUND], 25);
  assert_int_equal(r.kept, TK_BULK_KEPT);
  assert_int_equal(r.first[0].task, par);
  assert_string_equal(r.first[0].step, "slow");
  assert_int_equal(r.first[0].reason, TK_BULK_STATE);
  assert_non_null(strstr(r.first[0].message, "only a step in error can be retried"));
  assert_null(r.first[1].step);
  assert_int_equal(r.first[1].reason, TK_BULK_NO_FAILED_STEP);
  assert_int_equal(r.first[19].task, 100019);
  assert_string_equal(r.first[19].message, "no task 100019");
  char *text;
  assert_int_equal(tk_bulk_result_json(&r, &text, &err), 0);
  json_t *j = parsed(text);
  assert_int_equal(num(j, "failed"), 27);
  json_t *refused = json_object_get(j, "refused");
  assert_int_equal(num(refused, "state"), 1);
  assert_int_equal(num(refused, "not_found"), 25);
  assert_int_equal(num(refused, "no_failed_step"), 1);
  json_t *errors = json_object_get(j, "errors");
  assert_int_equal(json_array_size(errors), TK_BULK_KEPT);
  assert_string_equal(str(json_array_get(errors, 0), "reason"), "state");
  assert_string_equal(str(json_array_get(errors, 0), "step"), "slow");
  assert_true(json_is_null(json_object_get(json_array_get(errors, 1), "step")));
  json_decref(j);
  tk_bulk_result_free(&r);
}

/* More tasks than one page of ids: every one is acted on. */
static void bulk_over_many_pages(void **state) {
  efx *f = *state = efx_new(plain, "orch-1");
  efx_one_step(f, "good", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  int n = TK_PAGE_MAX + 5;
  for (int i = 0; i < n; i++) efx_submit(f, "good", NULL);
  tk_bulk_result r;
  tk_err err;
  tk_task_filter pending = {.state = "pending"};
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_CANCEL, &pending, n - 1, EFX_T0, &r, &err),
                   TK_ERANGE);
  int64_t count;
  assert_int_equal(tk_tasks_count(f->store, &pending, &count, &err), 0);
  assert_int_equal(count, n);
  assert_int_equal(tk_tasks_operate(f->store, TK_OP_CANCEL, &pending, n, EFX_T0, &r, &err), 0);
  assert_int_equal(r.tasks, n);
  assert_int_equal(r.done, n);
  assert_int_equal(tk_tasks_count(f->store, &pending, &count, &err), 0);
  assert_int_equal(count, 0);
}

/* ---- Activity ---- */

/* Two tasks retried on the "x" schedule (1 s, then 2 s), ticked at exact
 * times: A fails at T0, retries on time at T0+1s and fails, retries 500 ms
 * late at T0+3.5s and succeeds; B starts at T0+1s, fails, and retries
 * 1500 ms late at T0+3.5s, failing again. */
static void activity_buckets(void **state) {
  efx *f = *state = efx_new(timed, "orch-1");
  efx_one_step(f, "flaky", "{ kind = \"builtin\", name = \"fail\", times = 2 }",
               "{ max_attempts = 5, backoff = \"x\" }");
  efx_one_step(f, "worse", FAIL_ALWAYS, "{ max_attempts = 5, backoff = \"x\" }");
  efx_submit(f, "flaky", NULL);
  efx_tick(f);
  f->clock.now_ms = EFX_T0 + 1000;
  efx_submit(f, "worse", NULL);
  efx_tick(f);
  f->clock.now_ms = EFX_T0 + 3500;
  efx_tick(f);

  char *text;
  tk_err err;
  assert_int_equal(tk_activity_json(f->store, EFX_T0 + 4000, 4000, 1000, &text, &err), 0);
  json_t *a = parsed(text);
  assert_int_equal(num(a, "since"), EFX_T0);
  assert_int_equal(num(a, "bucket_ms"), 1000);
  json_t *b = json_object_get(a, "buckets");
  assert_int_equal(json_array_size(b), 4);
  /* start offset, succeeded, failed, retries, lateness avg, max (-1: null) */
  const int64_t want[4][6] = {{0, 0, 1, 0, -1, -1},
                              {1000, 0, 2, 1, 0, 0},
                              {2000, 0, 0, 0, -1, -1},
                              {3000, 1, 1, 2, 1000, 1500}};
  for (int i = 0; i < 4; i++) {
    json_t *k = json_array_get(b, (size_t)i);
    assert_int_equal(json_object_size(k), 6);
    assert_int_equal(num(k, "start"), EFX_T0 + want[i][0]);
    assert_int_equal(num(k, "succeeded"), want[i][1]);
    assert_int_equal(num(k, "failed"), want[i][2]);
    assert_int_equal(num(k, "retries"), want[i][3]);
    json_t *avg = json_object_get(k, "lateness_avg_ms"),
           *max = json_object_get(k, "lateness_max_ms");
    if (want[i][4] < 0) {
      assert_true(json_is_null(avg));
      assert_true(json_is_null(max));
    } else {
      assert_int_equal(json_integer_value(avg), want[i][4]);
      assert_int_equal(json_integer_value(max), want[i][5]);
    }
  }
  json_decref(a);

  /* A window that is not a whole number of buckets ends at now. */
  assert_int_equal(tk_activity_json(f->store, EFX_T0 + 4000, 2500, 1000, &text, &err), 0);
  a = parsed(text);
  assert_int_equal(num(a, "since"), EFX_T0 + 1000);
  assert_int_equal(json_array_size(json_object_get(a, "buckets")), 3);
  json_decref(a);
  expect_einval(tk_activity_json(f->store, EFX_T0, 3600000, 1000, &text, &err), &err, "1440", NULL);
  expect_einval(tk_activity_json(f->store, EFX_T0, 0, 1000, &text, &err), &err, "above 0", NULL);
  expect_einval(tk_activity_json(f->store, EFX_T0, 1000, 0, &text, &err), &err, "above 0", NULL);

  /* The task report says when each attempt was due. */
  json_t *task = efx_task(f, 1);
  json_t *history = json_object_get(efx_step(task, "s"), "history");
  assert_int_equal(json_array_size(history), 3);
  assert_int_equal(num(json_array_get(history, 0), "due_at"), EFX_T0);
  assert_int_equal(num(json_array_get(history, 1), "due_at"), EFX_T0 + 1000);
  assert_int_equal(num(json_array_get(history, 2), "due_at"), EFX_T0 + 3000);
  assert_int_equal(num(json_array_get(history, 2), "started_at"), EFX_T0 + 3500);
  json_decref(task);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(time_args),
      cmocka_unit_test_teardown(filter_errors, efx_teardown),
      cmocka_unit_test_teardown(task_pages, efx_teardown),
      cmocka_unit_test_teardown(step_pages, efx_teardown),
      cmocka_unit_test_teardown(bulk_retry_refused_above_max, efx_teardown),
      cmocka_unit_test_teardown(bulk_resolve_and_cancel, efx_teardown),
      cmocka_unit_test_teardown(bulk_reaches_in_progress_tasks_and_counts_refusals, efx_teardown),
      cmocka_unit_test_teardown(bulk_over_many_pages, efx_teardown),
      cmocka_unit_test_teardown(activity_buckets, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
