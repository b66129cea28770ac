/* The worker handler kind (handlers/worker.c, DESIGN §19): its table is
 * read at template time with every mistake placed and named, and its run,
 * should an orchestrator ever be handed one, fails the attempt for good. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/spec_read.h"

static void a_queue_is_read(void **state) {
  (void)state;
  json_t *spec = spec_of("{ kind = \"worker\", queue = \"images.v2_hi-res\" }");
  char *text = json_dumps(spec, JSON_SORT_KEYS | JSON_COMPACT);
  assert_string_equal(text, "{\"kind\":\"worker\",\"queue\":\"images.v2_hi-res\"}");
  free(text);
  json_decref(spec);
  spec = spec_of("{ kind = \"worker\", queue = "
                 "\"q234567890123456789012345678901234567890123456789012345678901234\" }");
  json_decref(spec);
}

static void a_bad_queue_is_placed_and_named(void **state) {
  (void)state;
  expect_spec_error("{ kind = \"worker\" }",
                    "t.toml:1:5: steps[1].handler.queue: missing: a worker handler needs the "
                    "queue its workers claim from, such as queue = \"images\"");
  const char *want_tail = ": expected a queue name: 1 to 64 lowercase letters, digits, '_', '.' "
                          "or '-'";
  struct {
    const char *table, *where;
  } bad[] = {
      {"{ kind = \"worker\", queue = \"Images\" }", "t.toml:1:32: steps[1].handler.queue = "
                                                   "\"Images\""},
      {"{ kind = \"worker\", queue = \"\" }", "t.toml:1:32: steps[1].handler.queue = \"\""},
      {"{ kind = \"worker\", queue = \"a/b\" }", "t.toml:1:32: steps[1].handler.queue = \"a/b\""},
      {"{ kind = \"worker\", queue = 7 }", "t.toml:1:32: steps[1].handler.queue = 7"},
      {"{ kind = \"worker\", queue = "
       "\"q2345678901234567890123456789012345678901234567890123456789012345\" }",
       "t.toml:1:32: steps[1].handler.queue = "
       "\"q2345678901234567890123456789012345678901234567890123456789012345\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[512];
    snprintf(want, sizeof want, "%s%s", bad[i].where, want_tail);
    expect_spec_error(bad[i].table, want);
  }
  expect_spec_error("{ kind = \"worker\", queue = \"q\", argv = [\"x\"] }",
                    "t.toml:1:37: unknown key \"steps[1].handler.argv\" (known keys: kind, "
                    "timeout, queue)");
}

static void an_orchestrator_never_runs_it(void **state) {
  (void)state;
  json_t *spec = spec_of("{ kind = \"worker\", queue = \"images\" }");
  const tk__handler_kind *k = tk__handler_kind_of(spec);
  assert_string_equal(k->name, "worker");
  tk__handler_step step = {spec, NULL, NULL, NULL, NULL};
  tk_handler_call call = {.task_id = 1, .step = "s", .attempt = 1, .max_attempts = 3};
  tk_handler_result out;
  memset(&out, 0, sizeof out);
  k->run(&step, &call, &out);
  assert_int_equal(out.status, TK_HANDLER_PERMANENT);
  assert_non_null(strstr(out.error, "queue \"images\""));
  assert_non_null(strstr(out.error, "outside workers"));
  json_decref(spec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_queue_is_read),
      cmocka_unit_test(a_bad_queue_is_placed_and_named),
      cmocka_unit_test(an_orchestrator_never_runs_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
