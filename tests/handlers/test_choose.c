/* The builtin choose (src/handlers/builtin_choose.c, DESIGN §17): a
 * decision's branches looked up in `cases` by the text of one placeholder
 * of the step's input (a string as it is, a number or a boolean as JSON),
 * else `default`, else a permanent failure naming the value; results
 * {"BRANCHES_KEY": [...]} that store/flow.c's rules accept. Through the
 * handler interface as the engine runs it (tk__handler_kind_of), and
 * through the engine on SQLite and PostgreSQL from a template's TOML,
 * where the engine must read the input for it (and still not for the
 * other builtins) and the branches not chosen are skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/engine_fixture.h"
#include "common/flow_fixture.h"
#include "handlers/handler.h"
#include "store/flow.h"

/* ---- the handler ------------------------------------------------------------------- */

static const char input[] =
    "{\"context\":{\"tier\":\"gold\",\"n\":3,\"vip\":true,\"rate\":0.5,\"o\":{\"a\":1}},"
    "\"parents\":{\"score\":{\"risk\":\"high\",\"why\":null}}}";

/* The spec of a choose on `value` with the usual cases, plus `more`
 * (JSON members, "" for none). */
static json_t *spec_of(const char *value, const char *more) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"kind\":\"builtin\",\"name\":\"choose\",\"value\":\"%s\",\"cases\":{\"high\":"
           "[\"review\"],\"low\":[\"approve\"],\"3\":[\"approve\",\"review\"],\"true\":[],"
           "\"0.5\":[\"review\"]}%s}",
           value, more);
  json_t *spec = json_loads(text, 0, NULL);
  assert_non_null(spec);
  return spec;
}

/* One attempt of the spec's kind on `in`: its status, results and error. */
static tk_handler_result run_once(json_t *spec, const char *in) {
  const tk__handler_kind *k = tk__handler_kind_of(spec);
  tk__handler_step step = {spec, NULL, NULL, NULL, NULL};
  tk_handler_call call = {.task_id = 7, .step = "triage", .attempt = 1, .max_attempts = 3,
                          .input = in};
  tk_handler_result out = {0};
  out.retry_after_ms = -1;
  k->run(&step, &call, &out);
  return out;
}

static void chooses(const char *value, const char *more, const char *want) {
  json_t *spec = spec_of(value, more);
  tk_handler_result r = run_once(spec, input);
  if (r.status != TK_HANDLER_SUCCESS) fail_msg("%s: %s", value, r.error);
  assert_non_null(r.results);
  assert_string_equal(r.results, want);
  free(r.results);
  json_decref(spec);
}

static void refuses(const char *value, const char *more, const char *in, const char *want) {
  json_t *spec = spec_of(value, more);
  tk_handler_result r = run_once(spec, in);
  assert_int_equal(r.status, TK_HANDLER_PERMANENT);
  assert_null(r.results);
  assert_string_equal(r.error, want);
  json_decref(spec);
}

static void the_value_picks_its_case(void **state) {
  (void)state;
  chooses("{{parents.score.risk}}", "", "{\"branches\":[\"review\"]}");
  /* A number, a boolean: their JSON text names the case. */
  chooses("{{context.n}}", "", "{\"branches\":[\"approve\",\"review\"]}");
  chooses("{{ context.vip }}", "", "{\"branches\":[]}");
  chooses("{{context.rate}}", "", "{\"branches\":[\"review\"]}");
}

static void no_case_takes_the_default(void **state) {
  (void)state;
  chooses("{{context.tier}}", ",\"default\":[\"approve\"]", "{\"branches\":[\"approve\"]}");
}

static void the_steps_branches_key_names_the_results_member(void **state) {
  (void)state;
  chooses("{{parents.score.risk}}", ",\"branches_key\":\"go\"", "{\"go\":[\"review\"]}");
}

static void no_case_and_no_default_fails_permanently_naming_the_value(void **state) {
  (void)state;
  refuses("{{context.tier}}", "", input,
          "builtin choose: {{context.tier}} is \"gold\", which is none of the cases (high, low, "
          "3, true, 0.5), and there is no default");
  refuses("{{context.tier}}", ",\"cases\":{}", input,
          "builtin choose: {{context.tier}} is \"gold\", which is none of the cases (none), and "
          "there is no default");
}

static void a_value_that_is_not_there_or_has_no_text_fails_permanently(void **state) {
  (void)state;
  refuses("{{parents.scor.risk}}", "", input,
          "builtin choose: {{parents.scor.risk}}: this step has no parent \"scor\" (its parents: "
          "score)");
  refuses("{{context.tier}}", "", "{\"context\":{},\"parents\":{}}",
          "builtin choose: {{context.tier}}: context has no member \"tier\"");
  refuses("{{context.o}}", ",\"default\":[\"review\"]", input,
          "builtin choose: {{context.o}} is {\"a\":1}; a case is chosen by a string, a number or "
          "a boolean");
  refuses("{{parents.score.why}}", ",\"default\":[\"review\"]", input,
          "builtin choose: {{parents.score.why}} is null; a case is chosen by a string, a number "
          "or a boolean");
  /* Looked up, never evaluated: an instance's item outside a map. */
  refuses("{{item.kind}}", "", input,
          "builtin choose: {{item.kind}}: this step is not an instance of a map (its input has "
          "no item)");
}

static void a_stored_spec_that_cannot_choose_fails_permanently(void **state) {
  (void)state;
  refuses("risk {{parents.score.risk}}", "", input,
          "builtin choose: value: \"risk {{parents.score.risk}}\" is not one placeholder such as "
          "{{parents.score.risk}}");
  refuses("{{parents.score.}}", "", input,
          "builtin choose: value: placeholder \"{{parents.score.}}\" (byte 1): expected a name "
          "after \".\" (letters, digits, '_' or '-')");
  refuses("{{parents.score.risk}}", ",\"cases\":{\"high\":\"review\"}", input,
          "builtin choose: the case for \"high\" is not an array of step names");
  refuses("{{context.tier}}", ",\"default\":{}", input,
          "builtin choose: default for \"gold\" is not an array of step names");
  /* The environment could show a secret in the results or the error. */
  setenv("TK_CHOOSE_SECRET", "hunter2", 1);
  refuses("{{env.TK_CHOOSE_SECRET}}", ",\"default\":[\"review\"]", input,
          "builtin choose: value: {{env.TK_CHOOSE_SECRET}}: the orchestrator's environment "
          "cannot choose (a secret would show in the step's results or error)");
  json_t *spec = json_pack("{s:s, s:s}", "kind", "builtin", "name", "choose");
  tk_handler_result r = run_once(spec, input);
  assert_int_equal(r.status, TK_HANDLER_PERMANENT);
  assert_string_equal(r.error, "builtin choose: the handler has no value (write value = "
                               "\"{{parents.STEP.KEY}}\")");
  json_decref(spec);
}

/* What choose returns is what a decision step may return: flow.c's rules
 * (which the engine applies) accept it. */
static void its_results_are_a_decision_the_flow_accepts(void **state) {
  (void)state;
  tk__flow *f = NULL;
  tk_err err;
  assert_int_equal(tk__flow_read(1, flow_definition, flow_edges, FLOW_NEDGES, &f, &err), 0);
  json_t *spec = spec_of("{{parents.score.risk}}", "");
  tk_handler_result r = run_once(spec, input);
  unsigned char chosen[NSTEPS];
  char why[256] = "";
  if (tk__flow_decide(f, TRIAGE, r.results, chosen, why, sizeof why) != 0) fail_msg("%s", why);
  assert_true(chosen[REVIEW] && !chosen[APPROVE]);
  free(r.results);
  json_decref(spec);
  tk__flow_free(f);
}

/* Only choose reads the step's input: the engine reads one per kind that
 * takes it, and a noop step must stay as cheap as it was. */
static void only_choose_takes_the_input(void **state) {
  (void)state;
  json_t *choose = spec_of("{{parents.score.risk}}", "");
  json_t *noop = json_pack("{s:s, s:s}", "kind", "builtin", "name", "noop");
  assert_ptr_equal(tk__handler_kind_of(choose), &tk__choose_kind);
  assert_true(tk__handler_kind_of(choose)->takes_input);
  assert_string_equal(tk__handler_kind_of(choose)->name, "builtin");
  assert_ptr_equal(tk__handler_kind_of(noop), &tk__builtin_kind);
  assert_false(tk__handler_kind_of(noop)->takes_input);
  /* The builtin kind's own run of choose (not the engine's way) is the same. */
  tk__handler_step step = {choose, NULL, NULL, NULL, NULL};
  tk_handler_call call = {.task_id = 7, .step = "pick", .attempt = 1, .input = input};
  tk_handler_result out = {0};
  tk__builtin_kind.run(&step, &call, &out);
  assert_int_equal(out.status, TK_HANDLER_SUCCESS);
  assert_string_equal(out.results, "{\"branches\":[\"review\"]}");
  free(out.results);
  json_decref(choose);
  json_decref(noop);
}

/* ---- through the engine ------------------------------------------------------------ */

typedef struct param {
  const char *backend;
} param;

/* A function handler whose results are the task's context. */
static void echo_context(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)ud;
  json_t *in = json_loads(call->input, 0, NULL);
  out->results = json_dumps(json_object_get(in, "context"), JSON_COMPACT);
  json_decref(in);
}

/* score -> triage (choose on {{parents.score.risk}}, with a default)
 * -> approve | review; pick (choose on {{context.tier}}, no default) ->
 * left | right. */
static const char choosing_toml[] =
    "name = \"choosing\"\nversion = \"1\"\n"
    EFX_STEP("score") "handler = { kind = \"function\", name = \"echo\" }\n"
    EFX_STEP("triage") "depends_on = [\"score\"]\ndecides = [\"approve\", \"review\"]\n"
    "handler = { kind = \"builtin\", name = \"choose\", value = \"{{parents.score.risk}}\", "
    "cases = { high = [\"review\"], low = [\"approve\"] }, default = [\"approve\", \"review\"] }\n"
    EFX_STEP("approve") "depends_on = [\"triage\"]\n" EFX_NOOP
    EFX_STEP("review") "depends_on = [\"triage\"]\n" EFX_NOOP
    EFX_STEP("pick") "decides = [\"left\", \"right\"]\n"
    "handler = { kind = \"builtin\", name = \"choose\", value = \"{{context.tier}}\", "
    "cases = { gold = [\"left\"], 3 = [\"right\"] } }\n"
    EFX_STEP("left") "depends_on = [\"pick\"]\n" EFX_NOOP
    EFX_STEP("right") "depends_on = [\"pick\"]\n" EFX_NOOP;

static const char *results_of(json_t *task, const char *step, char *buf, size_t cap) {
  char *d = json_dumps(json_object_get(efx_step(task, step), "results"),
                       JSON_COMPACT | JSON_ENCODE_ANY);
  snprintf(buf, cap, "%s", d ? d : "(none)");
  free(d);
  return buf;
}

static void the_engine_runs_choose_on_the_steps_input(void **state) {
  const param *p = *state;
  efx *f = calloc(1, sizeof *f);
  efx_open(f, (const char *const[]){"backoff.jitter=\"none\"", NULL});
  *state = f;
  if (strcmp(p->backend, "postgres") == 0)
    efx_use_postgres(f, getenv("TK_TEST_PG_URL"), "tk_choose");
  efx_engine(f, "orch-1");
  tk_err err;
  if (tk_engine_register(f->engine, "echo", echo_context, NULL, &err) != 0)
    fail_msg("%s", err.msg);
  efx_template(f, choosing_toml);
  int64_t high = efx_submit(f, "choosing", "{\"risk\":\"high\",\"tier\":\"gold\"}");
  int64_t other = efx_submit(f, "choosing", "{\"risk\":\"medium\",\"tier\":3}");
  int64_t none = efx_submit(f, "choosing", "{\"risk\":\"low\",\"tier\":\"bronze\"}");
  efx_drive(f, 30);
  char buf[256];
  efx_expect(f, high, "complete", "triage", "complete", "approve", "skipped", "review",
             "complete", "pick", "complete", "left", "complete", "right", "skipped", NULL);
  json_t *t = efx_task(f, high);
  assert_string_equal(results_of(t, "triage", buf, sizeof buf), "{\"branches\":[\"review\"]}");
  assert_string_equal(results_of(t, "pick", buf, sizeof buf), "{\"branches\":[\"left\"]}");
  json_decref(t);
  efx_expect(f, other, "complete", "triage", "complete", "approve", "complete", "review",
             "complete", "pick", "complete", "left", "skipped", "right", "complete", NULL);
  t = efx_task(f, other);
  assert_string_equal(results_of(t, "triage", buf, sizeof buf),
                      "{\"branches\":[\"approve\",\"review\"]}");
  assert_string_equal(results_of(t, "pick", buf, sizeof buf), "{\"branches\":[\"right\"]}");
  json_decref(t);
  /* No case, no default: one attempt, failed for good, naming the value. */
  efx_expect(f, none, "error", "triage", "complete", "approve", "complete", "review", "skipped",
             "pick", "error", NULL);
  t = efx_task(f, none);
  json_t *pick = efx_step(t, "pick");
  assert_int_equal(json_integer_value(json_object_get(pick, "attempts")), 1);
  assert_string_equal(json_string_value(json_object_get(pick, "last_error")),
                      "builtin choose: {{context.tier}} is \"bronze\", which is none of the "
                      "cases (3, gold), and there is no default");
  assert_string_equal(results_of(t, "triage", buf, sizeof buf), "{\"branches\":[\"approve\"]}");
  json_decref(t);
}

static int teardown(void **state) {
  efx *f = *state;
  efx_close(f);
  free(f);
  return 0;
}

int main(void) {
  static param sqlite = {"sqlite"}, postgres = {"postgres"};
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_value_picks_its_case),
      cmocka_unit_test(no_case_takes_the_default),
      cmocka_unit_test(the_steps_branches_key_names_the_results_member),
      cmocka_unit_test(no_case_and_no_default_fails_permanently_naming_the_value),
      cmocka_unit_test(a_value_that_is_not_there_or_has_no_text_fails_permanently),
      cmocka_unit_test(a_stored_spec_that_cannot_choose_fails_permanently),
      cmocka_unit_test(its_results_are_a_decision_the_flow_accepts),
      cmocka_unit_test(only_choose_takes_the_input),
      {"sqlite: the_engine_runs_choose_on_the_steps_input",
       the_engine_runs_choose_on_the_steps_input, NULL, teardown, &sqlite},
      {"postgres: the_engine_runs_choose_on_the_steps_input",
       the_engine_runs_choose_on_the_steps_input, NULL, teardown, &postgres},
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
