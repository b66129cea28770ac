/* [queues.NAME] (DESIGN §19, issue 23 item 4) through the real binary:
 * each bad value, name and key exits 78 naming FILE:LINE:COLUMN (or the
 * --set flag), the key, the value and what was expected; a burst needs a
 * rate; config show lists each queue's keys with where they came from,
 * in text and --json, a burst not set showing the default its rate gives
 * (max(1, ceil(rate per second))). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/run_cli.h"

static char dir[] = "/tmp/tasker-config-queues-XXXXXX";
static char file[128];

static int setup(void **state) {
  (void)state;
  if (mkdtemp(dir) == NULL) return -1;
  snprintf(file, sizeof file, "%s/q.toml", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

static void write_config(const char *text) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* `tasker --config FILE [--set SET] config check` on `toml` exits 78 with
 * exactly "tasker: " + want (FILE for %s) on stderr and nothing on stdout. */
static void refused(const char *toml, const char *set, const char *want) {
  write_config(toml);
  const char *with_set[] = {"--config", file, "--set", set, "config", "check", NULL};
  const char *plain[] = {"--config", file, "config", "check", NULL};
  run_result r;
  assert_int_equal(run_cli(&r, NULL, set ? with_set : plain), 0);
  char expected[1024];
  snprintf(expected, sizeof expected, want, file);
  char line[1100];
  snprintf(line, sizeof line, "tasker: %s\n", expected);
  assert_string_equal(r.err, line);
  assert_string_equal(r.out, "");
  assert_int_equal(r.status, 78);
  run_result_free(&r);
}

#define RATE_FORMS                                                                          \
  "expected a rate such as \"50/s\", \"300/m\" or \"1000/h\" (a whole count from 1 to "     \
  "1000000000 per second, minute or hour)"

static void bad_values_are_placed(void **state) {
  (void)state;
  refused("[queues.pay]\nconcurrency = 0\n", NULL,
          "%s:2:15: queues.pay.concurrency = 0: must be an integer from 1 to 1000000 (its steps "
          "in progress at once)");
  refused("[queues.pay]\nconcurrency = \"ten\"\n", NULL,
          "%s:2:15: queues.pay.concurrency = \"ten\": expected an integer from 1 to 1000000 "
          "(its steps in progress at once), got a string");
  refused("[queues.pay]\nconcurrency = 2.5\n", NULL,
          "%s:2:15: queues.pay.concurrency = 2.5: expected an integer from 1 to 1000000 (its "
          "steps in progress at once), got a float");
  refused("[queues.pay]\nrate = \"50/d\"\n", NULL,
          "%s:2:8: queues.pay.rate = \"50/d\": " RATE_FORMS);
  refused("[queues.pay]\nrate = \"0/s\"\n", NULL, "%s:2:8: queues.pay.rate = \"0/s\": " RATE_FORMS);
  refused("[queues.pay]\nrate = \"1.5/s\"\n", NULL,
          "%s:2:8: queues.pay.rate = \"1.5/s\": " RATE_FORMS);
  refused("[queues.pay]\nrate = \"50 / s\"\n", NULL,
          "%s:2:8: queues.pay.rate = \"50 / s\": " RATE_FORMS);
  refused("[queues.pay]\nrate = \"1000000001/h\"\n", NULL,
          "%s:2:8: queues.pay.rate = \"1000000001/h\": " RATE_FORMS);
  refused("[queues.pay]\nrate = 50\n", NULL,
          "%s:2:8: queues.pay.rate = 50: " RATE_FORMS ", got an integer");
  refused("[queues.pay]\nrate = \"5/s\"\nburst = 0\n", NULL,
          "%s:3:9: queues.pay.burst = 0: must be an integer from 1 to 1000000000 (the most "
          "steps the rate lets start at once)");
  refused("# no rate\n[queues.pay]\nconcurrency = 3\nburst = 5\n", NULL,
          "%s:4:9: queues.pay.burst = 5: a burst needs a rate (it is the size of the rate's "
          "token bucket), such as rate = \"50/s\"");
}

static void bad_keys_and_names(void **state) {
  (void)state;
  refused("[queues.pay]\nconcurency = 3\n", NULL,
          "%s:2:1: unknown key \"queues.pay.concurency\" (did you mean \"concurrency\"?)");
  refused("[queues.pay]\ncolour = 3\n", NULL,
          "%s:2:1: unknown key \"queues.pay.colour\" (known keys: concurrency, rate, burst)");
  refused("[queues.Payments]\nconcurrency = 3\n", NULL,
          "%s:1:9: queues.\"Payments\": a queue name must be 1 to 64 lowercase letters, digits, "
          "\"_\", \".\" or \"-\"");
  refused("[queues.\"pay ments\"]\nconcurrency = 3\n", NULL,
          "%s:1:9: queues.\"pay ments\": a queue name must be 1 to 64 lowercase letters, digits, "
          "\"_\", \".\" or \"-\"");
  refused("[queues]\npay = 3\n", NULL,
          "%s:2:7: queues.pay = 3: expected a table ([queues.NAME] with concurrency, rate, "
          "burst), got an integer");
  refused("[queues.pay]\nconcurrency = 3\n", "queues.pay.rate=fast", "--set queues.pay.rate=fast: " RATE_FORMS);
  refused("[queues.pay]\nconcurrency = 3\n", "queues.pay.concurrency=0",
          "--set queues.pay.concurrency=0: must be an integer from 1 to 1000000 (its steps in "
          "progress at once)");
}

/* The line of out for key, from "KEY = " to its end. */
static void assert_line(const char *out, const char *key, const char *value, const char *origin) {
  char want[512];
  snprintf(want, sizeof want, "\n%s = %s ", key, value);
  const char *at = strstr(out, want);
  if (at == NULL) fail_msg("no line \"%s = %s\" in:\n%s", key, value, out);
  const char *end = strchr(at + 1, '\n'), *hash = strstr(at, "  # ");
  assert_non_null(hash);
  assert_true(hash < end);
  assert_int_equal((int)(end - hash - 4), (int)strlen(origin));
  assert_memory_equal(hash + 4, origin, strlen(origin));
}

static void show_lists_queues(void **state) {
  (void)state;
  write_config("[queues.payments]\nconcurrency = 10\nrate = \"50/s\"\n"
               "[queues.images]\nrate = \"1000/h\"\nburst = 3\n"
               "[queues.slow]\nconcurrency = 2\n");
  char at[256];
  run_result r;
  const char *text[] = {"--config", file, "--set", "queues.slow.rate=90/m", "config", "show",
                        NULL};
  assert_int_equal(run_cli(&r, NULL, text), 0);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  snprintf(at, sizeof at, "%s:2", file);
  assert_line(r.out, "queues.payments.concurrency", "10", at);
  snprintf(at, sizeof at, "%s:3", file);
  assert_line(r.out, "queues.payments.rate", "\"50/s\"", at);
  assert_line(r.out, "queues.payments.burst", "50", "default");
  snprintf(at, sizeof at, "%s:5", file);
  assert_line(r.out, "queues.images.rate", "\"1000/h\"", at);
  snprintf(at, sizeof at, "%s:6", file);
  assert_line(r.out, "queues.images.burst", "3", at);
  assert_null(strstr(r.out, "queues.images.concurrency"));
  assert_line(r.out, "queues.slow.rate", "\"90/m\"", "--set");
  /* 90/m is 1.5 a second: a bucket of 2. */
  assert_line(r.out, "queues.slow.burst", "2", "default");
  run_result_free(&r);

  const char *json[] = {"--config", file, "config", "show", "--json", NULL};
  assert_int_equal(run_cli(&r, NULL, json), 0);
  assert_int_equal(r.status, 0);
  json_t *all = json_loads(r.out, 0, NULL);
  assert_non_null(all);
  json_t *s = json_object_get(all, "queues.payments.concurrency");
  assert_int_equal(json_integer_value(json_object_get(s, "value")), 10);
  snprintf(at, sizeof at, "%s:2", file);
  assert_string_equal(json_string_value(json_object_get(s, "origin")), at);
  s = json_object_get(all, "queues.images.burst");
  assert_int_equal(json_integer_value(json_object_get(s, "value")), 3);
  s = json_object_get(all, "queues.slow.concurrency");
  assert_int_equal(json_integer_value(json_object_get(s, "value")), 2);
  assert_null(json_object_get(all, "queues.slow.rate"));
  assert_null(json_object_get(all, "queues.slow.burst"));
  json_decref(all);
  run_result_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_values_are_placed),
      cmocka_unit_test(bad_keys_and_names),
      cmocka_unit_test(show_lists_queues),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
