/* The real tasker binary: global options, help, version, and
 * `tasker backoff` output, JSON shape, exit codes and messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "common/cli_expect.h"
#include "common/expect_text.h"

static void bad_flags_exit_2_with_one_line(void **state) {
  (void)state;
  const char *a1[] = {"backoff", "--attempts", "zero", NULL};
  expect_usage_error("tasker backoff: --attempts: invalid value \"zero\": expected an integer "
                     "from 1 to 100000\n", a1);
  const char *a2[] = {"backoff", "--jitter", "fuzzy", NULL};
  expect_usage_error("tasker backoff: --jitter: invalid value \"fuzzy\": expected none, "
                     "proportional, full, equal or decorrelated\n", a2);
  const char *a3[] = {"backoff", "--multiplier", "0.5", NULL};
  expect_usage_error("tasker backoff: --multiplier: invalid value \"0.5\": expected a number "
                     "from 1 to 1e+300\n", a3);
  const char *a4[] = {"backoff", "--max-delay", "5x", NULL};
  expect_usage_error("tasker backoff: --max-delay: invalid duration \"5x\": expected a number "
                     "with a unit ms, s, m or h (\"150ms\", \"2s\", \"1m30s\") or plain seconds "
                     "(\"30\", \"1.5\")\n", a4);
  const char *a5[] = {"backoff", "--frobnicate", NULL};
  expect_usage_error("tasker backoff: unknown flag \"--frobnicate\" (see tasker backoff --help)\n",
                     a5);
  const char *a6[] = {"backoff", "--schedule", "1s,,2s", NULL};
  expect_usage_error("tasker backoff: --schedule: invalid value \"1s,,2s\": expected delays "
                     "separated by commas\n", a6);
  const char *a7[] = {"backoff", "--jitter-fraction", "2", NULL};
  expect_usage_error("tasker backoff: --jitter-fraction: invalid value \"2\": expected a number "
                     "from 0 to 1\n", a7);
  const char *a8[] = {"backoff", "--min-delay", "10s", "--max-delay", "1s", NULL};
  expect_usage_error("tasker backoff: invalid policy: max_delay (1000 ms) is below min_delay "
                     "(10000 ms)\n", a8);
  const char *a9[] = {"launch", NULL};
  expect_usage_error("tasker: unknown command \"launch\" (see tasker --help)\n", a9);
  const char *a10[] = {"backoff", "--seed", NULL};
  expect_usage_error("tasker backoff: flag --seed needs a value (S)\n", a10);
}

static void help_and_version(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--help");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "backoff");
  expect_contains(r.out, "--db URL");
  run_result_free(&r);
  RUN(&r, "--version");
  assert_int_equal(r.status, 0);
  assert_memory_equal(r.out, "tasker ", 7);
  run_result_free(&r);
  RUN(&r, "backoff", "--help");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "--jitter-fraction");
  run_result_free(&r);
  const char *none[] = {NULL};
  assert_int_equal(run_cli(&r, NULL, none), 0);
  assert_int_equal(r.status, 2);
  expect_contains(r.err, "usage: tasker");
  run_result_free(&r);
}

/* Parse r->out as a JSON array of exactly the documented row objects. */
static json_t *rows_of(run_result *r) {
  json_error_t jerr;
  json_t *rows = json_loads(r->out, 0, &jerr);
  if (rows == NULL) fail_msg("not JSON: %s: %s", jerr.text, r->out);
  assert_true(json_is_array(rows));
  static const char *const keys[] = {"attempt", "raw_ms", "capped_ms", "min_ms", "median_ms",
                                     "max_ms"};
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    assert_true(json_is_object(row));
    assert_int_equal(json_object_size(row), 6);
    for (size_t k = 0; k < 6; k++) assert_true(json_is_integer(json_object_get(row, keys[k])));
    assert_int_equal(json_integer_value(json_object_get(row, "attempt")), (json_int_t)i + 1);
  }
  return rows;
}

static json_int_t field(json_t *rows, size_t i, const char *k) {
  return json_integer_value(json_object_get(json_array_get(rows, i), k));
}

static void json_shape_and_exact_schedule(void **state) {
  (void)state;
  run_result r;
  /* --json before the subcommand (a global option) */
  RUN(&r, "--json", "backoff", "--schedule", "1s,2s,4s,8s,16s,32s", "--multiplier", "2",
      "--max-delay", "60s", "--jitter", "none", "--attempts", "8");
  assert_int_equal(r.status, 0);
  json_t *rows = rows_of(&r);
  assert_int_equal(json_array_size(rows), 8);
  const json_int_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};
  for (size_t i = 0; i < 8; i++) {
    assert_int_equal(field(rows, i, "median_ms"), want[i]);
    assert_int_equal(field(rows, i, "min_ms"), want[i]);
    assert_int_equal(field(rows, i, "max_ms"), want[i]);
    assert_int_equal(field(rows, i, "capped_ms"), want[i]);
  }
  assert_int_equal(field(rows, 6, "raw_ms"), 64000);
  json_decref(rows);
  run_result_free(&r);
}

static void samples_spread_and_seed_repeats(void **state) {
  (void)state;
  run_result a, b;
  /* --json after the subcommand works too */
  RUN(&a, "backoff", "--base", "100ms", "--max-delay", "2s", "--jitter", "full", "--samples",
      "500", "--seed", "7", "--attempts", "6", "--json");
  RUN(&b, "backoff", "--json", "--base=100ms", "--max-delay=2s", "--jitter=full",
      "--samples=500", "--seed=7", "--attempts=6");
  assert_int_equal(a.status, 0);
  assert_string_equal(a.out, b.out);
  /* Another seed draws other delays: the seed is used, not ignored. */
  run_result c;
  RUN(&c, "backoff", "--json", "--base=100ms", "--max-delay=2s", "--jitter=full",
      "--samples=500", "--seed=8", "--attempts=6");
  assert_int_equal(c.status, 0);
  json_decref(rows_of(&c));
  if (strcmp(a.out, c.out) == 0) fail_msg("seed 7 and seed 8 drew the same delays: %s", a.out);
  run_result_free(&c);
  json_t *rows = rows_of(&a);
  for (size_t i = 0; i < 6; i++) {
    json_int_t lo = field(rows, i, "min_ms"), med = field(rows, i, "median_ms"),
               hi = field(rows, i, "max_ms"), cap = field(rows, i, "capped_ms");
    assert_true(lo >= 0 && lo <= med && med <= hi && hi <= cap);
    assert_true(lo < hi); /* 500 draws of full jitter spread out */
  }
  json_decref(rows);
  run_result_free(&a);
  run_result_free(&b);
}

static void table_output(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "backoff", "--base", "10ms", "--max-delay", "1s", "--jitter", "none", "--attempts",
      "8");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "attempt");
  expect_contains(r.out, "640ms");
  expect_contains(r.out, "1.28s");
  assert_string_equal(r.err, "");
  run_result_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_flags_exit_2_with_one_line),
      cmocka_unit_test(help_and_version),
      cmocka_unit_test(json_shape_and_exact_schedule),
      cmocka_unit_test(samples_spread_and_seed_repeats),
      cmocka_unit_test(table_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
