/* Set-based recording (DESIGN §5): the ordinary outcomes of a group (no
 * flow work after them, no batch items; a map's instances too) written by one statement
 * whatever their count, arrays in, each row fenced by its own claim as
 * OUTCOME_SQL (postgres_record.c) fences one. postgres_record.c decides
 * which outcomes come here, locks their tasks first (tk__pg_tasks_lock_queue)
 * and settles the tasks from what the statement returns. */
#include "store/postgres/postgres_internal.h"

#include <assert.h>
#include <stdlib.h>

#include "store/rules.h"

#define Q TK__PG_Q

/* The tasks' locks (postgres_internal.h, Concurrency), one statement, in
 * ascending id: the order every writer of a task takes, so that
 * orchestrators recording outcomes of the same tasks queue instead of
 * deadlocking. The caller passes the ids ascending, and unnest yields them
 * in that order, so no sort can move the locking away from it. */
static const char TASKS_LOCK_SQL[] =
    "SELECT pg_advisory_xact_lock(" TK__PG_TASK_LOCK_KEY("u.id") ")"
    " FROM unnest($1::bigint[]) AS u(id)";

static const char TASK_LOCK_SQL[] =
    "SELECT pg_advisory_xact_lock(" TK__PG_TASK_LOCK_KEY("$1::bigint") ")";

int tk__pg_tasks_lock_queue(tk__pg_pipe *p, const int64_t *ids, int n) {
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int k = 0; k < n; k++) {
    assert(k == 0 || ids[k - 1] < ids[k]);
    tk__pg_array_i64(&b, ids[k]);
  }
  const char *v = tk__pg_array_close(&b);
  int slot = v ? tk__pg_pipe_stmt(p, PG_TASKS_LOCK, TASKS_LOCK_SQL, 1, &v) : -1;
  tk__buf_free(&b);
  return slot;
}

int tk__pg_task_lock_queue(tk__pg_pipe *p, int64_t task_id) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  return tk__pg_pipe_stmt(p, PG_TASK_LOCK, TASK_LOCK_SQL, a.n, a.v);
}

/* The outcomes, one row each (o: arrays in, in write order, numbered by
 * ord), after their tasks' locks are held, so that no other outcome or
 * operator action of those tasks runs meanwhile and the snapshot sees all
 * they committed. The step is written only where its claim still holds it
 * (state in_progress, claim_id; a reaper's outcome, reap not NULL, only
 * while the lease still ends by reap), checked on the newest row version
 * after any concurrent heartbeat. Refused, the claim's attempt row is
 * finished as fenced_out if nothing finished it (fenced: its text; NULL
 * for a reaper, whose claim is alive). A recorded step's move
 * (in_progress -> its new state, at now, reason the attempt's outcome) is
 * recorded by the attempt row it finishes (0009_moves_in_their_rows.sql),
 * its place in the history drawn in ord order (f.seq: nextval above the
 * sort by ord, so the draws follow it), as the rows of one insert in that
 * order had it; drawn in a CTE of their own, the numbers were joined back
 * to each outcome by a nested loop over all of them, which cost a sixth of
 * the statement's time. Each finished attempt counts in
 * activity_minutes, summed per (minute, orchestrator) since one statement
 * may not upsert a row twice. The children of completed steps (release)
 * wait for as many parents fewer as completed here (TK__PG_RELEASE, per
 * child); one left with none waits no more from the time of its last
 * parent's outcome, which gets the credit for releasing it (as if the
 * outcomes had been written one after another). Each row returned, in
 * ord order: whether it was recorded, the children it released, and its
 * task's stored state and counters (written once per transaction, after
 * settling: postgres_record.c). Every row is reached by its key whatever
 * the generic plan (postgres_internal.h, Plans): steps, attempts and tasks
 * by = ANY of the arrays (the steps' fence, state and claim, is one
 * clause of their join to the outcomes: with the state a filter of its
 * own, the planner expected one in-progress step of the array's and
 * joined them by a nested loop that read every outcome again for each
 * step, 48 x 48 rows a full group; as one clause it hashes the outcomes,
 * and the statement took 3.5-4.2 -> 1.6-2.0 ms a group, bench_map
 * independent with 4 workers), a parent's edges by a subquery on the
 * template's index, each child by its (task_id, idx) and then its id, the children
 * found driving the join (kids outer, steps by key): with the steps also
 * filtered by = ANY of the children's ids, the generic plan put steps
 * outer and scanned every child again for each (10 parents releasing
 * 1,000 children each in one group: 34 s). */
static const char SET_SQL[] =
    "WITH o AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[],"
    " $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[],"
    " $11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::int[], $16::text[],"
    " $17::boolean[], $18::boolean[]) WITH ORDINALITY AS o(step, claim, state, results, error,"
    " run_at, delay, reap, finished_at, outcome, source, now, task, template, idx, fenced,"
    " release, inst, ord)),"
    " upd AS (UPDATE steps s SET state = o.state, results = o.results, last_error = o.error,"
    " run_at = COALESCE(o.run_at, s.run_at), last_delay_ms = COALESCE(o.delay, s.last_delay_ms),"
    " lease_owner = NULL, lease_expires_at = NULL, claim_id = NULL FROM o"
    " WHERE s.id = ANY ($1) AND s.id = o.step AND CASE WHEN s.state = " Q(TK__STEP_IN_PROGRESS)
    " THEN s.claim_id END = o.claim AND (o.reap IS NULL OR s.lease_expires_at <= o.reap)"
    " RETURNING o.ord, s.queue),"
    /* Room made in a queue wakes its claimants (0015_queues.sql). */
    " qn AS (SELECT pg_notify('" TK__PG_CHANNEL "', '') FROM upd WHERE queue IS NOT NULL LIMIT 1),"
    " f AS (SELECT x.*, CASE WHEN x.ok THEN " TK__PG_NEXT_SEQ " END AS seq FROM (SELECT o.*,"
    " u.ord IS NOT NULL AS ok FROM o LEFT JOIN upd u ON u.ord = o.ord ORDER BY o.ord) x),"
    " fin AS (UPDATE attempts a SET"
    " finished_at = CASE WHEN f.ok THEN f.finished_at ELSE f.now END,"
    " outcome = CASE WHEN f.ok THEN f.outcome ELSE 'fenced_out' END,"
    " error = CASE WHEN f.ok THEN f.error ELSE f.fenced END,"
    " delay_ms = CASE WHEN f.ok THEN f.delay END,"
    " delay_source = CASE WHEN f.ok THEN f.source END,"
    " next_run_at = CASE WHEN f.ok THEN f.run_at END, outcome_seq = f.seq,"
    " outcome_at = CASE WHEN f.ok THEN NULLIF(f.now, f.finished_at) END,"
    " outcome_state = CASE WHEN f.ok THEN NULLIF(f.state, "
    TK__PG_OUTCOME_STATE("f.outcome", "f.run_at") ") END"
    " FROM f"
    " WHERE a.id = ANY ($2) AND a.id = f.claim"
    " AND (f.ok OR (a.outcome IS NULL AND f.fenced IS NOT NULL))"
    " RETURNING a.started_at, a.owner, a.outcome),"
    " act AS (INSERT INTO activity_minutes (minute, orchestrator, succeeded, failed)"
    " SELECT started_at - started_at % 60000, owner, count(*) FILTER (WHERE outcome = 'success'),"
    " count(*) FILTER (WHERE outcome <> 'success') FROM fin GROUP BY 1, 2 ORDER BY 1, 2"
    " ON CONFLICT (minute, orchestrator) DO UPDATE SET"
    " succeeded = activity_minutes.succeeded + EXCLUDED.succeeded,"
    " failed = activity_minutes.failed + EXCLUDED.failed),"
    " kids AS (SELECT (SELECT x.id FROM steps x WHERE x.task_id = f.task"
    " AND x.idx = e.child_idx) AS id, count(*)::int AS k, max(f.ord) AS last,"
    " (array_agg(f.now ORDER BY f.ord DESC))[1] AS now FROM f, unnest(ARRAY(SELECT e.child_idx"
    " FROM template_edges e WHERE e.template_id = f.template AND e.parent_idx = f.idx))"
    " AS e(child_idx) WHERE f.ok AND f.release GROUP BY f.task, e.child_idx),"
    " rel AS (UPDATE steps c SET parents_remaining = GREATEST(c.parents_remaining - k.k, 0),"
    " run_at = CASE WHEN c.parents_remaining <= k.k THEN k.now ELSE c.run_at END FROM kids k"
    " WHERE c.id = k.id"
    " AND c.parents_remaining > 0 AND c.state = " Q(TK__STEP_PENDING) " RETURNING k.last,"
    " c.parents_remaining, c.state),"
    /* Instances of a map that finished count its map down (its own row,
     * 0008_map_countdowns.sql), once per map for the group; the count left
     * goes to its last finished instance, which settles the map at 0. */
    " cnt AS (SELECT f.task, f.idx, count(*)::int AS k, max(f.ord) AS last FROM f"
    " WHERE f.ok AND f.inst AND f.state IN (" Q(TK__STEP_COMPLETE) ", " Q(TK__STEP_ERROR) ")"
    " GROUP BY f.task, f.idx),"
    " mp AS (UPDATE map_countdowns m SET remaining = GREATEST(m.remaining - c.k, 0) FROM cnt c"
    " WHERE m.task_id = c.task AND m.idx = c.idx AND m.remaining > 0"
    " RETURNING c.last, m.remaining)"
    " SELECT f.ok, COALESCE(r.n, 0), t.state, t.steps_done, t.steps_total, t.steps_error,"
    " mp.remaining"
    " FROM f LEFT JOIN (SELECT last, count(*) AS n FROM rel WHERE parents_remaining = 0"
    " AND state = " Q(TK__STEP_PENDING) " GROUP BY last) r ON r.last = f.ord"
    " LEFT JOIN tasks t ON t.id = ANY ($13) AND t.id = f.task"
    " LEFT JOIN mp ON mp.last = f.ord CROSS JOIN (SELECT count(*) FROM qn) q0 ORDER BY f.ord";

enum { NARRAYS = 18 };

/* Outcome x's elements of SET_SQL's arrays (kind: TK__PG_SET_*). */
static void add_row(tk__buf b[NARRAYS], const tk__outcome *x, int kind) {
  int retry = x->next == TK__NEXT_RETRY;
  /* A reaper's outcome leaves a refused claim's attempt row alone; an
   * owner's finishes it with this text. */
  char fenced[256];
  if (!x->fence_lease) tk__fenced_attempt_text(fenced, sizeof fenced, x);
  char *err_tmp;
  tk__pg_array_i64(&b[0], x->step_id);
  tk__pg_array_i64(&b[1], x->claim_id);
  tk__pg_array_text(&b[2], tk__next_state_name(x->next));
  tk__pg_array_text(&b[3], x->results);
  tk__pg_array_text(&b[4], tk__pg_utf8(x->error, &err_tmp));
  free(err_tmp);
  if (retry) tk__pg_array_i64(&b[5], x->run_at), tk__pg_array_i64(&b[6], x->delay_ms);
  else tk__pg_array_text(&b[5], NULL), tk__pg_array_text(&b[6], NULL);
  if (x->fence_lease) tk__pg_array_i64(&b[7], x->now);
  else tk__pg_array_text(&b[7], NULL);
  tk__pg_array_i64(&b[8], x->finished_at);
  tk__pg_array_text(&b[9], x->attempt_outcome);
  tk__pg_array_text(&b[10], retry ? tk_delay_source_name(x->source) : NULL);
  tk__pg_array_i64(&b[11], x->now);
  tk__pg_array_i64(&b[12], x->task_id);
  tk__pg_array_i64(&b[13], x->template_id);
  tk__pg_array_i64(&b[14], x->idx);
  tk__pg_array_text(&b[15], x->fence_lease ? NULL : fenced);
  tk__pg_array_bool(&b[16], x->next == TK__NEXT_COMPLETE && (kind & TK__PG_SET_PARENT));
  tk__pg_array_bool(&b[17], (kind & TK__PG_SET_INSTANCE) != 0);
}

int tk__pg_outcomes_queue(tk__pg_pipe *p, const tk__outcome *const *o, const unsigned char *kind,
                          int n) {
  tk__buf b[NARRAYS] = {{0}};
  const char *v[NARRAYS];
  for (int k = 0; k < NARRAYS; k++) tk__pg_array_open(&b[k]);
  for (int i = 0; i < n; i++) add_row(b, o[i], kind[i]);
  int ok = 1;
  for (int k = 0; k < NARRAYS; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  int slot = ok ? tk__pg_pipe_stmt(p, PG_OUTCOMES, SET_SQL, NARRAYS, v) : -1;
  for (int k = 0; k < NARRAYS; k++) tk__buf_free(&b[k]);
  return slot;
}

void tk__pg_outcomes_row(const PGresult *res, int i, tk__pg_outcome_row *out) {
  out->recorded = tk__pg_bool(res, i, 0);
  out->released = (int)tk__pg_i64(res, i, 1);
  tk__pg_copy(out->task_state, sizeof out->task_state, res, i, 2);
  out->done = (int)tk__pg_i64(res, i, 3);
  out->total = (int)tk__pg_i64(res, i, 4);
  out->errors = (int)tk__pg_i64(res, i, 5);
  out->map_left = PQgetisnull(res, i, 6) ? -1 : (int)tk__pg_i64(res, i, 6);
}
