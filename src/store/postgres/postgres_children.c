/* Child tasks on PostgreSQL (DESIGN §18, 0021_child_tasks.sql): starting
 * a step's child in the transaction that parks the step, and reading a
 * task's family. The child's end is the trigger tasks_child_end's: a
 * signal bound to the parent's claim, and a NOTIFY, in the transaction
 * that ends the child; wait_take delivers it, so the parent's attempt
 * ends through the ordinary outcome path.
 *
 * The start is task_create's with a guard: first the parent's step is
 * locked (FOR UPDATE, as step_wait locks it) and must be held by the
 * claim; then the child is created by its identity, and before the commit
 * the child gets its parent's columns and the step is parked. */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"

#define Q TK__PG_Q

static int fence_check(tk__pg_pipe *p, void *ud, tk_err *err) {
  const tk__child_req *c = ud;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, c->step_id);
  tk__pg_arg_i64(&a, c->claim_id);
  int slot = tk__pg_pipe_stmt(p, -1,
                              "SELECT 1 FROM steps WHERE id = $1::bigint AND state = "
                              Q(TK__STEP_IN_PROGRESS) " AND claim_id = $2::bigint FOR UPDATE",
                              a.n, a.v);
  int rc = tk__pg_pipe_run(p, "child task", err);
  if (rc == 0 && PQntuples(tk__pg_result(p, slot)) != 1)
    rc = tk__heartbeat_refused(err, c->step_id, c->claim_id);
  tk__pg_pipe_reset(p);
  return rc;
}

static void park(tk__pg_pipe *p, void *ud) {
  const tk__child_req *c = ud;
  tk__pg_args a = {0};
  tk__pg_arg_text(&a, c->task->identity);
  tk__pg_arg_i64(&a, c->task_id);
  tk__pg_arg_i64(&a, c->step_id);
  tk__pg_arg_i64(&a, c->attempt);
  tk__pg_arg_i64(&a, c->claim_id);
  tk__pg_pipe_stmt(p, -1,
                   "UPDATE tasks SET parent_task_id = $2::bigint, parent_step_id = $3::bigint,"
                   " parent_attempt = $4::int, parent_claim_id = $5::bigint"
                   " WHERE identity = $1::text AND parent_task_id IS NULL",
                   a.n, a.v);
  a.n = 0;
  tk__pg_arg_i64(&a, c->step_id);
  tk__pg_arg_i64(&a, c->timeout_at);
  tk__pg_arg_i64(&a, c->task_id);
  tk__pg_arg_i64(&a, c->now);
  tk__pg_arg_i64(&a, c->attempt);
  tk__pg_pipe_stmt(p, -1,
                   "WITH u AS (UPDATE steps SET state = " Q(TK__STEP_WAITING) ", lease_owner ="
                   " NULL, lease_expires_at = NULL, run_at = $2::bigint WHERE id = $1::bigint"
                   " RETURNING id) INSERT INTO transitions (task_id, step_id, from_state,"
                   " to_state, at, reason, attempt) SELECT $3::bigint, id, "
                   Q(TK__STEP_IN_PROGRESS) ", " Q(TK__STEP_WAITING) ", $4::bigint, "
                   Q(TK__REASON_CHILD_WAITING) ", $5::int FROM u",
                   a.n, a.v);
  tk__pg_notify(p);
}

int tk__pg_child_start(tk_store *s, tk__child_req *c, tk_err *err) {
  tk__pg_guard g = {fence_check, park, c};
  return tk__pg_task_create_guarded(s, c->task, &g, &c->child_id, &c->existed, err);
}

#define LINK_SQL                                                                        \
  "SELECT c.id, c.state, c.created_at, c.finished_at, c.parent_task_id, c.parent_step_id," \
  " s.name, c.parent_attempt FROM tasks c JOIN steps s ON s.id = c.parent_step_id WHERE "

/* The links of sql's rows over task_id into a new array. */
static int links(tk_store *s, const char *sql, int64_t task_id, tk__child_rec **out, int *n,
                 tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  PGresult *r;
  int rc = tk__pg_query(s, -1, sql, &a, "child tasks", &r, err);
  if (rc) return rc;
  int rows = PQntuples(r), oom = 0;
  if (rows > 0 && (*out = calloc((size_t)rows, sizeof **out)) == NULL) oom = 1;
  for (int i = 0; i < rows && !oom; i++) {
    tk__child_rec *x = &(*out)[(*n)++];
    x->task_id = tk__pg_i64(r, i, 0);
    tk__pg_copy(x->state, sizeof x->state, r, i, 1);
    x->created_at = tk__pg_i64(r, i, 2);
    x->finished_at = tk__pg_i64(r, i, 3);
    x->parent_task_id = tk__pg_i64(r, i, 4);
    x->parent_step_id = tk__pg_i64(r, i, 5);
    x->parent_step = tk__dup(tk__pg_text(r, i, 6), &oom);
    x->attempt = (int)tk__pg_i64(r, i, 7);
  }
  PQclear(r);
  return oom ? tk_err_set(err, TK_ENOMEM, "out of memory reading child tasks") : 0;
}

int tk__pg_task_family(tk_store *s, int64_t task_id, tk__child_rec *parent,
                       tk__child_rec **children, int *n, tk_err *err) {
  memset(parent, 0, sizeof *parent);
  *children = NULL;
  *n = 0;
  tk__child_rec *up = NULL;
  int nup = 0;
  int rc = links(s, LINK_SQL "c.id = $1::bigint", task_id, &up, &nup, err);
  if (rc == 0 && nup == 1) {
    *parent = up[0];
    up[0].parent_step = NULL;
  }
  tk__child_recs_free(up, nup);
  if (rc == 0)
    rc = links(s, LINK_SQL "c.parent_task_id = $1::bigint ORDER BY c.id", task_id, children, n,
               err);
  if (rc) {
    tk__child_recs_free(*children, *n);
    *children = NULL;
    *n = 0;
    free(parent->parent_step);
    memset(parent, 0, sizeof *parent);
  }
  return rc;
}

/* Every descendant of task $1 (children, theirs, ...). */
#define DESCENDANTS                                                                        \
  "WITH RECURSIVE d(id) AS (SELECT id FROM tasks WHERE parent_task_id = $1::bigint"        \
  " UNION SELECT c.id FROM tasks c JOIN d ON c.parent_task_id = d.id)"

/* The descendants' locks, in ascending id as every writer of a task takes
 * them (after their parent's, whose id is lower). */
static const char LOCK_SQL[] =
    DESCENDANTS " SELECT pg_advisory_xact_lock(" TK__PG_TASK_LOCK_KEY("x.id") ")"
    " FROM (SELECT id FROM d ORDER BY id) x";

/* A statement of its own after the locks: its snapshot sees what every
 * writer that held them committed. Each unfinished descendant's
 * unfinished steps are cancelled, and the task, with their transitions
 * ($2 now, $3 the reason); a finish its row recorded (a task in error
 * that an operator resumed) is written out as its row first, as an
 * operator's cancel does. */
static const char CASCADE_SQL[] =
    DESCENDANTS ", live AS (SELECT id, state FROM tasks WHERE id IN (SELECT id FROM d) AND state IN ("
    Q(TK__TASK_PENDING) ", " Q(TK__TASK_IN_PROGRESS) ")),"
    " os AS (SELECT s.id, s.task_id, s.state FROM steps s WHERE s.task_id IN (SELECT id FROM live)"
    " AND s.state IN (" Q(TK__STEP_PENDING) ", " Q(TK__STEP_IN_PROGRESS) ", "
    Q(TK__STEP_WAITING_FOR_RETRY) ", " Q(TK__STEP_MAPPED) ", " Q(TK__STEP_WAITING) ") FOR UPDATE),"
    " cs AS (UPDATE steps s SET state = " Q(TK__STEP_CANCELLED) ", lease_owner = NULL,"
    " lease_expires_at = NULL FROM os WHERE s.id = os.id RETURNING s.id, s.task_id, os.state),"
    " ct AS (UPDATE tasks x SET state = " Q(TK__TASK_CANCELLED) ", updated_at = $2::bigint,"
    " finished_at = $2, finish_seq = NULL FROM live WHERE x.id = live.id RETURNING x.id, live.state)"
    " INSERT INTO transitions (id, task_id, step_id, from_state, to_state, at, reason)"
    " SELECT * FROM (" TK__PG_FINISH_ROW("t.id IN (SELECT id FROM ct)") ") old"
    " UNION ALL SELECT " TK__PG_NEXT_SEQ ", task_id, id, state, " Q(TK__STEP_CANCELLED)
    ", $2, $3::text FROM cs"
    " UNION ALL SELECT " TK__PG_NEXT_SEQ ", id, NULL, state, " Q(TK__TASK_CANCELLED)
    ", $2, $3 FROM ct";

void tk__pg_children_cancel_queue(tk__pg_pipe *p, int64_t task_id, int64_t now) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_pipe_stmt(p, -1, LOCK_SQL, a.n, a.v);
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_text(&a, TK__REASON_PARENT_ENDED);
  tk__pg_pipe_stmt(p, -1, CASCADE_SQL, a.n, a.v);
}
