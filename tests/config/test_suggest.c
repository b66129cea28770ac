/* "Did you mean": typos find their key; unrelated words find nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "config/internal.h"

static const char *const keys[] = {"schedule", "base", "multiplier", "max_delay",
                                   "min_delay", "jitter", "jitter_fraction",
                                   "max_server_delay", "profiles"};
#define NKEYS (sizeof keys / sizeof keys[0])

static void typos_find_their_key(void **state) {
  (void)state;
  assert_string_equal(tk__suggest("max_dealy", keys, NKEYS), "max_delay"); /* swap */
  assert_string_equal(tk__suggest("maxdelay", keys, NKEYS), "max_delay");  /* missing */
  assert_string_equal(tk__suggest("multiplyer", keys, NKEYS), "multiplier");
  assert_string_equal(tk__suggest("jiter", keys, NKEYS), "jitter");
  assert_string_equal(tk__suggest("profile", keys, NKEYS), "profiles");
  assert_string_equal(tk__suggest("bse", keys, NKEYS), "base");
  assert_string_equal(tk__suggest("Schedule", keys, NKEYS), "schedule");
}

static void unrelated_words_find_nothing(void **state) {
  (void)state;
  assert_null(tk__suggest("colour", keys, NKEYS));
  assert_null(tk__suggest("db", keys, NKEYS));
  assert_null(tk__suggest("", keys, NKEYS));
  assert_null(tk__suggest("retries", keys, NKEYS));
  assert_null(tk__suggest("max_delay", keys, 0));
  char long_word[200];
  memset(long_word, 'a', sizeof long_word - 1);
  long_word[sizeof long_word - 1] = '\0';
  assert_null(tk__suggest(long_word, keys, NKEYS));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(typos_find_their_key),
      cmocka_unit_test(unrelated_words_find_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
