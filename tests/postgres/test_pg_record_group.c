/* Recording a group of outcomes on PostgreSQL (DESIGN §5, issue 22): one
 * record call holding outcomes of several tasks of every kind (completed,
 * erroring, retried, reaped, a reaper's outcome refused because the owner
 * renewed the lease, an owner's outcome refused because its task was
 * cancelled, and a step with both the reaper's and its owner's late
 * outcome), given in an order that is not the tasks' order. Every row the
 * group writes is checked: steps, attempt rows, transitions, the tasks'
 * counters and moves, children released, activity_minutes, the fenced and
 * lease_expired counters, and what the call says of each outcome. A
 * second case poisons one outcome's write with a trigger: the group fails
 * as a whole, is recorded one by one, and only the poisoned outcome is
 * lost. A third checks the group statement's plan: the steps joined to the
 * outcomes by a hash, not a nested loop over every outcome for each step.
 * Each case runs on a fresh database of the harness's cluster
 * (skipped as requiring pg without one). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/outcomes.h"
#include "core/buf.h"
#include "store/postgres/postgres_internal.h"
#include "store/rules.h"
#include "store/store.h"

#define LEASE 30000
#define SHORT_LEASE 1000
#define T(ms) (EFX_T0 + (ms))

static int setup(void **state) {
  *state = efx_new_pg("tk_pg_group");
  return 0;
}

/* Claim every ready step for owner at now: how many, into out. */
static int claim_at(efx *f, const char *owner, int64_t now, int64_t lease, tk__claimed *out,
                    int max) {
  int n;
  tk_err err;
  efx_must(efx_claim_at(f->store, owner, now, lease, max, out, &n, &err), &err, "claim");
  return n;
}

/* The claim of step idx of task among out[0..n). */
static const tk__claimed *claimed(const tk__claimed *out, int n, int64_t task, int idx) {
  for (int i = 0; i < n; i++)
    if (out[i].task_id == task && out[i].idx == idx) return &out[i];
  fail_msg("task %lld step %d was not claimed", (long long)task, idx);
  return NULL;
}

static const char one_toml[] = "name = \"one\"\nversion = \"1\"\n" EFX_STEP("s") EFX_NOOP;
/* a; b and c after a; d after both. */
static const char diamond_toml[] =
    "name = \"diamond\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP EFX_STEP("b") EFX_NOOP
    "depends_on = [\"a\"]\n" EFX_STEP("c") EFX_NOOP "depends_on = [\"a\"]\n" EFX_STEP("d")
        EFX_NOOP "depends_on = [\"b\", \"c\"]\n";
/* x; y; z after y. */
static const char pair_toml[] =
    "name = \"pair\"\nversion = \"1\"\n" EFX_STEP("x") EFX_NOOP EFX_STEP("y") EFX_NOOP
    EFX_STEP("z") EFX_NOOP "depends_on = [\"y\"]\n";

/* Task t's moves in its history as the report reads it (since 0009 some
 * are recorded by attempt and tasks rows): those of its steps from
 * in_progress (the outcomes'; the claims' are not the group's) as
 * "name:from>to:reason:attempt@at", or (steps 0) the task's own as
 * "from>to:reason" (from "-" for none), in order, joined by spaces
 * ("NULL": none). */
static void expect_moves(efx *f, int64_t t, int steps, const char *want) {
  tk__task_report r;
  tk_err err;
  efx_must(f->store->ops->task_report(f->store, t, &r, &err), &err, "report");
  char got[2048] = "";
  size_t len = 0;
  for (int i = 0; i < r.ntransitions; i++) {
    const tk__transition_rec *x = &r.transitions[i];
    const char *sep = len ? " " : "";
    if (!steps && x->step == NULL)
      len += (size_t)snprintf(got + len, sizeof got - len, "%s%s>%s:%s", sep,
                              x->from ? x->from : "-", x->to, x->reason);
    else if (steps && x->step != NULL && x->from && strcmp(x->from, TK__STEP_IN_PROGRESS) == 0)
      len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%s>%s:%s:%lld@%lld", sep,
                              x->step, x->from, x->to, x->reason, (long long)x->attempt,
                              (long long)(x->at - EFX_T0));
  }
  tk__task_report_free(&r);
  if (strcmp(len ? got : "NULL", want) != 0)
    fail_msg("task %lld's %s moves: got [%s], want [%s]", (long long)t, steps ? "step" : "own",
             len ? got : "NULL", want);
}

static void expect_step_moves(efx *f, int64_t t, const char *want) { expect_moves(f, t, 1, want); }
static void expect_task_moves(efx *f, int64_t t, const char *want) { expect_moves(f, t, 0, want); }

/* A task's moves until its first claim. */
#define CLAIMED_MOVES "->pending:" TK__REASON_CREATED " pending>in_progress:" TK__REASON_FIRST_CLAIM

/* Task t's row: state, steps done, in error, finished_at (relative). */
static void expect_task(efx *f, int64_t t, const char *want) {
  efx_pg_expect(f->url, want,
             "SELECT state, steps_done, steps_error, finished_at - %lld FROM tasks WHERE id = %lld",
             (long long)EFX_T0, (long long)t);
}

/* Step `name` of task t: state, results, last_error, run_at (relative),
 * last_delay_ms, lease_owner, claim_id, parents_remaining. */
static void expect_step(efx *f, int64_t t, const char *name, const char *want) {
  efx_pg_expect(f->url, want,
             "SELECT state, results, last_error, run_at - %lld, last_delay_ms, lease_owner,"
             " claim_id IS NOT NULL, parents_remaining FROM steps"
             " WHERE task_id = %lld AND name = '%s'",
             (long long)EFX_T0, (long long)t, name);
}

/* The attempt rows of step `name` of task t, in order: attempt, owner,
 * outcome, finished_at (relative), error, delay_ms, delay_source,
 * next_run_at (relative). */
static void expect_attempts(efx *f, int64_t t, const char *name, const char *want) {
  efx_pg_expect(f->url, want,
             "SELECT string_agg(concat_ws(',', a.attempt, a.owner, COALESCE(a.outcome, 'open'),"
             " COALESCE((a.finished_at - %lld)::text, '-'), COALESCE(a.error, '-'),"
             " COALESCE(a.delay_ms::text, '-'), COALESCE(a.delay_source, '-'),"
             " COALESCE((a.next_run_at - %lld)::text, '-')), ' ' ORDER BY a.id)"
             " FROM attempts a JOIN steps s ON s.id = a.step_id"
             " WHERE s.task_id = %lld AND s.name = '%s'",
             (long long)EFX_T0, (long long)EFX_T0, (long long)t, name);
}

static int64_t counter(efx *f, const char *name) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT COALESCE(sum(value), 0) FROM counters WHERE name = '%s'",
           name);
  char *v = efx_pg_text(f->url, sql);
  int64_t n = strtoll(v, NULL, 10);
  free(v);
  return n;
}

/* One record call of outcomes of nine tasks of every kind: every row. */
static void a_mixed_group_writes_every_row(void **state) {
  efx *f = *state;
  efx_template(f, one_toml);
  efx_template(f, diamond_toml);
  efx_template(f, pair_toml);
  tk_err err;

  /* X, H and U are claimed by v with a short lease; the reaper (w) looks
   * at T(1500), then v renews H's lease. */
  int64_t X = efx_submit(f, "one", "{}"), H = efx_submit(f, "one", "{}"),
          U = efx_submit(f, "one", "{}");
  tk__claimed cv[8];
  assert_int_equal(claim_at(f, "v", T(1), SHORT_LEASE, cv, 8), 3);
  int64_t D = efx_submit(f, "diamond", "{}"), P = efx_submit(f, "pair", "{}"),
          R = efx_submit(f, "one", "{}"), C = efx_submit(f, "one", "{}"),
          K = efx_submit(f, "one", "{}"), E = efx_submit(f, "one", "{}");
  tk__claimed cw[16];
  assert_int_equal(claim_at(f, "w", T(2), LEASE, cw, 16), 7); /* D.a, P.x, P.y, R, C, K, E */
  /* D's a completes alone first, so that b and c run. */
  tk__outcome a = success_of(claimed(cw, 7, D, 0), "w", T(3));
  tk__effects fx1;
  tk_err e1;
  efx_must(f->store->ops->record(f->store, &a, 1, &fx1, &e1, NULL, &err), &err, "record a");
  efx_must(e1.code, &e1, "record a");
  assert_int_equal(fx1.children_released, 2);
  tk__claimed cd[4];
  assert_int_equal(claim_at(f, "w", T(4), LEASE, cd, 4), 2);
  /* C is cancelled under its claim. */
  const char *ts = NULL;
  efx_must(tk_task_operate(f->store, TK_OP_CANCEL, C, NULL, T(5), &ts, &err), &err, "cancel");
  assert_string_equal(ts, TK__TASK_CANCELLED);
  tk__expired ex[8];
  int nex;
  efx_must(f->store->ops->expired(f->store, T(1500), 8, ex, &nex, &err), &err, "expired");
  assert_int_equal(nex, 3);
  efx_must(f->store->ops->heartbeat(f->store, claimed(cv, 3, H, 0)->step_id,
                                claimed(cv, 3, H, 0)->claim_id, T(60000), &err),
       &err, "heartbeat");
  int64_t fenced = counter(f, "fenced_writes"), expired = counter(f, "lease_expired");

  /* The group, in an order that is not the tasks'. */
  int64_t now = T(1500);
  tk__outcome o[] = {
      success_of(claimed(cw, 7, K, 0), "w", now),                 /* 0 K: the task completes */
      error_of(claimed(cw, 7, P, 0), "w", now),                   /* 1 P.x, while y runs */
      reaped_of(claimed(cv, 3, X, 0), "v", now, T(4500)),         /* 2 X: reaped */
      success_of(claimed(cd, 2, D, 2), "w", now),                 /* 3 D.c */
      error_of(claimed(cw, 7, E, 0), "w", now),                   /* 4 E: the task fails */
      success_of(claimed(cw, 7, C, 0), "w", now),                 /* 5 C: cancelled: fenced */
      success_of(claimed(cw, 7, P, 1), "w", now),                 /* 6 P.y: releases z */
      reaped_of(claimed(cv, 3, U, 0), "v", now, T(4500)),         /* 7 U: reaped */
      reaped_of(claimed(cv, 3, H, 0), "v", now, T(4500)),         /* 8 H: renewed: refused */
      retry_of(claimed(cw, 7, R, 0), "w", now, T(6500)),          /* 9 R: retried */
      success_of(claimed(cd, 2, D, 1), "w", now),                 /* 10 D.b: releases d */
      success_of(claimed(cv, 3, U, 0), "v", now),                 /* 11 U's owner, too late */
  };
  enum { N = sizeof o / sizeof o[0] };
  tk__effects fx[N];
  tk_err errs[N];
  efx_must(f->store->ops->record(f->store, o, N, fx, errs, NULL, &err), &err, "record the group");

  /* What the call says of each outcome. */
  for (int i = 0; i < N; i++) {
    int want_fenced = i == 5 || i == 8 || i == 11;
    if (want_fenced) assert_int_equal(errs[i].code, TK_EFENCED);
    else efx_must(errs[i].code, &errs[i], "an outcome of the group");
  }
  assert_int_equal(fx[6].children_released, 1); /* z */
  assert_int_equal(fx[3].children_released, 0); /* d still waits for b */
  assert_int_equal(fx[10].children_released, 1); /* d: b was its last parent */
  for (int i = 0; i < N; i++)
    if (i != 6 && i != 10) assert_int_equal(fx[i].children_released, 0);
  assert_string_equal(fx[0].task_state, TK__TASK_COMPLETE);
  assert_string_equal(fx[4].task_state, TK__TASK_ERROR);
  for (int i = 0; i < N; i++)
    if (i != 0 && i != 4) assert_null(fx[i].task_state);

  /* K: complete. */
  expect_step(f, K, "s", "complete|{\"ok\":true}|NULL|0|0|NULL|f|0");
  expect_attempts(f, K, "s", "1,w,success,1500,-,-,-,-");
  expect_step_moves(f, K, "s:in_progress>complete:success:1@1500");
  expect_task(f, K, "complete|1|0|1500");
  expect_task_moves(f, K, CLAIMED_MOVES " in_progress>complete:" TK__REASON_ALL_COMPLETE);

  /* E: error, and the task with it. */
  expect_step(f, E, "s", "error|NULL|it broke for good|0|0|NULL|f|0");
  expect_attempts(f, E, "s", "1,w,failure,1500,it broke for good,-,-,-");
  expect_step_moves(f, E, "s:in_progress>error:failure:1@1500");
  expect_task(f, E, "error|0|1|1500");
  expect_task_moves(f, E, CLAIMED_MOVES " in_progress>error:" TK__REASON_TASK_FAILED);

  /* R: retried; its task untouched. */
  expect_step(f, R, "s", "waiting_for_retry|NULL|it broke|6500|5000|NULL|f|0");
  expect_attempts(f, R, "s", "1,w,failure,1500,it broke,5000,computed,6500");
  expect_step_moves(f, R, "s:in_progress>waiting_for_retry:failure:1@1500");
  expect_task(f, R, "in_progress|0|0|NULL");
  expect_task_moves(f, R, CLAIMED_MOVES);

  /* X: reaped. */
  expect_step(f, X, "s", "waiting_for_retry|NULL|lease expired|4500|3000|NULL|f|0");
  expect_attempts(f, X, "s", "1,v,lease_expired,1500,lease expired,3000,computed,4500");
  expect_step_moves(f, X, "s:in_progress>waiting_for_retry:lease_expired:1@1500");
  expect_task(f, X, "in_progress|0|0|NULL");

  /* U: reaped; its owner's late success refused, its attempt row left as
   * the reaper finished it. */
  expect_step(f, U, "s", "waiting_for_retry|NULL|lease expired|4500|3000|NULL|f|0");
  expect_attempts(f, U, "s", "1,v,lease_expired,1500,lease expired,3000,computed,4500");
  expect_step_moves(f, U, "s:in_progress>waiting_for_retry:lease_expired:1@1500");

  /* H: the owner renewed after the reaper looked: refused, nothing
   * written, the attempt still open. */
  expect_step(f, H, "s", "in_progress|NULL|NULL|0|0|v|t|0");
  expect_attempts(f, H, "s", "1,v,open,-,-,-,-,-");
  expect_step_moves(f, H, "NULL");
  expect_task(f, H, "in_progress|0|0|NULL");

  /* C: cancelled under its claim: the late success closes the attempt as
   * fenced_out and changes nothing else. */
  expect_step(f, C, "s", "cancelled|NULL|NULL|0|0|NULL|t|0");
  expect_attempts(f, C, "s",
                  "1,w,fenced_out,1500,success refused: the step was no longer held by this "
                  "claim,-,-,-");
  expect_task(f, C, "cancelled|0|0|5");

  /* D: b and c complete in one group; d released once, due now. */
  expect_step(f, D, "b", "complete|{\"ok\":true}|NULL|3|0|NULL|f|0");
  expect_step(f, D, "c", "complete|{\"ok\":true}|NULL|3|0|NULL|f|0");
  expect_step(f, D, "d", "pending|NULL|NULL|1500|0|NULL|f|0");
  expect_step_moves(f, D,
                    "a:in_progress>complete:success:1@3 c:in_progress>complete:success:1@1500 "
                    "b:in_progress>complete:success:1@1500");
  expect_task(f, D, "in_progress|3|0|NULL");

  /* P: x failed while y still ran, then y completed and released z: the
   * task can still progress, so it never moved (one after another, x's
   * outcome saw y in progress). */
  expect_step(f, P, "x", "error|NULL|it broke for good|0|0|NULL|f|0");
  expect_step(f, P, "y", "complete|{\"ok\":true}|NULL|0|0|NULL|f|0");
  expect_step(f, P, "z", "pending|NULL|NULL|1500|0|NULL|f|0");
  expect_step_moves(f, P,
                    "x:in_progress>error:failure:1@1500 y:in_progress>complete:success:1@1500");
  expect_task(f, P, "in_progress|1|1|NULL");
  expect_task_moves(f, P, CLAIMED_MOVES);

  /* The counters: C, H and U's owner refused; X and U reaped. */
  assert_int_equal(counter(f, "fenced_writes") - fenced, 3);
  assert_int_equal(counter(f, "lease_expired") - expired, 2);
  /* Activity, per orchestrator: w's successes a, K, P.y, D.b, D.c; its
   * failures E, P.x, R and C's fenced_out; v's X and U. */
  efx_pg_expect(f->url, "v|0|2\nw|5|4",
             "SELECT orchestrator, succeeded, failed FROM activity_minutes ORDER BY 1");
  /* The ordinary outcomes' steps (and the children they released) were
   * written by one statement of the group's transaction, not one
   * subtransaction (savepoint) per outcome, nor one transaction each:
   * their rows carry one xmin. */
  efx_pg_expect(f->url, "1",
             "SELECT count(DISTINCT xmin::text) FROM steps WHERE task_id IN"
             " (%lld, %lld, %lld, %lld, %lld) OR (task_id = %lld AND name <> 'a')",
             (long long)K, (long long)E, (long long)R, (long long)X, (long long)P, (long long)D);
  /* Every attempt row but H's is closed. */
  efx_pg_expect(f->url, "1", "SELECT count(*) FROM attempts WHERE outcome IS NULL");
}

/* An outcome whose write fails (a trigger refuses it) fails its group as
 * a whole; the group is then recorded one by one, and only that outcome is
 * lost: the others are written, its step keeps its claim for the reaper. */
static void a_failing_outcome_loses_only_itself(void **state) {
  efx *f = *state;
  efx_template(f, one_toml);
  char *ok = efx_pg_text(
      f->url,
      "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " IF NEW.results = '\"poison\"' THEN RAISE EXCEPTION 'poisoned step %', NEW.id; END IF;"
      " RETURN NEW; END $$;"
      " CREATE TRIGGER poison BEFORE UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION poison();"
      " SELECT 'ok'");
  assert_string_equal(ok, "ok");
  free(ok);
  int64_t t[3];
  for (int i = 0; i < 3; i++) t[i] = efx_submit(f, "one", "{}");
  tk__claimed c[3];
  assert_int_equal(claim_at(f, "w", T(1), LEASE, c, 3), 3);
  tk__outcome o[3];
  for (int i = 0; i < 3; i++) o[i] = success_of(claimed(c, 3, t[i], 0), "w", T(10));
  o[1].results = "\"poison\"";
  tk__effects fx[3];
  tk_err errs[3], err;
  efx_must(f->store->ops->record(f->store, o, 3, fx, errs, NULL, &err), &err, "record the group");
  efx_must(errs[0].code, &errs[0], "the first outcome");
  efx_must(errs[2].code, &errs[2], "the third outcome");
  assert_int_equal(errs[1].code, TK_ESTORE);
  assert_non_null(strstr(errs[1].msg, "poisoned step"));
  expect_task(f, t[0], "complete|1|0|10");
  expect_task(f, t[2], "complete|1|0|10");
  expect_task(f, t[1], "in_progress|0|0|NULL");
  expect_step(f, t[1], "s", "in_progress|NULL|NULL|0|0|w|t|0");
  expect_attempts(f, t[1], "s", "1,w,open,-,-,-,-,-");
  expect_attempts(f, t[0], "s", "1,w,success,10,-,-,-,-");
  efx_pg_expect(f->url, "w|2|0", "SELECT orchestrator, succeeded, failed FROM activity_minutes");
}

/* The group statement's generic plan joins the steps to the outcomes by a
 * hash, whatever the statistics say of in-progress steps: with the fence's
 * state a filter of its own, a store whose statistics showed few of them
 * (here 50 steps, all complete, analyzed) got a nested loop that read every
 * outcome again for each step (48 x 48 rows a full group). The statement
 * is the one the store prepared on its session (pg_prepared_statements),
 * planned as the record transaction plans it (postgres_util.c's
 * tk__pg_begin_generic, sequential scans off as postgres_store.c sets). */
static void the_group_statement_hashes_its_outcomes(void **state) {
  efx *f = *state;
  efx_template(f, one_toml);
  enum { N = 50 };
  for (int i = 0; i < N; i++) efx_submit(f, "one", "{}");
  tk__claimed c[N];
  assert_int_equal(claim_at(f, "w", T(1), LEASE, c, N), N);
  tk__outcome o[N];
  for (int i = 0; i < N; i++) o[i] = success_of(&c[i], "w", T(10));
  tk__effects fx[N];
  tk_err errs[N], err;
  efx_must(f->store->ops->record(f->store, o, N, fx, errs, NULL, &err), &err, "record the group");
  for (int i = 0; i < N; i++) efx_must(errs[i].code, &errs[i], "an outcome of the group");
  free(efx_pg_text(f->url, "ANALYZE; SELECT 1"));
  PGresult *r = PQexec(((tk__pg *)f->store)->conn,
                       "SELECT statement FROM pg_prepared_statements"
                       " WHERE statement LIKE 'WITH o AS (SELECT * FROM unnest(%'");
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  assert_int_equal(PQntuples(r), 1);
  tk__buf sql = {0};
  tk__buf_addf(&sql,
               "SET enable_seqscan = off; SET enable_bitmapscan = off;"
               " SET plan_cache_mode = force_generic_plan; PREPARE q AS %s;"
               " EXPLAIN EXECUTE q('{1}', '{1}', '{complete}', '{null}', '{null}', '{null}',"
               " '{null}', '{null}', '{1}', '{success}', '{null}', '{1}', '{1}', '{1}', '{0}',"
               " '{x}', '{t}', '{f}')",
               PQgetvalue(r, 0, 0));
  PQclear(r);
  assert_false(sql.oom);
  char *plan = efx_pg_text(f->url, sql.p);
  tk__buf_free(&sql);
  /* The steps' join to the outcomes, by the step's id: its line. */
  int joins = 0;
  for (char *line = strtok(plan, "\n"); line; line = strtok(NULL, "\n")) {
    if (strstr(line, "s.id = o") == NULL) continue;
    joins++;
    if (strstr(line, "Hash Cond") == NULL) fail_msg("not a hash join: %s", line);
  }
  assert_int_equal(joins, 1);
  free(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_mixed_group_writes_every_row, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(a_failing_outcome_loses_only_itself, setup, efx_teardown),
      cmocka_unit_test_setup_teardown(the_group_statement_hashes_its_outcomes, setup, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
