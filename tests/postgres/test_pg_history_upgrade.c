/* A task's history across migration 0009 (issue 22): on PostgreSQL a
 * step's claim and outcome moves are recorded by their attempt row, and a
 * task's start and ordinary finish by its tasks row, no longer as
 * transitions rows (a finish is written out as its row when an operator
 * moves the task again). A store written before 0009 keeps its rows and
 * must read the same afterwards, with the moves written after the
 * migration joining them in order.
 *
 * One script of moves (a retry, a lease that expires and its late owner
 * fenced, an error, an operator's retry, outcomes recorded later than the
 * attempt finished) runs on SQLite, whose rows are today's history, and on
 * PostgreSQL, where the store is taken back to schema 8 halfway (while an
 * attempt is in flight) and migrated again. The old store is made by
 * undoing 0009 on the store's rows (common/pg_undo.h): each move an
 * attempt row records becomes the transitions row tasker wrote before
 * 0009 (same id, so the same place in the order), and the columns go. The whole history (the
 * task, its steps, attempts and transitions, as the report gives them)
 * and what a prune counts must be the same on both, and so must the
 * store's whole moves view, which on PostgreSQL derives the moves that
 * rows other than transitions record (0012_moves_view.sql) and which the
 * history, the step list and prune read. Skipped as requiring
 * pg without the harness's cluster (TK_TEST_PG_URL). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/retention.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/pg_undo.h"
#include "store/rules.h"
#include "store/store.h"

#define T(ms) (EFX_T0 + (ms))
#define LEASE 10000

static const char *const sets[] = {"engine.max_attempts=5", "backoff.jitter=none", NULL};

static const char chain_toml[] = "name = \"chain\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
    EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP;

static tk__claimed claim_one(efx *f, const char *owner) {
  tk__claimed c;
  int n;
  tk_err err;
  efx_must(tk__store_claim(f->store, owner, LEASE, 1, &c, &n, &err), &err, "claim");
  if (n != 1) fail_msg("nothing to claim at T+%lld", (long long)(f->clock.now_ms - EFX_T0));
  return c;
}

/* The outcome of claim c by owner: recorded at now, the attempt finished
 * at finished_at; next, with a retry due at run_at. */
static tk__outcome outcome_of(const tk__claimed *c, const char *owner, tk__next_state next,
                              int64_t finished_at, int64_t now, int64_t run_at) {
  tk__outcome o = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                   .template_id = c->template_id, .idx = c->idx,
                   .instance = c->item_index + 1, .owner = owner, .attempt = c->attempt,
                   .now = now, .finished_at = finished_at, .next = next,
                   .attempt_outcome = next == TK__NEXT_COMPLETE ? "success" : "failure"};
  if (next == TK__NEXT_COMPLETE) o.results = "{\"ok\":true}";
  else o.error = "it broke";
  if (next == TK__NEXT_RETRY) {
    o.run_at = run_at;
    o.delay_ms = run_at - finished_at;
    o.source = TK_DELAY_COMPUTED;
  }
  return o;
}

/* Record o: the outcome's own code (0, TK_EFENCED). */
static int record(efx *f, const tk__outcome *o) {
  tk__effects fx;
  tk_err one, whole;
  efx_must(f->store->ops->record(f->store, o, 1, &fx, &one, NULL, &whole), &whole, "record");
  return one.code;
}

static void record_ok(efx *f, const tk__outcome *o) {
  int rc = record(f, o);
  if (rc != 0) fail_msg("outcome refused: %s", tk_err_name(rc));
}

/* Claim one step for "A" now, then at now record its outcome next (no
 * retry), its attempt finished at finished_at. */
static void run_once(efx *f, tk__next_state next, int64_t finished_at, int64_t now) {
  tk__claimed c = claim_one(f, "A");
  f->clock.now_ms = now;
  tk__outcome o = outcome_of(&c, "A", next, finished_at, now, 0);
  record_ok(f, &o);
}

static void operate_ok(efx *f, tk_operator_action action, int64_t task, const char *step) {
  tk_err err;
  efx_must(tk_task_operate(f->store, action, task, step, f->clock.now_ms, NULL, &err), &err,
       "operate");
}

/* Times as T+ms, NULL (TK__NONE) as "null". */
static const char *rel(char *buf, int64_t t) {
  if (t == TK__NONE) return "null";
  snprintf(buf, 24, "T+%lld", (long long)(t - EFX_T0));
  return buf;
}

#define STR(s) ((s) ? (s) : "null")

/* The task's whole history as the report gives it, one line per fact. */
static char *history(efx *f, int64_t task) {
  tk__task_report r;
  tk_err err;
  efx_must(f->store->ops->task_report(f->store, task, &r, &err), &err, "report");
  size_t cap = 16384, len = 0;
  char *out = malloc(cap), a[24], b[24], c[24];
  len += (size_t)snprintf(out + len, cap - len, "task %s updated=%s finished=%s %d/%d/%d\n",
                          r.state, rel(a, r.updated_at), rel(b, r.finished_at), r.steps_total,
                          r.steps_done, r.steps_error);
  for (int i = 0; i < r.nsteps; i++)
    len += (size_t)snprintf(out + len, cap - len, "step %s %s attempts=%d run_at=%s\n",
                            r.steps[i].name, r.steps[i].state, r.steps[i].attempts,
                            rel(a, r.steps[i].run_at));
  for (int i = 0; i < r.nattempts; i++) {
    const tk__attempt_rec *x = &r.attempts[i];
    len += (size_t)snprintf(out + len, cap - len, "attempt #%d by %s %s..%s %s next=%s\n",
                            x->attempt, x->owner, rel(a, x->started_at), rel(b, x->finished_at),
                            STR(x->outcome), rel(c, x->next_run_at));
  }
  for (int i = 0; i < r.ntransitions; i++) {
    const tk__transition_rec *x = &r.transitions[i];
    snprintf(c, sizeof c, "%lld", (long long)x->attempt);
    len += (size_t)snprintf(out + len, cap - len, "%s %s %s -> %s (%s) attempt=%s\n",
                            rel(a, x->at), x->step ? x->step : "(task)", STR(x->from), x->to,
                            x->reason, x->attempt == TK__NONE ? "null" : c);
  }
  tk__task_report_free(&r);
  assert_true(len < cap);
  return out;
}

/* What one run of the script leaves: the history, the store's moves
 * view, and a prune's counts (dry run, then done). */
typedef struct result {
  char *history, *moves;
  tk_prune_counts dry, pruned;
} result;

/* Every row of the store's moves view (0012_moves_view.sql; SQLite's
 * 0013), every task's, a map's instances' too, in its order: on
 * PostgreSQL it derives what attempt and tasks rows record, on SQLite it
 * is the transitions rows, and both must read the same. */
static char *moves_view(efx *f) {
  static const char sql[] =
      "SELECT task_id, step, map_idx, from_state, to_state, at, reason, attempt FROM moves"
      " ORDER BY seq";
  return f->pg_db[0] ? efx_pg_text(f->url, sql) : efx_sql_text(f->db, "%s", sql);
}

/* Run the script on f; halfway (an attempt in flight) call halfway(f),
 * and at_end(f) before the prune. */
static result script(efx *f, void (*halfway)(efx *f), void (*at_end)(efx *f)) {
  efx_template(f, chain_toml);
  int64_t task = efx_submit(f, "chain", "{}");
  /* a#1 fails and is retried; a#2 is claimed (from waiting_for_retry). */
  tk__claimed c = claim_one(f, "A");
  f->clock.now_ms = T(10);
  tk__outcome o = outcome_of(&c, "A", TK__NEXT_RETRY, T(5), T(10), T(1000));
  record_ok(f, &o);
  f->clock.now_ms = T(1000);
  tk__claimed late = claim_one(f, "B");
  halfway(f);
  /* a#2's lease expires and the reaper records it; its owner is fenced. */
  tk__expired x;
  int n;
  tk_err err;
  efx_must(f->store->ops->expired(f->store, T(1000 + LEASE), 1, &x, &n, &err), &err, "expired");
  assert_int_equal(n, 1);
  f->clock.now_ms = T(1000 + LEASE);
  o = outcome_of(&x.step, x.owner, TK__NEXT_RETRY, T(1000 + LEASE), T(1000 + LEASE),
                 T(2000 + LEASE));
  o.attempt_outcome = "lease_expired";
  o.fence_lease = 1;
  record_ok(f, &o);
  f->clock.now_ms = T(1500 + LEASE);
  o = outcome_of(&late, "B", TK__NEXT_COMPLETE, T(1500 + LEASE), T(1500 + LEASE), 0);
  assert_int_equal(record(f, &o), TK_EFENCED);
  /* a#3 succeeds, recorded after it finished; b fails for good. */
  f->clock.now_ms = T(2000 + LEASE);
  run_once(f, TK__NEXT_COMPLETE, T(2050 + LEASE), T(2100 + LEASE));
  run_once(f, TK__NEXT_ERROR, T(2200 + LEASE), T(2200 + LEASE));
  /* An operator retries b, which then succeeds: the task completes. */
  f->clock.now_ms = T(3000 + LEASE);
  operate_ok(f, TK_OP_RETRY, task, "b");
  run_once(f, TK__NEXT_COMPLETE, T(3100 + LEASE), T(3100 + LEASE));
  /* Two more end in error: an operator cancels one and resolves the other
   * (its finish in error written out as a row either way). */
  f->clock.now_ms = T(4000 + LEASE);
  int64_t cancelled = efx_submit(f, "chain", "{}"), resolved = efx_submit(f, "chain", "{}");
  run_once(f, TK__NEXT_ERROR, T(4000 + LEASE), T(4000 + LEASE));
  run_once(f, TK__NEXT_COMPLETE, T(4000 + LEASE), T(4000 + LEASE));
  run_once(f, TK__NEXT_ERROR, T(4100 + LEASE), T(4100 + LEASE));
  f->clock.now_ms = T(5000 + LEASE);
  operate_ok(f, TK_OP_CANCEL, cancelled, NULL);
  operate_ok(f, TK_OP_RESOLVE, resolved, "b");

  at_end(f);
  char *texts[3] = {history(f, task), history(f, cancelled), history(f, resolved)};
  result r = {.history = malloc(strlen(texts[0]) + strlen(texts[1]) + strlen(texts[2]) + 1)};
  strcat(strcat(strcpy(r.history, texts[0]), texts[1]), texts[2]);
  for (int i = 0; i < 3; i++) free(texts[i]);
  r.moves = moves_view(f);
  tk_prune_options po = {.complete_before = T(100000), .cancelled_before = T(100000),
                         .dry_run = 1};
  efx_must(tk_prune(f->store, &po, &r.dry, &err), &err, "prune (dry run)");
  po.dry_run = 0;
  efx_must(tk_prune(f->store, &po, &r.pruned, &err), &err, "prune");
  return r;
}

static void nothing(efx *f) { (void)f; }

/* The transitions rows: all, and those with an attempt (a step's claims
 * and outcomes), as "all|with an attempt". */
static void expect_rows(efx *f, const char *want) {
  char *rows = efx_pg_text(f->url, "SELECT count(*), count(attempt) FROM transitions");
  assert_string_equal(rows, want);
  free(rows);
}

/* After 0009 the rows are each task's creation and its finish in error,
 * written out when an operator moved it again, and those operators'
 * moves: of the first task b's retry and the task's resumption; of the
 * second b cancelled and the task; of the third b resolved and the task
 * completed. The rest is in the attempt and tasks rows. */
static void only_moves_no_other_row_records(efx *f) { expect_rows(f, "12|0"); }

/* Those written at schema 8 stay (the creation, a#1's claim and outcome,
 * the start, a#2's claim), with the 11 rows written after as above. */
static void rows_from_before_and_eleven(efx *f) { expect_rows(f, "16|3"); }

/* The PostgreSQL store back at schema 8, its moves in transitions rows,
 * then migrated again by tasker. */
static void back_to_8_and_migrate(efx *f) {
  /* The creation; the start, the claims and the outcome are derived. */
  expect_rows(f, "1|0");
  free(efx_pg_text(f->url, PG_UNDO_0022));
  free(efx_pg_text(f->url, PG_UNDO_0021));
  free(efx_pg_text(f->url, PG_UNDO_0020));
  free(efx_pg_text(f->url, PG_UNDO_0019));
  free(efx_pg_text(f->url, PG_UNDO_0018));
  free(efx_pg_text(f->url, PG_UNDO_0017));
  free(efx_pg_text(f->url, PG_UNDO_0016));
  free(efx_pg_text(f->url, PG_UNDO_0015));
  free(efx_pg_text(f->url, PG_UNDO_0014));
  free(efx_pg_text(f->url, PG_UNDO_0013));
  free(efx_pg_text(f->url, PG_UNDO_0012));
  free(efx_pg_text(f->url, PG_UNDO_0011));
  free(efx_pg_text(f->url, PG_UNDO_0010));
  char *rows = efx_pg_text(f->url, PG_UNDO_0009);
  assert_string_equal(rows, "5");
  free(rows);
  tk_err err;
  int applied = 0, version = 0;
  efx_must(tk_store_migrate(f->store, &applied, &version, &err), &err, "migrate");
  assert_int_equal(applied, 14); /* 0009 to 0022 */
  assert_int_equal(version, 22);
}

/* text under a heading, a line at a time (cmocka cuts long messages). */
static void print_lines(const char *heading, char *text) {
  print_error("%s:\n", heading);
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
    print_error("  %s\n", line);
}

static void expect_same(const result *sqlite, const result *pg) {
  if (strcmp(sqlite->history, pg->history) != 0) {
    print_lines("SQLite", sqlite->history);
    print_lines("PostgreSQL", pg->history);
    fail_msg("the histories differ (above)");
  }
  if (strcmp(sqlite->moves, pg->moves) != 0) {
    print_lines("SQLite's moves", sqlite->moves);
    print_lines("PostgreSQL's moves", pg->moves);
    fail_msg("the moves views differ (above)");
  }
  const tk_prune_counts *c[4] = {&sqlite->dry, &pg->dry, &sqlite->pruned, &pg->pruned};
  for (int i = 0; i < 4; i += 2)
    if (memcmp(c[i], c[i + 1], sizeof *c[i]) != 0)
      fail_msg("prune%s counts differ: SQLite %lld tasks %lld steps %lld attempts %lld"
               " transitions, PostgreSQL %lld %lld %lld %lld",
               i == 0 ? " (dry run)" : "", (long long)c[i]->tasks, (long long)c[i]->steps,
               (long long)c[i]->attempts, (long long)c[i]->transitions,
               (long long)c[i + 1]->tasks, (long long)c[i + 1]->steps,
               (long long)c[i + 1]->attempts, (long long)c[i + 1]->transitions);
}

/* The script on SQLite and on PostgreSQL (with halfway and at_end there):
 * the same history and prune counts. */
static void compare(void (*halfway)(efx *f), void (*at_end)(efx *f)) {
  efx lite, pg;
  efx_open(&pg, sets);
  efx_use_postgres(&pg, getenv("TK_TEST_PG_URL"), "tk_pg_history"); /* or skips */
  efx_open(&lite, sets);
  result a = script(&lite, nothing, nothing);
  result b = script(&pg, halfway, at_end);
  assert_int_equal(a.pruned.tasks, 3);
  assert_int_equal(a.pruned.transitions, 16 + 7 + 9);
  expect_same(&a, &b);
  free(a.history);
  free(b.history);
  free(a.moves);
  free(b.moves);
  efx_close(&lite);
  efx_close(&pg);
}

/* PostgreSQL taken back to schema 8 halfway; after the migration no move
 * that an attempt or tasks row records was written as a transitions row. */
static void history_survives_the_upgrade(void **state) {
  (void)state;
  compare(back_to_8_and_migrate, rows_from_before_and_eleven);
}

/* PostgreSQL at schema 9 throughout. */
static void history_at_schema_9(void **state) {
  (void)state;
  compare(nothing, only_moves_no_other_row_records);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(history_survives_the_upgrade),
      cmocka_unit_test(history_at_schema_9),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
