/* What a task's report says of decisions and map (issue 21 item 5;
 * DESIGN §17), from the rows a store returns: a skipped step's reason, a
 * decision's branches and choice, a map's instance counts and first
 * instances, `why` on a skipped, mapped, convergence or failed decision
 * step, and tk_instances_json's pages and refusals. The store here is a
 * stub that answers task_report and instance_list with fixed rows, so the
 * report's rules are checked on their own; the same JSON through the real
 * backends and binary is tests/cli/test_cli_flow.c and
 * tests/server/test_api.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/engine.h>
#include <tasker/query.h>

#include "store/store.h"

#define NOW INT64_C(1767225600000)
#define WIDTH 25 /* the map's instances */

/* score -> triage (decides approve | review, key "pick") -> approve,
 * review; list -> process (a map over list.files); notify converges on
 * approve, review and process. */
static const char definition[] =
    "{\"name\": \"orders\", \"steps\": ["
    "{\"name\": \"score\", \"depends_on\": []},"
    "{\"name\": \"triage\", \"depends_on\": [\"score\"], \"decides\": [\"approve\", \"review\"],"
    " \"allow_none\": false, \"branches_key\": \"pick\"},"
    "{\"name\": \"approve\", \"depends_on\": [\"triage\"]},"
    "{\"name\": \"review\", \"depends_on\": [\"triage\"]},"
    "{\"name\": \"list\", \"depends_on\": []},"
    "{\"name\": \"process\", \"depends_on\": [\"list\"], \"map\": {\"parent\": \"list\","
    " \"path\": [\"files\"], \"max\": 100, \"max_failures\": 2}},"
    "{\"name\": \"notify\", \"depends_on\": [\"approve\", \"review\", \"process\"]}]}";

/* What the stub's rows say of each template step. */
typedef struct stub_step {
  const char *name, *state, *results, *last_error;
  int parents_remaining;
} stub_step;

typedef struct stub {
  tk_store base;
  stub_step steps[7];
  int map_idx_asked, after_asked, limit_asked, lists;
} stub;

static char *dup(const char *s) { return s ? strdup(s) : NULL; }

static int stub_report(tk_store *s, int64_t task_id, tk__task_report *r, tk_err *err) {
  stub *st = (stub *)s;
  if (task_id != 7) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  memset(r, 0, sizeof *r);
  r->id = 7;
  snprintf(r->state, sizeof r->state, "in_progress");
  r->created_at = r->updated_at = NOW - 1000;
  r->finished_at = TK__NONE;
  r->steps_total = 7;
  r->context = dup("{}");
  r->template_.namespace_ = dup("default");
  r->template_.name = dup("orders");
  r->template_.version = dup("1");
  r->template_.definition = dup(definition);
  r->nsteps = 7;
  r->steps = calloc(7, sizeof *r->steps);
  for (int i = 0; i < 7; i++) {
    tk__step_rec *x = &r->steps[i];
    x->id = 100 + i;
    x->idx = i;
    x->name = dup(st->steps[i].name);
    snprintf(x->state, sizeof x->state, "%s", st->steps[i].state);
    x->max_attempts = 3;
    x->retryable = 1;
    x->parents_remaining = st->steps[i].parents_remaining;
    x->run_at = NOW - 500;
    x->lease_expires_at = TK__NONE;
    x->results = dup(st->steps[i].results);
    x->last_error = dup(st->steps[i].last_error);
    x->item_index = -1;
    x->instances_total = TK__NONE;
  }
  /* process: mapped into 25, 12 done, 1 failed, 12 to go. */
  if (strcmp(st->steps[5].state, "mapped") == 0) {
    r->steps[5].instances_total = WIDTH;
    r->steps[5].instances_done = 12;
    r->steps[5].instances_failed = 1;
    r->steps[5].instances_waiting = 12;
  }
  /* approve skipped: first an older, other reason, then the last one;
   * then one of an instance (step 1012, not a template step). */
  r->ntransitions = 3;
  r->transitions = calloc(3, sizeof *r->transitions);
  for (int i = 0; i < 3; i++) {
    r->transitions[i].at = NOW - 100 + i;
    r->transitions[i].step_id = i < 2 ? 102 : 1012;
    r->transitions[i].step = dup(i < 2 ? "approve" : "process[12]");
    r->transitions[i].from = dup("pending");
    r->transitions[i].to = dup(i == 1 ? "skipped" : i ? "in_progress" : "pending");
    r->transitions[i].reason = dup(i == 1 ? "not chosen by triage" : i ? "claimed" : "created");
    r->transitions[i].attempt = TK__NONE;
  }
  return 0;
}

/* Instances item_index > after, at most limit, of WIDTH. */
static int stub_instances(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                          tk__step_rec **out, int *n, int64_t *total, tk_err *err) {
  (void)err;
  stub *st = (stub *)s;
  st->lists++;
  st->map_idx_asked = map_idx;
  st->after_asked = after;
  st->limit_asked = limit;
  assert_int_equal(task_id, 7);
  *total = WIDTH;
  *n = 0;
  *out = calloc((size_t)limit, sizeof **out);
  for (int i = after + 1; i < WIDTH && *n < limit; i++) {
    tk__step_rec *x = &(*out)[(*n)++];
    char name[32], item[48];
    snprintf(name, sizeof name, "process[%d]", i);
    snprintf(item, sizeof item, "\"file-%02d.csv\"", i);
    x->id = 1000 + i;
    x->name = dup(name);
    snprintf(x->state, sizeof x->state, "%s", i < 12 ? "complete" : i == 12 ? "error" : "pending");
    x->attempts = i <= 12;
    x->max_attempts = 3;
    x->item_index = i;
    x->item = dup(item);
    x->last_error = dup(i == 12 ? "exit status 1: bad file" : NULL);
    x->instances_total = TK__NONE;
  }
  return 0;
}

static const tk__store_ops stub_ops = {.task_report = stub_report,
                                       .instance_list = stub_instances};

/* The running picture: triage chose review (approve skipped), process is
 * mapped, notify waits for it. */
static void running(stub *s) {
  memset(s, 0, sizeof *s);
  s->base.ops = &stub_ops;
  const stub_step steps[7] = {{"score", "complete", "{\"risk\": \"high\"}", NULL, 0},
                              {"triage", "complete", "{\"pick\": [\"review\"]}", NULL, 0},
                              {"approve", "skipped", NULL, NULL, 0},
                              {"review", "complete", "{}", NULL, 0},
                              {"list", "complete", "{\"files\": []}", NULL, 0},
                              {"process", "mapped", NULL, NULL, 0},
                              {"notify", "pending", NULL, NULL, 1}};
  memcpy(s->steps, steps, sizeof steps);
}

static json_t *task_of(stub *s) {
  char *text;
  tk_err err;
  if (tk_engine_task_json(&s->base, 7, NOW, &text, &err) != 0)
    fail_msg("tk_engine_task_json: %s", err.msg);
  json_t *v = json_loads(text, 0, NULL);
  free(text);
  assert_non_null(v);
  return v;
}

static json_t *step_of(json_t *task, const char *name) {
  size_t i;
  json_t *st;
  json_array_foreach(json_object_get(task, "steps"), i, st) {
    if (strcmp(json_string_value(json_object_get(st, "name")), name) == 0) return st;
  }
  fail_msg("no step %s", name);
  return NULL;
}

static const char *str(json_t *o, const char *k) {
  const char *v = json_string_value(json_object_get(o, k));
  return v ? v : "(not a string)";
}
static json_int_t num(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}

/* "[\"a\",\"b\"]" of a JSON value, for one comparison. */
static char *compact(json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}
static void assert_json(json_t *v, const char *want) {
  char *got = compact(v);
  if (got == NULL || strcmp(got, want) != 0) fail_msg("got %s, want %s", got ? got : "NULL", want);
  free(got);
}

static void test_skipped_step_says_why(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *t = task_of(&s);
  json_t *approve = step_of(t, "approve");
  assert_string_equal(str(approve, "skipped_reason"), "not chosen by triage");
  json_t *why = json_object_get(approve, "why");
  assert_string_equal(str(why, "reason"), "skipped");
  assert_string_equal(str(why, "detail"), "not chosen by triage");
  /* Only a skipped step has the member. */
  assert_null(json_object_get(step_of(t, "review"), "skipped_reason"));
  json_decref(t);
}

static void test_instance_transitions_named(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *t = task_of(&s);
  /* An instance's changes are named as the store names it (it is not
   * among the report's steps), not taken for the task's own. */
  json_t *tr = json_object_get(t, "transitions");
  assert_int_equal(json_array_size(tr), 3);
  assert_string_equal(str(json_array_get(tr, 0), "step"), "approve");
  assert_string_equal(str(json_array_get(tr, 2), "step"), "process[12]");
  json_decref(t);
}

static void test_decision_shows_branches_and_choice(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *t = task_of(&s);
  json_t *triage = step_of(t, "triage");
  assert_json(json_object_get(triage, "decides"), "[\"approve\",\"review\"]");
  /* Read under the step's own branches_key ("pick"). */
  assert_json(json_object_get(triage, "chosen"), "[\"review\"]");
  assert_null(json_object_get(step_of(t, "review"), "decides"));
  json_decref(t);
  /* Not decided yet: null; resolved by an operator: none chosen. */
  s.steps[1].state = "in_progress";
  t = task_of(&s);
  assert_true(json_is_null(json_object_get(step_of(t, "triage"), "chosen")));
  json_decref(t);
  s.steps[1].state = "resolved_manually";
  t = task_of(&s);
  assert_json(json_object_get(step_of(t, "triage"), "chosen"), "[]");
  json_decref(t);
}

static void test_failed_decision_why_has_its_message(void **state) {
  (void)state;
  stub s;
  running(&s);
  s.steps[1].state = "error";
  s.steps[1].results = NULL;
  s.steps[1].last_error = "decision: \"ship\" is not one of the branches of triage (approve, review)";
  json_t *t = task_of(&s);
  json_t *why = json_object_get(step_of(t, "triage"), "why");
  assert_string_equal(str(why, "reason"), "error");
  assert_non_null(strstr(str(why, "detail"), "\"ship\" is not one of the branches of triage"));
  assert_non_null(strstr(str(why, "detail"), "skips every branch"));
  /* A step in error that decides nothing keeps the plain words. */
  assert_null(strstr(str(json_object_get(step_of(t, "score"), "why"), "detail"), "decision"));
  json_decref(t);
}

static void test_failed_map_why_says_retry_its_instances(void **state) {
  (void)state;
  stub s;
  running(&s);
  s.steps[5].state = "error";
  s.steps[5].last_error = "1 of 25 instances failed; max_failures is 0";
  json_t *t = task_of(&s);
  assert_string_equal(str(json_object_get(step_of(t, "process"), "why"), "detail"),
                      "the map failed for good: 1 of 25 instances failed; max_failures is 0; "
                      "`tasker retry` its failed instances, or `tasker resolve` it");
  json_decref(t);
}

static void test_map_counts_first_instances_and_why(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *t = task_of(&s);
  json_t *process = step_of(t, "process");
  json_t *in = json_object_get(process, "instances");
  assert_int_equal(num(in, "total"), WIDTH);
  assert_int_equal(num(in, "done"), 12);
  assert_int_equal(num(in, "failed"), 1);
  assert_int_equal(num(in, "waiting"), 12);
  /* The first page: 10 in element order, the next page after #9. */
  json_t *first = json_object_get(in, "first");
  assert_int_equal(json_array_size(first), 10);
  assert_int_equal(num(json_array_get(first, 0), "item_index"), 0);
  assert_string_equal(str(json_array_get(first, 9), "name"), "process[9]");
  assert_json(json_object_get(json_array_get(first, 3), "item"), "\"file-03.csv\"");
  assert_int_equal(num(in, "next_after"), 9);
  assert_int_equal(s.map_idx_asked, 5);
  assert_int_equal(s.after_asked, -1);
  assert_json(json_object_get(json_object_get(process, "map"), "max_failures"), "2");
  json_t *why = json_object_get(process, "why");
  assert_string_equal(str(why, "reason"), "mapped");
  assert_string_equal(str(why, "detail"), "waiting for 12 of 25 instances (1 failed)");
  /* A map step is running work: the task is processing, not waiting. */
  assert_string_equal(str(t, "execution_status"), "processing");
  json_decref(t);
  /* Before it is mapped: no counts, and no instance list read. */
  s.steps[5].state = "pending";
  s.lists = 0;
  t = task_of(&s);
  assert_true(json_is_null(json_object_get(step_of(t, "process"), "instances")));
  assert_int_equal(s.lists, 0);
  json_decref(t);
}

static void test_convergence_why_names_the_parents_it_waits_for(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *t = task_of(&s);
  json_t *why = json_object_get(step_of(t, "notify"), "why");
  assert_string_equal(str(why, "reason"), "waiting_for_dependencies");
  /* approve is skipped and review complete: only process holds it. */
  assert_json(json_object_get(why, "blocking"), "[{\"step\":\"process\",\"state\":\"mapped\"}]");
  assert_string_equal(str(why, "detail"),
                      "waiting for 1 of its 3 parents (a parent counts once complete, resolved "
                      "or skipped)");
  json_decref(t);
}

static void test_skipped_counts_as_finished(void **state) {
  (void)state;
  stub s;
  running(&s);
  s.steps[5].state = "complete";
  s.steps[6].state = "skipped";
  s.steps[6].parents_remaining = 0;
  json_t *t = task_of(&s);
  assert_string_equal(str(t, "execution_status"), "all_complete");
  json_decref(t);
}

/* tk_instances_json as JSON; fails on an error. */
static json_t *page(stub *s, const char *step, int after, int limit) {
  char *text;
  tk_err err;
  if (tk_instances_json(&s->base, 7, step, after, limit, NOW, &text, &err) != 0)
    fail_msg("tk_instances_json: %s", err.msg);
  json_t *v = json_loads(text, 0, NULL);
  free(text);
  assert_non_null(v);
  return v;
}

static void test_instance_pages(void **state) {
  (void)state;
  stub s;
  running(&s);
  json_t *p = page(&s, "process", -1, 10);
  assert_int_equal(num(p, "total"), WIDTH);
  assert_int_equal(json_array_size(json_object_get(p, "instances")), 10);
  assert_int_equal(num(p, "next_after"), 9);
  assert_int_equal(num(p, "task"), 7);
  assert_string_equal(str(p, "step"), "process");
  /* One more row is asked, to know whether a next page exists. */
  assert_int_equal(s.limit_asked, 11);
  json_decref(p);
  p = page(&s, "process", 9, 10);
  json_t *in = json_object_get(p, "instances");
  assert_int_equal(num(json_array_get(in, 0), "item_index"), 10);
  json_t *failed = json_array_get(in, 2);
  assert_string_equal(str(failed, "state"), "error");
  assert_string_equal(str(failed, "last_error"), "exit status 1: bad file");
  /* Each instance says why, as a step does. */
  assert_string_equal(str(json_object_get(failed, "why"), "reason"), "error");
  assert_string_equal(str(json_object_get(json_array_get(in, 0), "why"), "reason"), "done");
  assert_string_equal(str(json_object_get(json_array_get(in, 3), "why"), "reason"), "ready");
  assert_int_equal(num(p, "next_after"), 19);
  json_decref(p);
  /* The last page: exactly what is left, no next. */
  p = page(&s, "process", 19, 5);
  assert_int_equal(json_array_size(json_object_get(p, "instances")), 5);
  assert_true(json_is_null(json_object_get(p, "next_after")));
  json_decref(p);
  p = page(&s, "process", 24, 5);
  assert_int_equal(json_array_size(json_object_get(p, "instances")), 0);
  assert_true(json_is_null(json_object_get(p, "next_after")));
  json_decref(p);
}

/* rc is `code` and the message holds `want`. */
static void expect_refused(stub *s, int64_t task, const char *step, int after, int limit,
                           int code, const char *want) {
  char *text = NULL;
  tk_err err;
  int rc = tk_instances_json(&s->base, task, step, after, limit, NOW, &text, &err);
  if (rc != code || strstr(err.msg, want) == NULL)
    fail_msg("got %s (%s), want %s with \"%s\"", tk_err_name(rc), rc ? err.msg : text,
             tk_err_name(code), want);
  assert_null(text);
}

static void test_instance_page_refusals(void **state) {
  (void)state;
  stub s;
  running(&s);
  s.lists = 0;
  expect_refused(&s, 7, "process", -1, 0, TK_EINVAL, "limit 0: expected 1 to 1000");
  expect_refused(&s, 7, "process", -1, 1001, TK_EINVAL, "limit 1001: expected 1 to 1000");
  expect_refused(&s, 7, "process", -2, 10, TK_EINVAL, "after -2: expected an instance's item_index");
  expect_refused(&s, 7, "review", -1, 10, TK_EINVAL,
                 "step \"review\" of task 7 is not a map step");
  expect_refused(&s, 7, "nope", -1, 10, TK_ENOENT, "task 7 has no step \"nope\"");
  expect_refused(&s, 8, "process", -1, 10, TK_ENOENT, "no task 8");
  /* Refused before any instance is read. */
  assert_int_equal(s.lists, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_skipped_step_says_why),
      cmocka_unit_test(test_instance_transitions_named),
      cmocka_unit_test(test_decision_shows_branches_and_choice),
      cmocka_unit_test(test_failed_decision_why_has_its_message),
      cmocka_unit_test(test_failed_map_why_says_retry_its_instances),
      cmocka_unit_test(test_map_counts_first_instances_and_why),
      cmocka_unit_test(test_convergence_why_names_the_parents_it_waits_for),
      cmocka_unit_test(test_skipped_counts_as_finished),
      cmocka_unit_test(test_instance_pages),
      cmocka_unit_test(test_instance_page_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
