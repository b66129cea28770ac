/* `tasker simulate` as a user runs it: repeatable output for a seed, the
 * JSON shape, the comparisons at 100 clients, the SVG file and flag
 * errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cli_expect.h"
#include "common/expect_text.h"

static void same_seed_same_output(void **state) {
  (void)state;
  run_result a, b, c;
  RUN(&a, "simulate", "--clients", "10:30:10", "--trials", "5", "--seed", "11");
  RUN(&b, "simulate", "--clients=10:30:10", "--trials=5", "--seed=11");
  RUN(&c, "simulate", "--clients", "10:30:10", "--trials", "5", "--seed", "12");
  assert_int_equal(a.status, 0);
  assert_string_equal(a.err, "");
  assert_string_equal(a.out, b.out);
  assert_string_not_equal(a.out, c.out);
  expect_contains(a.out, "seed 11");
  expect_contains(a.out, "mean total calls");
  expect_contains(a.out, "mean completion time");
  expect_contains(a.out, "clients that succeeded within their attempt budget");
  expect_contains(a.out, "decorrelated");
  run_result_free(&a);
  run_result_free(&b);
  run_result_free(&c);
}

static json_t *result_for(json_t *results, const char *policy) {
  size_t i;
  json_t *row;
  json_array_foreach(results, i, row) {
    if (strcmp(json_string_value(json_object_get(row, "policy")), policy) == 0) return row;
  }
  fail_msg("no result for %s", policy);
  return NULL;
}

static double num(json_t *row, const char *key) {
  json_t *v = json_object_get(row, key);
  if (!json_is_number(v)) fail_msg("%s is not a number", key);
  return json_number_value(v);
}

static void json_at_100_clients(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--json", "simulate", "--clients", "100", "--trials", "20", "--seed", "3");
  assert_int_equal(r.status, 0);
  json_error_t jerr;
  json_t *root = json_loads(r.out, 0, &jerr);
  if (root == NULL) fail_msg("not JSON: %s", jerr.text);
  assert_int_equal(json_integer_value(json_object_get(root, "seed")), 3);
  json_t *config = json_object_get(root, "config");
  assert_int_equal(json_integer_value(json_object_get(config, "trials")), 20);
  assert_int_equal(json_integer_value(json_object_get(config, "max_attempts")), 20);
  assert_int_equal(json_array_size(json_object_get(config, "policies")), 7);
  json_t *results = json_object_get(root, "results");
  assert_int_equal(json_array_size(results), 7);
  size_t i;
  json_t *row;
  json_array_foreach(results, i, row) {
    assert_int_equal(json_integer_value(json_object_get(row, "clients")), 100);
    assert_true(num(row, "mean_calls") >= 200);
    assert_true(num(row, "mean_completion_ms") > 0);
    double ok = num(row, "succeeded");
    assert_true(ok >= 0 && ok <= 1);
  }
  json_t *full = result_for(results, "full"), *expo = result_for(results, "exponential"),
         *linear = result_for(results, "linear");
  assert_true(num(full, "mean_calls") < num(expo, "mean_calls"));
  assert_true(num(linear, "succeeded") < 1.0);
  assert_int_equal(json_integer_value(json_object_get(linear, "max_attempts")), 4);
  json_decref(root);
  run_result_free(&r);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

static void svg_has_two_charts_and_a_legend(void **state) {
  (void)state;
  char path[] = "/tmp/tasker-sim-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  run_result r;
  RUN(&r, "simulate", "--clients", "10:50:20", "--trials", "3", "--seed", "1", "--policies",
      "full,exponential,linear", "--svg", path);
  assert_int_equal(r.status, 0);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  unlink(path);
  assert_memory_equal(buf, "<?xml version=\"1.0\"", 19);
  expect_contains(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
  expect_contains(buf, "</svg>\n");
  assert_int_equal(count(buf, "<polyline"), 6); /* 3 policies x 2 charts */
  assert_int_equal(count(buf, "<svg"), count(buf, "</svg>"));
  assert_int_equal(count(buf, "<text"), count(buf, "</text>"));
  expect_contains(buf, ">exponential</text>");
  expect_contains(buf, "mean completion time");
  /* The table lists only the chosen policies, in the order given. */
  expect_contains(r.out, "full   exponential        linear");
  assert_null(strstr(r.out, "decorrelated"));
  run_result_free(&r);
}

static void bad_flags_exit_2_with_one_line(void **state) {
  (void)state;
  const char *a1[] = {"simulate", "--clients", "0:10:1", NULL};
  expect_usage_error("tasker simulate: --clients: invalid value \"0:10:1\": expected N or "
                     "FROM:TO:STEP with 1 <= FROM <= TO <= 100000 and STEP >= 1\n", a1);
  const char *a2[] = {"simulate", "--clients", "10:190", NULL};
  expect_usage_error("tasker simulate: --clients: invalid value \"10:190\": expected N or "
                     "FROM:TO:STEP with 1 <= FROM <= TO <= 100000 and STEP >= 1\n", a2);
  const char *a3[] = {"simulate", "--policies", "full,jittery", NULL};
  expect_usage_error("tasker simulate: --policies: unknown policy \"jittery\": expected none, "
                     "exponential, full, equal, decorrelated, proportional or linear\n", a3);
  const char *a4[] = {"simulate", "--base", "2s", "--cap", "1s", NULL};
  expect_usage_error("tasker simulate: invalid settings: base (2000 ms) is above the cap "
                     "(1000 ms)\n", a4);
  const char *a5[] = {"simulate", "--trials", "0", NULL};
  expect_usage_error("tasker simulate: --trials: invalid value \"0\": expected an integer from "
                     "1 to 1000000\n", a5);
  const char *a6[] = {"simulate", "--policies", "full,full", NULL};
  expect_usage_error("tasker simulate: --policies: \"full\" is listed twice\n", a6);
  const char *a7[] = {"simulate", "--base", "0", NULL};
  expect_usage_error("tasker simulate: --base: invalid value \"0\": must be above 0\n", a7);
}

static void svg_write_failure_is_reported(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "simulate", "--clients", "5", "--trials", "1", "--seed", "1", "--svg",
      "/nonexistent-dir/x.svg");
  assert_int_equal(r.status, 1);
  assert_string_equal(r.err, "tasker simulate: --svg: cannot write \"/nonexistent-dir/x.svg\": "
                             "No such file or directory\n");
  run_result_free(&r);
}

static void help_describes_the_model(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "simulate", "--help");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "--max-attempts N");
  expect_contains(r.out, "linear is a naive client");
  run_result_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_seed_same_output),
      cmocka_unit_test(json_at_100_clients),
      cmocka_unit_test(svg_has_two_charts_and_a_legend),
      cmocka_unit_test(bad_flags_exit_2_with_one_line),
      cmocka_unit_test(svg_write_failure_is_reported),
      cmocka_unit_test(help_describes_the_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
