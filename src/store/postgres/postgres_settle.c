/* Statements that outcomes and operator actions share: releasing a
 * finished step's children, asking whether a task can still progress, and
 * moving a task to the state tk__settle chose. Each runs inside the
 * caller's transaction, which holds the task's row lock. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>

#include "store/rules.h"

#define Q TK__PG_Q

int tk__pg_release_queue(tk__pg_pipe *p, int64_t task_id, int64_t template_id, int idx,
                         int64_t now) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_i64(&a, template_id);
  tk__pg_arg_i64(&a, idx);
  tk__pg_arg_i64(&a, now);
  return tk__pg_pipe_stmt(p, PG_RELEASE,
                          "WITH rel AS (" TK__PG_RELEASE("$1::bigint", "$2::bigint", "$3::int",
                                                         "$4::bigint", "true")
                          ") SELECT " TK__PG_RELEASED("rel"),
                          a.n, a.v);
}

/* A statement of its own, so its snapshot is taken after the task's lock
 * was granted: every transaction that changed the task's steps under that
 * lock has committed by then, and claims only move steps between states
 * that both count as progress. */
int tk__pg_can_progress_queue(tk__pg_pipe *p, int64_t task_id) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  return tk__pg_pipe_stmt(p, PG_CAN_PROGRESS,
                          "SELECT EXISTS (SELECT 1 FROM steps x WHERE x.task_id = $1::bigint"
                          " AND " TK__PG_CAN_PROGRESS("x") ")",
                          a.n, a.v);
}

/* The writes of tasks in one statement, one of each per transaction: its
 * counters (steps done and in error, added to what is stored), updated_at,
 * and its moves, the last one its new state, each with its transition in
 * order. No move: the state, finished_at and finish_seq stay. A task's
 * last move that is its ordinary finish (from in_progress to complete or
 * error, for tk__settle's reason, at the now written as finished_at) is
 * recorded by its row (finish_seq, 0009_moves_in_their_rows.sql) rather
 * than as a transitions row; a finish that the row recorded before is
 * written out as its row first (TK__PG_FINISH_ROW), since the task moves
 * again. Every move's place in the history is drawn in order (mv) before
 * any is written. $1 tasks, $2 done +, $3 in error +, $4 now, $5 the last
 * move's state (NULL: none), $6 whether that is terminal; then every
 * move, in order, as arrays of task, from, to, reason and time. */
static const char TASKS_WRITE_SQL[] =
    "WITH mv AS (SELECT m.*, " TK__PG_NEXT_SEQ " AS seq FROM (SELECT * FROM unnest($7::bigint[],"
    " $8::text[], $9::text[], $10::text[], $11::bigint[]) WITH ORDINALITY AS m(task, f, t, r, at, o)"
    " ORDER BY o) m),"
    " u AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], $5::text[],"
    " $6::boolean[]) AS u(id, done, errors, now, state, terminal)),"
    /* Each task's last move, when the row can record it. */
    " fin AS (SELECT DISTINCT ON (mv.task) mv.task, mv.o,"
    " mv.f = " Q(TK__TASK_IN_PROGRESS) " AND mv.r IS NOT DISTINCT FROM "
    TK__PG_FINISH_REASON("mv.t") " AND mv.at = u.now AS implied, mv.seq"
    " FROM mv JOIN u ON u.id = mv.task ORDER BY mv.task, mv.o DESC),"
    " w AS (UPDATE tasks t SET steps_done = t.steps_done + u.done,"
    " steps_error = t.steps_error + u.errors, updated_at = u.now,"
    " state = COALESCE(u.state, t.state),"
    " finished_at = CASE WHEN u.state IS NULL THEN t.finished_at WHEN u.terminal THEN u.now END,"
    " finish_seq = CASE WHEN u.state IS NULL THEN t.finish_seq WHEN fin.implied THEN fin.seq END"
    " FROM u LEFT JOIN fin ON fin.task = u.id"
    " WHERE t.id = ANY ($1) AND t.id = u.id RETURNING t.id)"
    " INSERT INTO transitions (id, task_id, step_id, from_state, to_state, at, reason)"
    " SELECT * FROM (" TK__PG_FINISH_ROW("t.id = ANY (ARRAY(SELECT task FROM mv))") ") old"
    " UNION ALL SELECT mv.seq, mv.task, NULL, mv.f, mv.t, mv.at, mv.r FROM mv"
    " WHERE mv.task IN (SELECT id FROM w)"
    " AND NOT EXISTS (SELECT 1 FROM fin WHERE fin.task = mv.task AND fin.o = mv.o AND fin.implied)";

int tk__pg_tasks_write_queue(tk__pg_pipe *p, const tk__pg_task_sum *t, int n,
                             const tk__pg_task_move *moves, const int64_t *move_task,
                             int nmoves) {
  enum { NA = 11 };
  tk__buf b[NA] = {{0}};
  const char *v[NA];
  for (int k = 0; k < NA; k++) tk__pg_array_open(&b[k]);
  for (int j = 0; j < n; j++) {
    tk__pg_array_i64(&b[0], t[j].task_id);
    tk__pg_array_i64(&b[1], t[j].done);
    tk__pg_array_i64(&b[2], t[j].errors);
    tk__pg_array_i64(&b[3], t[j].now);
    tk__pg_array_text(&b[4], t[j].state);
    tk__pg_array_bool(&b[5], t[j].state != NULL && tk__task_state_terminal(t[j].state));
  }
  for (int j = 0; j < nmoves; j++) {
    tk__pg_array_i64(&b[6], move_task[j]);
    tk__pg_array_text(&b[7], moves[j].from);
    tk__pg_array_text(&b[8], moves[j].to);
    tk__pg_array_text(&b[9], moves[j].reason);
    tk__pg_array_i64(&b[10], moves[j].at);
  }
  int ok = 1;
  for (int k = 0; k < NA; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  int slot = ok ? tk__pg_pipe_stmt(p, PG_TASK_WRITE, TASKS_WRITE_SQL, NA, v) : -1;
  for (int k = 0; k < NA; k++) tk__buf_free(&b[k]);
  return slot;
}

int tk__pg_task_write_queue(tk__pg_pipe *p, int64_t task_id, int done, int errors, int64_t now,
                            const tk__pg_task_move *moves, int nmoves) {
  tk__pg_task_sum t = {task_id, done, errors, now, nmoves > 0 ? moves[nmoves - 1].to : NULL};
  int64_t *move_task = malloc((size_t)(nmoves > 0 ? nmoves : 1) * sizeof *move_task);
  if (move_task == NULL) return -1;
  for (int j = 0; j < nmoves; j++) move_task[j] = task_id;
  int slot = tk__pg_tasks_write_queue(p, &t, 1, moves, move_task, nmoves);
  free(move_task);
  return slot;
}

int tk__pg_settle_queue(tk__pg_pipe *p, int64_t task_id, const char *from, const char *to,
                        const char *reason, int64_t now) {
  tk__pg_task_move m = {from, to, reason, now};
  return tk__pg_task_write_queue(p, task_id, 0, 0, now, &m, 1);
}
