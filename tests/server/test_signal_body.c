/* A signal's body (DESIGN §18, docs/api.md) as the API reads it
 * (tk__signal_body_parse: the member types, unknown members, JSON that
 * stops) and as the library's one rule takes it (store/rules.c:
 * tk__signal_check on the parsed values, tk__signal_body_check on text as
 * the CLI's --data): each refusal names its place (the member in
 * e.param, or the line and column), and a body taken hands the data over
 * parsed, to be written once as compact JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/request_parse.h"
#include "store/rules.h"

/* Body text refused by the parser with a 400 naming param ("" for none)
 * and saying `says`. */
static void refused(const char *body, const char *param, const char *says) {
  tk__signal_body b;
  tk__api_error e;
  memset(&e, 0, sizeof e);
  if (tk__signal_body_parse(body, strlen(body), &b, &e) == 0) {
    tk__signal_body_free(&b);
    fail_msg("taken: %s", body);
  }
  assert_int_equal(e.status, 400);
  assert_string_equal(e.code, "bad_request");
  assert_string_equal(e.param, param);
  if (strstr(e.message, says) == NULL) fail_msg("\"%s\" does not say \"%s\"", e.message, says);
}

static void the_parser_names_the_place(void **state) {
  (void)state;
  refused("", "", "the request has no body");
  refused("{\"data\": {\"a\": [1,\n  2,}, \"key\": \"k\"}", "", "at line 2, column");
  refused("[1]", "", "the body is an array: expected a JSON object");
  refused("{\"data\": 1, \"eror\": \"x\"}", "eror", "unknown member \"eror\"");
  refused("{\"error\": 42}", "error", "error: an integer: expected a string");
  refused("{\"data\": 1, \"key\": []}", "key", "key: an array: expected a string");
  /* A NUL in a string: jansson refuses it as JSON already. */
  refused("{\"error\": \"a\\u0000b\"}", "", "not valid JSON");
  refused("{\"data\": 1, \"data\": 2}", "", "duplicate");
}

/* The rule on what the parser took from body: 0, or TK_EINVAL at place. */
static int rule(const char *body, const char **place, char **compact, tk_err *err) {
  tk__signal_body b;
  tk__api_error e;
  if (tk__signal_body_parse(body, strlen(body), &b, &e) != 0) fail_msg("refused: %s", e.message);
  int rc = tk__signal_check(b.data, b.error, b.key, compact, place, err);
  tk__signal_body_free(&b);
  return rc;
}

static void the_rule_names_the_member(void **state) {
  (void)state;
  static const struct {
    const char *body, *place, *says;
  } bad[] = {
      {"{}", "data", "not neither"},
      {"{\"key\": \"k\"}", "data", "not neither"},
      {"{\"data\": 1, \"error\": \"x\"}", "error", "not both"},
      {"{\"error\": \"\"}", "error", "a failing signal needs a message"},
      {"{\"data\": null, \"key\": \"\"}", "key", "1 to 200 bytes, not 0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *place = NULL;
    char *compact = NULL;
    tk_err err;
    assert_int_equal(rule(bad[i].body, &place, &compact, &err), TK_EINVAL);
    assert_null(compact);
    assert_non_null(place);
    assert_string_equal(place, bad[i].place);
    if (strstr(err.msg, bad[i].says) == NULL)
      fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].body, err.msg, bad[i].says);
  }
}

static void a_body_taken_is_written_once_compact(void **state) {
  (void)state;
  const char *place = "unset";
  char *compact = NULL;
  tk_err err;
  assert_int_equal(rule("{ \"data\" : { \"b\" : [ 1 , 2.5 , null ] } , \"key\" : \"k1\" }", &place,
                        &compact, &err),
                   0);
  assert_null(place);
  assert_string_equal(compact, "{\"b\":[1,2.5,null]}");
  free(compact);
  /* null is data too; an error signal has no data to write. */
  assert_int_equal(rule("{\"data\": null}", &place, &compact, &err), 0);
  assert_string_equal(compact, "null");
  free(compact);
  assert_int_equal(rule("{\"error\": \"refused by ana\"}", &place, &compact, &err), 0);
  assert_null(compact);
}

/* The CLI's --data: text parsed by the library, the place of a refusal
 * its line and column; the rule as above. */
static void the_text_path(void **state) {
  (void)state;
  tk_err err;
  assert_int_equal(tk__signal_body_check("{\"a\":\n  [1,}", NULL, NULL, &err), TK_EINVAL);
  if (strstr(err.msg, "signal data is not JSON: ") == NULL || strstr(err.msg, "line 2") == NULL)
    fail_msg("%s", err.msg);
  assert_int_equal(tk__signal_body_check("42", NULL, "k", &err), 0);
  assert_int_equal(tk__signal_body_check("{}", "x", NULL, &err), TK_EINVAL);
  assert_int_equal(tk__signal_body_check(NULL, "", NULL, &err), TK_EINVAL);
  assert_int_equal(tk__signal_body_check(NULL, "no", NULL, &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_parser_names_the_place),
      cmocka_unit_test(the_rule_names_the_member),
      cmocka_unit_test(a_body_taken_is_written_once_compact),
      cmocka_unit_test(the_text_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
