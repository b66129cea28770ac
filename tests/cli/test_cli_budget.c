/* Retry budgets through the real tasker binary on a real SQLite file:
 * `config show` lists [budgets.NAME], `template add` refuses a budget the
 * configuration lacks (FILE:LINE:COLUMN, exit 78, nothing stored), and
 * `run` defers retries over budget: events, the summary's counter, and
 * `show` with source "budget". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/run_cli.h"

/* One retry per 200 ms window and nothing for first attempts: of three
 * steps that fail once at the same moment, one retries after its 10 ms and
 * the others wait 200 ms and 400 ms more (to the window's slot edges). */
static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"10ms\"\n"
                             "[budgets.api]\nratio = 0\nwindow = \"200ms\"\n"
                             "min_per_second = 5\n";

static const char flaky[] = "name = \"call\"\nversion = \"1\"\n"
                            "[[steps]]\nname = \"call\"\n"
                            "handler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"
                            "retry = { max_attempts = 3, budget = \"api\" }\n";

static int setup(void **state) {
  *state = cli_store_open(config);
  return 0;
}

static int teardown(void **state) {
  cli_store_close(*state);
  return 0;
}

/* The line of `text` that starts with `start` ends with `end`. */
static void expect_line(const char *text, const char *start, const char *end) {
  const char *p = strstr(text, start);
  if (p == NULL || (p != text && p[-1] != '\n')) fail_msg("no line %s in\n%s", start, text);
  const char *nl = strchr(p, '\n');
  size_t len = nl ? (size_t)(nl - p) : strlen(p);
  if (len < strlen(end) || strncmp(p + len - strlen(end), end, strlen(end)) != 0)
    fail_msg("line %.*s does not end with %s", (int)len, p, end);
}

static void config_show_lists_budgets(void **state) {
  cli *c = *state;
  run_result r;
  CLI(c, &r, "config", "show");
  assert_int_equal(r.status, 0);
  char origin[512];
  snprintf(origin, sizeof origin, "# %s:6", c->cfg);
  expect_line(r.out, "budgets.api.window = \"200ms\" ", origin);
  expect_line(r.out, "budgets.api.per_host = false ", "# default");
  run_result_free(&r);
  CLI(c, &r, "config", "show", "--json");
  assert_int_equal(r.status, 0);
  json_t *all = json_loads(r.out, 0, NULL);
  assert_non_null(all);
  json_t *ph = json_object_get(all, "budgets.api.per_host");
  assert_true(json_is_false(json_object_get(ph, "value")));
  json_t *w = json_object_get(all, "budgets.api.window");
  assert_int_equal(json_integer_value(json_object_get(w, "ms")), 200);
  json_decref(all);
  run_result_free(&r);
}

static void an_unknown_budget_is_refused_and_nothing_stored(void **state) {
  cli *c = *state;
  char path[400];
  efx_write(c->dir, "bad.toml",
            "name = \"bad\"\nversion = \"1\"\n[retry]\nbudget = \"aip\"\n"
            "[[steps]]\nname = \"a\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n",
            path, sizeof path);
  char *before = efx_snapshot(c->db);
  run_result r;
  CLI(c, &r, "template", "add", path);
  char want[1024];
  snprintf(want, sizeof want,
           "tasker template add: %s:4:10: retry.budget: unknown retry budget \"aip\" "
           "(configured: api; a budget is a [budgets.NAME] table of the configuration)\n",
           path);
  assert_int_equal(r.status, 78);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, want);
  run_result_free(&r);
  efx_unchanged(c->db, before);
}

static void run_defers_retries_over_budget(void **state) {
  cli *c = *state;
  char path[400], events[400];
  efx_write(c->dir, "call.toml", flaky, path, sizeof path);
  snprintf(events, sizeof events, "%s/events.jsonl", c->dir);
  run_result r;
  CLI(c, &r, "template", "add", path);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  for (int i = 0; i < 3; i++) {
    CLI(c, &r, "submit", "call");
    assert_int_equal(r.status, 0);
    run_result_free(&r);
  }
  CLI(c, &r, "run", "--until-idle", "--workers", "0", "--events", events);
  assert_int_equal(r.status, 0);
  expect_contains(r.err, "3 retries scheduled (2 deferred by retry budgets)");
  expect_contains(r.err, "tasks: 3 complete");
  run_result_free(&r);
  /* Two step.retry_deferred events, each before the retry it moved. */
  char *text = efx_read(events);
  int deferred = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    json_t *e = json_loads(line, 0, NULL);
    assert_non_null(e);
    if (strcmp(json_string_value(json_object_get(e, "type")), "step.retry_deferred") == 0) {
      deferred++;
      assert_string_equal(json_string_value(json_object_get(e, "budget")), "api");
      assert_int_equal(json_integer_value(json_object_get(e, "computed_delay_ms")), 10);
      assert_true(json_integer_value(json_object_get(e, "deferred_until")) >
                  json_integer_value(json_object_get(e, "computed_run_at")));
    }
    json_decref(e);
  }
  free(text);
  assert_int_equal(deferred, 2);
  /* `show` gives the deferred attempts' source. */
  int budget = 0;
  for (int id = 1; id <= 3; id++) {
    char task[16];
    snprintf(task, sizeof task, "%d", id);
    CLI(c, &r, "show", task, "--json");
    assert_int_equal(r.status, 0);
    json_t *t = json_loads(r.out, 0, NULL);
    assert_non_null(t);
    size_t i;
    json_t *a, *step = json_array_get(json_object_get(t, "steps"), 0);
    json_array_foreach(json_object_get(step, "history"), i, a) {
      const char *src = json_string_value(json_object_get(a, "delay_source"));
      if (src && strcmp(src, "budget") == 0) budget++;
    }
    json_decref(t);
    run_result_free(&r);
  }
  assert_int_equal(budget, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(config_show_lists_budgets, setup, teardown),
      cmocka_unit_test_setup_teardown(an_unknown_budget_is_refused_and_nothing_stored, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(run_defers_retries_over_budget, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
