/* Decisions and map run by the engine (DESIGN §17) on a real SQLite store
 * with real command handlers: a decision is read from the handler's
 * results, and one that names no branch the step may choose fails it for
 * good, with the value in the message; a map's instances get their
 * element on stdin, and the step after the map gets every result in
 * element order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"

static const char *const settings[] = {"backoff.jitter=none", "backoff.base=1s", NULL};

static int setup(void **state) {
  *state = efx_new(settings, "orch-1");
  return 0;
}

/* A decision step whose command prints `printed`, between approve and
 * review, as template `name`. */
static void decision_template(efx *f, const char *name, const char *printed, int allow_none) {
  char toml[2048];
  snprintf(toml, sizeof toml,
           "name = \"%s\"\nversion = \"1\"\n"
           "[[steps]]\nname = \"triage\"\n"
           "handler = { kind = \"command\", argv = [\"sh\", \"-c\", \"echo '%s'\"] }\n"
           "retry = { max_attempts = 3 }\n"
           "decides = [\"approve\", \"review\"]\nallow_none = %s\n"
           "[[steps]]\nname = \"approve\"\ndepends_on = [\"triage\"]\n"
           "handler = { kind = \"builtin\", name = \"noop\" }\n"
           "[[steps]]\nname = \"review\"\ndepends_on = [\"triage\"]\n"
           "handler = { kind = \"builtin\", name = \"noop\" }\n",
           name, printed, allow_none ? "true" : "false");
  efx_template(f, toml);
}

static const char *step_str(json_t *task, const char *step, const char *key) {
  return json_string_value(json_object_get(efx_step(task, step), key));
}

/* A command's choice is the decision: the branch not chosen is skipped. */
static void command_decides(void **state) {
  efx *f = *state;
  decision_template(f, "pick", "{\\\"branches\\\": [\\\"review\\\"]}", 0);
  int64_t id = efx_submit(f, "pick", NULL);
  efx_drive(f, 20);
  efx_expect(f, id, "complete", "triage", "complete", "approve", "skipped", "review", "complete",
             NULL);
}

/* A decision naming a step it may not choose, or none when none is not
 * allowed, fails the step at once (no retry) and names the value. */
static void bad_decisions_fail_for_good(void **state) {
  efx *f = *state;
  static const struct {
    const char *printed, *message;
  } bad[] = {
      {"{\\\"branches\\\": [\\\"ship\\\"]}",
       "decision: \"ship\" is not one of the branches of triage (approve, review)"},
      {"{\\\"branches\\\": []}", "decision: triage chose no branch"},
      {"{\\\"branches\\\": \\\"review\\\"}",
       "decision: results' \"branches\" must be an array of step names, got"},
      {"{\\\"other\\\": 1}", "decision: triage chose no branch"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[16];
    snprintf(name, sizeof name, "bad%zu", i);
    decision_template(f, name, bad[i].printed, 0);
    int64_t id = efx_submit(f, name, NULL);
    efx_drive(f, 20);
    efx_expect(f, id, "error", "triage", "error", "approve", "pending", "review", "pending",
               NULL);
    json_t *t = efx_task(f, id);
    const char *why = step_str(t, "triage", "last_error");
    if (why == NULL || strstr(why, bad[i].message) == NULL)
      fail_msg("case %zu: last_error %s, expected it to contain %s", i, why ? why : "(none)",
               bad[i].message);
    json_decref(t);
    assert_int_equal(efx_sql_int(f->db,
                                 "SELECT COUNT(*) FROM attempts a JOIN steps s ON s.id = a.step_id"
                                 " WHERE s.task_id = %lld AND s.name = 'triage'",
                                 (long long)id),
                     1);
  }
  /* With allow_none, choosing none skips both. */
  decision_template(f, "none", "{\\\"branches\\\": []}", 1);
  int64_t id = efx_submit(f, "none", NULL);
  efx_drive(f, 20);
  efx_expect(f, id, "complete", "triage", "complete", "approve", "skipped", "review", "skipped",
             NULL);
}

/* Each instance's command reads its element on stdin; the step after
 * the map gets the instances' results in element order. */
static void map_instances_read_their_items(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"fan\"\nversion = \"1\"\n"
                  "[[steps]]\nname = \"list\"\n"
                  "handler = { kind = \"command\","
                  " argv = [\"sh\", \"-c\", \"echo '{\\\"files\\\": [\\\"a\\\", \\\"b\\\", \\\"c\\\"]}'\"] }\n"
                  "[[steps]]\nname = \"each\"\ndepends_on = [\"list\"]\n"
                  "handler = { kind = \"command\", argv = [\"cat\"] }\n"
                  "map = { over = \"{{parents.list.files}}\" }\n"
                  "[[steps]]\nname = \"sum\"\ndepends_on = [\"each\"]\n"
                  "handler = { kind = \"command\", argv = [\"cat\"] }\n");
  int64_t id = efx_submit(f, "fan", "{\"n\": 1}");
  efx_drive(f, 40);
  efx_expect(f, id, "complete", "list", "complete", "each", "complete", "sum", "complete", NULL);
  /* sum echoed its input: each instance's (an echo of its own input). */
  json_t *t = efx_task(f, id);
  json_t *sum = json_loads(step_str(t, "sum", "results"), 0, NULL);
  if (sum == NULL) sum = json_incref(json_object_get(efx_step(t, "sum"), "results"));
  json_t *each = json_object_get(json_object_get(sum, "parents"), "each");
  assert_int_equal(json_array_size(each), 3);
  const char *want[3] = {"a", "b", "c"};
  for (size_t i = 0; i < 3; i++) {
    json_t *in = json_array_get(each, i);
    assert_string_equal(json_string_value(json_object_get(in, "item")), want[i]);
    assert_int_equal(json_integer_value(json_object_get(in, "item_index")), (json_int_t)i);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(in, "context"), "n")), 1);
  }
  json_decref(sum);
  json_decref(t);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM steps WHERE map_idx IS NOT NULL"), 3);
  /* Each instance's events name it. */
  assert_int_equal(efx_events(f, "step.claimed", "each"), 0);
  assert_int_equal(efx_events(f, "step.claimed", "each[1]"), 1);
  assert_int_equal(efx_events(f, "step.completed", "each[2]"), 1);
}

/* The choose builtin answers under the step's branches_key. */
static void choose_under_its_key(void **state) {
  efx *f = *state;
  efx_template(f, "name = \"keyed\"\nversion = \"1\"\n"
                  "[[steps]]\nname = \"triage\"\n"
                  "handler = { kind = \"builtin\", name = \"choose\", value = \"{{context.tier}}\","
                  " cases = { gold = [\"fast\"] }, default = [\"slow\"] }\n"
                  "decides = [\"fast\", \"slow\"]\nbranches_key = \"go\"\n"
                  "[[steps]]\nname = \"fast\"\ndepends_on = [\"triage\"]\n"
                  "handler = { kind = \"builtin\", name = \"noop\" }\n"
                  "[[steps]]\nname = \"slow\"\ndepends_on = [\"triage\"]\n"
                  "handler = { kind = \"builtin\", name = \"noop\" }\n");
  int64_t gold = efx_submit(f, "keyed", "{\"tier\": \"gold\"}");
  int64_t tin = efx_submit(f, "keyed", "{\"tier\": \"tin\"}");
  efx_drive(f, 20);
  efx_expect(f, gold, "complete", "triage", "complete", "fast", "complete", "slow", "skipped",
             NULL);
  efx_expect(f, tin, "complete", "triage", "complete", "fast", "skipped", "slow", "complete",
             NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(command_decides, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(bad_decisions_fail_for_good, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(map_instances_read_their_items, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(choose_under_its_key, setup, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
