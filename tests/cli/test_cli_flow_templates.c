/* Decision and map steps in templates (issue 21, DESIGN §17) through the
 * real tasker binary on a real SQLite file: every refusal names
 * FILE:LINE:COLUMN, the key, the value and what was expected, exits 78 and
 * stores nothing; a good template is stored in the normalized shape that
 * store/flow.c reads back (decides, allow_none, branches_key; map with
 * parent, path, max, max_failures, range, chunk); the ceiling of map.max
 * is the configuration's limits.map_max. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/cli_store.h"
#include "common/expect_text.h"
#include "store/flow.h"

static const char config[] = "[backoff]\njitter = \"none\"\n";

static int setup(void **state) {
  *state = cli_store_open(config);
  return 0;
}

static int teardown(void **state) {
  cli_store_close(*state);
  return 0;
}

#define HEAD "name = \"flow\"\nversion = \"1\"\n"
#define NOOP "handler = { kind = \"builtin\", name = \"noop\" }\n"
#define STEP(name) "[[steps]]\nname = \"" name "\"\n"
/* Lines 3-8: a parent "list", and a decision "triage" with a branch
 * "approve" (line 9 on is each case's own). */
#define LIST STEP("list") NOOP
#define TRIAGE STEP("triage") "depends_on = [\"list\"]\n" NOOP
#define BATCH                                                                               \
  "handler = { kind = \"builtin\", name = \"batch\" }\nbatch = { items_from = \"rows\" }\n"
#define CHOOSE(rest)                                                                        \
  "handler = { kind = \"builtin\", name = \"choose\", value = \"{{parents.list.risk}}\"" rest \
  " }\n"

static const bad_template bad_templates[] = {
    /* decides */
    {HEAD LIST TRIAGE "decides = [\"aprove\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "10:12", "steps[2].decides: unknown step \"aprove\" (did you mean \"approve\"?)"},
    {HEAD LIST TRIAGE "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"list\"]\n" NOOP,
     "10:12",
     "steps[2].decides: branch \"approve\" does not depend on \"triage\": a branch lists its "
     "decider in depends_on"},
    {HEAD LIST TRIAGE "decides = []\n", "10:11",
     "steps[2].decides = [...]: must be a non-empty array of step names"},
    {HEAD LIST TRIAGE "decides = \"approve\"\n", "10:11",
     "steps[2].decides = \"approve\": expected a non-empty array of step names, got a string"},
    {HEAD LIST TRIAGE "decides = [\"approve\", \"approve\"]\n" STEP("approve")
         "depends_on = [\"triage\"]\n" NOOP,
     "10:23", "steps[2].decides: \"approve\" is listed twice"},
    {HEAD LIST TRIAGE "decides = [\"triage\"]\n", "10:12",
     "steps[2].decides: step \"triage\" cannot be its own branch"},
    {HEAD LIST TRIAGE "allow_none = true\n", "10:14",
     "steps[2].allow_none: applies to a decision step only (one with decides = [...])"},
    {HEAD LIST TRIAGE "branches_key = \"chosen\"\n", "10:16",
     "steps[2].branches_key: applies to a decision step only (one with decides = [...])"},
    {HEAD LIST TRIAGE "decides = [\"approve\"]\nbranches_key = \"\"\n" STEP("approve")
         "depends_on = [\"triage\"]\n" NOOP,
     "11:16", "steps[2].branches_key = \"\": must be a non-empty string"},
    {HEAD LIST TRIAGE "decides = [\"approve\"]\nmap = { over = \"{{parents.list.files}}\" }\n"
         STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "11:7", "steps[2].map: a step cannot both decide and map"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" BATCH "decides = [\"approve\"]\n"
         STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "11:11", "steps[2].decides: a batch step cannot decide: its results are its items' counts"},
    /* map */
    {HEAD LIST TRIAGE "map = { over = \"files\" }\n", "10:16",
     "steps[2].map.over = \"files\": expected one placeholder of a parent's results, such as "
     "\"{{parents.list.files}}\""},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}} \" }\n", "10:16",
     "steps[2].map.over = \"{{parents.list.files}} \": expected one placeholder of a parent's "
     "results, such as \"{{parents.list.files}}\""},
    {HEAD LIST TRIAGE "map = { over = \"{{context.files}}\" }\n", "10:16",
     "steps[2].map.over = \"{{context.files}}\": expected one placeholder of a parent's results, "
     "such as \"{{parents.list.files}}\""},
    {HEAD LIST TRIAGE "map = { over = \"{{parents}}\" }\n", "10:16",
     "steps[2].map.over = \"{{parents}}\": expected one placeholder of a parent's results, such "
     "as \"{{parents.list.files}}\""},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files\" }\n", "10:16",
     "steps[2].map.over = \"{{parents.list.files\": expected one placeholder of a parent's "
     "results, such as \"{{parents.list.files}}\" (placeholder \"{{parents.list.files\" (byte "
     "1): unclosed (expected \"}}\"))"},
    {HEAD LIST TRIAGE STEP("other") NOOP "map = { over = \"{{parents.triage.files}}\" }\n",
     "13:16",
     "steps[3].map.over = \"{{parents.triage.files}}\": \"triage\" is not a parent of this step "
     "(depends_on: none)"},
    {HEAD LIST TRIAGE "map = { range = \"{{parents.lst.rows}}\" }\n", "10:17",
     "steps[2].map.range = \"{{parents.lst.rows}}\": \"lst\" is not a parent of this step "
     "(depends_on: list)"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.a}}\", range = \"{{parents.list.n}}\" }\n",
     "10:46", "steps[2].map.range: a map runs over a list (over) or a range, not both"},
    {HEAD LIST TRIAGE "map = { max = 10 }\n", "10:7",
     "steps[2].map: missing: a map needs over = \"{{parents.STEP.PATH}}\" (a list) or range = "
     "\"{{parents.STEP.PATH}}\" (a count)"},
    {HEAD LIST TRIAGE "map = \"{{parents.list.files}}\"\n", "10:7",
     "steps[2].map = \"{{parents.list.files}}\": expected a table, got a string"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", limit = 3 }\n", "10:42",
     "unknown key \"steps[2].map.limit\" (known keys: over, range, chunk, max, max_failures)"},
    {HEAD LIST TRIAGE "map = { range = \"{{parents.list.n}}\", chunk = 0 }\n", "10:47",
     "steps[2].map.chunk = 0: must be an integer >= 1"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", chunk = 10 }\n", "10:50",
     "steps[2].map.chunk: applies to a range only (map.range)"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", max = 0 }\n", "10:48",
     "steps[2].map.max = 0: must be an integer from 1 to 100000 (the ceiling, limits.map_max)"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", max = 100001 }\n", "10:48",
     "steps[2].map.max = 100001: must be an integer from 1 to 100000 (the ceiling, "
     "limits.map_max)"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", max_failures = -1 }\n", "10:57",
     "steps[2].map.max_failures = -1: must be an integer >= 0"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", max = 5, max_failures = 6 }\n",
     "10:66", "steps[2].map.max_failures = 6: must be an integer from 0 to max (5)"},
    {HEAD LIST TRIAGE "map = { over = \"{{parents.list.files}}\", max_failures = 100001 }\n",
     "10:57", "steps[2].map.max_failures = 100001: must be an integer from 0 to max (100000)"},
    {HEAD LIST STEP("each") "depends_on = [\"list\"]\n" BATCH
         "map = { over = \"{{parents.list.files}}\" }\n",
     "11:7", "steps[2].map: a map step cannot be a batch step"},
    /* the choose builtin */
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE(", cases = { high = [] }"),
     "9:38",
     "steps[2].handler.name = \"choose\": the choose builtin runs on a decision step only: add "
     "decides = [...], the branches it chooses between"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         "handler = { kind = \"builtin\", name = \"choose\", value = \"high\", cases = {} }\n"
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:56",
     "steps[2].handler.value = \"high\": expected one placeholder such as "
     "\"{{parents.score.risk}}\""},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         "handler = { kind = \"builtin\", name = \"choose\", value = \"{{parents.lst.risk}}\", "
         "cases = {} }\ndecides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n"
         NOOP,
     "9:56",
     "steps[2].handler.value = \"{{parents.lst.risk}}\": \"lst\" is not a parent of this step "
     "(depends_on: list)"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         "handler = { kind = \"builtin\", name = \"choose\", value = \"{{env.RISK}}\", cases = {} }\n"
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:56",
     "steps[2].handler.value = \"{{env.RISK}}\": expected a value of the context or of the "
     "parents' results: one from env would be shown in the step's failures"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         "handler = { kind = \"builtin\", name = \"choose\", cases = {} }\n"
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:11",
     "steps[2].handler.value: missing: the choose builtin needs value = \"{{...}}\", the value "
     "whose text picks a case"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE("")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:11",
     "steps[2].handler.cases: missing: the choose builtin needs cases = { VALUE = [\"BRANCH\", "
     "...] }"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE(", cases = [\"approve\"]")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:89",
     "steps[2].handler.cases = [...]: expected a table of values to arrays of step names, "
     "such as { high = [\"review\"] }, got an array"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE(", cases = { high = \"approve\" }")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:98",
     "steps[2].handler.cases.high = \"approve\": expected an array of step names, got a string"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         CHOOSE(", cases = { high = [\"review\"], low = [\"aprove\"] }")
         "decides = [\"approve\", \"review\"]\n" STEP("approve") "depends_on = [\"triage\"]\n"
         NOOP STEP("review") "depends_on = [\"triage\"]\n" NOOP,
     "9:117",
     "steps[2].handler.cases.low[1] = \"aprove\": expected one of the step's branches (decides: "
     "approve, review)"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         CHOOSE(", cases = { high = [\"approve\", \"approve\"] }")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:110", "steps[2].handler.cases.high[2] = \"approve\": \"approve\" is listed twice"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE(", cases = { low = [] }")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:97",
     "steps[2].handler.cases.low = [...]: chooses no branch, and the step does not allow none: name "
     "some of approve, or set allow_none = true"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         CHOOSE(", cases = { high = [\"approve\"] }, default = \"approve\"")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:123",
     "steps[2].handler.default = \"approve\": expected an array of step names, got a string"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n"
         CHOOSE(", cases = { high = [\"approve\"] }, default = [\"list\"]")
         "decides = [\"approve\"]\n" STEP("approve") "depends_on = [\"triage\"]\n" NOOP,
     "9:124",
     "steps[2].handler.default[1] = \"list\": expected one of the step's branches (decides: "
     "approve)"},
    {HEAD LIST STEP("triage") "depends_on = [\"list\"]\n" CHOOSE(", cases = { high = [\"approve\"] }")
         "decides = [\"approve\"]\nbatch = { items_from = \"rows\" }\n" STEP("approve")
         "depends_on = [\"triage\"]\n" NOOP,
     "11:9",
     "steps[2].batch: the builtin \"choose\" does not take batches: use the builtin \"batch\" "
     "or a function handler (tk_engine_register_batch)"},
};

/* Write `text` as DIR/NAME; its path into path. */
static void write_template(cli *c, const char *name, const char *text, char *path, size_t len) {
  efx_write(c->dir, name, text, path, len);
}

static void refusals_name_the_place_and_store_nothing(void **state) {
  cli_expect_template_refusals(*state, bad_templates,
                               sizeof bad_templates / sizeof bad_templates[0]);
}

/* The template the good cases add: a decision chosen by the choose
 * builtin, a decision by a command's results with its own key, a map
 * over a list, a chunked range, and a map over a map's whole results. */
static const char good[] =
    HEAD "[[steps]]\nname = \"score\"\n" NOOP
    "[[steps]]\nname = \"triage\"\ndepends_on = [\"score\"]\n"
    "handler = { kind = \"builtin\", name = \"choose\", value = \"{{parents.score.risk}}\", "
    "cases = { high = [\"review\"], low = [\"approve\"], \"1\" = [] }, default = [\"review\"] }\n"
    "decides = [\"approve\", \"review\"]\nallow_none = true\n"
    "[[steps]]\nname = \"approve\"\ndepends_on = [\"triage\"]\n" NOOP
    "[[steps]]\nname = \"review\"\ndepends_on = [\"triage\"]\n" NOOP
    "[[steps]]\nname = \"route\"\ndepends_on = [\"score\"]\n"
    "handler = { kind = \"command\", argv = [\"./route\"] }\n"
    "decides = [\"ship\"]\nbranches_key = \"go\"\n"
    "[[steps]]\nname = \"ship\"\ndepends_on = [\"route\", \"approve\"]\n" NOOP
    "[[steps]]\nname = \"list\"\n" NOOP
    "[[steps]]\nname = \"process\"\ndepends_on = [\"list\", \"score\"]\n"
    "handler = { kind = \"command\", argv = [\"./process\"] }\n"
    "map = { over = \"{{ parents.list.files }}\", max = 10000, max_failures = 3 }\n"
    "[[steps]]\nname = \"chunks\"\ndepends_on = [\"list\"]\n" NOOP
    "map = { range = \"{{parents.list.counts.0}}\", chunk = 1000 }\n"
    "[[steps]]\nname = \"sum\"\ndepends_on = [\"process\", \"chunks\"]\n" NOOP
    "[[steps]]\nname = \"again\"\ndepends_on = [\"process\"]\n" NOOP
    "map = { over = \"{{parents.process}}\" }\n";

/* The stored definition of template 1 read back as store/flow.c reads
 * it, with its edges from the store. */
static tk__flow *stored_flow(cli *c) {
  char *def = efx_sql_text(c->db, "SELECT definition FROM templates WHERE id = 1");
  char *edges_text = efx_sql_text(c->db,
                                  "SELECT group_concat(parent_idx || ' ' || child_idx, ' ') FROM "
                                  "(SELECT * FROM template_edges WHERE template_id = 1 "
                                  "ORDER BY child_idx, parent_idx)");
  int edges[64], n = 0;
  for (char *p = edges_text, *end; n < 64; p = end) {
    long v = strtol(p, &end, 10);
    if (end == p) break;
    edges[n++] = (int)v;
  }
  tk__flow *f = NULL;
  tk_err err = {0};
  if (tk__flow_read(1, def, edges, n / 2, &f, &err) != 0) fail_msg("tk__flow_read: %s", err.msg);
  free(def);
  free(edges_text);
  return f;
}

static int index_of(const tk__flow *f, const char *name) {
  for (int i = 0; i < f->nsteps; i++)
    if (strcmp(f->steps[i].name, name) == 0) return i;
  fail_msg("no step %s", name);
  return -1;
}

/* The step's map path, "a.b", into buf. */
static const char *path_text(const tk__flow_step *st, char *buf, size_t cap) {
  size_t used = 0, k;
  json_t *seg;
  buf[0] = '\0';
  json_array_foreach(st->map_path, k, seg) {
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", k ? "." : "", json_string_value(seg));
  }
  return buf;
}

static void a_good_template_is_stored_as_the_store_reads_it(void **state) {
  cli *c = *state;
  char path[400];
  write_template(c, "good.toml", good, path, sizeof path);
  run_result r;
  CLI(c, &r, "template", "add", path);
  if (r.status != 0) fail_msg("template add: exit %d: %s", r.status, r.err);
  assert_string_equal(r.err, "added default/flow version 1 (11 steps)\n");
  run_result_free(&r);
  /* The normalized JSON, member by member. */
  efx_sql_expect(c->db,
                 "[\"approve\",\"review\"]|true|\"branches\"|{\"cases\":{\"1\":[],\"high\":"
                 "[\"review\"],\"low\":[\"approve\"]},\"default\":[\"review\"],\"kind\":\"builtin\","
                 "\"name\":\"choose\",\"value\":\"{{parents.score.risk}}\"}",
                 "SELECT json_extract(definition, '$.steps[1].decides'), "
                 "json_type(definition, '$.steps[1].allow_none'), "
                 "json_quote(json_extract(definition, '$.steps[1].branches_key')), "
                 "json_extract(definition, '$.steps[1].handler') FROM templates");
  /* A decision without allow_none gets it, false. */
  efx_sql_expect(c->db, "false|\"go\"",
                 "SELECT json_type(definition, '$.steps[4].allow_none'), "
                 "json_quote(json_extract(definition, '$.steps[4].branches_key')) FROM templates");
  efx_sql_expect(c->db,
                 "{\"max\":10000,\"max_failures\":3,\"parent\":\"list\",\"path\":[\"files\"]}|"
                 "{\"chunk\":1000,\"max\":100000,\"max_failures\":0,\"parent\":\"list\",\"path\":"
                 "[\"counts\",\"0\"],\"range\":true}",
                 "SELECT json_extract(definition, '$.steps[7].map'), "
                 "json_extract(definition, '$.steps[8].map') FROM templates");
  /* Steps without either carry neither. */
  efx_sql_expect(c->db, "0",
                 "SELECT count(*) FROM templates, json_each(definition, '$.steps') WHERE "
                 "json_extract(value, '$.name') IN ('score', 'approve', 'review', 'ship', "
                 "'list', 'sum') AND (json_extract(value, '$.decides') IS NOT NULL OR "
                 "json_extract(value, '$.map') IS NOT NULL OR json_extract(value, "
                 "'$.allow_none') IS NOT NULL OR json_extract(value, '$.branches_key') IS NOT "
                 "NULL)");
  /* And as the store reads it. */
  tk__flow *f = stored_flow(c);
  assert_int_equal(f->nsteps, 11);
  assert_int_equal(f->special, 1);
  const tk__flow_step *triage = &f->steps[index_of(f, "triage")];
  assert_int_equal(triage->ndecides, 2);
  assert_int_equal(triage->decides[0], index_of(f, "approve"));
  assert_int_equal(triage->decides[1], index_of(f, "review"));
  assert_int_equal(triage->allow_none, 1);
  assert_string_equal(triage->branches_key, "branches");
  const tk__flow_step *route = &f->steps[index_of(f, "route")];
  assert_int_equal(route->ndecides, 1);
  assert_int_equal(route->decides[0], index_of(f, "ship"));
  assert_int_equal(route->allow_none, 0);
  assert_string_equal(route->branches_key, "go");
  assert_int_equal(tk__flow_is_map(f, index_of(f, "triage")), 0);
  char buf[64];
  const tk__flow_step *process = &f->steps[index_of(f, "process")];
  assert_int_equal(process->map, 1);
  assert_int_equal(process->map_parent, index_of(f, "list"));
  assert_string_equal(path_text(process, buf, sizeof buf), "files");
  assert_int_equal(process->max, 10000);
  assert_int_equal(process->max_failures, 3);
  assert_int_equal(process->ndecides, 0);
  const tk__flow_step *chunks = &f->steps[index_of(f, "chunks")];
  assert_int_equal(chunks->map, 2);
  assert_int_equal(chunks->map_parent, index_of(f, "list"));
  assert_string_equal(path_text(chunks, buf, sizeof buf), "counts.0");
  assert_int_equal(chunks->chunk, 1000);
  assert_int_equal(chunks->max, 100000);
  assert_int_equal(chunks->max_failures, 0);
  const tk__flow_step *again = &f->steps[index_of(f, "again")];
  assert_int_equal(again->map, 1);
  assert_int_equal(again->map_parent, index_of(f, "process"));
  assert_int_equal(json_array_size(again->map_path), 0);
  /* The decision the store makes from results follows the stored names. */
  unsigned char chosen[11];
  char why[256];
  assert_int_equal(tk__flow_decide(f, index_of(f, "route"), "{\"go\":[\"ship\"]}", chosen, why,
                                   sizeof why),
                   0);
  assert_int_equal(chosen[index_of(f, "ship")], 1);
  /* A map's elements from its parent's results, by the stored path. */
  json_t *elements = NULL;
  assert_int_equal(tk__flow_map_elements(f, index_of(f, "chunks"), "{\"counts\":[2500]}",
                                         &elements, why, sizeof why),
                   0);
  char *text = json_dumps(elements, JSON_COMPACT);
  assert_string_equal(text, "[{\"start\":0,\"end\":1000},{\"start\":1000,\"end\":2000},"
                            "{\"start\":2000,\"end\":2500}]");
  free(text);
  json_decref(elements);
  tk__flow_free(f);
}

static void a_template_without_decisions_or_maps_reads_as_plain(void **state) {
  cli *c = *state;
  char path[400];
  write_template(c, "plain.toml",
                 HEAD LIST STEP("next") "depends_on = [\"list\"]\n" NOOP, path, sizeof path);
  run_result r;
  CLI(c, &r, "template", "add", path);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  efx_sql_expect(c->db,
                 "{\"depends_on\":[],\"handler\":{\"kind\":\"builtin\",\"name\":\"noop\"},"
                 "\"name\":\"list\"}",
                 "SELECT json_extract(definition, '$.steps[0]') FROM templates");
  tk__flow *f = stored_flow(c);
  assert_int_equal(f->special, 0);
  tk__flow_free(f);
}

/* limits.map_max is the ceiling and the default max, from the file and
 * from --set. */
static void the_ceiling_is_limits_map_max(void **state) {
  (void)state;
  cli *c = cli_store_open("[limits]\nmap_max = 50\n");
  char over[400], under[400], want[600];
  write_template(c, "over.toml",
                 HEAD LIST STEP("each") "depends_on = [\"list\"]\n" NOOP
                 "map = { over = \"{{parents.list.files}}\", max = 51 }\n",
                 over, sizeof over);
  char *before = efx_snapshot(c->db);
  run_result r;
  CLI(c, &r, "template", "add", over);
  snprintf(want, sizeof want,
           "tasker template add: %s:10:48: steps[2].map.max = 51: must be an integer from 1 to "
           "50 (the ceiling, limits.map_max)\n",
           over);
  assert_int_equal(r.status, 78);
  assert_string_equal(r.err, want);
  run_result_free(&r);
  efx_unchanged(c->db, before);
  /* --set raises it for this command. */
  CLI(c, &r, "--set", "limits.map_max=51", "template", "add", over);
  if (r.status != 0) fail_msg("template add --set: exit %d: %s", r.status, r.err);
  run_result_free(&r);
  efx_sql_expect(c->db, "51", "SELECT json_extract(definition, '$.steps[1].map.max') FROM "
                              "templates WHERE id = 1");
  /* Without max, the ceiling is the max. */
  write_template(c, "under.toml",
                 "name = \"under\"\nversion = \"1\"\n" LIST STEP("each")
                 "depends_on = [\"list\"]\n" NOOP "map = { over = \"{{parents.list.files}}\" }\n",
                 under, sizeof under);
  CLI(c, &r, "template", "add", under);
  if (r.status != 0) fail_msg("template add: exit %d: %s", r.status, r.err);
  run_result_free(&r);
  efx_sql_expect(c->db, "50", "SELECT json_extract(definition, '$.steps[1].map.max') FROM "
                              "templates WHERE name = 'under'");
  CLI(c, &r, "config", "show");
  expect_contains(r.out, "limits.map_max = 50");
  run_result_free(&r);
  cli_store_close(c);
}

/* On PostgreSQL (TK_TEST_PG_URL's server): the same refusals store
 * nothing, and the good template is stored as the same definition text as
 * on SQLite, which the store reads back alike. */
static void on_postgres_the_same(void **state) {
  cli *c = *state;
  const char *server = efx_pg_server(getenv("TK_TEST_PG_URL"));
  cli pg = *c;
  char name[64];
  efx_pg_database(server, "tk_flow_templates", name, sizeof name, pg.url, sizeof pg.url);
  pg.db[0] = '\0';
  run_result r;
  CLI(&pg, &r, "init");
  if (r.status != 0) fail_msg("init: exit %d: %s", r.status, r.err);
  run_result_free(&r);
  cli_expect_template_refusals(&pg, bad_templates,
                               sizeof bad_templates / sizeof bad_templates[0]);
  char *count = efx_pg_text(pg.url, "SELECT (SELECT count(*) FROM templates) + "
                                    "(SELECT count(*) FROM template_edges)");
  assert_string_equal(count, "0");
  free(count);
  char path[400];
  write_template(c, "good.toml", good, path, sizeof path);
  CLI(&pg, &r, "template", "add", path);
  if (r.status != 0) fail_msg("template add: exit %d: %s", r.status, r.err);
  run_result_free(&r);
  CLI(c, &r, "template", "add", path);
  if (r.status != 0) fail_msg("template add: exit %d: %s", r.status, r.err);
  run_result_free(&r);
  char *on_pg = efx_pg_text(pg.url, "SELECT definition FROM templates");
  char *on_sqlite = efx_sql_text(c->db, "SELECT definition FROM templates");
  assert_string_equal(on_pg, on_sqlite);
  char *edges = efx_pg_text(pg.url, "SELECT string_agg(parent_idx || ' ' || child_idx, ' ' "
                                    "ORDER BY child_idx, parent_idx) FROM template_edges");
  assert_string_equal(edges, "0 1 1 2 1 3 0 4 2 5 4 5 0 7 6 7 6 8 7 9 8 9 7 10");
  tk__flow *f = NULL;
  int pairs[24];
  char *p = edges;
  for (int i = 0; i < 24; i++) pairs[i] = (int)strtol(p, &p, 10);
  tk_err err = {0};
  if (tk__flow_read(1, on_pg, pairs, 12, &f, &err) != 0) fail_msg("tk__flow_read: %s", err.msg);
  assert_int_equal(f->steps[1].ndecides, 2);
  assert_int_equal(f->steps[7].map, 1);
  assert_int_equal(f->steps[8].map, 2);
  tk__flow_free(f);
  free(edges);
  free(on_pg);
  free(on_sqlite);
  efx_pg_drop(server, name);
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(refusals_name_the_place_and_store_nothing),
      TEST(a_good_template_is_stored_as_the_store_reads_it),
      TEST(a_template_without_decisions_or_maps_reads_as_plain),
      cmocka_unit_test(the_ceiling_is_limits_map_max),
      TEST(on_postgres_the_same),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
