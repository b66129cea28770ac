/* Core pieces: the error table, durations, the random source, clocks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/expect_text.h"

#include <stdint.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/duration.h>
#include <tasker/error.h>
#include <tasker/rand.h>

static void error_table_is_complete_and_distinct(void **state) {
  (void)state;
  assert_string_equal(tk_strerror(0), "success");
  assert_string_equal(tk_strerror(TK_EINVAL), "invalid argument");
  assert_string_equal(tk_err_name(TK_ENOHINT), "TK_ENOHINT");
  assert_string_equal(tk_strerror(12345), "unknown error");
  /* Every code from -1 down to the last has its own text and name. */
  for (int c = -1; c > TK__ERR_LAST; c--) {
    assert_string_not_equal(tk_strerror(c), "unknown error");
    for (int d = c - 1; d > TK__ERR_LAST; d--)
      assert_string_not_equal(tk_strerror(c), tk_strerror(d));
  }
}

static void err_buffer_formats_and_truncates(void **state) {
  (void)state;
  tk_err e;
  tk_err_clear(&e);
  assert_string_equal(tk_err_message(&e), "success");
  assert_int_equal(tk_err_set(&e, TK_ERANGE, "value %d too big", 7), TK_ERANGE);
  assert_string_equal(e.msg, "value 7 too big");
  char big[2 * TK_ERR_MSG_MAX];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tk_err_set(&e, TK_EINVAL, "%s", big);
  assert_int_equal(strlen(e.msg), TK_ERR_MSG_MAX - 1);
  assert_int_equal(tk_err_set(NULL, TK_EIO, "ignored"), TK_EIO);
}

static void duration_parse_forms(void **state) {
  (void)state;
  struct { const char *text; int64_t ms; } ok[] = {
      {"150ms", 150}, {"2s", 2000}, {"5m", 300000}, {"1h", 3600000}, {"1m30s", 90000},
      {"30", 30000}, {"1.5", 1500}, {"0.25s", 250}, {"0", 0}, {"1h2m3s4ms", 3723004},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t ms = -1;
    assert_int_equal(tk_duration_parse(ok[i].text, &ms, NULL), 0);
    assert_int_equal(ms, ok[i].ms);
  }
  const char *bad[] = {"", "-1s", "5x", "s", "1.5.2s", "10 s", "1s2", "ms", "1e3"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t ms = 77;
    tk_err e;
    assert_true(tk_duration_parse(bad[i], &ms, &e) < 0);
    assert_int_equal(ms, 77);
    expect_contains(e.msg, "invalid duration");
  }
  tk_err e;
  int64_t ms;
  tk_duration_parse("5x", &ms, &e);
  assert_string_equal(e.msg, "invalid duration \"5x\": expected a number with a unit ms, s, m "
                             "or h (\"150ms\", \"2s\", \"1m30s\") or plain seconds (\"30\", \"1.5\")");
  assert_int_equal(tk_duration_parse("999999999999999999h", &ms, &e), TK_ERANGE);
}

static void duration_from_seconds(void **state) {
  (void)state;
  int64_t ms;
  assert_int_equal(tk_duration_from_seconds(2.5, &ms, NULL), 0);
  assert_int_equal(ms, 2500);
  assert_int_equal(tk_duration_from_seconds(-1, &ms, NULL), TK_ERANGE);
  assert_int_equal(tk_duration_from_seconds(1e300, &ms, NULL), TK_ERANGE);
}

static void duration_format(void **state) {
  (void)state;
  struct { int64_t ms; const char *text; } cases[] = {
      {0, "0ms"}, {150, "150ms"}, {1000, "1s"}, {1500, "1.5s"}, {60000, "1m"},
      {90000, "1m30s"}, {3600000, "1h"}, {3723004, "1h2m3.004s"}, {-2000, "-2s"},
      {INT64_MIN, "-2562047788015h12m55.808s"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[64];
    tk_duration_format(cases[i].ms, buf, sizeof buf);
    assert_string_equal(buf, cases[i].text);
  }
}

static void rand_range_bounds_and_reproducibility(void **state) {
  (void)state;
  tk_rand a, b;
  tk_rand_seed(&a, 0);
  tk_rand_seed(&b, 0);
  int hits[7] = {0};
  for (int i = 0; i < 70000; i++) {
    int64_t x = tk_rand_range(&a, 3, 9);
    assert_int_equal(x, tk_rand_range(&b, 3, 9));
    assert_in_range(x, 3, 9);
    hits[x - 3]++;
  }
  for (int i = 0; i < 7; i++) assert_in_range(hits[i], 9000, 11000);
  assert_int_equal(tk_rand_range(&a, 5, 5), 5);
  int64_t big = tk_rand_range(&a, 0, INT64_MAX);
  assert_true(big >= 0);
  double u = tk_rand_unit(&a);
  assert_true(u >= 0.0 && u < 1.0);
}

static void manual_clock_advances_on_sleep(void **state) {
  (void)state;
  tk_manual_clock m = {.now_ms = 1000};
  tk_clock c = tk_clock_manual(&m);
  assert_int_equal(tk_clock_now(&c), 1000);
  tk_clock_sleep(&c, 250);
  tk_clock_sleep(&c, 0);
  assert_int_equal(tk_clock_now(&c), 1250);
  assert_int_equal(m.sleeps, 1);
  tk_clock s = tk_clock_system();
  assert_true(tk_clock_now(&s) > 1700000000000LL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(error_table_is_complete_and_distinct),
      cmocka_unit_test(err_buffer_formats_and_truncates),
      cmocka_unit_test(duration_parse_forms),
      cmocka_unit_test(duration_from_seconds),
      cmocka_unit_test(duration_format),
      cmocka_unit_test(rand_range_bounds_and_reproducibility),
      cmocka_unit_test(manual_clock_advances_on_sleep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
