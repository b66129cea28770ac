/* The workflow examples of docs/workflows.md (examples/templates/
 * order_review.toml, count_lines.toml, chunks.toml) as a new user runs
 * them, and the approval of docs/waiting.md (order_approval.toml): the real binary on a real SQLite file, `template add`, `submit`,
 * `run --until-idle`, their commands real sh subprocesses. Checked from
 * `show --json`, `why` and `show --instances`: which branch of the decision ran and which
 * was skipped, and why; what the convergence step saw; the fan-out's sum
 * against the files' real line counts (and an empty directory giving []);
 * the chunk cursors covering [0, 10500) exactly once, each instance run
 * once (`show --instances`). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/run_cli.h"

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"10ms\"\n";

/* examples/templates/NAME in the checkout ($TK_TOP, which scripts/run-tests
 * sets, else the working directory) into path[len]. */
static void example(const char *name, char *path, size_t len) {
  const char *top = getenv("TK_TOP");
  snprintf(path, len, "%s/examples/templates/%s", top ? top : ".", name);
  if (access(path, R_OK) != 0) fail_msg("%s: not readable", path);
}

/* A store with the example `file` added. */
static cli *store_with_example(const char *file) {
  cli *c = cli_store_open(config);
  char path[1024];
  example(file, path, sizeof path);
  free(cli_stdout(c, ARGS("template", "add", path)));
  return c;
}

/* Submit `name` with `context`; the task's id. */
static long submit(cli *c, const char *name, const char *context) {
  char *out = cli_stdout(c, ARGS("submit", name, "--context", context));
  long id = strtol(out, NULL, 10);
  free(out);
  assert_true(id > 0);
  return id;
}

/* One orchestrator, four workers, until nothing is left to do. */
static void run_until_idle(cli *c) {
  free(cli_stdout(c, ARGS("run", "--until-idle", "--workers", "4")));
}

/* `show ID --json`, parsed. */
static json_t *show(cli *c, long id) {
  char ids[32];
  snprintf(ids, sizeof ids, "%ld", id);
  char *out = cli_stdout(c, ARGS("show", ids, "--json"));
  json_error_t e;
  json_t *doc = json_loads(out, 0, &e);
  if (doc == NULL) fail_msg("show %ld --json: %s: %s", id, e.text, out);
  free(out);
  return doc;
}

static void expect_state(json_t *task, const char *name, const char *state) {
  const char *got = json_string_value(json_object_get(efx_step(task, name), "state"));
  if (got == NULL || strcmp(got, state) != 0)
    fail_msg("step %s is %s, expected %s", name, got ? got : "(none)", state);
}

/* The reason of the transition of step `name` into `to`. */
static const char *reason_into(json_t *task, const char *name, const char *to) {
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(task, "transitions"), i, t) {
    const char *s = json_string_value(json_object_get(t, "step"));
    const char *into = json_string_value(json_object_get(t, "to"));
    if (s && into && strcmp(s, name) == 0 && strcmp(into, to) == 0)
      return json_string_value(json_object_get(t, "reason"));
  }
  fail_msg("no transition of %s into %s", name, to);
  return NULL;
}

/* The results of step `name`, as compact JSON text (malloc'd). */
static char *results(json_t *task, const char *name) {
  return json_dumps(json_object_get(efx_step(task, name), "results"), JSON_COMPACT | JSON_ENCODE_ANY);
}

static void expect_results(json_t *task, const char *name, const char *want) {
  char *got = results(task, name);
  if (got == NULL || strcmp(got, want) != 0)
    fail_msg("%s's results are %s, expected %s", name, got ? got : "(none)", want);
  free(got);
}

static void expect_task_complete(json_t *task) {
  assert_string_equal(json_string_value(json_object_get(task, "state")), "complete");
  assert_int_equal(json_integer_value(json_object_get(task, "steps_error")), 0);
  assert_int_equal(json_integer_value(json_object_get(task, "steps_done")),
                   json_integer_value(json_object_get(task, "steps_total")));
}

/* ---- order_review: a decision ----------------------------------------------------------- */

/* triage chose `ran`: it ran, `skipped` was skipped for it. */
static void expect_chosen(json_t *task, const char *ran, const char *skipped) {
  char want[64];
  snprintf(want, sizeof want, "{\"branches\":[\"%s\"]}", ran);
  expect_results(task, "triage", want);
  expect_state(task, ran, "complete");
  expect_state(task, skipped, "skipped");
  assert_string_equal(reason_into(task, skipped, "skipped"), "not chosen by triage");
}

/* One order of each risk: the low one is approved and `review` skipped,
 * the high one is reviewed and `approve` skipped, each "not chosen by
 * triage"; `notify` runs after whichever branch ran (one parent complete,
 * one skipped) and says which; both tasks complete. */
static void order_review_takes_the_branch_its_risk_chooses(void **state) {
  (void)state;
  cli *c = store_with_example("order_review.toml");
  long low = submit(c, "shop/order_review", "{\"order\": {\"id\": \"A1\", \"total\": 120}}");
  long high = submit(c, "shop/order_review", "{\"order\": {\"id\": \"B2\", \"total\": 4800}}");
  run_until_idle(c);

  json_t *t = show(c, low);
  expect_task_complete(t);
  expect_results(t, "score", "{\"risk\":\"low\",\"total\":120}");
  expect_chosen(t, "approve", "review");
  expect_state(t, "notify", "complete");
  expect_results(t, "notify", "{\"message\":\"order A1 approved\"}");
  json_decref(t);

  t = show(c, high);
  expect_task_complete(t);
  expect_chosen(t, "review", "approve");
  expect_results(t, "notify", "{\"message\":\"order B2 sent to review\"}");
  json_decref(t);

  /* `why` on the skipped branch says who did not choose it. */
  char ids[32];
  snprintf(ids, sizeof ids, "%ld", high);
  char *why = cli_stdout(c, ARGS("why", ids, "approve"));
  expect_contains(why, "not chosen by triage");
  free(why);
  cli_store_close(c);
}

/* ---- count_lines: a map over a list, then a sum ---------------------------------------- */

/* Write DIR/NAME with `lines` lines. */
static void file_of_lines(const char *dir, const char *name, int lines) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 0; i < lines; i++) fprintf(f, "line %d\n", i);
  fclose(f);
}

/* Four files of 3, 10, 0 and 1 lines (one in a subdirectory): `count`
 * runs once per file and its results are their counts in list's (sorted)
 * order, each naming its file; `total` sums them to 14. An empty
 * directory: `count` completes with [] and `total` says 0 files, 0 lines. */
static void count_lines_sums_one_instance_per_file(void **state) {
  (void)state;
  cli *c = store_with_example("count_lines.toml");
  char data[600], empty[600], sub[700];
  snprintf(data, sizeof data, "%s/data", c->dir);
  snprintf(empty, sizeof empty, "%s/empty", c->dir);
  snprintf(sub, sizeof sub, "%s/sub", data);
  assert_int_equal(mkdir(data, 0755), 0);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(mkdir(empty, 0755), 0);
  static const struct { const char *name; int lines; } files[] = {
      {"a.txt", 3}, {"c.txt", 10}, {"nothing", 0}, {"sub/b.txt", 1}}; /* C-sorted */
  for (size_t i = 0; i < 4; i++) file_of_lines(data, files[i].name, files[i].lines);

  char ctx[1400];
  snprintf(ctx, sizeof ctx, "{\"dir\": \"%s\"}", data);
  long full = submit(c, "demo/count_lines", ctx);
  snprintf(ctx, sizeof ctx, "{\"dir\": \"%s\"}", empty);
  long none = submit(c, "demo/count_lines", ctx);
  run_until_idle(c);

  json_t *t = show(c, full);
  expect_task_complete(t);
  json_t *listed = json_object_get(json_object_get(efx_step(t, "list"), "results"), "files");
  assert_int_equal(json_array_size(listed), 4);
  json_t *counted = json_object_get(efx_step(t, "count"), "results");
  assert_true(json_is_array(counted));
  assert_int_equal(json_array_size(counted), 4);
  for (size_t i = 0; i < 4; i++) {
    char want[800];
    snprintf(want, sizeof want, "%s/%s", data, files[i].name);
    assert_string_equal(json_string_value(json_array_get(listed, i)), want);
    json_t *r = json_array_get(counted, i);
    assert_string_equal(json_string_value(json_object_get(r, "file")), want);
    assert_int_equal(json_integer_value(json_object_get(r, "lines")), files[i].lines);
  }
  expect_results(t, "total", "{\"files\":4,\"lines\":14}");
  json_decref(t);

  t = show(c, none);
  expect_task_complete(t);
  expect_results(t, "list", "{\"files\":[]}");
  expect_results(t, "count", "[]");
  expect_results(t, "total", "{\"files\":0,\"lines\":0}");
  json_decref(t);
  cli_store_close(c);
}

/* ---- chunks: a map over a range --------------------------------------------------------- */

/* `show ID --instances STEP --json`: the first page of up to 1000 of a
 * map step's instances, in element order (their array). */
static json_t *instances(cli *c, long id, const char *name) {
  char ids[32];
  snprintf(ids, sizeof ids, "%ld", id);
  char *out = cli_stdout(c, ARGS("show", ids, "--instances", name, "--limit", "1000", "--json"));
  json_error_t e;
  json_t *page = json_loads(out, 0, &e);
  if (page == NULL) fail_msg("show --instances: %s: %s", e.text, out);
  free(out);
  json_t *list = json_incref(json_object_get(page, "instances"));
  assert_true(json_is_array(list));
  assert_int_equal(json_integer_value(json_object_get(page, "total")), json_array_size(list));
  json_decref(page);
  return list;
}

/* 10500 rows in chunks of 1000: 11 instances, each run once, whose
 * cursors, in order, tile [0, 10500) with no gap and no overlap, each
 * chunk 1000 rows but the last (500); `report` counts 11 chunks and 10500
 * rows. */
static void chunks_cover_the_range_once(void **state) {
  (void)state;
  cli *c = store_with_example("chunks.toml");
  long id = submit(c, "demo/chunks", "{}");
  run_until_idle(c);

  json_t *t = show(c, id);
  expect_task_complete(t);
  expect_results(t, "count", "{\"rows\":10500}");
  json_t *chunks = json_object_get(efx_step(t, "process"), "results");
  assert_true(json_is_array(chunks));
  assert_int_equal(json_array_size(chunks), 11);
  json_int_t next = 0;
  size_t i;
  json_t *r;
  json_array_foreach(chunks, i, r) {
    json_int_t start = json_integer_value(json_object_get(r, "start"));
    json_int_t end = json_integer_value(json_object_get(r, "end"));
    if (start != next) fail_msg("chunk %zu starts at %lld, expected %lld", i, (long long)start,
                                (long long)next);
    assert_int_equal(end - start, i < 10 ? 1000 : 500);
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), end - start);
    next = end;
  }
  assert_int_equal(next, 10500);
  expect_results(t, "report", "{\"chunks\":11,\"rows\":10500}");
  json_decref(t);

  /* Each instance process[i] was claimed once and succeeded: cursor i in,
   * its own results out. */
  json_t *list = instances(c, id, "process");
  assert_int_equal(json_array_size(list), 11);
  json_array_foreach(list, i, r) {
    char name[32];
    snprintf(name, sizeof name, "process[%zu]", i);
    assert_int_equal(json_integer_value(json_object_get(r, "item_index")), i);
    assert_string_equal(json_string_value(json_object_get(r, "name")), name);
    assert_string_equal(json_string_value(json_object_get(r, "state")), "complete");
    assert_int_equal(json_integer_value(json_object_get(r, "attempts")), 1);
    json_t *item = json_object_get(r, "item"), *res = json_object_get(r, "results");
    assert_int_equal(json_integer_value(json_object_get(item, "start")), 1000 * (json_int_t)i);
    assert_int_equal(json_integer_value(json_object_get(res, "start")), 1000 * (json_int_t)i);
    assert_int_equal(json_integer_value(json_object_get(res, "end")),
                     json_integer_value(json_object_get(item, "end")));
  }
  json_decref(list);
  cli_store_close(c);
}

/* ---- order_approval: a wait for a person (DESIGN §18) ---------------------------------- */

/* `tasker signal ID STEP ARGS...` (exit 0 expected). */
static void signal_step(cli *c, long id, const char *step, const char *flag, const char *value) {
  char ids[32];
  snprintf(ids, sizeof ids, "%ld", id);
  free(cli_stdout(c, ARGS("signal", ids, step, flag, value)));
}

/* The approval as its comment tells it: run until idle, the order waits
 * for its approval (the task waiting on the world, no worker held, the
 * run ended); a signal with data approves it and the next run ships it.
 * A rejection sent before the step waits is kept: the next run takes it,
 * the step fails with its message and the order stops in error, never
 * shipped. */
static void order_approval_waits_for_its_signal(void **state) {
  (void)state;
  cli *c = store_with_example("order_approval.toml");
  long id = submit(c, "order_approval", "{\"order\": 7}");
  run_until_idle(c);
  json_t *t = show(c, id);
  expect_state(t, "approve", "waiting");
  expect_state(t, "ship", "pending");
  assert_string_equal(json_string_value(json_object_get(t, "execution_status")),
                      "waiting_for_the_world");
  json_decref(t);
  signal_step(c, id, "approve", "--data", "{\"by\": \"ann\"}");
  run_until_idle(c);
  t = show(c, id);
  expect_task_complete(t);
  expect_results(t, "approve", "{\"by\":\"ann\"}");
  expect_results(t, "ship", "{\"shipped\":true}");
  json_decref(t);

  long no = submit(c, "order_approval", "{\"order\": 8}");
  signal_step(c, no, "approve", "--fail", "too expensive");
  run_until_idle(c);
  t = show(c, no);
  assert_string_equal(json_string_value(json_object_get(t, "state")), "error");
  expect_state(t, "approve", "error");
  expect_state(t, "ship", "pending");
  assert_string_equal(json_string_value(json_object_get(efx_step(t, "approve"), "last_error")),
                      "too expensive");
  json_decref(t);
  cli_store_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(order_review_takes_the_branch_its_risk_chooses),
      cmocka_unit_test(count_lines_sums_one_instance_per_file),
      cmocka_unit_test(chunks_cover_the_range_once),
      cmocka_unit_test(order_approval_waits_for_its_signal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
