/* Deadlines on PostgreSQL (DESIGN §3, 0019_deadlines.sql): the deadlines
 * that came, looked at each once. A taker locks their rows, skipping the
 * rows another taker holds (so several orchestrators never apply one
 * twice), then their tasks' locks in ascending id as every writer of a
 * task does, reads the tasks' states after them, and under
 * tk__deadline_plan's rule ends those still pending or in progress in
 * error with their unfinished steps cancelled (tk__pg_cancel_queue, the
 * operator's cancel with another end); every row taken goes. Off the hot
 * path: unnamed statements but the earliest deadline's read, and the
 * claim never reads deadlines. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

int tk__pg_deadline_first_queue(tk__pg_pipe *p) {
  /* Prepared: every idle pass's next_due reads it. */
  return tk__pg_pipe_stmt(p, PG_DEADLINE_FIRST, "SELECT min(deadline_at) FROM deadlines", 0, NULL);
}

/* The rows due by $1, earliest first, at most $2, locked. */
static const char DUE_SQL[] =
    "SELECT task_id, deadline_at FROM deadlines WHERE deadline_at <= $1::bigint"
    " ORDER BY deadline_at, task_id LIMIT $2::int FOR UPDATE SKIP LOCKED";

/* A statement of its own after the tasks' locks: its snapshot sees what
 * every writer that held them committed. */
static const char STATES_SQL[] = "SELECT id, state FROM tasks WHERE id = ANY ($1::bigint[])";

static const char DROP_SQL[] = "DELETE FROM deadlines WHERE task_id = ANY ($1::bigint[])";

typedef struct due {
  int64_t task_id, deadline_at;
  char state[TK__STATE_MAX]; /* "" when the task is gone */
} due;

static int by_task(const void *a, const void *b) {
  int64_t x = ((const due *)a)->task_id, y = ((const due *)b)->task_id;
  return (x > y) - (x < y);
}

static int64_t or_never(int64_t t) { return t == TK__NONE ? INT64_MAX : t; }

/* Lock the rows due and read them into v (*k of them), then lock their
 * tasks and read their states; in the open transaction. */
static int take(tk__pg_pipe *p, int64_t now, int limit, due *v, int *k, tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_i64(&a, limit);
  int slot = tk__pg_pipe_stmt(p, -1, DUE_SQL, a.n, a.v);
  int rc = tk__pg_pipe_run(p, "deadlines", err);
  if (rc) return rc;
  PGresult *r = tk__pg_result(p, slot);
  for (*k = 0; *k < PQntuples(r) && *k < limit; (*k)++) {
    v[*k].task_id = tk__pg_i64(r, *k, 0);
    v[*k].deadline_at = tk__pg_i64(r, *k, 1);
  }
  tk__pg_pipe_reset(p);
  if (*k == 0) return 0;
  qsort(v, (size_t)*k, sizeof *v, by_task);
  int64_t *ids = malloc((size_t)*k * sizeof *ids);
  if (ids == NULL) return tk__pg_oom(err, "deadlines");
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int i = 0; i < *k; i++) tk__pg_array_i64(&b, ids[i] = v[i].task_id);
  const char *arr = tk__pg_array_close(&b);
  int locked = arr ? tk__pg_tasks_lock_queue(p, ids, *k) : -1;
  slot = locked >= 0 ? tk__pg_pipe_stmt(p, -1, STATES_SQL, 1, &arr) : -1;
  free(ids);
  rc = slot < 0 ? tk__pg_oom(err, "deadlines") : tk__pg_pipe_run(p, "deadlines", err);
  tk__buf_free(&b);
  if (rc) return rc;
  r = tk__pg_result(p, slot);
  for (int row = 0; row < PQntuples(r); row++) {
    due key = {.task_id = tk__pg_i64(r, row, 0)};
    due *d = bsearch(&key, v, (size_t)*k, sizeof *v, by_task);
    if (d) tk__pg_copy(d->state, sizeof d->state, r, row, 1);
  }
  tk__pg_pipe_reset(p);
  return 0;
}

/* Queue the writes of the deadlines v[0..k): the tasks they end (into
 * out, *n), and every row's removal. */
static int queue_ends(tk__pg_pipe *p, const due *v, int k, int64_t now, int64_t *out, int *n,
                      tk_err *err) {
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int i = 0; i < k; i++) {
    tk__op_plan plan;
    tk__pg_array_i64(&b, v[i].task_id);
    if (!tk__deadline_plan(v[i].state, v[i].deadline_at, now, &plan)) continue;
    tk__pg_cancel_queue(p, &plan, v[i].task_id, v[i].state, now);
    out[(*n)++] = v[i].task_id;
  }
  const char *arr = tk__pg_array_close(&b);
  int slot = arr ? tk__pg_pipe_stmt(p, -1, DROP_SQL, 1, &arr) : -1;
  tk__buf_free(&b);
  return slot < 0 ? tk__pg_oom(err, "deadlines") : 0;
}

int tk__pg_deadline_apply(tk_store *s, int64_t now, int limit, int64_t *out, int *n,
                          int64_t *next_at, tk_err *err) {
  *n = 0;
  *next_at = INT64_MAX;
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "deadlines", err);
  if (rc) return rc;
  /* Most looks find nothing due: one read, no transaction. */
  int first = tk__pg_deadline_first_queue(&p);
  if ((rc = tk__pg_pipe_run(&p, "deadlines", err)) == 0)
    *next_at = or_never(tk__pg_i64(tk__pg_result(&p, first), 0, 0));
  due *v = NULL;
  if (rc == 0 && *next_at <= now && limit > 0) {
    tk__pg_pipe_reset(&p);
    v = calloc((size_t)limit, sizeof *v);
    int k = 0;
    if (v == NULL) rc = tk__pg_oom(err, "deadlines");
    if (rc == 0) {
      tk__pg_begin(&p);
      rc = take(&p, now, limit, v, &k, err);
    }
    if (rc == 0) rc = queue_ends(&p, v, k, now, out, n, err);
    if (rc == 0) {
      first = tk__pg_deadline_first_queue(&p);
      if (*n > 0) tk__pg_notify(&p);
      tk__pg_commit(&p);
      if ((rc = tk__pg_pipe_run(&p, "deadlines", err)) == 0)
        *next_at = or_never(tk__pg_i64(tk__pg_result(&p, first), 0, 0));
    }
    if (rc) *n = 0;
  }
  free(v);
  tk__pg_pipe_end(&p);
  return rc;
}
