/* Operator actions (DESIGN §3): retry, resolve, cancel. One transaction
 * that locks the task, then its steps; the rules (preconditions, messages,
 * what changes) are tk__operator_plan's and tk__settle's. */
#include "store/postgres/postgres_internal.h"

#include <string.h>

#include "store/flow.h"
#include "store/rules.h"

#define Q TK__PG_Q

/* Read after the task's lock (find), which every outcome of the task
 * waits for, so nothing of it changes while the action is decided and
 * applied. */
static const char TASK_SQL[] = "SELECT state, template_id FROM tasks WHERE id = $1::bigint";

/* FOR UPDATE too: claims move a ready step without the task's lock, so the
 * step's state is read from its newest version, locked. */
static const char STEP_SQL[] =
    "SELECT s.id, s.state, s.idx, s.map_idx, (SELECT m.state FROM steps m"
    " WHERE m.task_id = s.task_id AND m.idx = s.map_idx) FROM steps s"
    " WHERE s.task_id = $1::bigint AND s.name = $2::text FOR UPDATE OF s";

/* $1 step, $2 new state, $3 reset the attempts (due now, $4), */
static const char STEP_SET_SQL[] =
    "UPDATE steps SET state = $2::text,"
    " attempts = CASE WHEN $3::boolean THEN 0 ELSE attempts END,"
    " run_at = CASE WHEN $3 THEN $4::bigint ELSE run_at END,"
    " last_delay_ms = CASE WHEN $3 THEN 0 ELSE last_delay_ms END WHERE id = $1::bigint";

/* A retried batch step's given-up items get a fresh budget with it. */
static const char ITEMS_RESET_SQL[] =
    "UPDATE items SET state = " Q(TK__ITEM_PENDING) ", attempts = 0"
    " WHERE step_id = $1::bigint AND state = " Q(TK__ITEM_GAVE_UP);

static const char TRANSITION_SQL[] =
    "INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " VALUES ($1::bigint, $2::bigint, $3::text, $4::text, $5::bigint, $6::text)";

static const char COUNTS_SQL[] =
    "UPDATE tasks SET steps_done = steps_done + $2::int, steps_error = steps_error + $3::int,"
    " updated_at = $4::bigint WHERE id = $1::bigint"
    " RETURNING state, steps_done, steps_total, steps_error";

/* Every unfinished step, locked as it is now (a claim may have just moved
 * one to in_progress), cancelled with its transition: a map's instances
 * are steps of the task, and a mapped map step is unfinished too. */
static const char CANCEL_STEPS_SQL[] =
    "WITH old AS (SELECT id, state FROM steps WHERE task_id = $1::bigint AND state IN ("
    Q(TK__STEP_PENDING) ", " Q(TK__STEP_IN_PROGRESS) ", " Q(TK__STEP_WAITING_FOR_RETRY) ", "
    Q(TK__STEP_MAPPED) ", " Q(TK__STEP_WAITING) ") FOR UPDATE),"
    " c AS (UPDATE steps s SET state = " Q(TK__STEP_CANCELLED) ", lease_owner = NULL,"
    " lease_expires_at = NULL FROM old WHERE s.id = old.id RETURNING s.id, old.state)"
    " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, state, " Q(TK__STEP_CANCELLED) ", $2::bigint, $3::text FROM c";

/* The task to $5 (cancelled; a deadline's: error), with its transition;
 * an ordinary finish its row recorded (a task in error) is written out
 * as its row first (TK__PG_FINISH_ROW: finished_at changes). */
static const char CANCEL_TASK_SQL[] =
    "WITH t AS (UPDATE tasks SET state = $5::text, updated_at = $2::bigint,"
    " finished_at = $2, finish_seq = NULL WHERE id = $1::bigint RETURNING id)"
    " INSERT INTO transitions (id, task_id, step_id, from_state, to_state, at, reason)"
    " SELECT * FROM (" TK__PG_FINISH_ROW("t.id = $1") ") old"
    " UNION ALL SELECT " TK__PG_NEXT_SEQ ", id, NULL, $3::text, $5, $2, $4::text FROM t";

void tk__pg_cancel_queue(tk__pg_pipe *p, const tk__op_plan *plan, int64_t task_id,
                         const char *task_state, int64_t now) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_text(&a, plan->step_reason);
  tk__pg_pipe_stmt(p, PG_OP_CANCEL_STEPS, CANCEL_STEPS_SQL, a.n, a.v);
  a.n = 0;
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_text(&a, task_state);
  tk__pg_arg_text(&a, plan->reason);
  tk__pg_arg_text(&a, plan->task_to);
  tk__pg_pipe_stmt(p, PG_OP_CANCEL_TASK, CANCEL_TASK_SQL, a.n, a.v);
  tk__pg_children_cancel_queue(p, task_id, now);
}

/* What the action found: the task, and the step for retry and resolve. */
typedef struct target {
  char task_state[TK__STATE_MAX], step_state[TK__STATE_MAX];
  int64_t template_id, step_id;
  int idx;
  int map_idx; /* an instance's map step; -1 for a template step */
  char map_state[TK__STATE_MAX]; /* an instance's map step's state */
} target;

/* Lock and read the task and (step not NULL) its step. */
static int find(tk__pg_pipe *p, int64_t task_id, const char *step, target *t, tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_text(&a, step);
  tk__pg_begin(p);
  tk__pg_task_lock_queue(p, task_id);
  int task_slot = tk__pg_pipe_stmt(p, PG_OP_TASK, TASK_SQL, 1, a.v);
  int step_slot = step ? tk__pg_pipe_stmt(p, PG_OP_STEP, STEP_SQL, 2, a.v) : -1;
  int rc = tk__pg_pipe_run(p, "operator", err);
  if (rc) return rc;
  PGresult *r = tk__pg_result(p, task_slot);
  if (PQntuples(r) == 0) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  tk__pg_copy(t->task_state, sizeof t->task_state, r, 0, 0);
  t->template_id = tk__pg_i64(r, 0, 1);
  if (step == NULL) return 0;
  r = tk__pg_result(p, step_slot);
  if (PQntuples(r) == 0)
    return tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)task_id, step);
  t->step_id = tk__pg_i64(r, 0, 0);
  tk__pg_copy(t->step_state, sizeof t->step_state, r, 0, 1);
  t->idx = (int)tk__pg_i64(r, 0, 2);
  int64_t map_idx = tk__pg_i64(r, 0, 3);
  t->map_idx = map_idx == TK__NONE ? -1 : (int)map_idx;
  tk__pg_copy(t->map_state, sizeof t->map_state, r, 0, 4);
  return 0;
}

/* What the step is in its template's flow (DESIGN §17). */
static tk__op_step_kind kind_of(const tk__flow *f, const target *t) {
  tk__op_step_kind k = {0};
  k.instance = t->map_idx >= 0;
  k.map_state = k.instance ? t->map_state : NULL;
  k.decision = !k.instance && tk__flow_is_decision(f, t->idx);
  k.map = !k.instance && tk__flow_is_map(f, t->idx);
  return k;
}

/* Queue the writes of plan to the step (or, cancelling, to the task). */
static void queue_step(tk__pg_pipe *p, const tk__op_plan *plan, int64_t task_id, const target *t,
                       int64_t now) {
  tk__pg_args a = {0};
  if (plan->cancel_task) {
    tk__pg_cancel_queue(p, plan, task_id, t->task_state, now);
    return;
  }
  if (plan->step_to != NULL) {
    tk__pg_arg_i64(&a, t->step_id);
    tk__pg_arg_text(&a, plan->step_to);
    tk__pg_arg_bool(&a, plan->reset_attempts);
    tk__pg_arg_i64(&a, now);
    tk__pg_pipe_stmt(p, PG_OP_STEP_SET, STEP_SET_SQL, a.n, a.v);
    if (plan->reset_attempts) tk__pg_pipe_stmt(p, PG_OP_ITEMS_RESET, ITEMS_RESET_SQL, 1, a.v);
    a.n = 0;
    tk__pg_arg_i64(&a, task_id);
    tk__pg_arg_i64(&a, t->step_id);
    tk__pg_arg_text(&a, t->step_state);
    tk__pg_arg_text(&a, plan->step_to);
    tk__pg_arg_i64(&a, now);
    tk__pg_arg_text(&a, plan->reason);
    tk__pg_pipe_stmt(p, PG_TRANSITION, TRANSITION_SQL, a.n, a.v);
  }
}

/* Queue the task's counters (the plan's changes, and done and errors
 * more from the flow's work) and, with release, the release of the
 * step's children; the slots of the task's counts and of the children
 * released (-1 when not asked). */
static void queue_counts(tk__pg_pipe *p, const tk__op_plan *plan, int64_t task_id,
                         const target *t, int64_t now, int done, int errors, int release,
                         int *counts_slot, int *release_slot) {
  tk__pg_args a = {0};
  *counts_slot = *release_slot = -1;
  if (plan->cancel_task) return;
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_i64(&a, plan->steps_done_delta + done);
  tk__pg_arg_i64(&a, plan->steps_error_delta + errors);
  tk__pg_arg_i64(&a, now);
  *counts_slot = tk__pg_pipe_stmt(p, PG_OP_TASK_COUNTS, COUNTS_SQL, a.n, a.v);
  if (release) *release_slot = tk__pg_release_queue(p, task_id, t->template_id, t->idx, now);
}

/* The flow's part of plan (DESIGN §17), after the step's writes ran: a
 * resolved step's children released under the flow's rules (a decision's
 * branches skipped: no choice was made), an instance's map settled. */
static int flow_plan(tk__pg_pipe *p, const tk__op_plan *plan, const tk__flow *f,
                     int64_t task_id, const target *t, int64_t now, tk__pg_flow_run *x,
                     tk_err *err) {
  *x = (tk__pg_flow_run){.p = p, .f = f, .task_id = task_id, .now = now, .err = err};
  int rc = 0;
  if (plan->release_children) rc = tk__pg_flow_finished(x, t->idx, NULL, 0);
  if (rc == 0 && plan->map_settle) rc = tk__pg_flow_map_settle(x, t->map_idx);
  tk__pg_pipe_reset(p);
  return rc;
}

/* After the plan's writes: the task's move, if tk__settle chooses one
 * (always another state than c->state, with a reason). */
static void settle(tk__pg_pipe *p, int64_t task_id, const tk__task_counts *c, int can_progress,
                   int64_t now, tk__effects *fx) {
  const char *reason;
  const char *to = tk__settle(c, can_progress, &reason);
  if (to == NULL) return;
  fx->task_state = to;
  tk__pg_settle_queue(p, task_id, c->state, to, reason, now);
}

int tk__pg_operator(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                    int64_t now, tk__effects *fx, tk_err *err) {
  memset(fx, 0, sizeof *fx);
  if (action == TK__OP_CANCEL) step = NULL;
  else if (step == NULL) return tk_err_set(err, TK_EINVAL, "retry and resolve need a step name");
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "operator", err);
  if (rc) return rc;
  target t = {.map_idx = -1};
  tk__op_plan plan = {0};
  const tk__flow *f = NULL;
  tk__op_step_kind kind = {0};
  if ((rc = find(&p, task_id, step, &t, err)) == 0 && step != NULL &&
      (rc = tk__pg_flow_get(&p, t.template_id, &f, err)) == 0)
    kind = kind_of(f, &t);
  if (rc == 0)
    rc = tk__operator_plan(action, task_id, t.task_state, step, step ? t.step_state : NULL,
                           &kind, &plan, err);
  int counts_slot = -1, release_slot = -1, progress_slot = -1;
  /* Decisions and map: the step's writes first, then the flow's work,
   * then the counters with what it changed. */
  int flow = rc == 0 && f != NULL && f->special && (plan.release_children || plan.map_settle);
  tk__pg_flow_run x = {0};
  if (rc == 0) {
    tk__pg_pipe_reset(&p);
    queue_step(&p, &plan, task_id, &t, now);
    if (flow && (rc = tk__pg_pipe_run(&p, "operator", err)) == 0)
      rc = flow_plan(&p, &plan, f, task_id, &t, now, &x, err);
  }
  if (rc == 0) {
    queue_counts(&p, &plan, task_id, &t, now, x.done, x.errors, plan.release_children && !flow,
                 &counts_slot, &release_slot);
    /* After the writes, in the same batch: a new snapshot with them. */
    if (plan.settle) progress_slot = tk__pg_can_progress_queue(&p, task_id);
    rc = tk__pg_pipe_run(&p, "operator", err);
  }
  if (rc == 0) {
    fx->children_released = x.released;
    if (release_slot >= 0)
      fx->children_released = (int)tk__pg_i64(tk__pg_result(&p, release_slot), 0, 0);
    if (plan.cancel_task) fx->task_state = plan.task_to;
    PGresult *counts = tk__pg_result(&p, counts_slot);
    int can_progress = progress_slot >= 0 && tk__pg_bool(tk__pg_result(&p, progress_slot), 0, 0);
    char state[TK__STATE_MAX];
    tk__task_counts c = {.state = state};
    int known = counts != NULL && PQntuples(counts) == 1;
    if (known) {
      tk__pg_copy(state, sizeof state, counts, 0, 0);
      c.done = (int)tk__pg_i64(counts, 0, 1);
      c.total = (int)tk__pg_i64(counts, 0, 2);
      c.errors = (int)tk__pg_i64(counts, 0, 3);
    }
    tk__pg_pipe_reset(&p);
    if (plan.settle && known) settle(&p, task_id, &c, can_progress, now, fx);
    /* A retried or resolved step is work for someone; a cancel ends work
     * others may be sleeping on. */
    tk__pg_notify(&p);
    tk__pg_commit(&p);
    if ((rc = tk__pg_pipe_run(&p, "operator", err)) != 0) memset(fx, 0, sizeof *fx);
  }
  tk__pg_pipe_end(&p); /* rolls back what failed */
  return rc;
}
