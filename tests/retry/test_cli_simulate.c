/* `tasker simulate` as a user runs it: repeatable output for a seed, the
 * JSON shape, the comparisons at 100 clients, the SVG file and flag
 * errors; then the same for `tasker simulate outage`, whose figures are
 * checked against a case worked out by hand (tests/retry/test_simulate.c
 * has the arithmetic). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cli_expect.h"
#include "common/expect_text.h"

static void same_seed_same_output(void **state) {
  (void)state;
  run_result a, b, c;
  RUN(&a, "simulate", "--clients", "10:30:10", "--trials", "5", "--seed", "11");
  RUN(&b, "simulate", "--clients=10:30:10", "--trials=5", "--seed=11");
  RUN(&c, "simulate", "--clients", "10:30:10", "--trials", "5", "--seed", "12");
  assert_int_equal(a.status, 0);
  assert_string_equal(a.err, "");
  assert_string_equal(a.out, b.out);
  assert_string_not_equal(a.out, c.out);
  expect_contains(a.out, "seed 11");
  expect_contains(a.out, "mean total calls");
  expect_contains(a.out, "mean completion time");
  expect_contains(a.out, "clients that succeeded within their attempt budget");
  expect_contains(a.out, "decorrelated");
  run_result_free(&a);
  run_result_free(&b);
  run_result_free(&c);
}

static json_t *result_for(json_t *results, const char *policy) {
  size_t i;
  json_t *row;
  json_array_foreach(results, i, row) {
    if (strcmp(json_string_value(json_object_get(row, "policy")), policy) == 0) return row;
  }
  fail_msg("no result for %s", policy);
  return NULL;
}

static double num(json_t *row, const char *key) {
  json_t *v = json_object_get(row, key);
  if (!json_is_number(v)) fail_msg("%s is not a number", key);
  return json_number_value(v);
}

static void json_at_100_clients(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--json", "simulate", "--clients", "100", "--trials", "20", "--seed", "3");
  assert_int_equal(r.status, 0);
  json_error_t jerr;
  json_t *root = json_loads(r.out, 0, &jerr);
  if (root == NULL) fail_msg("not JSON: %s", jerr.text);
  assert_int_equal(json_integer_value(json_object_get(root, "seed")), 3);
  json_t *config = json_object_get(root, "config");
  assert_int_equal(json_integer_value(json_object_get(config, "trials")), 20);
  assert_int_equal(json_integer_value(json_object_get(config, "max_attempts")), 20);
  assert_int_equal(json_array_size(json_object_get(config, "policies")), 7);
  json_t *results = json_object_get(root, "results");
  assert_int_equal(json_array_size(results), 7);
  size_t i;
  json_t *row;
  json_array_foreach(results, i, row) {
    assert_int_equal(json_integer_value(json_object_get(row, "clients")), 100);
    assert_true(num(row, "mean_calls") >= 200);
    assert_true(num(row, "mean_completion_ms") > 0);
    double ok = num(row, "succeeded");
    assert_true(ok >= 0 && ok <= 1);
  }
  json_t *full = result_for(results, "full"), *expo = result_for(results, "exponential"),
         *linear = result_for(results, "linear");
  assert_true(num(full, "mean_calls") < num(expo, "mean_calls"));
  assert_true(num(linear, "succeeded") < 1.0);
  assert_int_equal(json_integer_value(json_object_get(linear, "max_attempts")), 4);
  json_decref(root);
  run_result_free(&r);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

/* A fresh empty file for --svg to write: path is a mkstemp template. */
static void temp_file(char *path) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
}

/* The file's text (in a static buffer), then the file removed. */
static char *take_file(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  unlink(path);
  return buf;
}

static void svg_has_two_charts_and_a_legend(void **state) {
  (void)state;
  char path[] = "/tmp/tasker-sim-XXXXXX";
  temp_file(path);
  run_result r;
  RUN(&r, "simulate", "--clients", "10:50:20", "--trials", "3", "--seed", "1", "--policies",
      "full,exponential,linear", "--svg", path);
  assert_int_equal(r.status, 0);
  const char *buf = take_file(path);
  assert_memory_equal(buf, "<?xml version=\"1.0\"", 19);
  expect_contains(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
  expect_contains(buf, "</svg>\n");
  assert_int_equal(count(buf, "<polyline"), 6); /* 3 policies x 2 charts */
  assert_int_equal(count(buf, "<svg"), count(buf, "</svg>"));
  assert_int_equal(count(buf, "<text"), count(buf, "</text>"));
  expect_contains(buf, ">exponential</text>");
  expect_contains(buf, "mean completion time");
  /* The table lists only the chosen policies, in the order given. */
  expect_contains(r.out, "full   exponential        linear");
  assert_null(strstr(r.out, "decorrelated"));
  run_result_free(&r);
}

static void bad_flags_exit_2_with_one_line(void **state) {
  (void)state;
  const char *a1[] = {"simulate", "--clients", "0:10:1", NULL};
  expect_usage_error("tasker simulate: --clients: invalid value \"0:10:1\": expected N or "
                     "FROM:TO:STEP with 1 <= FROM <= TO <= 100000 and STEP >= 1\n", a1);
  const char *a2[] = {"simulate", "--clients", "10:190", NULL};
  expect_usage_error("tasker simulate: --clients: invalid value \"10:190\": expected N or "
                     "FROM:TO:STEP with 1 <= FROM <= TO <= 100000 and STEP >= 1\n", a2);
  const char *a3[] = {"simulate", "--policies", "full,jittery", NULL};
  expect_usage_error("tasker simulate: --policies: unknown policy \"jittery\": expected none, "
                     "exponential, full, equal, decorrelated, proportional or linear\n", a3);
  const char *a4[] = {"simulate", "--base", "2s", "--cap", "1s", NULL};
  expect_usage_error("tasker simulate: invalid settings: base (2000 ms) is above the cap "
                     "(1000 ms)\n", a4);
  const char *a5[] = {"simulate", "--trials", "0", NULL};
  expect_usage_error("tasker simulate: --trials: invalid value \"0\": expected an integer from "
                     "1 to 1000000\n", a5);
  const char *a6[] = {"simulate", "--policies", "full,full", NULL};
  expect_usage_error("tasker simulate: --policies: \"full\" is listed twice\n", a6);
  const char *a7[] = {"simulate", "--base", "0", NULL};
  expect_usage_error("tasker simulate: --base: invalid value \"0\": must be above 0\n", a7);
}

static void svg_write_failure_is_reported(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "simulate", "--clients", "5", "--trials", "1", "--seed", "1", "--svg",
      "/nonexistent-dir/x.svg");
  assert_int_equal(r.status, 1);
  assert_string_equal(r.err, "tasker simulate: --svg: cannot write \"/nonexistent-dir/x.svg\": "
                             "No such file or directory\n");
  run_result_free(&r);
}

static void help_describes_the_model(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "simulate", "--help");
  assert_int_equal(r.status, 0);
  expect_contains(r.out, "--max-attempts N");
  expect_contains(r.out, "linear is a naive client");
  expect_contains(r.out, "tasker simulate outage [--rate N/s]");
  expect_contains(r.out, "--budget-min-per-second N");
  run_result_free(&r);
}

/* ---- tasker simulate outage ---- */

static json_t *parse_json(const char *text) {
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  if (root == NULL) fail_msg("not JSON: %s: %s", jerr.text, text);
  return root;
}

static json_t *outage_row(json_t *root, const char *profile, int budget) {
  size_t i;
  json_t *row;
  json_array_foreach(json_object_get(root, "results"), i, row) {
    if (strcmp(json_string_value(json_object_get(row, "profile")), profile) == 0 &&
        json_is_true(json_object_get(row, "budget")) == budget)
      return row;
  }
  fail_msg("no result for %s, budget %d", profile, budget);
  return NULL;
}

static double amp(json_t *row, const char *phase) {
  return num(json_object_get(row, phase), "amplification");
}

static json_int_t int_at(json_t *row, const char *phase, const char *key) {
  json_t *v = json_object_get(phase ? json_object_get(row, phase) : row, key);
  if (!json_is_integer(v)) fail_msg("%s.%s is not an integer", phase ? phase : "", key);
  return json_integer_value(v);
}

/* The goal, through the binary: the default scenario, three attempts,
 * about 3x without a budget and at most 1.1x with one. */
static void outage_default_scenario_meets_the_goal(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--json", "simulate", "outage", "--profiles", "default", "--seed", "1");
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  json_t *root = parse_json(r.out);
  assert_string_equal(json_string_value(json_object_get(root, "scenario")), "outage");
  assert_int_equal(json_integer_value(json_object_get(root, "seed")), 1);
  json_t *config = json_object_get(root, "config");
  assert_int_equal(json_integer_value(json_object_get(config, "max_attempts")), 3);
  assert_int_equal(json_integer_value(json_object_get(config, "outage_ms")), 60000);
  json_t *budget = json_object_get(config, "budget");
  assert_true(num(budget, "ratio") == 0.05);
  assert_int_equal(json_integer_value(json_object_get(budget, "window_ms")), 10000);
  assert_true(num(budget, "min_per_second") == 2);
  assert_int_equal(json_array_size(json_object_get(root, "results")), 2);
  json_t *none = outage_row(root, "default", 0), *with = outage_row(root, "default", 1);
  assert_true(amp(none, "during") > 2.9 && amp(none, "during") <= 3.0);
  assert_true(amp(with, "during") <= 1.1);
  assert_true(amp(with, "draining") <= 1.1);
  assert_int_equal(int_at(none, "during", "firsts"), 6000);
  assert_true(int_at(with, NULL, "exhausted") < int_at(none, NULL, "exhausted"));
  assert_true(int_at(with, NULL, "drain_ms") > int_at(none, NULL, "drain_ms"));
  json_decref(root);
  run_result_free(&r);
}

/* The hand-worked case: jitter off through --set, 10 steps/s for 30 s,
 * calls failing from 10 s to 20 s, a budget of one retry per second. */
static void outage_figures_match_the_hand_worked_case(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "--set", "backoff.jitter=\"none\"", "--json", "simulate", "outage", "--rate", "10/s",
      "--duration", "30s", "--outage", "10s", "--outage-start", "10s", "--max-attempts", "3",
      "--budget-ratio", "0", "--budget-window", "1s", "--budget-min-per-second", "1", "--seed",
      "1");
  assert_int_equal(r.status, 0);
  json_t *root = parse_json(r.out);
  json_t *none = outage_row(root, "default", 0), *with = outage_row(root, "default", 1);
  assert_int_equal(int_at(none, "during", "firsts"), 100);
  assert_int_equal(int_at(none, "during", "calls"), 260);
  assert_true(amp(none, "during") == 2.6);
  assert_int_equal(int_at(none, "after", "calls"), 130);
  assert_int_equal(int_at(none, NULL, "drain_ms"), 1900);
  assert_int_equal(int_at(none, NULL, "exhausted"), 70);
  assert_int_equal(int_at(with, "during", "calls"), 109);
  assert_true(amp(with, "during") == 1.09);
  assert_int_equal(int_at(with, "after", "calls"), 200);
  assert_int_equal(int_at(with, NULL, "drain_ms"), 99000);
  assert_int_equal(int_at(with, NULL, "max_wait_ms"), 98000);
  assert_int_equal(int_at(with, NULL, "deferred"), 108);
  assert_int_equal(int_at(with, NULL, "exhausted"), 0);
  assert_int_equal(int_at(with, NULL, "succeeded"), 300);
  json_decref(root);
  run_result_free(&r);
  /* One attempt: no retry, so no drain, and its ratio is null, not NaN. */
  RUN(&r, "--json", "simulate", "outage", "--max-attempts", "1", "--duration", "2m", "--seed",
      "1");
  assert_int_equal(r.status, 0);
  root = parse_json(r.out);
  json_t *draining = json_object_get(outage_row(root, "default", 1), "draining");
  assert_true(json_is_null(json_object_get(draining, "amplification")));
  assert_int_equal(int_at(draining, NULL, "calls"), 0);
  json_decref(root);
  run_result_free(&r);
}

static void outage_table(void **state) {
  (void)state;
  run_result a, b;
  RUN(&a, "--set", "backoff.jitter=\"none\"", "simulate", "outage", "--rate", "10/s",
      "--duration", "30s", "--outage", "10s", "--outage-start", "10s", "--budget-ratio", "0",
      "--budget-window", "1s", "--budget-min-per-second", "1", "--seed", "5");
  RUN(&b, "--set", "backoff.jitter=\"none\"", "simulate", "outage", "--rate=600/m",
      "--duration=30s", "--outage=10s", "--outage-start=10s", "--budget-ratio=0",
      "--budget-window=1s", "--budget-min-per-second=1", "--seed=5");
  assert_int_equal(a.status, 0);
  assert_string_equal(a.err, "");
  assert_string_equal(a.out, b.out); /* 600/m is 10/s */
  expect_contains(a.out, "outage: 10 first attempts/s for 30s; every call fails from 10s to 20s "
                         "(10s); 3 attempts per step; seed 5\n");
  expect_contains(a.out, "budget 0+1/s: retries may spend 0 of the first attempts over 1s, "
                         "plus 1/s\n");
  expect_contains(a.out, "calls per first attempt\n");
  expect_contains(a.out, "profile      budget       during draining    after       drain  "
                         "succeeded  exhausted  deferred    max wait  peak/s\n");
  expect_contains(a.out, "default      none           2.60     2.50     1.30        1.9s"
                         "        230         70         0         0ms      30\n");
  expect_contains(a.out, "default      0+1/s          1.09     2.00     2.00       1m39s"
                         "        300          0       108       1m38s      11\n");
  run_result_free(&a);
  run_result_free(&b);
}

/* Enough of an XML parser to say the SVG is well formed: every element
 * closes in order, attributes are quoted, '&' starts an entity, and the
 * root is one <svg>. NULL, or what is wrong. */
static const char *xml_problem(const char *s) {
  const char *open[32];
  size_t open_len[32];
  int depth = 0, roots = 0;
  if (strncmp(s, "<?xml ", 6) == 0) {
    if ((s = strstr(s, "?>")) == NULL) return "unterminated declaration";
    s += 2;
  }
  while (*s) {
    if (*s == '&') {
      static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
      size_t k = 0;
      while (k < 5 && strncmp(s, ents[k], strlen(ents[k])) != 0) k++;
      if (k == 5) return "a bare &";
      s++;
      continue;
    }
    if (*s == '>') return "a stray >";
    if (*s != '<') {
      if (depth == 0 && *s != '\n' && *s != ' ') return "text outside the root";
      s++;
      continue;
    }
    if (s[1] == '/') {
      size_t len = strcspn(s + 2, ">");
      if (depth == 0 || len != open_len[depth - 1] || strncmp(s + 2, open[depth - 1], len) != 0)
        return "a closing tag that does not match";
      depth--;
      s += 2 + len + 1;
      continue;
    }
    const char *name = s + 1;
    size_t len = strcspn(name, " \n/>");
    if (len == 0) return "a tag without a name";
    if (depth == 0 && (roots++ > 0 || len != 3 || strncmp(name, "svg", 3) != 0))
      return "a root other than one <svg>";
    const char *p = name + len;
    for (;;) {
      while (*p == ' ' || *p == '\n') p++;
      if (p[0] == '/' && p[1] == '>') {
        s = p + 2;
        break;
      }
      if (*p == '>') {
        if (depth == 32) return "nesting too deep";
        open[depth] = name;
        open_len[depth++] = len;
        s = p + 1;
        break;
      }
      size_t alen = strcspn(p, "= />");
      if (alen == 0 || p[alen] != '=' || p[alen + 1] != '"') return "an unquoted attribute";
      const char *end = strchr(p + alen + 2, '"');
      if (end == NULL) return "an unterminated attribute";
      for (const char *q = p + alen + 2; q < end; q++)
        if (*q == '<') return "'<' in an attribute";
      p = end + 1;
    }
  }
  return depth == 0 && roots == 1 ? NULL : "an element left open";
}

static void outage_svg_is_well_formed(void **state) {
  (void)state;
  char path[] = "/tmp/tasker-outage-XXXXXX";
  temp_file(path);
  run_result r;
  RUN(&r, "--config", "examples/config/tasker.toml", "simulate", "outage", "--profiles",
      "fast,default", "--duration", "5m", "--seed", "1", "--svg", path);
  assert_int_equal(r.status, 0);
  const char *svg = take_file(path);
  const char *problem = xml_problem(svg);
  if (problem) fail_msg("SVG not well formed: %s", problem);
  assert_int_equal(count(svg, "<polyline"), 4); /* 2 profiles x without, with */
  expect_contains(svg, ">fast, no budget</text>");
  expect_contains(svg, ">default, budget 0.05+2/s</text>");
  expect_contains(svg, ">outage</text>");
  expect_contains(svg, "downstream calls per second");
  /* The xml check itself catches what it should. */
  assert_non_null(xml_problem("<svg><g></svg></g>"));
  assert_non_null(xml_problem("<svg a=b/>"));
  assert_non_null(xml_problem("<svg>&</svg>"));
  assert_null(xml_problem("<svg a=\"1\"><g/>x &amp; y</svg>\n"));
  /* The table lists the profiles in the order given. */
  char *fast = strstr(r.out, "\nfast "), *dflt = strstr(r.out, "\ndefault ");
  assert_non_null(fast);
  assert_non_null(dflt);
  assert_true(fast < dflt);
  run_result_free(&r);
}

/* Each bad flag or value: exit 2, one line naming the flag, the value
 * and what was expected. */
static void outage_bad_flags(void **state) {
  (void)state;
  static const struct {
    const char *args[8];
    const char *want;
  } cases[] = {
      {{"simulate", "outage", "--rate", "0", NULL},
       "tasker simulate outage: --rate: invalid value \"0\": expected first "
       "attempts per second as 100/s, 100 or 6000/m, above 0 and at most "
       "1000000/s\n"},
      {{"simulate", "outage", "--rate", "10/h", NULL},
       "tasker simulate outage: --rate: invalid value \"10/h\": expected first "
       "attempts per second as 100/s, 100 or 6000/m, above 0 and at most "
       "1000000/s\n"},
      {{"simulate", "outage", "--budget-window", "150ms", NULL},
       "tasker simulate outage: invalid settings: budget: window is 150 ms: must "
       "be a multiple of 100 ms from 100 ms to 1 day (it slides in 100 equal "
       "steps)\n"},
      {{"simulate", "outage", "--budget-min-per-second", "0", NULL},
       "tasker simulate outage: invalid settings: budget: min_per_second is 0: "
       "over the 10s window that allows 0 retries; it must allow at least 1, or a "
       "deferred retry could wait for first attempts that never come\n"},
      {{"simulate", "outage", "--budget-ratio", "-1", NULL},
       "tasker simulate outage: --budget-ratio: invalid value \"-1\": expected a "
       "number from 0 to 1000\n"},
      {{"simulate", "outage", "--outage", "10m", "--duration", "5m", NULL},
       "tasker simulate outage: invalid settings: the outage (10m from 30s) must "
       "end before arrivals stop at 5m\n"},
      {{"simulate", "outage", "--profiles", "nosuch", NULL},
       "tasker simulate outage: unknown profile \"nosuch\" (known profiles: "
       "default)\n"},
      {{"simulate", "outage", "--profiles", "default,default", NULL},
       "tasker simulate outage: --profiles: \"default\" is listed twice\n"},
      {{"simulate", "outage", "--profiles", "default,", NULL},
       "tasker simulate outage: --profiles: invalid value \"default,\": expected "
       "profile names separated by commas\n"},
      {{"simulate", "outage", "--max-attempts", "0", NULL},
       "tasker simulate outage: --max-attempts: invalid value \"0\": expected an "
       "integer from 1 to 1000\n"},
      {{"simulate", "outage", "--clients", "10", NULL},
       "tasker simulate outage: unknown flag \"--clients\" (see tasker simulate "
       "outage --help)\n"},
      {{"simulate", "outage", "--outage", "soon", NULL},
       "tasker simulate outage: --outage: invalid duration \"soon\": expected a "
       "number with a unit ms, s, m or h (\"150ms\", \"2s\", \"1m30s\") or plain "
       "seconds (\"30\", \"1.5\")\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_usage_error(cases[i].want, cases[i].args);
}

/* A budget so tight that the backlog would take months to drain: the run
 * stops with an error that says what to change, and exit status 1. */
static void outage_that_never_drains_is_reported(void **state) {
  (void)state;
  run_result r;
  RUN(&r, "simulate", "outage", "--rate", "1/s", "--duration", "10m", "--outage", "5m",
      "--outage-start", "1m", "--budget-window", "24h", "--budget-min-per-second", "0.0000116",
      "--seed", "1");
  assert_int_equal(r.status, 1);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "tasker simulate outage: profile \"default\": the run lasts past "
                             "30 days of simulated time: retries are waiting too long (raise "
                             "the budget's floor or shorten the outage)\n");
  run_result_free(&r);
}

static void contention_is_the_default_scenario(void **state) {
  (void)state;
  run_result a, b;
  RUN(&a, "simulate", "--clients", "5", "--trials", "2", "--seed", "3");
  RUN(&b, "simulate", "contention", "--clients", "5", "--trials", "2", "--seed", "3");
  assert_int_equal(a.status, 0);
  assert_string_equal(a.out, b.out);
  run_result_free(&a);
  run_result_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_seed_same_output),
      cmocka_unit_test(json_at_100_clients),
      cmocka_unit_test(svg_has_two_charts_and_a_legend),
      cmocka_unit_test(bad_flags_exit_2_with_one_line),
      cmocka_unit_test(svg_write_failure_is_reported),
      cmocka_unit_test(help_describes_the_model),
      cmocka_unit_test(outage_default_scenario_meets_the_goal),
      cmocka_unit_test(outage_figures_match_the_hand_worked_case),
      cmocka_unit_test(outage_table),
      cmocka_unit_test(outage_svg_is_well_formed),
      cmocka_unit_test(outage_bad_flags),
      cmocka_unit_test(outage_that_never_drains_is_reported),
      cmocka_unit_test(contention_is_the_default_scenario),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
