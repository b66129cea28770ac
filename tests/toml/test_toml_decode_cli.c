/* The real `tasker toml-decode`: tagged JSON on stdout and exit 0 for a
 * valid document; one located line on stderr, nothing on stdout and exit 1
 * for an invalid one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "common/run_cli.h"

static void valid_input_prints_tagged_json(void **state) {
  (void)state;
  const char *args[] = {"toml-decode", NULL};
  run_result r;
  assert_int_equal(run_cli(&r, "n = 0xff\n[t]\nd = 1979-05-27\nf = [1.5, \"s\"]\n", args), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  json_error_t jerr;
  json_t *j = json_loads(r.out, 0, &jerr);
  assert_non_null(j);
  json_t *want = json_pack("{s:{s:s,s:s},s:{s:{s:s,s:s},s:[{s:s,s:s},{s:s,s:s}]}}",
                           "n", "type", "integer", "value", "255",
                           "t", "d", "type", "date-local", "value", "1979-05-27",
                           "f", "type", "float", "value", "1.5", "type", "string", "value", "s");
  assert_true(json_equal(j, want));
  json_decref(j);
  json_decref(want);
  run_result_free(&r);
}

static void invalid_input_reports_one_located_line(void **state) {
  (void)state;
  const char *args[] = {"toml-decode", NULL};
  run_result r;
  assert_int_equal(run_cli(&r, "a = 1\nb = tru\n", args), 0);
  assert_int_equal(r.status, 1);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "toml-decode: line 2, column 5: invalid value \"tru\": expected a "
                             "string, number, boolean (true, false), date-time, array or inline "
                             "table\n");
  run_result_free(&r);
}

static void arguments_are_refused(void **state) {
  (void)state;
  const char *args[] = {"toml-decode", "file.toml", NULL};
  run_result r;
  assert_int_equal(run_cli(&r, "", args), 0);
  assert_int_equal(r.status, 2);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "tasker toml-decode: unexpected argument \"file.toml\"\n");
  run_result_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_input_prints_tagged_json),
      cmocka_unit_test(invalid_input_reports_one_located_line),
      cmocka_unit_test(arguments_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
