/* Retry-After parsing: delay-seconds (one too long to count is the longest
 * wait), the three HTTP-date forms, the past, and every malformed class
 * giving "no hint" rather than a crash. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include <tasker/backoff.h>

/* 1994-11-06T08:49:37Z in ms since the epoch. */
#define INSTANT_1994 784111777000LL

static int parse(const char *s, int64_t now, int64_t *out, tk_err *err) {
  return tk_retry_after_parse(s, strlen(s), now, out, err);
}

static void three_date_forms_agree(void **state) {
  (void)state;
  const char *forms[] = {
      "Sun, 06 Nov 1994 08:49:37 GMT",  /* IMF-fixdate */
      "Sunday, 06-Nov-94 08:49:37 GMT", /* obsolete RFC 850 */
      "Sun Nov  6 08:49:37 1994",       /* asctime */
  };
  /* "now" is 10 minutes before the instant, in 1994, so the two-digit
   * year resolves to 1994. */
  int64_t now = INSTANT_1994 - 600000;
  for (size_t i = 0; i < 3; i++) {
    int64_t d = -1;
    tk_err err;
    assert_int_equal(parse(forms[i], now, &d, &err), 0);
    assert_int_equal(d, 600000);
  }
}

static void seconds_form(void **state) {
  (void)state;
  int64_t d = -1;
  assert_int_equal(parse("120", 0, &d, NULL), 0);
  assert_int_equal(d, 120000);
  assert_int_equal(parse("  0\t", 0, &d, NULL), 0);
  assert_int_equal(d, 0);
  /* The largest number of seconds that fits in int64 milliseconds. */
  assert_int_equal(parse("9223372036854775", 0, &d, NULL), 0);
  assert_int_equal(d, 9223372036854775000LL);
}

static void past_date_gives_zero(void **state) {
  (void)state;
  int64_t d = -1;
  assert_int_equal(parse("Sun, 06 Nov 1994 08:49:37 GMT", 1700000000000LL, &d, NULL), 0);
  assert_int_equal(d, 0);
  d = -1;
  assert_int_equal(parse("Thu, 01 Jan 1970 00:00:00 GMT", 1, &d, NULL), 0);
  assert_int_equal(d, 0);
}

static void rfc850_year_window(void **state) {
  (void)state;
  /* now = 2026-11-22; "30" is 2030 (within 50 years ahead), "94" is 1994. */
  int64_t now = 1795305600000LL;
  int64_t d = -1;
  assert_int_equal(parse("Tuesday, 01-Jan-30 00:00:00 GMT", now, &d, NULL), 0);
  assert_int_equal(d, 1893456000000LL - now);
  assert_int_equal(parse("Sunday, 06-Nov-94 08:49:37 GMT", now, &d, NULL), 0);
  assert_int_equal(d, 0);
}

static void leap_day_and_leap_second(void **state) {
  (void)state;
  int64_t d = -1;
  assert_int_equal(parse("Thu, 29 Feb 2024 00:00:00 GMT", 0, &d, NULL), 0);
  assert_int_equal(d, 1709164800000LL);
  assert_int_equal(parse("Sat, 31 Dec 2016 23:59:60 GMT", 0, &d, NULL), 0);
  assert_int_equal(d, 1483228800000LL);
}

/* More seconds than int64 milliseconds can count is the longest wait
 * (INT64_MAX), for the caller to cap, never "no hint" (which would retry
 * at the policy's delay, at once); the latest HTTP-date is a delay too. */
static void too_long_to_count_is_the_longest_wait(void **state) {
  (void)state;
  const char *huge[] = {"9223372036854776", "99999999999999999999",
                        " 999999999999999999999999999999999999999999 "};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    int64_t d = -1;
    tk_err err;
    if (parse(huge[i], 0, &d, &err) != 0) fail_msg("\"%s\": %s", huge[i], err.msg);
    assert_int_equal(d, INT64_MAX);
  }
  /* Still malformed when something else follows the digits. */
  int64_t d = 12345;
  assert_int_equal(parse("99999999999999999999x", 0, &d, NULL), TK_ENOHINT);
  assert_int_equal(parse("99999999999999999999.5", 0, &d, NULL), TK_ENOHINT);
  assert_int_equal(d, 12345);
  /* 9999-12-31T23:59:59Z, from the epoch and from 1994. */
  assert_int_equal(parse("Fri, 31 Dec 9999 23:59:59 GMT", 0, &d, NULL), 0);
  assert_int_equal(d, 253402300799000LL);
  assert_int_equal(parse("Fri Dec 31 23:59:59 9999", INSTANT_1994, &d, NULL), 0);
  assert_int_equal(d, 253402300799000LL - INSTANT_1994);
}

static void expect_no_hint(const char *s, const char *why) {
  int64_t d = 12345;
  tk_err err;
  tk_err_clear(&err);
  assert_int_equal(tk_retry_after_parse(s, strlen(s), INSTANT_1994, &d, &err), TK_ENOHINT);
  assert_int_equal(d, 12345); /* untouched */
  assert_int_equal(err.code, TK_ENOHINT);
  if (strstr(err.msg, why) == NULL) fail_msg("message \"%s\" lacks \"%s\"", err.msg, why);
}

static void malformed_values_give_no_hint(void **state) {
  (void)state;
  expect_no_hint("", "empty");
  expect_no_hint("   ", "empty");
  expect_no_hint("-1", "negative");
  expect_no_hint("1.5", "fractional");
  expect_no_hint("Sun, 06 Nov 1994 25:49:37 GMT", "time of day out of range");
  expect_no_hint("Sun, 06 Nov 1994 08:60:37 GMT", "time of day out of range");
  expect_no_hint("Sun, 30 Feb 1994 08:49:37 GMT", "no such day");
  expect_no_hint("Fri, 29 Feb 2019 08:49:37 GMT", "no such day");
  expect_no_hint("Sun, 06 Nov 1994 08:49:37 UTC", "malformed");
  expect_no_hint("Sun, 06 Nov 1994 08:49:37 GMT trailing", "malformed");
  expect_no_hint("Sun, 6 Nov 1994 08:49:37 GMT", "malformed");
  expect_no_hint("sun, 06 nov 1994 08:49:37 GMT", "malformed");
  expect_no_hint("Xyz, 06 Nov 1994 08:49:37 GMT", "malformed");
  expect_no_hint("Sun Nov 6 08:49:37 1994", "malformed");
  expect_no_hint("12abc", "malformed");
  expect_no_hint("+5", "malformed");
  expect_no_hint("soon", "malformed");
}

static void not_nul_terminated(void **state) {
  (void)state;
  const char buf[] = {'4', '2', '7'};
  int64_t d = -1;
  assert_int_equal(tk_retry_after_parse(buf, 2, 0, &d, NULL), 0);
  assert_int_equal(d, 42000);
  assert_int_equal(tk_retry_after_parse(NULL, 0, 0, &d, NULL), TK_ENOHINT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(three_date_forms_agree),
      cmocka_unit_test(seconds_form),
      cmocka_unit_test(past_date_gives_zero),
      cmocka_unit_test(rfc850_year_window),
      cmocka_unit_test(leap_day_and_leap_second),
      cmocka_unit_test(too_long_to_count_is_the_longest_wait),
      cmocka_unit_test(malformed_values_give_no_hint),
      cmocka_unit_test(not_nul_terminated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
