/* The rules of decisions and map (src/store/flow.c, DESIGN §17) that the
 * engine and both backends share, on one fixed template read as a store
 * reads it: which results a decision step may give (an unknown branch, a
 * duplicate, not an array, not an object, none with and without
 * allow_none, a custom branches_key), the elements of a map over a list
 * (a list, not a list, a missing path, over max, exactly max, empty) and
 * over a range (0, an exact multiple of chunk, a remainder, over max,
 * negative, not an integer), and a map's verdict. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/flow_fixture.h"
#include "store/flow.h"

static int setup(void **state) {
  tk__flow *f = NULL;
  tk_err err = {0};
  int rc = tk__flow_read(7, flow_definition, flow_edges, FLOW_NEDGES, &f, &err);
  if (rc != 0) fail_msg("tk__flow_read: %s", err.msg);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  tk__flow_free(*state);
  return 0;
}

/* ---- reading ------------------------------------------------------------------- */

static void the_flow_reads_the_steps_roles_and_edges(void **state) {
  const tk__flow *f = *state;
  assert_int_equal(f->nsteps, NSTEPS);
  assert_true(f->special);
  assert_true(tk__flow_is_decision(f, TRIAGE));
  assert_true(tk__flow_is_decision(f, PICK));
  assert_false(tk__flow_is_decision(f, APPROVE));
  assert_true(tk__flow_is_map(f, PROCESS));
  assert_true(tk__flow_is_map(f, CHUNKS));
  assert_false(tk__flow_is_map(f, LIST));
  assert_false(tk__flow_is_map(f, NSTEPS));
  assert_false(tk__flow_is_decision(f, -1));
  assert_int_equal(f->steps[TRIAGE].nchildren, 2);
  assert_int_equal(f->steps[PROCESS].map_parent, LIST);
  assert_int_equal(f->steps[CHUNKS].map, 2);
  assert_string_equal(f->steps[PICK].branches_key, "go");
}

static void a_definition_without_decisions_or_maps_is_not_special(void **state) {
  (void)state;
  tk__flow *f = NULL;
  tk_err err = {0};
  assert_int_equal(tk__flow_read(1, "{\"steps\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
                                 (const int[]){0, 1}, 1, &f, &err),
                   0);
  assert_false(f->special);
  tk__flow_free(f);
}

static void a_definition_that_does_not_read_is_refused(void **state) {
  (void)state;
  tk__flow *f = (tk__flow *)1;
  tk_err err = {0};
  assert_int_equal(tk__flow_read(3, "{\"steps\":", NULL, 0, &f, &err), TK_EINVAL);
  assert_null(f);
  assert_non_null(strstr(err.msg, "template 3: definition does not parse"));
  /* A branch that is not a step of the template. */
  assert_int_equal(tk__flow_read(4, "{\"steps\":[{\"name\":\"a\",\"decides\":[\"zz\"]}]}", NULL,
                                 0, &f, &err),
                   TK_EINVAL);
  assert_null(f);
  assert_string_equal(err.msg, "template 4: step a: its decides or map names no step of the "
                               "template, or its map has no parent, path or chunk >= 1");
  /* An edge out of range. */
  assert_int_equal(tk__flow_read(5, "{\"steps\":[{\"name\":\"a\"}]}", (const int[]){0, 1}, 1, &f,
                                 &err),
                   TK_EINVAL);
  assert_null(f);
  assert_string_equal(err.msg, "template 5: edge 0 (0 -> 1) names no step of its 1");
  /* A map whose chunk is not >= 1. */
  assert_int_equal(tk__flow_read(6,
                                 "{\"steps\":[{\"name\":\"a\"},{\"name\":\"b\",\"map\":{\"parent\":"
                                 "\"a\",\"path\":[],\"range\":true,\"chunk\":0}}]}",
                                 (const int[]){0, 1}, 1, &f, &err),
                   TK_EINVAL);
  assert_null(f);
  /* A path segment that is not a string (messages name each one). */
  assert_int_equal(tk__flow_read(8,
                                 "{\"steps\":[{\"name\":\"a\"},{\"name\":\"b\",\"map\":{\"parent\":"
                                 "\"a\",\"path\":[\"x\",1]}}]}",
                                 (const int[]){0, 1}, 1, &f, &err),
                   TK_EINVAL);
  assert_null(f);
}

/* ---- decisions ----------------------------------------------------------------- */

/* No step chosen (one digit per step, in template order). */
#define NONE "00000000000"

/* Decide for step idx: the return code, and the chosen set as a string of
 * '0'/'1' per step into got (all '0' when refused, which is checked, as
 * is a reason then). */
static int decide(const tk__flow *f, int idx, const char *results, char *got, char *why,
                  size_t whylen) {
  unsigned char chosen[NSTEPS];
  memset(chosen, 0xAA, sizeof chosen);
  why[0] = '\0';
  int rc = tk__flow_decide(f, idx, results, chosen, why, whylen);
  for (int i = 0; i < NSTEPS; i++) {
    assert_true(chosen[i] == 0 || chosen[i] == 1);
    got[i] = (char)('0' + chosen[i]);
  }
  got[NSTEPS] = '\0';
  if (rc != 0) {
    assert_string_equal(got, NONE);
    assert_true(why[0] != '\0');
  }
  return rc;
}

/* Decision step idx accepts results, choosing `want` ('1' per chosen step). */
static void chose(const tk__flow *f, int idx, const char *results, const char *want) {
  char got[NSTEPS + 1], why[512];
  if (decide(f, idx, results, got, why, sizeof why) != 0)
    fail_msg("results %s: refused: %s", results, why);
  assert_string_equal(got, want);
}

/* Decision step idx refuses results, saying `says` (a part of why). */
static void refused(const tk__flow *f, int idx, const char *results, const char *says) {
  char got[NSTEPS + 1], why[512];
  assert_int_equal(decide(f, idx, results, got, why, sizeof why), TK_EINVAL);
  if (strstr(why, says) == NULL)
    fail_msg("results %s: expected \"%s\" in \"%s\"", results ? results : "(none)", says, why);
}

static void a_decision_names_branches_it_may_choose(void **state) {
  chose(*state, TRIAGE, "{\"branches\":[\"review\"]}", "00010000000");
  chose(*state, TRIAGE, "{\"branches\":[\"review\",\"approve\"],\"note\":1}", "00110000000");
}

static void a_decision_naming_another_step_fails_naming_it(void **state) {
  const tk__flow *f = *state;
  refused(f, TRIAGE, "{\"branches\":[\"approve\",\"ship\"]}",
          "decision: \"ship\" is not one of the branches of triage (approve, review)");
  /* A step of the template that is not one of its branches. */
  refused(f, TRIAGE, "{\"branches\":[\"left\"]}",
          "decision: \"left\" is not one of the branches of triage (approve, review)");
  /* A name that is not a string. */
  refused(f, TRIAGE, "{\"branches\":[3]}",
          "decision: 3 is not one of the branches of triage (approve, review)");
}

static void a_decision_naming_a_branch_twice_fails(void **state) {
  refused(*state, TRIAGE, "{\"branches\":[\"review\",\"review\"]}",
          "decision: \"review\" is named twice");
}

static void a_decision_whose_branches_are_not_an_array_fails(void **state) {
  refused(*state, TRIAGE, "{\"branches\":\"review\"}",
          "decision: results' \"branches\" must be an array of step names, got "
          "{\"branches\":\"review\"}");
  refused(*state, TRIAGE, "{\"branches\":{\"review\":true}}", "must be an array of step names");
}

static void decision_results_that_are_not_an_object_fail(void **state) {
  const tk__flow *f = *state;
  refused(f, TRIAGE, "[\"review\"]",
          "decision: results must be an object with a \"branches\" array naming the branches "
          "(approve, review), got [\"review\"]");
  refused(f, TRIAGE, "\"review\"", "got \"review\"");
  /* No results at all, and results that are not JSON. */
  refused(f, TRIAGE, NULL, "got nothing");
  refused(f, TRIAGE, "{\"branches\":[", "got nothing");
  /* Even a step that allows none needs an object. */
  refused(f, PICK, "[]", "\"go\" array naming the branches (left, right), got []");
}

static void choosing_none_fails_without_allow_none(void **state) {
  const tk__flow *f = *state;
  refused(f, TRIAGE, "{\"branches\":[]}",
          "decision: triage chose no branch (\"branches\" is []) and does not allow none: name "
          "one of approve, review, or set allow_none = true");
  refused(f, TRIAGE, "{\"branches\":null}", "(\"branches\" is null)");
  refused(f, TRIAGE, "{\"x\":1}", "triage chose no branch");
}

static void choosing_none_is_allowed_with_allow_none(void **state) {
  chose(*state, PICK, "{\"go\":[]}", NONE);
  chose(*state, PICK, "{\"go\":null}", NONE);
  chose(*state, PICK, "{}", NONE);
}

static void a_custom_branches_key_is_the_one_read(void **state) {
  const tk__flow *f = *state;
  chose(f, PICK, "{\"go\":[\"right\"],\"branches\":[\"left\"]}", "00000010000");
  /* "branches" is not pick's key: choosing by it chooses none. */
  chose(f, PICK, "{\"branches\":[\"left\"]}", NONE);
  refused(f, PICK, "{\"go\":\"left\"}", "results' \"go\" must be an array");
}

/* ---- map ----------------------------------------------------------------------- */

/* Map step idx runs over exactly `want` (compact JSON) given its parent's
 * results. */
static void mapped(const tk__flow *f, int idx, const char *results, const char *want) {
  json_t *els = NULL;
  char why[512] = "";
  int rc = tk__flow_map_elements(f, idx, results, &els, why, sizeof why);
  if (rc != 0) fail_msg("results %s: refused (%d): %s", results, rc, why);
  assert_true(json_is_array(els));
  char *got = json_dumps(els, JSON_COMPACT);
  assert_string_equal(got, want);
  free(got);
  json_decref(els);
}

/* Map step idx refuses its parent's results with rc, saying `says` (a
 * part of why), and gives no elements. */
static void map_refused(const tk__flow *f, int idx, const char *results, int rc,
                        const char *says) {
  json_t *els = (json_t *)1;
  char why[512] = "";
  assert_int_equal(tk__flow_map_elements(f, idx, results, &els, why, sizeof why), rc);
  assert_null(els);
  if (strstr(why, says) == NULL)
    fail_msg("results %s: expected \"%s\" in \"%s\"", results ? results : "(none)", says, why);
}

static void a_map_over_a_list_runs_over_its_elements(void **state) {
  const tk__flow *f = *state;
  mapped(f, PROCESS, "{\"files\":[\"a\",{\"b\":1}],\"other\":1}", "[\"a\",{\"b\":1}]");
  /* Exactly max. */
  mapped(f, PROCESS, "{\"files\":[1,2,3,4,5]}", "[1,2,3,4,5]");
  /* Empty. */
  mapped(f, PROCESS, "{\"files\":[]}", "[]");
}

static void a_map_over_more_than_max_fails_naming_the_count(void **state) {
  map_refused(*state, PROCESS, "{\"files\":[1,2,3,4,5,6]}", TK_ERANGE,
              "map over {{parents.list.files}}: 6 elements, more than max 5");
}

static void a_map_over_what_is_not_a_list_fails_naming_the_value(void **state) {
  const tk__flow *f = *state;
  map_refused(f, PROCESS, "{\"files\":{\"a\":1}}", TK_EINVAL,
              "map over {{parents.list.files}}: expected a list, got {\"a\":1}");
  map_refused(f, PROCESS, "{\"files\":\"a,b\"}", TK_EINVAL,
              "map over {{parents.list.files}}: expected a list, got \"a,b\"");
  /* The path missing, the parent without results, results that are not JSON. */
  map_refused(f, PROCESS, "{\"file\":[1]}", TK_EINVAL,
              "map over {{parents.list.files}}: expected a list, got nothing");
  map_refused(f, PROCESS, NULL, TK_EINVAL, "expected a list, got nothing");
  map_refused(f, PROCESS, "[1,", TK_EINVAL, "expected a list, got nothing");
  map_refused(f, PROCESS, "[[1]]", TK_EINVAL, "expected a list, got nothing");
}

static void a_range_runs_over_chunks_of_it(void **state) {
  const tk__flow *f = *state;
  mapped(f, CHUNKS, "{\"rows\":0}", "[]");
  /* An exact multiple of chunk 3, at max 5. */
  mapped(f, CHUNKS, "{\"rows\":15}",
         "[{\"start\":0,\"end\":3},{\"start\":3,\"end\":6},{\"start\":6,\"end\":9},"
         "{\"start\":9,\"end\":12},{\"start\":12,\"end\":15}]");
  /* A remainder: the last chunk is shorter. */
  mapped(f, CHUNKS, "{\"rows\":7}",
         "[{\"start\":0,\"end\":3},{\"start\":3,\"end\":6},{\"start\":6,\"end\":7}]");
  mapped(f, CHUNKS, "{\"rows\":1}", "[{\"start\":0,\"end\":1}]");
}

static void a_range_over_max_fails_naming_the_count(void **state) {
  const tk__flow *f = *state;
  map_refused(f, CHUNKS, "{\"rows\":16}", TK_ERANGE,
              "map range {{parents.count.rows}}: 16 in chunks of 3 is 6 instances, more than "
              "max 5");
  /* So large that counting it must not overflow, nor building it run. */
  map_refused(f, CHUNKS, "{\"rows\":9223372036854775807}", TK_ERANGE,
              "is 3074457345618258603 instances, more than max 5");
}

static void a_range_that_is_not_a_non_negative_integer_fails(void **state) {
  const tk__flow *f = *state;
  map_refused(f, CHUNKS, "{\"rows\":-1}", TK_EINVAL,
              "map range {{parents.count.rows}}: expected a non-negative integer, got -1");
  map_refused(f, CHUNKS, "{\"rows\":2.5}", TK_EINVAL,
              "map range {{parents.count.rows}}: expected a non-negative integer, got 2.5");
  map_refused(f, CHUNKS, "{\"rows\":\"7\"}", TK_EINVAL, "got \"7\"");
  map_refused(f, CHUNKS, "{\"rows\":true}", TK_EINVAL, "got true");
  map_refused(f, CHUNKS, "{}", TK_EINVAL, "got nothing");
}

/* A path through an array (a segment of digits indexes it) and a chunk
 * that nearly reaches INT64_MAX: the last cursor is computed without
 * overflowing. */
static void paths_index_arrays_and_huge_chunks_do_not_overflow(void **state) {
  (void)state;
  static const char def[] =
      "{\"steps\":[{\"name\":\"p\"},"
      "{\"name\":\"l\",\"map\":{\"parent\":\"p\",\"path\":[\"a\",\"1\"],\"max\":10}},"
      "{\"name\":\"r\",\"map\":{\"parent\":\"p\",\"path\":[\"n\"],\"range\":true,"
      "\"chunk\":9223372036854775806,\"max\":10}}]}";
  tk__flow *f = NULL;
  tk_err err = {0};
  assert_int_equal(tk__flow_read(9, def, (const int[]){0, 1, 0, 2}, 2, &f, &err), 0);
  mapped(f, 1, "{\"a\":[[0],[1,2]]}", "[1,2]");
  map_refused(f, 1, "{\"a\":[[0]]}", TK_EINVAL,
              "map over {{parents.p.a.1}}: expected a list, got nothing");
  mapped(f, 1, "{\"a\":{\"1\":[5]}}", "[5]");
  mapped(f, 2, "{\"n\":9223372036854775807}",
         "[{\"start\":0,\"end\":9223372036854775806},"
         "{\"start\":9223372036854775806,\"end\":9223372036854775807}]");
  tk__flow_free(f);
}

static void a_maps_verdict_allows_max_failures(void **state) {
  const tk__flow *f = *state;
  char why[256] = "";
  assert_int_equal(tk__flow_map_verdict(f, PROCESS, 3, 0, why, sizeof why), 1);
  assert_int_equal(tk__flow_map_verdict(f, PROCESS, 3, 1, why, sizeof why), 0);
  assert_string_equal(why, "1 of 3 instances failed; max_failures is 0");
  assert_int_equal(tk__flow_map_verdict(f, CHUNKS, 4, 1, why, sizeof why), 1);
  assert_int_equal(tk__flow_map_verdict(f, CHUNKS, 10, 3, why, sizeof why), 0);
  assert_string_equal(why, "3 of 10 instances failed; max_failures is 1");
}

static void an_instance_is_named_after_its_map(void **state) {
  (void)state;
  char buf[32];
  tk__flow_instance_name(buf, sizeof buf, "process", 3);
  assert_string_equal(buf, "process[3]");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(the_flow_reads_the_steps_roles_and_edges),
      T(a_definition_without_decisions_or_maps_is_not_special),
      T(a_definition_that_does_not_read_is_refused),
      T(a_decision_names_branches_it_may_choose),
      T(a_decision_naming_another_step_fails_naming_it),
      T(a_decision_naming_a_branch_twice_fails),
      T(a_decision_whose_branches_are_not_an_array_fails),
      T(decision_results_that_are_not_an_object_fail),
      T(choosing_none_fails_without_allow_none),
      T(choosing_none_is_allowed_with_allow_none),
      T(a_custom_branches_key_is_the_one_read),
      T(a_map_over_a_list_runs_over_its_elements),
      T(a_map_over_more_than_max_fails_naming_the_count),
      T(a_map_over_what_is_not_a_list_fails_naming_the_value),
      T(a_range_runs_over_chunks_of_it),
      T(a_range_over_max_fails_naming_the_count),
      T(a_range_that_is_not_a_non_negative_integer_fails),
      T(paths_index_arrays_and_huge_chunks_do_not_overflow),
      T(a_maps_verdict_allows_max_failures),
      T(an_instance_is_named_after_its_map),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
