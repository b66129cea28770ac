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

int tk__pg_settle_queue(tk__pg_pipe *p, int64_t task_id, const char *from, const char *to,
                        const char *reason, int64_t now) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_text(&a, to);
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_bool(&a, tk__task_state_terminal(to));
  tk__pg_arg_text(&a, from);
  tk__pg_arg_text(&a, reason);
  return tk__pg_pipe_stmt(
      p, PG_SETTLE,
      "WITH t AS (UPDATE tasks SET state = $2::text, updated_at = $3::bigint,"
      " finished_at = CASE WHEN $4::boolean THEN $3 END WHERE id = $1::bigint RETURNING id)"
      " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
      " SELECT id, NULL, $5::text, $2, $3, $6::text FROM t",
      a.n, a.v);
}
