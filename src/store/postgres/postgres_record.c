/* Recording outcomes (DESIGN §5), fenced by their claims, with the next
 * claim in the same transaction (group commit).
 *
 * Round trips, for a group of n outcomes and a claim:
 *   1. BEGIN, one statement that locks every task of the group (ascending
 *      id), and one statement (postgres_record_set.c) that writes the
 *      ordinary outcomes: steps, attempt rows, transitions, activity and
 *      children, and returns what settling their tasks needs. Outcomes
 *      that need the flow (a decision, a step with a map child), outcomes
 *      of a map's instances and outcomes with batch items take the
 *      per-outcome path instead, with every other outcome of their task:
 *      per outcome a SAVEPOINT and one statement (OUTCOME_SQL or
 *      INSTANCE_SQL), in the same round trip when there are no ordinary
 *      ones, else in one more;
 *   2. when settling needs to know whether tasks can still progress (a
 *      step in error), one statement per such task, in one round trip;
 *   3. one statement that writes every task (its counters and the moves
 *      tk__settle chose), the claim (under a savepoint of its own), the
 *      fenced-writes counter, NOTIFY and COMMIT.
 * A claim alone is one round trip. More than GROUP_MAX outcomes take one
 * such transaction per GROUP_MAX, the claim going with the last. An
 * outcome of the per-outcome path that fails (a store error) is rolled
 * back to its savepoint (one more round trip) and the rest of the group
 * goes on; a failure of the set statement, or later in the transaction,
 * rolls it all back and each outcome is then recorded in a transaction of
 * its own on the per-outcome path, so that only a failing one is lost (its
 * lease expires and the reaper fails it). A lost connection is
 * TK_EDISCONNECTED for the whole call: the caller records everything
 * again once it has reconnected. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#include "store/flow.h"
#include "store/rules.h"

#define Q TK__PG_Q

/* The outcome statement, after the task's lock is held (so no other
 * outcome or operator action of the task runs meanwhile, and its snapshot
 * sees everything they committed). The step is written only where its
 * claim still holds it: the UPDATE checks that on the newest row version,
 * after any concurrent heartbeat, so a reaper's outcome ($8: now) is also
 * refused when the lease was renewed after the reaper looked. Refused, the
 * claim's attempt row is finished as fenced_out if nothing finished it
 * ($16: its text; NULL for a reaper, whose claim is alive). The scan for
 * "can the task progress" reads this statement's snapshot, in which the
 * step itself is still in progress and released children still wait: it
 * leaves out the one and adds the other. The task's counters are not
 * written here: its row is written once per transaction, at the end
 * (commit_group), with the sum of its outcomes and its moves; this returns
 * the stored counts plus this outcome's, and settle_tasks adds those of
 * the task's earlier outcomes in the same transaction. The step's move
 * (in_progress -> its new state, at now, reason the attempt's outcome) is
 * recorded by the attempt row it finishes (outcome_seq, outcome_at,
 * outcome_state: 0009_moves_in_their_rows.sql); a refused one moved
 * nothing and records none.
 * $1 step, $2 claim, $3 new state, $4 results, $5 error, $6 run_at and $7
 * delay (retries), $8 now (reaper), $9 finished_at, $10 attempt outcome,
 * $11 delay source, $12 now, $13 task, $14 template, $15 idx, $16
 * fenced-out text, $17 steps done +, $18 steps in error +, $19 release the
 * children. */
#define OUTCOME_WITH                                                                            \
    "WITH upd AS (UPDATE steps SET state = $3::text, results = $4::text, last_error = $5::text,"   \
    " run_at = COALESCE($6::bigint, run_at), last_delay_ms = COALESCE($7::bigint, last_delay_ms)," \
    " lease_owner = NULL, lease_expires_at = NULL, claim_id = NULL"                                \
    " WHERE id = $1::bigint AND state = " Q(TK__STEP_IN_PROGRESS) " AND claim_id = $2::bigint"     \
    " AND ($8::bigint IS NULL OR lease_expires_at <= $8) RETURNING id, queue),"                    \
    /* A step of a queue leaving in_progress makes room in it: wake the                            \
     * claimants waiting for room (0015_queues.sql). */                                            \
    " qn AS (SELECT pg_notify('" TK__PG_CHANNEL "', '') FROM upd WHERE queue IS NOT NULL),"        \
    " fin AS (UPDATE attempts a SET"                                                               \
    " finished_at = CASE WHEN u.ok THEN $9::bigint ELSE $12::bigint END,"                          \
    " outcome = CASE WHEN u.ok THEN $10::text ELSE 'fenced_out' END,"                              \
    " error = CASE WHEN u.ok THEN $5 ELSE $16::text END,"                                          \
    " delay_ms = CASE WHEN u.ok THEN $7 END,"                                                      \
    " delay_source = CASE WHEN u.ok THEN $11::text END,"                                           \
    " next_run_at = CASE WHEN u.ok THEN $6 END,"                                                   \
    " outcome_seq = CASE WHEN u.ok THEN " TK__PG_NEXT_SEQ " END,"                                  \
    " outcome_at = CASE WHEN u.ok THEN NULLIF($12, $9) END,"                                       \
    " outcome_state = CASE WHEN u.ok THEN NULLIF($3, " TK__PG_OUTCOME_STATE("$10", "$6") ") END"   \
    " FROM (SELECT EXISTS (SELECT 1 FROM upd) AS ok) u"                                            \
    " WHERE a.id = $2 AND (u.ok OR (a.outcome IS NULL AND $16::text IS NOT NULL))"                 \
    " RETURNING a.started_at, a.owner, a.outcome),"                                                \
    /* The finished attempt in the per-minute counts (migration 0006). */                          \
    " act AS (INSERT INTO activity_minutes (minute, orchestrator, succeeded, failed)"              \
    " SELECT started_at - started_at % 60000, owner, (outcome = 'success')::int,"                  \
    " (outcome <> 'success')::int FROM fin"                                                        \
    " ON CONFLICT (minute, orchestrator) DO UPDATE SET"                                            \
    " succeeded = activity_minutes.succeeded + EXCLUDED.succeeded,"                                \
    " failed = activity_minutes.failed + EXCLUDED.failed),"                                        \
    " rel AS (" TK__PG_RELEASE("$13", "$14::bigint", "$15::int", "$12",                            \
                               "$19::boolean AND EXISTS (SELECT 1 FROM upd)") "),"                 \
    " tsk AS (SELECT state, steps_done + $17::int AS steps_done, steps_total,"                   \
    " steps_error + $18::int AS steps_error FROM tasks"                                         \
    " WHERE id = $13 AND $17::int + $18::int > 0 AND EXISTS (SELECT 1 FROM upd))"
#define OUTCOME_COLUMNS                                                                         \
    " SELECT (SELECT count(*) FROM upd), " TK__PG_RELEASED("rel") ","                           \
    " t.state, t.steps_done, t.steps_total, t.steps_error,"                                     \
    " CASE WHEN t.steps_error > 0 OR t.state = " Q(TK__TASK_ERROR) " THEN"                      \
    " EXISTS (SELECT 1 FROM steps x WHERE x.task_id = $13 AND x.id <> $1"                       \
    " AND " TK__PG_CAN_PROGRESS("x") ") OR " TK__PG_RELEASED("rel") " > 0 END"
/* qn is read (so run) by the FROM item that gives the one row. */
#define OUTCOME_FROM " FROM (SELECT count(*) FROM qn) one LEFT JOIN tsk t ON true"
static const char OUTCOME_SQL[] = OUTCOME_WITH OUTCOME_COLUMNS OUTCOME_FROM;

/* The outcome of an instance of a map step (DESIGN §17): OUTCOME_SQL with
 * no counters of the task ($17, $18: 0) and no children released ($19:
 * false; $15 is the map's idx), and one more write when it finishes the
 * instance (complete or error): its map waits for one instance fewer, in
 * its countdown row (0008_map_countdowns.sql: a HOT update, where one of
 * the map's steps row was not). The last column is what it still waits
 * for: at 0, the map is settled (postgres_flow.c) in the same
 * transaction, which recounts its instances and checks it is mapped. */
static const char INSTANCE_SQL[] =
    OUTCOME_WITH ", mp AS (UPDATE map_countdowns m SET remaining = m.remaining - 1"
    " WHERE m.task_id = $13 AND m.idx = $15"
    " AND $3 IN (" Q(TK__STEP_COMPLETE) ", " Q(TK__STEP_ERROR) ") AND m.remaining > 0"
    " AND EXISTS (SELECT 1 FROM upd) RETURNING m.remaining)"
    OUTCOME_COLUMNS ", (SELECT remaining FROM mp)" OUTCOME_FROM;

/* A batch step's item results, written with its outcome or at a
 * checkpoint, only while the claim holds the step (the caller holds a lock
 * that keeps it so: the task's, or a share lock on the step) and only to
 * items still pending: an acked or given-up item never changes again.
 * $1 step, $2 claim, then parallel arrays of seq, state, delta, error. */
static const char ITEMS_SQL[] =
    "UPDATE items i SET state = u.state, attempts = i.attempts + u.delta,"
    " last_error = COALESCE(u.error, i.last_error)"
    " FROM unnest($3::bigint[], $4::text[], $5::int[], $6::text[]) AS u(seq, state, delta, error)"
    " WHERE i.step_id = $1::bigint AND i.seq = u.seq AND i.state = " Q(TK__ITEM_PENDING)
    " AND EXISTS (SELECT 1 FROM steps WHERE id = $1 AND state = " Q(TK__STEP_IN_PROGRESS)
    " AND claim_id = $2::bigint)";

/* Refused writes ($1) and the reaper's recorded lease expiries ($2),
 * counted last in the transaction: the counters' rows are shared by every
 * orchestrator, so they are held only for the commit (and taken in the
 * same order by all). */
static const char COUNT_SQL[] =
    "INSERT INTO counters (name, value) SELECT name, value FROM (VALUES"
    " ('fenced_writes', $1::bigint), ('lease_expired', $2::bigint)) v (name, value)"
    " WHERE value > 0"
    " ON CONFLICT (name) DO UPDATE SET value = counters.value + EXCLUDED.value";

enum { PENDING, RECORDED, FENCED, FAILED };

/* Outcomes per transaction at most. Each on the per-outcome path has a
 * savepoint, and a transaction with more than 64 subtransactions that
 * wrote overflows the server's per-backend cache of them, which slows
 * every other session's snapshots while it lasts. */
#define GROUP_MAX 48

/* One outcome of the group, in the order they are written. */
typedef struct rec {
  int i;                 /* its index in the caller's arrays */
  int savepoint, result; /* slots of its SAVEPOINT and of its last command, the outcome */
  int tries, status;
  int done, errors; /* what it adds to its task's counters, once recorded */
  /* After it, for settling; state NULL: not settled. state points to
   * `state` or to the move chosen for an earlier outcome of the task, and
   * is the `from` of this one's move. */
  tk__task_counts counts;
  char state[TK__STATE_MAX];
  int can_progress; /* -1: not known */
  const char *to, *reason; /* the task's move that settling chose (to NULL: none) */
  /* Decisions and map (DESIGN §17): the template's flow, and the flow's
   * work this outcome needs after it is written (FLOW_*). */
  const tk__flow *flow;
  int flow_work;
  int instance; /* an outcome of an instance of a map step */
  int set;      /* written by the set statement (postgres_record_set.c) */
} rec;

/* The flow's work after an outcome: none; the step completed and its
 * children are released under the flow's rules (a decision, or a step
 * with a map child); an instance finished its map's last one. */
enum { FLOW_NONE, FLOW_FINISHED, FLOW_MAP_SETTLE };

/* Whether step idx of f has a map step among its children. */
static int has_map_child(const tk__flow *f, int idx) {
  const tk__flow_step *st = &f->steps[idx];
  for (int i = 0; i < st->nchildren; i++)
    if (tk__flow_is_map(f, st->children[i])) return 1;
  return 0;
}

/* Whether outcome o releases its children through the flow's rules
 * rather than in its own statement. Never for a template without
 * decisions or maps. */
static int flow_release(const tk__flow *f, const tk__outcome *o) {
  return f != NULL && f->special && !tk__flow_is_map(f, o->idx) &&
         o->next == TK__NEXT_COMPLETE && o->idx >= 0 && o->idx < f->nsteps &&
         (tk__flow_is_decision(f, o->idx) || has_map_child(f, o->idx));
}

/* The savepoint of each outcome, and of the claim after them. */
static int savepoint(tk__pg_pipe *p) {
  return tk__pg_pipe_stmt(p, PG_SAVEPOINT, "SAVEPOINT o", 0, NULL);
}

static int rollback_savepoint(tk__pg_pipe *p) {
  return tk__pg_pipe_stmt(p, PG_ROLLBACK_SAVEPOINT, "ROLLBACK TO SAVEPOINT o", 0, NULL);
}

/* Lock order (postgres_internal.h): tasks in ascending id; a task's
 * outcomes in the order the caller gave them. */
static int by_task(const void *a, const void *b) {
  const tk__outcome *x = *(const tk__outcome *const *)a, *y = *(const tk__outcome *const *)b;
  if (x->task_id != y->task_id) return x->task_id < y->task_id ? -1 : 1;
  return (x > y) - (x < y);
}

/* The items of outcome o as the arrays of ITEMS_SQL, in b[0..3]. */
static int item_arrays(const tk__item_result *r, int n, tk__buf b[4], const char *v[4]) {
  for (int k = 0; k < 4; k++) tk__pg_array_open(&b[k]);
  for (int j = 0; j < n; j++) {
    char *tmp;
    tk__pg_array_i64(&b[0], r[j].seq);
    tk__pg_array_text(&b[1], r[j].state);
    tk__pg_array_i64(&b[2], r[j].delta);
    tk__pg_array_text(&b[3], tk__pg_utf8(r[j].error, &tmp));
    free(tmp);
  }
  int ok = 1;
  for (int k = 0; k < 4; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  return ok;
}

int tk__pg_items_queue(tk__pg_pipe *p, int64_t step_id, int64_t claim_id,
                       const tk__item_result *r, int n) {
  tk__buf b[4] = {{0}};
  const char *v[4];
  int slot = -1;
  if (item_arrays(r, n, b, v)) {
    tk__pg_args a = {0};
    tk__pg_arg_i64(&a, step_id);
    tk__pg_arg_i64(&a, claim_id);
    for (int k = 0; k < 4; k++) tk__pg_arg_text(&a, v[k]);
    slot = tk__pg_pipe_stmt(p, PG_OUTCOME_ITEMS, ITEMS_SQL, a.n, a.v);
  }
  for (int k = 0; k < 4; k++) tk__buf_free(&b[k]);
  return slot;
}

/* Queue outcome o's commands: its savepoint, its task's lock (unless the
 * group's tasks were locked together: locked), its items, and the outcome
 * statement. */
static int queue_outcome(tk__pg_pipe *p, const tk__outcome *o, rec *r, int locked) {
  r->savepoint = savepoint(p);
  if (!locked && tk__pg_task_lock_queue(p, o->task_id) < 0) return -1;
  if (o->nitems > 0 && tk__pg_items_queue(p, o->step_id, o->claim_id, o->items, o->nitems) < 0)
    return -1;
  /* A reaper's outcome leaves a refused claim's attempt row alone; an
   * owner's finishes it with this text (ASCII: attempt_outcome is one of
   * the engine's names). */
  char fenced[256];
  if (!o->fence_lease) tk__fenced_attempt_text(fenced, sizeof fenced, o);
  char *err_tmp;
  int retry = o->next == TK__NEXT_RETRY;
  /* An instance counts in no task counter and releases nothing itself.
   * A claim hands an instance out as its map's idx, and never the map
   * step itself (it is mapped, never ready): an outcome of a map's idx is
   * an instance's, whatever o->instance says. */
  int instance = r->instance = tk__flow_is_map(r->flow, o->idx);
  r->flow_work = flow_release(r->flow, o) ? FLOW_FINISHED : FLOW_NONE;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, o->step_id);
  tk__pg_arg_i64(&a, o->claim_id);
  tk__pg_arg_text(&a, tk__next_state_name(o->next));
  tk__pg_arg_text(&a, o->results);
  tk__pg_arg_text(&a, tk__pg_utf8(o->error, &err_tmp));
  if (retry) tk__pg_arg_i64(&a, o->run_at), tk__pg_arg_i64(&a, o->delay_ms);
  else tk__pg_arg_null(&a), tk__pg_arg_null(&a);
  if (o->fence_lease) tk__pg_arg_i64(&a, o->now);
  else tk__pg_arg_null(&a);
  tk__pg_arg_i64(&a, o->finished_at);
  tk__pg_arg_text(&a, o->attempt_outcome);
  tk__pg_arg_text(&a, retry ? tk_delay_source_name(o->source) : NULL);
  tk__pg_arg_i64(&a, o->now);
  tk__pg_arg_i64(&a, o->task_id);
  tk__pg_arg_i64(&a, o->template_id);
  tk__pg_arg_i64(&a, o->idx);
  tk__pg_arg_text(&a, o->fence_lease ? NULL : fenced);
  tk__pg_arg_i64(&a, o->next == TK__NEXT_COMPLETE && !instance);
  tk__pg_arg_i64(&a, o->next == TK__NEXT_ERROR && !instance);
  tk__pg_arg_bool(&a, o->next == TK__NEXT_COMPLETE && !instance && r->flow_work == FLOW_NONE);
  r->result = instance ? tk__pg_pipe_stmt(p, PG_OUTCOME_INSTANCE, INSTANCE_SQL, a.n, a.v)
                       : tk__pg_pipe_stmt(p, PG_OUTCOME, OUTCOME_SQL, a.n, a.v);
  free(err_tmp);
  return r->result < 0 || r->savepoint < 0 ? -1 : 0;
}

/* Read outcome r's statement: recorded (with what settling needs) or
 * fenced. */
static void read_outcome(tk__pg_pipe *p, const tk__outcome *o, rec *r, tk__effects *fx,
                         tk_err *e) {
  PGresult *res = tk__pg_result(p, r->result);
  if (tk__pg_i64(res, 0, 0) != 1) {
    r->status = FENCED;
    tk__fenced_error(e, o);
    return;
  }
  r->status = RECORDED;
  int instance = r->instance;
  r->done = o->next == TK__NEXT_COMPLETE && !instance;
  r->errors = o->next == TK__NEXT_ERROR && !instance;
  fx->children_released = (int)tk__pg_i64(res, 0, 1);
  r->can_progress = -1;
  /* An instance that leaves its map with none unfinished settles it. */
  if (instance && PQnfields(res) > 7 && !PQgetisnull(res, 0, 7) && tk__pg_i64(res, 0, 7) == 0)
    r->flow_work = FLOW_MAP_SETTLE;
  if (PQgetisnull(res, 0, 2)) return; /* a retry: the task is not settled */
  tk__pg_copy(r->state, sizeof r->state, res, 0, 2);
  r->counts.state = r->state;
  r->counts.done = (int)tk__pg_i64(res, 0, 3);
  r->counts.total = (int)tk__pg_i64(res, 0, 4);
  r->counts.errors = (int)tk__pg_i64(res, 0, 5);
  if (!PQgetisnull(res, 0, 6)) r->can_progress = tk__pg_bool(res, 0, 6);
}

/* A failure that a retry of the same outcome may get past. */
static int transient(const tk__pg_pipe *p) {
  return strcmp(p->sqlstate, "40P01") == 0 || strcmp(p->sqlstate, "40001") == 0;
}

/* Phase 1: every outcome from recs[0] that the set statement does not
 * write, each in its savepoint (locked: the group's tasks are locked
 * already). A failed outcome is rolled back to its savepoint and the rest
 * goes on. 0, or a failure that leaves the transaction unusable (rolled
 * back by the caller). */
static int write_outcomes(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs,
                          tk__effects *fx, tk_err *errs, int locked, tk_err *err) {
  int k = 0;
  for (;;) {
    while (k < n && recs[k].set) k++;
    if (k >= n) return 0;
    for (int j = k; j < n; j++)
      if (!recs[j].set && queue_outcome(p, &o[recs[j].i], &recs[j], locked) != 0) break;
    int rc = tk__pg_pipe_run(p, "record outcome", err);
    int failed = rc ? p->failed : -1, j = k;
    for (; j < n; j++) {
      if (recs[j].set) continue;
      if (failed >= 0 && recs[j].result >= failed) break;
      read_outcome(p, &o[recs[j].i], &recs[j], &fx[recs[j].i], &errs[recs[j].i]);
    }
    if (rc == 0) return 0;
    if (p->broken || j >= n || failed <= recs[j].savepoint) return rc;
    /* Outcome j failed after its savepoint: undo it alone. */
    tk_err one;
    tk_err_set(&one, TK_ESTORE, "%s", err->msg);
    int again = transient(p) && ++recs[j].tries < 2;
    tk__pg_pipe_reset(p);
    rollback_savepoint(p);
    if ((rc = tk__pg_pipe_run(p, "record outcome", err))) return rc;
    tk__pg_pipe_reset(p);
    memset(&fx[recs[j].i], 0, sizeof fx[recs[j].i]);
    if (!again) {
      recs[j].status = FAILED;
      errs[recs[j].i] = one;
      j++;
    }
    k = j;
  }
}

/* Whether the set statement may write recs[k]'s outcome: no batch items,
 * not an instance of a map, no flow work after it, and no other outcome
 * of the group for its step or its claim (those are written one after
 * the other, the later one then fenced). */
static int ordinary(const tk__outcome *o, int n, const rec *recs, int k) {
  const tk__outcome *x = &o[recs[k].i];
  if (x->nitems > 0 || flow_release(recs[k].flow, x)) return 0;
  for (int j = 0; j < n; j++) {
    const tk__outcome *y = &o[recs[j].i];
    if (j != k && (y->step_id == x->step_id || y->claim_id == x->claim_id)) return 0;
  }
  return 1;
}

/* Mark (rec.set) the outcomes the set statement writes: those of each
 * task whose outcomes in the group are all ordinary. A task's outcomes all
 * go one way, so that its history keeps the order the caller gave. How
 * many were marked. */
static int choose_set(const tk__outcome *o, int n, rec *recs) {
  int nset = 0;
  for (int k = 0; k < n;) {
    int end = k, all = 1;
    for (; end < n && o[recs[end].i].task_id == o[recs[k].i].task_id; end++)
      all &= ordinary(o, n, recs, end);
    for (int j = k; j < end; j++) recs[j].set = all;
    nset += all ? end - k : 0;
    k = end;
  }
  return nset;
}

/* recs[k]'s outcome as the set statement's row says: refused (fenced), or
 * recorded with what settling needs (its task's stored counts plus its
 * own; a retry settles nothing). */
static void read_set_row(const tk__outcome *x, rec *r, const tk__pg_outcome_row *row,
                         tk__effects *fx, tk_err *e) {
  if (!row->recorded) {
    r->status = FENCED;
    tk__fenced_error(e, x);
    return;
  }
  r->status = RECORDED;
  /* An instance counts in no task counter; the last of its map to finish
   * settles the map (flow_outcomes). */
  r->done = x->next == TK__NEXT_COMPLETE && !r->instance;
  r->errors = x->next == TK__NEXT_ERROR && !r->instance;
  fx->children_released = row->released;
  r->can_progress = -1;
  if (r->instance && row->map_left == 0) r->flow_work = FLOW_MAP_SETTLE;
  if (!r->done && !r->errors) return;
  memcpy(r->state, row->task_state, sizeof r->state);
  r->counts = (tk__task_counts){.state = r->state, .done = row->done + r->done,
                                .total = row->total, .errors = row->errors + r->errors};
}

/* The set-based part of the group (rec.set), after BEGIN: every task of
 * the group locked (ascending id, one statement), then the set
 * statement, one round trip. 0, or a failure of the whole (the caller
 * rolls back and records each outcome alone). */
static int write_set(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs, tk__effects *fx,
                     tk_err *errs, tk_err *err) {
  int64_t tasks[GROUP_MAX];
  const tk__outcome *set[GROUP_MAX];
  unsigned char kind[GROUP_MAX];
  int ntasks = 0, nset = 0;
  for (int k = 0; k < n; k++) {
    const tk__outcome *x = &o[recs[k].i];
    if (ntasks == 0 || tasks[ntasks - 1] != x->task_id) tasks[ntasks++] = x->task_id;
    if (!recs[k].set) continue;
    /* A claim hands an instance out as its map's idx (never the map). */
    const tk__flow *f = recs[k].flow;
    recs[k].instance = tk__flow_is_map(f, x->idx);
    int leaf = f != NULL && x->idx >= 0 && x->idx < f->nsteps && f->steps[x->idx].nchildren == 0;
    kind[nset] = (unsigned char)((recs[k].instance ? TK__PG_SET_INSTANCE : 0) |
                                 (recs[k].instance || leaf ? 0 : TK__PG_SET_PARENT));
    set[nset++] = x;
  }
  int slot = -1, rc;
  if (tk__pg_tasks_lock_queue(p, tasks, ntasks) < 0 ||
      (slot = tk__pg_outcomes_queue(p, set, kind, nset)) < 0)
    rc = p->broken ? tk_err_set(err, TK_EDISCONNECTED, "postgres: record outcomes: connection lost")
                   : tk__pg_oom(err, "record outcomes");
  else
    rc = tk__pg_pipe_run(p, "record outcomes", err);
  if (rc == 0 && PQntuples(tk__pg_result(p, slot)) != nset)
    rc = tk_err_set(err, TK_ESTORE, "postgres: record outcomes: %d rows for %d outcomes",
                    PQntuples(tk__pg_result(p, slot)), nset);
  for (int k = 0, row = 0; rc == 0 && k < n; k++) {
    if (!recs[k].set) continue;
    tk__pg_outcome_row r;
    tk__pg_outcomes_row(tk__pg_result(p, slot), row++, &r);
    read_set_row(&o[recs[k].i], &recs[k], &r, &fx[recs[k].i], &errs[recs[k].i]);
  }
  if (rc == 0) tk__pg_pipe_reset(p);
  return rc;
}

/* Whether the tasks of the set statement's outcomes can still progress,
 * as each outcome would have seen it written one after another: an
 * outcome followed by another recorded one of its task can (that step is
 * still in progress then); a task's last one sees the group's end state,
 * asked (one statement per task, all in one round trip) only when
 * settling needs it (tk__settle_needs_scan, with all the task's outcomes
 * counted). 0, or a failure of the whole. */
static int set_progress(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs, tk_err *err) {
  int scan_rec[GROUP_MAX], scan_slot[GROUP_MAX], nscans = 0;
  for (int k = 0; k < n;) {
    int end = k, last = -1, done = 0, errors = 0;
    for (; end < n && o[recs[end].i].task_id == o[recs[k].i].task_id; end++) {
      if (!recs[end].set || recs[end].status != RECORDED) continue;
      if (last >= 0) recs[last].can_progress = 1;
      last = end;
      done += recs[end].done;
      errors += recs[end].errors;
    }
    if (last >= 0 && recs[last].counts.state != NULL) {
      tk__task_counts c = recs[last].counts;
      c.done += done - recs[last].done;
      c.errors += errors - recs[last].errors;
      if (tk__settle_needs_scan(&c)) {
        if (nscans == 0) tk__pg_pipe_reset(p);
        scan_rec[nscans] = last;
        scan_slot[nscans++] = tk__pg_can_progress_queue(p, o[recs[last].i].task_id);
      }
    }
    k = end;
  }
  if (nscans == 0) return 0;
  int rc = tk__pg_pipe_run(p, "settle task", err);
  for (int j = 0; rc == 0 && j < nscans; j++)
    recs[scan_rec[j]].can_progress = tk__pg_bool(tk__pg_result(p, scan_slot[j]), 0, 0);
  return rc;
}

/* The flow's work of the recorded outcomes that need it (rec.flow_work),
 * in write order, after every outcome of the group was written: each
 * statement at once, under the tasks' locks that the outcomes took. What
 * it adds to the task's counters joins the outcome's own, and the
 * outcome's counts are read again for settling; the task's other
 * outcomes ask whether it can progress again at settling, in a snapshot
 * with this work in it. 0, or a failure that undoes the transaction (the
 * caller records each outcome alone then). */
static int flow_outcomes(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs,
                         tk__effects *fx, tk_err *err) {
  for (int k = 0; k < n; k++) {
    rec *r = &recs[k];
    const tk__outcome *x = &o[r->i];
    if (r->status != RECORDED || r->flow_work == FLOW_NONE) continue;
    tk__pg_flow_run run = {.p = p, .f = r->flow, .task_id = x->task_id, .now = x->now,
                           .err = err};
    int rc = r->flow_work == FLOW_FINISHED ? tk__pg_flow_finished(&run, x->idx, x->results, 1)
                                           : tk__pg_flow_map_settle(&run, x->idx);
    if (rc == 0) rc = tk__pg_flow_task_counts(&run, r->state, sizeof r->state, &r->counts);
    if (rc) return rc;
    r->done += run.done;
    r->errors += run.errors;
    r->counts.done += r->done;
    r->counts.errors += r->errors;
    fx[r->i].children_released += run.released;
    for (int j = 0; j < n; j++)
      if (o[recs[j].i].task_id == x->task_id) recs[j].can_progress = -1;
  }
  return 0;
}

/* Settle the tasks of recorded outcomes (tk__settle), in write order: an
 * outcome's counts were read right after it, and a move chosen for an
 * earlier outcome of the same task is the state the next one sees. The
 * moves are written with the commit. *notify is set when an outcome made
 * work visible (children released, a retry scheduled) or moved a task. */
static int settle_tasks(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs, tk__effects *fx,
                        int *notify, tk_err *err) {
  const char *moved_to = NULL;
  int64_t task = 0;
  int done = 0, errors = 0; /* added by the task's earlier outcomes */
  for (int k = 0; k < n; k++) {
    rec *r = &recs[k];
    const tk__outcome *x = &o[r->i];
    if (k == 0 || x->task_id != task) task = x->task_id, moved_to = NULL, done = errors = 0;
    if (r->status != RECORDED) continue;
    if (fx[r->i].children_released > 0 || x->next == TK__NEXT_RETRY) *notify = 1;
    if (r->counts.state == NULL) continue; /* a retry */
    r->counts.done += done;
    r->counts.errors += errors;
    done += r->done;
    errors += r->errors;
    if (moved_to != NULL) r->counts.state = moved_to;
    if (r->can_progress < 0 && tk__settle_needs_scan(&r->counts)) {
      /* Not answered with the outcome (the task had no step in error
       * then): ask now, still under the task's lock. */
      tk__pg_pipe_reset(p);
      int slot = tk__pg_can_progress_queue(p, x->task_id);
      int rc = tk__pg_pipe_run(p, "settle task", err);
      if (rc) return rc;
      r->can_progress = tk__pg_bool(tk__pg_result(p, slot), 0, 0);
    }
    /* Another state than counts.state, and a reason, or NULL. */
    const char *to = tk__settle(&r->counts, r->can_progress > 0, &r->reason);
    if (to == NULL) continue;
    r->to = to;
    fx[r->i].task_state = to;
    /* A task that ends can end someone's wait for work to run out
     * (`tasker run --until-idle`). */
    *notify = 1;
    moved_to = to;
  }
  return 0;
}

/* Queue the one write of each task of the group, all in one statement:
 * the sum of its recorded outcomes' counts and the moves settling chose,
 * in write order. A task whose outcomes were all retries (nothing
 * counted, no move) is not written. 0, or -1 when memory ran out. */
static int write_tasks(tk__pg_pipe *p, const tk__outcome *o, int n, const rec *recs) {
  tk__pg_task_sum tasks[GROUP_MAX];
  tk__pg_task_move moves[GROUP_MAX];
  int64_t move_task[GROUP_MAX];
  int ntasks = 0, nmoves = 0;
  for (int k = 0; k < n;) {
    tk__pg_task_sum t = {.task_id = o[recs[k].i].task_id};
    int first_move = nmoves;
    for (; k < n && o[recs[k].i].task_id == t.task_id; k++) {
      const rec *r = &recs[k];
      if (r->status != RECORDED) continue;
      t.done += r->done;
      t.errors += r->errors;
      t.now = o[r->i].now;
      if (r->to != NULL) {
        move_task[nmoves] = t.task_id;
        moves[nmoves++] = (tk__pg_task_move){r->counts.state, r->to, r->reason, o[r->i].now};
      }
    }
    if (nmoves > first_move) t.state = moves[nmoves - 1].to;
    if (t.done > 0 || t.errors > 0 || nmoves > first_move) tasks[ntasks++] = t;
  }
  if (ntasks == 0) return 0;
  return tk__pg_tasks_write_queue(p, tasks, ntasks, moves, move_task, nmoves) < 0 ? -1 : 0;
}

/* Phase 2: the tasks' writes, the claim, the counter, NOTIFY, COMMIT. The
 * claim has a savepoint of its own: if it fails, the outcomes still
 * commit and next->n stays 0. 1: the transaction failed outside the claim;
 * TK_*: a claim alone failed. Either way the caller's tk__pg_pipe_end
 * rolls back what is left open. */
static int commit_group(tk__pg_pipe *p, const tk__outcome *o, int n, rec *recs, int notify,
                        tk__claim_request *next, tk_err *err) {
  if (p->ran > 0) tk__pg_pipe_reset(p); /* else BEGIN is queued still (a claim alone) */
  int64_t fenced = 0, expired = 0;
  for (int k = 0; k < n; k++) {
    if (recs[k].status == FENCED) fenced++;
    if (recs[k].status == RECORDED && tk__outcome_expires_lease(&o[recs[k].i])) expired++;
  }
  if (write_tasks(p, o, n, recs) != 0) {
    tk__pg_oom(err, "record outcome");
    return 1;
  }
  int claim_savepoint = -1, claim_slot = -1, retry_slot = -1;
  if (next) {
    if (n > 0) claim_savepoint = savepoint(p);
    tk__pg_claim_queue(p, next, &claim_slot, &retry_slot);
  }
  int tail = p->nslots;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, fenced);
  tk__pg_arg_i64(&a, expired);
  int count = fenced > 0 || expired > 0;
  if (count) tk__pg_pipe_stmt(p, PG_COUNT, COUNT_SQL, a.n, a.v);
  if (notify) tk__pg_notify(p);
  tk__pg_commit(p);
  int rc = tk__pg_pipe_run(p, n == 0 ? "claim" : "record outcome", err);
  if (rc == 0) return next ? tk__pg_claim_read(p, next, claim_slot, retry_slot, err) : 0;
  /* Broken (TK_EDISCONNECTED: nothing was committed), or a claim alone. */
  if (p->broken || n == 0) return rc;
  /* The claim's own savepoint failing leaves no savepoint of its own to
   * return to: that counts as a failure of the whole. */
  if (next == NULL || p->failed <= claim_savepoint || p->failed >= tail) return 1;
  /* The claim failed: keep the outcomes. */
  tk__pg_pipe_reset(p);
  rollback_savepoint(p);
  if (count) tk__pg_pipe_stmt(p, PG_COUNT, COUNT_SQL, a.n, a.v);
  if (notify) tk__pg_notify(p);
  tk__pg_commit(p);
  if (tk__pg_pipe_run(p, "record outcome", err) != 0) return 1;
  next->n = 0;
  next->next_retry_at = next->next_due_at = INT64_MIN; /* unknown: look again soon */
  return 0;
}

/* Record the group in one transaction. 0: done (errs say how each went);
 * 1: the transaction failed as a whole (nothing of it kept); TK_*: a
 * claim alone failed, or the connection is unusable. */
static int write_group(tk__pg *pg, const tk__outcome *o, int n, rec *recs, tk__effects *fx,
                       tk_err *errs, tk__claim_request *next, int set_based, tk_err *err) {
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin(pg, &p, n == 0 ? "claim" : "record outcome", err);
  if (rc) return rc;
  int notify = 0;
  /* Each template's flow, read on the connection's first outcome of it
   * (an outcome naming no stored template is written as before, with no
   * flow: its own statement says what became of it). */
  for (int k = 0; k < n && rc == 0; k++)
    if ((rc = tk__pg_flow_get(&p, o[recs[k].i].template_id, &recs[k].flow, err)) == TK_ENOENT) {
      rc = 0;
      tk_err_clear(err);
    }
  tk__pg_pipe_reset(&p);
  if (rc) {
    rc = p.broken ? rc : 1;
    tk__pg_pipe_end(&p);
    return rc;
  }
  tk__pg_begin_generic(&p);
  if (n > 0) {
    int nset = set_based ? choose_set(o, n, recs) : 0;
    if (nset > 0) rc = write_set(&p, o, n, recs, fx, errs, err);
    if (rc == 0) rc = write_outcomes(&p, o, n, recs, fx, errs, nset > 0, err);
    if (rc == 0) rc = flow_outcomes(&p, o, n, recs, fx, err);
    if (rc == 0 && nset > 0) rc = set_progress(&p, o, n, recs, err);
    if (rc == 0) rc = settle_tasks(&p, o, n, recs, fx, &notify, err);
    if (rc) rc = p.broken ? rc : 1;
  }
  if (rc == 0) rc = commit_group(&p, o, n, recs, notify, next, err);
  tk__pg_pipe_end(&p); /* rolls back what failed */
  return rc;
}

/* After the group's transaction failed as a whole: each outcome in a
 * transaction of its own, then the claim alone. 0 unless nothing at all
 * could be recorded. */
static int write_alone(tk__pg *pg, const tk__outcome *o, int n, rec *recs, tk__effects *fx,
                       tk_err *errs, tk__claim_request *next, tk_err *err) {
  int recorded = 0;
  for (int k = 0; k < n; k++) {
    int i = recs[k].i;
    rec one = {.i = 0};
    tk_err_clear(&errs[i]);
    memset(&fx[i], 0, sizeof fx[i]);
    int rc = write_group(pg, &o[i], 1, &one, &fx[i], &errs[i], NULL, 0, &errs[i]);
    if (rc == 0 && (errs[i].code == 0 || errs[i].code == TK_EFENCED)) {
      recorded++; /* a fenced one too: its refusal was counted */
      continue;
    }
    if (rc == 0) continue; /* its own error says why */
    memset(&fx[i], 0, sizeof fx[i]);
    if (rc == 1) { /* errs[i] has the failure of its own transaction */
      tk_err last = errs[i];
      tk_err_set(&errs[i], TK_ESTORE, "%s (failed twice: in its group and alone)", last.msg);
    }
    if (rc == TK_EDISCONNECTED) {
      /* The rest cannot be tried now; the caller records them all again
       * after reconnecting (those done already are then fenced). */
      *err = errs[i];
      return TK_EDISCONNECTED;
    }
  }
  if (recorded == 0) {
    *err = errs[recs[0].i];
    return err->code ? err->code : TK_ESTORE;
  }
  tk_err ignored;
  if (next) write_group(pg, o, 0, recs, fx, errs, next, 0, &ignored);
  return 0;
}

int tk__pg_record(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                  tk__claim_request *next, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  if (next) {
    next->n = 0;
    next->next_retry_at = next->next_due_at = INT64_MIN;
  }
  for (int i = 0; i < n; i++) {
    tk_err_clear(&errs[i]);
    memset(&fx[i], 0, sizeof fx[i]);
  }
  if (n <= 0) {
    rec none;
    return next ? write_group(pg, o, 0, &none, fx, errs, next, 0, err) : 0;
  }
  rec *recs = calloc((size_t)n, sizeof *recs);
  const tk__outcome **order = malloc((size_t)n * sizeof *order);
  if (recs == NULL || order == NULL) {
    free(recs);
    free(order);
    return tk__pg_oom(err, "record");
  }
  for (int i = 0; i < n; i++) order[i] = &o[i];
  qsort(order, (size_t)n, sizeof *order, by_task);
  for (int k = 0; k < n; k++) recs[k].i = (int)(order[k] - o);
  free(order);
  /* Transactions of at most GROUP_MAX outcomes, the claim with the last. */
  int rc = 0, recorded = 0;
  for (int start = 0; start < n; start += GROUP_MAX) {
    int m = n - start < GROUP_MAX ? n - start : GROUP_MAX;
    tk__claim_request *claim = start + m >= n ? next : NULL;
    rc = write_group(pg, o, m, recs + start, fx, errs, claim, 1, err);
    if (rc == 1) {
      /* The group's transaction failed as a whole: one transaction per
       * outcome now, so that only a failing one is lost. */
      rc = write_alone(pg, o, m, recs + start, fx, errs, claim, err);
    }
    if (rc == TK_EDISCONNECTED) break;
    if (rc == 0) {
      recorded = 1;
      continue;
    }
    for (int k = start; k < start + m; k++) /* nothing of this group recorded */
      if (errs[recs[k].i].code == 0) errs[recs[k].i] = *err;
  }
  if (rc == TK_EDISCONNECTED) {
    /* The caller records them all again once connected (any committed
     * already are then fenced). */
    for (int i = 0; i < n; i++) {
      errs[i] = *err;
      memset(&fx[i], 0, sizeof fx[i]);
    }
  } else if (recorded) {
    rc = 0;
  }
  free(recs);
  return rc;
}
