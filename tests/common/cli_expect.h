/* cmocka checks on the real binary, shared by the CLI tests. Include after
 * <cmocka.h>. */
#ifndef TESTS_CLI_EXPECT_H
#define TESTS_CLI_EXPECT_H

#include "common/run_cli.h"

/* Run tasker with the given arguments (no stdin) into *r. */
#define RUN(r, ...)                                                  \
  do {                                                               \
    const char *args_[] = {__VA_ARGS__, NULL};                       \
    assert_int_equal(run_cli((r), NULL, args_), 0);                  \
  } while (0)

/* A bad flag or value: exit 2, nothing on stdout, exactly `want` on stderr. */
static inline void expect_usage_error(const char *want, const char *const *args) {
  run_result r;
  assert_int_equal(run_cli(&r, NULL, args), 0);
  assert_int_equal(r.status, 2);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, want);
  run_result_free(&r);
}

#endif
