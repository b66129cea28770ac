/* The embedding example (examples/embed.c) as a new user runs it: an
 * in-process handler asks for a 100 ms delay, the retry honours it, the
 * child receives its parent's results, the task completes. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/run_cli.h"
#include "common/expect_text.h"

static void embed_example_runs_a_task_with_a_server_hinted_retry(void **state) {
  (void)state;
  char bin[4096];
  char *tasker = strdup(tasker_path());
  snprintf(bin, sizeof bin, "%s/../examples/embed", dirname(tasker));
  free(tasker);
  char dir[] = "/tmp/tasker-embed-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s %s/embed.db 2>&1", bin, dir);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char out[65536];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  if (status != 0) fail_msg("embed exited with %d: %s", status, out);
  expect_contains(out, "\"delay_ms\":100,\"source\":\"server\"");
  expect_contains(out, "\"parents\":{\"charge\":{\"charged\":4200,\"currency\":\"EUR\"}}");
  expect_contains(out, "completed 2 steps, 1 retry");
  expect_contains(out, "\"execution_status\": \"all_complete\"");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(embed_example_runs_a_task_with_a_server_hinted_retry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
