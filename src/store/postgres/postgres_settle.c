/* Statements that outcomes and operator actions share: releasing a
 * finished step's children, asking whether a task can still progress, and
 * moving a task to the state tk__settle chose. Each runs inside the
 * caller's transaction, which holds the task's row lock. */
#include "store/postgres/postgres_internal.h"

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

/* One write of a task per transaction: its counters (steps done and in
 * error, added to what is stored) and its moves, the last one its new
 * state, each with its transition in order. No move: the state and
 * finished_at stay. $1 task, $2 done +, $3 in error +, $4 now, $5 the last
 * move's state, $6 whether that is terminal, then the moves as arrays of
 * from, to, reason and time. */
static const char TASK_WRITE_SQL[] =
    "WITH w AS (UPDATE tasks SET steps_done = steps_done + $2::int,"
    " steps_error = steps_error + $3::int, updated_at = $4::bigint,"
    " state = COALESCE($5::text, state),"
    " finished_at = CASE WHEN $5 IS NULL THEN finished_at WHEN $6::boolean THEN $4 END"
    " WHERE id = $1::bigint RETURNING id)"
    " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT w.id, NULL, m.f, m.t, m.at, m.r FROM w,"
    " unnest($7::text[], $8::text[], $9::text[], $10::bigint[]) WITH ORDINALITY"
    " AS m(f, t, r, at, o) ORDER BY m.o";

int tk__pg_task_write_queue(tk__pg_pipe *p, int64_t task_id, int done, int errors, int64_t now,
                            const tk__pg_task_move *moves, int nmoves) {
  tk__buf b[4] = {{0}};
  const char *v[4];
  for (int k = 0; k < 4; k++) tk__pg_array_open(&b[k]);
  for (int j = 0; j < nmoves; j++) {
    tk__pg_array_text(&b[0], moves[j].from);
    tk__pg_array_text(&b[1], moves[j].to);
    tk__pg_array_text(&b[2], moves[j].reason);
    tk__pg_array_i64(&b[3], moves[j].at);
  }
  int ok = 1;
  for (int k = 0; k < 4; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  int slot = -1;
  if (ok) {
    const char *last = nmoves > 0 ? moves[nmoves - 1].to : NULL;
    tk__pg_args a = {0};
    tk__pg_arg_i64(&a, task_id);
    tk__pg_arg_i64(&a, done);
    tk__pg_arg_i64(&a, errors);
    tk__pg_arg_i64(&a, now);
    tk__pg_arg_text(&a, last);
    tk__pg_arg_bool(&a, last != NULL && tk__task_state_terminal(last));
    for (int k = 0; k < 4; k++) tk__pg_arg_text(&a, v[k]);
    slot = tk__pg_pipe_stmt(p, PG_TASK_WRITE, TASK_WRITE_SQL, a.n, a.v);
  }
  for (int k = 0; k < 4; k++) tk__buf_free(&b[k]);
  return slot;
}

int tk__pg_settle_queue(tk__pg_pipe *p, int64_t task_id, const char *from, const char *to,
                        const char *reason, int64_t now) {
  tk__pg_task_move m = {from, to, reason, now};
  return tk__pg_task_write_queue(p, task_id, 0, 0, now, &m, 1);
}
