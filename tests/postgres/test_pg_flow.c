/* Decisions, skipped steps, convergence and map on the PostgreSQL backend
 * (DESIGN §17), through the store ops alone: templates are stored with
 * their normalized definitions as workflow/template.c writes them
 * (decides, map), tasks created, steps claimed and outcomes recorded as the
 * engine would, and the results observed in task reports, claims, inputs
 * and instance lists. The conformance suite runs the same rules on both
 * backends through template files; this program pins the PostgreSQL side
 * down on its own, on a fresh database per case of the harness's cluster
 * (skipped as requiring pg without one). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/engine_fixture.h"
#include "store/flow.h"
#include "store/migration.h"
#include "store/rules.h"
#include "store/store.h"

#define LEASE 30000

/* ---- Helpers ---- */

static int setup(void **state) {
  *state = efx_new_pg("tk_pg_flow");
  return 0;
}

/* Store a template: its definition's JSON and edges (pairs). */
static int64_t put_template(efx *f, const char *name, const char *definition, const int *edges,
                            int nedges) {
  tk__template_row row = {.namespace_ = "default", .name = name, .version = "1",
                          .description = "", .definition = definition, .digest = name,
                          .edges = edges, .nedges = nedges, .created_at = EFX_T0};
  tk_err err;
  efx_must(f->store->ops->template_put(f->store, &row, 1, &err), &err, "template put");
  return row.id;
}

/* A task of template tpl whose steps are names[0..n) with parents[i] each. */
static int64_t submit(efx *f, int64_t tpl, const char *const *names, const int *parents, int n) {
  tk__new_step steps[16];
  for (int i = 0; i < n; i++)
    steps[i] = (tk__new_step){.name = names[i], .nparents = parents[i], .max_attempts = 3,
                              .retryable = 1, .backoff = "default"};
  tk__new_task t = {.template_id = tpl, .context = "{}", .steps = steps, .nsteps = n,
                    .now = f->clock.now_ms, .start_at = f->clock.now_ms};
  int64_t id;
  int existed;
  tk_err err;
  efx_must(f->store->ops->task_create(f->store, &t, &id, &existed, &err), &err, "submit");
  return id;
}

static int claim(efx *f, tk__claimed *out, int limit) {
  int n;
  tk_err err;
  efx_must(tk__store_claim(f->store, "w", LEASE, limit, out, &n, &err), &err, "claim");
  return n;
}

static tk__claimed claim_one(efx *f) {
  tk__claimed c;
  if (claim(f, &c, 1) != 1) fail_msg("nothing to claim");
  return c;
}

/* The outcome of claim c, by owner "w" now: COMPLETE with results, or
 * ERROR. */
static tk__outcome outcome_of(efx *f, const tk__claimed *c, tk__next_state next,
                              const char *results) {
  return (tk__outcome){.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                       .template_id = c->template_id, .idx = c->idx,
                       .instance = c->item_index + 1, .owner = "w", .attempt = c->attempt,
                       .now = f->clock.now_ms, .finished_at = f->clock.now_ms,
                       .attempt_outcome = next == TK__NEXT_COMPLETE ? "success" : "failure",
                       .next = next, .results = results,
                       .error = next == TK__NEXT_ERROR ? "boom" : NULL};
}

/* Record outcome_of(c, next, results). */
static tk__effects finish(efx *f, const tk__claimed *c, tk__next_state next,
                          const char *results) {
  tk__outcome o = outcome_of(f, c, next, results);
  tk__effects fx;
  tk_err e, err;
  int rc = f->store->ops->record(f->store, &o, 1, &fx, &e, NULL, &err);
  efx_must(rc, &err, "record");
  efx_must(e.code, &e, "record outcome");
  return fx;
}

static void report(efx *f, int64_t task, tk__task_report *r) {
  tk_err err;
  efx_must(f->store->ops->task_report(f->store, task, r, &err), &err, "report");
}

static const tk__step_rec *step_of(const tk__task_report *r, const char *name) {
  for (int i = 0; i < r->nsteps; i++)
    if (strcmp(r->steps[i].name, name) == 0) return &r->steps[i];
  fail_msg("no step %s in the report", name);
  return NULL;
}

/* Whether the report has a transition of step `name` to `to` for `reason`. */
static int has_transition(const tk__task_report *r, const char *name, const char *to,
                          const char *reason) {
  const tk__step_rec *s = step_of(r, name);
  for (int i = 0; i < r->ntransitions; i++) {
    const tk__transition_rec *t = &r->transitions[i];
    if (t->step_id == s->id && strcmp(t->to, to) == 0 && strcmp(t->reason, reason) == 0)
      return 1;
  }
  return 0;
}

/* The states of the report's steps, "name=state ..." in template order. */
static void expect_states(efx *f, int64_t task, const char *task_state, const char *want) {
  tk__task_report r;
  report(f, task, &r);
  char got[1024] = "";
  size_t used = 0;
  for (int i = 0; i < r.nsteps; i++)
    used += (size_t)snprintf(got + used, sizeof got - used, "%s%s=%s", i ? " " : "",
                             r.steps[i].name, r.steps[i].state);
  if (strcmp(got, want) != 0 || strcmp(r.state, task_state) != 0)
    fail_msg("task %s, steps: %s; expected task %s, steps: %s", r.state, got, task_state, want);
  tk__task_report_free(&r);
}

static void operate(efx *f, tk_operator_action action, int64_t task, const char *step) {
  tk__effects fx;
  tk_err err;
  efx_must(f->store->ops->operator(f->store, action, task, step, f->clock.now_ms, &fx, &err), &err,
       "operator");
}

/* ---- A decision ---- */

/* score -> triage (decides approve, review) -> approve, review -> done. */
static const char decision_def[] =
    "{\"name\":\"order\",\"steps\":[{\"name\":\"score\"},"
    "{\"name\":\"triage\",\"depends_on\":[\"score\"],\"decides\":[\"approve\",\"review\"],"
    "\"allow_none\":true,\"branches_key\":\"branches\"},"
    "{\"name\":\"approve\",\"depends_on\":[\"triage\"]},"
    "{\"name\":\"review\",\"depends_on\":[\"triage\"]},"
    "{\"name\":\"done\",\"depends_on\":[\"approve\",\"review\"]}]}";
static const int decision_edges[] = {0, 1, 1, 2, 1, 3, 2, 4, 3, 4};
static const char *const decision_names[] = {"score", "triage", "approve", "review", "done"};
static const int decision_parents[] = {0, 1, 1, 1, 2};

static int64_t decision_task(efx *f) {
  int64_t tpl = put_template(f, "order", decision_def, decision_edges, 5);
  return submit(f, tpl, decision_names, decision_parents, 5);
}

/* The decision chose review: approve is skipped at once with its reason,
 * review runs, and done converges on one complete and one skipped parent. */
static void decision_skips_the_branch_not_chosen(void **state) {
  efx *f = *state;
  int64_t task = decision_task(f);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  tk__claimed triage = claim_one(f);
  assert_int_equal(triage.idx, 1);
  assert_int_equal(triage.item_index, -1);
  tk__effects fx = finish(f, &triage, TK__NEXT_COMPLETE, "{\"branches\":[\"review\"]}");
  assert_int_equal(fx.children_released, 1);
  expect_states(f, task, "in_progress",
                "score=complete triage=complete approve=skipped review=pending done=pending");
  tk__task_report r;
  report(f, task, &r);
  assert_true(has_transition(&r, "approve", "skipped", "not chosen by triage"));
  assert_int_equal(r.steps_done, 3);
  tk__task_report_free(&r);
  tk__claimed review = claim_one(f);
  assert_int_equal(review.idx, 3);
  finish(f, &review, TK__NEXT_COMPLETE, "{}");
  tk__claimed done = claim_one(f);
  assert_int_equal(done.idx, 4);
  finish(f, &done, TK__NEXT_COMPLETE, "{}");
  expect_states(f, task, "complete",
                "score=complete triage=complete approve=skipped review=complete done=complete");
}

/* Choosing none (allow_none): both branches are skipped, and done, whose
 * parents are all skipped, is skipped too; the task completes. */
static void all_parents_skipped_skips_the_child(void **state) {
  efx *f = *state;
  int64_t task = decision_task(f);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  tk__claimed triage = claim_one(f);
  tk__effects fx = finish(f, &triage, TK__NEXT_COMPLETE, "{\"branches\":[]}");
  assert_int_equal(fx.children_released, 0);
  assert_string_equal(fx.task_state, "complete");
  expect_states(f, task, "complete",
                "score=complete triage=complete approve=skipped review=skipped done=skipped");
  tk__task_report r;
  report(f, task, &r);
  assert_true(has_transition(&r, "done", "skipped", "all parents skipped"));
  assert_int_equal(r.steps_done, 5);
  tk__task_report_free(&r);
  tk__claimed none[2];
  assert_int_equal(claim(f, none, 2), 0);
}

/* Resolving a decision step in error makes no choice: every branch is
 * skipped, and what depends only on them is skipped too. */
static void resolving_a_decision_skips_its_branches(void **state) {
  efx *f = *state;
  int64_t task = decision_task(f);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  tk__claimed triage = claim_one(f);
  finish(f, &triage, TK__NEXT_ERROR, NULL);
  expect_states(f, task, "error",
                "score=complete triage=error approve=pending review=pending done=pending");
  operate(f, TK_OP_RESOLVE, task, "triage");
  expect_states(f, task, "complete",
                "score=complete triage=resolved_manually approve=skipped review=skipped "
                "done=skipped");
}

/* A branch not chosen is skipped at once, though another of its parents
 * is still running; that parent's completion then releases nothing, and
 * the task completes without running it. start -> d (decides a, b), x;
 * a depends on d and x; b on d. */
static void a_branch_is_skipped_while_another_parent_runs(void **state) {
  efx *f = *state;
  static const char def[] =
      "{\"name\":\"two\",\"steps\":[{\"name\":\"start\"},"
      "{\"name\":\"d\",\"depends_on\":[\"start\"],\"decides\":[\"a\",\"b\"],"
      "\"allow_none\":false,\"branches_key\":\"pick\"},"
      "{\"name\":\"x\",\"depends_on\":[\"start\"]},"
      "{\"name\":\"a\",\"depends_on\":[\"d\",\"x\"]},{\"name\":\"b\",\"depends_on\":[\"d\"]}]}";
  static const int edges[] = {0, 1, 0, 2, 1, 3, 2, 3, 1, 4};
  static const char *const names[] = {"start", "d", "x", "a", "b"};
  static const int parents[] = {0, 1, 1, 2, 1};
  int64_t task = submit(f, put_template(f, "two", def, edges, 5), names, parents, 5);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  tk__claimed c[2];
  assert_int_equal(claim(f, c, 2), 2);
  const tk__claimed *d = c[0].idx == 1 ? &c[0] : &c[1], *x = c[0].idx == 1 ? &c[1] : &c[0];
  tk__effects fx = finish(f, d, TK__NEXT_COMPLETE, "{\"pick\":[\"b\"]}");
  assert_int_equal(fx.children_released, 1);
  expect_states(f, task, "in_progress",
                "start=complete d=complete x=in_progress a=skipped b=pending");
  fx = finish(f, x, TK__NEXT_COMPLETE, "{}");
  assert_int_equal(fx.children_released, 0);
  tk__claimed b = claim_one(f);
  assert_int_equal(b.idx, 4);
  fx = finish(f, &b, TK__NEXT_COMPLETE, "{}");
  assert_string_equal(fx.task_state, "complete");
  expect_states(f, task, "complete", "start=complete d=complete x=complete a=skipped b=complete");
}

/* ---- Map ---- */

/* list -> process (map over parents.list.files, max 4, max_failures
 * MF) -> sum. */
static int64_t map_task(efx *f, int max_failures) {
  char def[1024];
  snprintf(def, sizeof def,
           "{\"name\":\"fan\",\"steps\":[{\"name\":\"list\"},"
           "{\"name\":\"process\",\"depends_on\":[\"list\"],\"map\":{\"parent\":\"list\","
           "\"path\":[\"files\"],\"max\":4,\"max_failures\":%d}},"
           "{\"name\":\"sum\",\"depends_on\":[\"process\"]}]}",
           max_failures);
  static const int edges[] = {0, 1, 1, 2};
  static const char *const names[] = {"list", "process", "sum"};
  static const int parents[] = {0, 1, 1};
  char tname[32];
  snprintf(tname, sizeof tname, "fan%d", max_failures);
  return submit(f, put_template(f, tname, def, edges, 2), names, parents, 3);
}

/* Three elements: three instances claimed as the map's step with their
 * positions and elements in their inputs; the last to finish completes
 * the map with the array of results in element order, and sum sees it. */
static void map_runs_one_instance_per_element(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  tk__effects fx = finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE,
                          "{\"files\":[\"a\",\"b\",{\"c\":3}]}");
  assert_int_equal(fx.children_released, 3); /* each instance a step made ready */
  expect_states(f, task, "in_progress", "list=complete process=mapped sum=pending");
  tk__claimed inst[4];
  assert_int_equal(claim(f, inst, 4), 3);
  int64_t ids[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(inst[i].idx, 1);
    assert_int_equal(inst[i].item_index, i);
    ids[i] = inst[i].step_id;
  }
  json_t *in[3];
  tk_err err;
  efx_must(f->store->ops->inputs(f->store, ids, 3, in, &err), &err, "inputs");
  assert_string_equal(json_string_value(json_object_get(in[1], "item")), "b");
  assert_int_equal(json_integer_value(json_object_get(in[2], "item_index")), 2);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(in[2], "item"), "c")), 3);
  assert_non_null(json_object_get(json_object_get(in[0], "parents"), "list"));
  for (int i = 0; i < 3; i++) json_decref(in[i]);
  /* Out of order: the array is in element order all the same. */
  finish(f, &inst[2], TK__NEXT_COMPLETE, "{\"n\":2}");
  finish(f, &inst[0], TK__NEXT_COMPLETE, "{\"n\":0}");
  expect_states(f, task, "in_progress", "list=complete process=mapped sum=pending");
  fx = finish(f, &inst[1], TK__NEXT_COMPLETE, "{\"n\":1}");
  assert_int_equal(fx.children_released, 1);
  tk__task_report r;
  report(f, task, &r);
  const tk__step_rec *p = step_of(&r, "process");
  assert_string_equal(p->state, "complete");
  assert_string_equal(p->results, "[{\"n\":0},{\"n\":1},{\"n\":2}]");
  assert_int_equal(p->instances_total, 3);
  assert_int_equal(p->instances_done, 3);
  assert_int_equal(p->instances_failed, 0);
  assert_int_equal(p->instances_waiting, 0);
  assert_int_equal(p->item_index, -1);
  assert_int_equal(r.nsteps, 3);
  assert_int_equal(r.steps_done, 2);
  assert_true(has_transition(&r, "process", "mapped", "mapped into 3 instances"));
  assert_true(has_transition(&r, "process", "complete", "all instances finished"));
  tk__task_report_free(&r);
  tk__claimed sum = claim_one(f);
  assert_int_equal(sum.idx, 2);
  efx_must(f->store->ops->inputs(f->store, &sum.step_id, 1, in, &err), &err, "inputs");
  char *text = json_dumps(json_object_get(json_object_get(in[0], "parents"), "process"),
                          JSON_COMPACT);
  assert_string_equal(text, "[{\"n\":0},{\"n\":1},{\"n\":2}]");
  free(text);
  json_decref(in[0]);
  finish(f, &sum, TK__NEXT_COMPLETE, "{}");
  expect_states(f, task, "complete", "list=complete process=complete sum=complete");
}

/* A map's countdown of unfinished instances lives in map_countdowns
 * (0008): a report still says the mapped step waits for them, and a store
 * written before 0008 mid-map (the count in the map's parents_remaining,
 * no table: made here by undoing 0008 on such a task) upgrades and
 * finishes the map once its last instance finishes, not before. */
static void map_countdown_survives_the_upgrade(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[1,2,3,4]}");
  tk__claimed inst[4];
  assert_int_equal(claim(f, inst, 4), 4);
  finish(f, &inst[0], TK__NEXT_COMPLETE, "0");
  tk__task_report r;
  report(f, task, &r);
  assert_int_equal(step_of(&r, "process")->parents_remaining, 3);
  tk__task_report_free(&r);
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT remaining FROM map_countdowns WHERE task_id = %lld",
           (long long)task);
  char *left = efx_pg_text(f->url, sql);
  assert_string_equal(left, "3");
  free(left);
  /* Back to 0007's shape for the countdowns, as an older tasker left
   * them, and 0008 applied again alone: the migrations after it (their
   * own changes elsewhere) are set aside in the record meanwhile. */
  int countdowns = 0;
  for (const tk__migration *m = tk__postgres_migrations; m->number != 0; m++)
    if (strcmp(m->name, "map_countdowns") == 0) countdowns = m->number;
  assert_true(countdowns > 0);
  snprintf(sql, sizeof sql,
           "UPDATE steps s SET parents_remaining = c.remaining FROM map_countdowns c"
           " WHERE s.task_id = c.task_id AND s.idx = c.idx; DROP TABLE map_countdowns;"
           " CREATE TABLE later AS SELECT * FROM schema_migrations WHERE version > %d;"
           " DELETE FROM schema_migrations WHERE version >= %d; SELECT 1",
           countdowns, countdowns);
  free(efx_pg_text(f->url, sql));
  tk_err err;
  int applied = 0;
  efx_must(tk_store_migrate_to(f->store, countdowns, &applied, NULL, &err), &err, "migrate");
  assert_int_equal(applied, 1);
  free(efx_pg_text(f->url, "INSERT INTO schema_migrations SELECT * FROM later; DROP TABLE later;"
                           " SELECT 1"));
  snprintf(sql, sizeof sql, "SELECT remaining FROM map_countdowns WHERE task_id = %lld",
           (long long)task);
  left = efx_pg_text(f->url, sql);
  assert_string_equal(left, "3");
  free(left);
  finish(f, &inst[3], TK__NEXT_COMPLETE, "3");
  finish(f, &inst[1], TK__NEXT_COMPLETE, "1");
  expect_states(f, task, "in_progress", "list=complete process=mapped sum=pending");
  tk__effects fx = finish(f, &inst[2], TK__NEXT_COMPLETE, "2");
  assert_int_equal(fx.children_released, 1);
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->results, "[0,1,2,3]");
  assert_int_equal(step_of(&r, "process")->parents_remaining, 0);
  tk__task_report_free(&r);
  /* The finished map's countdown is gone. */
  left = efx_pg_text(f->url, "SELECT count(*) FROM map_countdowns");
  assert_string_equal(left, "0");
  free(left);
}

/* An empty list completes the map with [] at once; sum is ready. */
static void empty_map_completes_with_an_empty_array(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[]}");
  tk__task_report r;
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->state, "complete");
  assert_string_equal(step_of(&r, "process")->results, "[]");
  assert_true(has_transition(&r, "process", "complete", "mapped into 0 instances"));
  assert_int_equal(step_of(&r, "process")->instances_total, TK__NONE);
  tk__task_report_free(&r);
  tk__claimed sum = claim_one(f);
  assert_int_equal(sum.idx, 2);
}

/* More elements than max: the map fails permanently, naming the count;
 * the task fails (nothing else can progress). */
static void map_over_max_fails(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  tk__effects fx = finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE,
                          "{\"files\":[1,2,3,4,5]}");
  assert_string_equal(fx.task_state, "error");
  tk__task_report r;
  report(f, task, &r);
  const tk__step_rec *p = step_of(&r, "process");
  assert_string_equal(p->state, "error");
  assert_non_null(strstr(p->last_error, "5 elements, more than max 4"));
  assert_true(has_transition(&r, "process", "error", TK__REASON_MAP_TOO_WIDE));
  assert_int_equal(r.steps_error, 1);
  tk__task_report_free(&r);
}

/* An instance in error fails the map (max_failures 0) and the task; an
 * operator's retry of that instance reopens both, and its success
 * completes the map. */
static void retrying_a_failed_instance_reopens_the_map(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\"]}");
  tk__claimed inst[2];
  assert_int_equal(claim(f, inst, 2), 2);
  finish(f, &inst[0], TK__NEXT_COMPLETE, "1");
  tk__effects fx = finish(f, &inst[1], TK__NEXT_ERROR, NULL);
  assert_string_equal(fx.task_state, "error");
  tk__task_report r;
  report(f, task, &r);
  const tk__step_rec *p = step_of(&r, "process");
  assert_string_equal(p->state, "error");
  assert_string_equal(p->last_error, "1 of 2 instances failed; max_failures is 0");
  assert_int_equal(p->instances_failed, 1);
  assert_int_equal(r.steps_error, 1);
  tk__task_report_free(&r);
  tk_err err;
  tk__effects ofx;
  assert_int_equal(f->store->ops->operator(f->store, TK_OP_RETRY, task, "process",
                                           f->clock.now_ms, &ofx, &err),
                   TK_ESTATE);
  operate(f, TK_OP_RETRY, task, "process[1]");
  expect_states(f, task, "in_progress", "list=complete process=mapped sum=pending");
  report(f, task, &r);
  assert_int_equal(r.steps_error, 0);
  assert_int_equal(step_of(&r, "process")->instances_waiting, 1);
  tk__task_report_free(&r);
  tk__claimed again = claim_one(f);
  assert_int_equal(again.item_index, 1);
  finish(f, &again, TK__NEXT_COMPLETE, "2");
  expect_states(f, task, "in_progress", "list=complete process=complete sum=pending");
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->results, "[1,2]");
  tk__task_report_free(&r);
}

/* max_failures 1: the map completes with null where the instance failed. */
static void tolerated_failures_leave_nulls(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 1);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\"]}");
  tk__claimed inst[2];
  assert_int_equal(claim(f, inst, 2), 2);
  finish(f, &inst[0], TK__NEXT_ERROR, NULL);
  finish(f, &inst[1], TK__NEXT_COMPLETE, "\"ok\"");
  tk__task_report r;
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->state, "complete");
  assert_string_equal(step_of(&r, "process")->results, "[null,\"ok\"]");
  assert_string_equal(r.state, "in_progress");
  tk__task_report_free(&r);
}

/* Cancel mid-map: the mapped step and its unfinished instances are
 * cancelled with the task. */
static void cancel_mid_map(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\",\"c\"]}");
  tk__claimed inst;
  assert_int_equal(claim(f, &inst, 1), 1);
  finish(f, &inst, TK__NEXT_COMPLETE, "1");
  operate(f, TK_OP_CANCEL, task, NULL);
  expect_states(f, task, "cancelled", "list=complete process=cancelled sum=cancelled");
  tk__step_rec *rows;
  int n;
  int64_t total;
  tk_err err;
  efx_must(f->store->ops->instance_list(f->store, task, 1, -1, 10, &rows, &n, &total, &err), &err,
       "instances");
  assert_int_equal(n, 3);
  assert_string_equal(rows[0].state, "complete");
  assert_string_equal(rows[1].state, "cancelled");
  assert_string_equal(rows[2].state, "cancelled");
  tk__step_recs_free(rows, n);
  tk__claimed none;
  assert_int_equal(claim(f, &none, 1), 0);
  /* The cancelled map's countdown (0008) goes when its task is pruned. */
  char *left = efx_pg_text(f->url, "SELECT count(*) FROM map_countdowns");
  assert_string_equal(left, "1");
  free(left);
  tk__prune_request pr = {.limit = 10};
  for (int i = 0; i < TK__PRUNE_STATES; i++) pr.before[i] = f->clock.now_ms + 1;
  tk__prune_counts pc;
  efx_must(f->store->ops->prune(f->store, &pr, &pc, &err), &err, "prune");
  assert_int_equal(pc.tasks, 1);
  left = efx_pg_text(f->url, "SELECT count(*) FROM map_countdowns");
  assert_string_equal(left, "0");
  free(left);
}

/* instance_list pages through a map's instances in element order. */
static void instance_list_pages(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE,
         "{\"files\":[\"a\",\"b\",\"c\",\"d\"]}");
  tk__step_rec *rows;
  int n;
  int64_t total;
  tk_err err;
  efx_must(f->store->ops->instance_list(f->store, task, 1, -1, 3, &rows, &n, &total, &err), &err,
       "instances");
  assert_int_equal(total, 4);
  assert_int_equal(n, 3);
  char name[32];
  for (int i = 0; i < 3; i++) {
    tk__flow_instance_name(name, sizeof name, "process", i);
    assert_string_equal(rows[i].name, name);
    assert_int_equal(rows[i].item_index, i);
    assert_string_equal(rows[i].state, "pending");
  }
  assert_string_equal(rows[3 - 1].item, "\"c\"");
  tk__step_recs_free(rows, n);
  efx_must(f->store->ops->instance_list(f->store, task, 1, 2, 3, &rows, &n, &total, &err), &err,
       "instances");
  assert_int_equal(n, 1);
  assert_int_equal(rows[0].item_index, 3);
  assert_string_equal(rows[0].item, "\"d\"");
  tk__step_recs_free(rows, n);
}

/* Every instance's outcome in one group (one transaction), with an
 * outcome of another task between them: the last settles the map and
 * releases sum in the same transaction. */
static void instances_recorded_in_one_group(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\",\"c\"]}");
  int64_t other = map_task(f, 0);
  tk__claimed c[4];
  assert_int_equal(claim(f, c, 4), 4); /* 3 instances, then the other task's list */
  tk__outcome o[4];
  for (int i = 0; i < 4; i++) {
    o[i] = outcome_of(f, &c[i], TK__NEXT_COMPLETE, "7");
    if (c[i].task_id == other) o[i].results = "{\"files\":[]}";
  }
  tk__effects fx[4];
  tk_err e[4], err;
  efx_must(f->store->ops->record(f->store, o, 4, fx, e, NULL, &err), &err, "record");
  for (int i = 0; i < 4; i++) efx_must(e[i].code, &e[i], "outcome");
  expect_states(f, task, "in_progress", "list=complete process=complete sum=pending");
  expect_states(f, other, "in_progress", "list=complete process=complete sum=pending");
  tk__task_report r;
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->results, "[7,7,7]");
  tk__task_report_free(&r);
  tk__claimed sums[2];
  assert_int_equal(claim(f, sums, 2), 2);
}

/* A decision whose results the store cannot read fails that outcome alone
 * (the engine refuses them before); the other outcome of the group is
 * recorded, and the decision's step stays as it was. */
static void a_bad_decision_fails_its_outcome_alone(void **state) {
  efx *f = *state;
  int64_t task = decision_task(f);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  int64_t other = map_task(f, 0);
  tk__claimed c[2];
  assert_int_equal(claim(f, c, 2), 2);
  tk__outcome o[2] = {outcome_of(f, &c[0], TK__NEXT_COMPLETE, "{\"branches\":[\"ship\"]}"),
                      outcome_of(f, &c[1], TK__NEXT_COMPLETE, "{\"files\":[]}")};
  assert_int_equal(c[0].task_id, task);
  tk__effects fx[2];
  tk_err e[2], err;
  efx_must(f->store->ops->record(f->store, o, 2, fx, e, NULL, &err), &err, "record");
  assert_int_equal(e[0].code, TK_ESTORE);
  assert_non_null(strstr(e[0].msg, "\"ship\" is not one of the branches of triage"));
  assert_int_equal(e[1].code, 0);
  expect_states(f, task, "in_progress",
                "score=complete triage=in_progress approve=pending review=pending done=pending");
  expect_states(f, other, "in_progress", "list=complete process=complete sum=pending");
}

/* A lost lease of an instance: the reaper sees its map's idx and its
 * element's position, and its retry stays an instance. */
static void reaper_sees_the_instance(void **state) {
  efx *f = *state;
  map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\"]}");
  tk__claimed c[2];
  assert_int_equal(claim(f, c, 2), 2);
  f->clock.now_ms += LEASE + 1;
  tk__expired x[4];
  int n;
  tk_err err;
  efx_must(f->store->ops->expired(f->store, f->clock.now_ms, 4, x, &n, &err), &err, "expired");
  assert_int_equal(n, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(x[i].step.idx, 1);
    assert_int_equal(x[i].step.item_index, x[i].step.step_id == c[0].step_id ? 0 : 1);
  }
}

/* A map over a map's results: when the first completes, the second
 * expands in the same transaction, one instance per result. */
static void a_map_over_a_map(void **state) {
  efx *f = *state;
  static const char def[] =
      "{\"name\":\"twice\",\"steps\":[{\"name\":\"list\"},"
      "{\"name\":\"one\",\"depends_on\":[\"list\"],\"map\":{\"parent\":\"list\","
      "\"path\":[\"files\"],\"max\":10,\"max_failures\":0}},"
      "{\"name\":\"two\",\"depends_on\":[\"one\"],\"map\":{\"parent\":\"one\","
      "\"path\":[],\"max\":10,\"max_failures\":0}}]}";
  static const int edges[] = {0, 1, 1, 2};
  static const char *const names[] = {"list", "one", "two"};
  static const int parents[] = {0, 1, 1};
  int64_t task = submit(f, put_template(f, "twice", def, edges, 2), names, parents, 3);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[1,2]}");
  tk__claimed c[4];
  assert_int_equal(claim(f, c, 4), 2);
  finish(f, &c[0], TK__NEXT_COMPLETE, "[\"x\"]");
  finish(f, &c[1], TK__NEXT_COMPLETE, "[\"y\"]");
  expect_states(f, task, "in_progress", "list=complete one=complete two=mapped");
  assert_int_equal(claim(f, c, 4), 2);
  assert_int_equal(c[0].idx, 2);
  json_t *in;
  tk_err err;
  efx_must(f->store->ops->inputs(f->store, &c[1].step_id, 1, &in, &err), &err, "inputs");
  char *item = json_dumps(json_object_get(in, "item"), JSON_COMPACT | JSON_ENCODE_ANY);
  assert_string_equal(item, c[1].item_index == 1 ? "[\"y\"]" : "[\"x\"]");
  free(item);
  json_decref(in);
  finish(f, &c[0], TK__NEXT_COMPLETE, "1");
  finish(f, &c[1], TK__NEXT_COMPLETE, "2");
  expect_states(f, task, "complete", "list=complete one=complete two=complete");
}

/* Resolving the last unfinished instance (pending) settles the map; a
 * resolved instance's place in the results is null. */
static void resolving_an_instance_settles_the_map(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[\"a\",\"b\"]}");
  tk__claimed c;
  assert_int_equal(claim(f, &c, 1), 1);
  finish(f, &c, TK__NEXT_COMPLETE, "\"done\"");
  operate(f, TK_OP_RESOLVE, task, "process[1]");
  expect_states(f, task, "in_progress", "list=complete process=complete sum=pending");
  tk__task_report r;
  report(f, task, &r);
  assert_string_equal(step_of(&r, "process")->results, "[\"done\",null]");
  assert_int_equal(r.steps_done, 2);
  tk__task_report_free(&r);
}

/* Resolving a failed map releases its children (it counts as complete). */
static void resolving_a_failed_map_releases_its_children(void **state) {
  efx *f = *state;
  int64_t task = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":\"not a list\"}");
  expect_states(f, task, "error", "list=complete process=error sum=pending");
  operate(f, TK_OP_RESOLVE, task, "process");
  expect_states(f, task, "in_progress", "list=complete process=resolved_manually sum=pending");
  tk__claimed sum = claim_one(f);
  assert_int_equal(sum.idx, 2);
}

/* The status report counts steps in every state at once: the seven of
 * DESIGN §3, skipped and mapped. */
static void status_counts_every_step_state(void **state) {
  efx *f = *state;
  decision_task(f); /* score claimed then complete, triage: approve skipped */
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{}");
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"branches\":[\"review\"]}");
  tk__claimed review = claim_one(f); /* in_progress */
  assert_int_equal(review.idx, 3);
  int64_t mapped = map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_COMPLETE, "{\"files\":[1,2]}");
  tk__claimed inst[2];
  assert_int_equal(claim(f, inst, 2), 2);
  tk__outcome o = outcome_of(f, &inst[0], TK__NEXT_RETRY, NULL); /* waiting_for_retry */
  o.error = "again";
  o.delay_ms = 60000;
  o.run_at = f->clock.now_ms + 60000;
  tk__effects fx;
  tk_err e, err;
  efx_must(f->store->ops->record(f->store, &o, 1, &fx, &e, NULL, &err), &err, "record");
  efx_must(e.code, &e, "retry");
  finish(f, &inst[1], TK__NEXT_ERROR, NULL); /* error */
  operate(f, TK_OP_RESOLVE, mapped, "process[1]"); /* resolved_manually */
  int64_t gone = map_task(f, 0);
  operate(f, TK_OP_CANCEL, gone, NULL); /* cancelled */
  map_task(f, 0);
  finish(f, (tk__claimed[]){claim_one(f)}, TK__NEXT_ERROR, NULL); /* error */
  tk__status_report st;
  efx_must(f->store->ops->status(f->store, f->clock.now_ms, &st, &err), &err, "status");
  static const char *const want[] = {"cancelled", "complete", "error", "in_progress", "mapped",
                                     "pending", "resolved_manually", "skipped",
                                     "waiting_for_retry"};
  char got[512] = "";
  size_t used = 0;
  for (int i = 0; i < st.nsteps; i++)
    used += (size_t)snprintf(got + used, sizeof got - used, "%s ", st.steps[i].state);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strcmp(st.steps[i < (size_t)st.nsteps ? i : 0].state, want[i]) != 0)
      fail_msg("status steps: %s; expected %s at %zu", got, want[i], i);
  assert_int_equal(st.nsteps, 9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(decision_skips_the_branch_not_chosen, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(all_parents_skipped_skips_the_child, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(resolving_a_decision_skips_its_branches, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_branch_is_skipped_while_another_parent_runs, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(map_runs_one_instance_per_element, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(map_countdown_survives_the_upgrade, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(empty_map_completes_with_an_empty_array, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(map_over_max_fails, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(retrying_a_failed_instance_reopens_the_map, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(tolerated_failures_leave_nulls, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(cancel_mid_map, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(instance_list_pages, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(instances_recorded_in_one_group, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_bad_decision_fails_its_outcome_alone, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(reaper_sees_the_instance, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_map_over_a_map, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(resolving_an_instance_settles_the_map, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(resolving_a_failed_map_releases_its_children, setup,
                                      efx_teardown),
      cmocka_unit_test_setup_teardown(status_counts_every_step_state, setup, efx_teardown),
  };
  return cmocka_run_group_tests_name("pg_flow", tests, NULL, NULL);
}
