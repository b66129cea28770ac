/* Creating tasks: the task, its steps, its batch steps' items and its
 * first transition in one statement, one round trip. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#include "store/rules.h"

#define Q TK__PG_Q

/* The steps come as parallel arrays in template order (their position is
 * their idx); batch settings and items as arrays keyed by that idx. An
 * identity that exists already makes the INSERT of the task do nothing,
 * and with no task row nothing else is written. Also when another session
 * inserts the same identity at this moment: ON CONFLICT waits for it to
 * commit and then does nothing (the lookup after this statement then sees
 * its row). NOTIFY only for a task actually created.
 * $1 template, $2 identity, $3 context, $4 steps, $5 now, $6-$10 the
 * steps' name, max_attempts, retryable, backoff, parents; $11-$14 batch
 * steps' idx and settings; $15-$18 items' step idx, seq, key, data; $19
 * the reason of the first transition; $20 the start time (a later one
 * delays the root steps: parents_remaining -1, run_at $20; 0005). */
static const char CREATE_SQL[] =
    "WITH t AS (INSERT INTO tasks (template_id, identity, context, state, steps_total,"
    " created_at, updated_at) VALUES ($1::bigint, $2::text, $3::text, " Q(TK__TASK_PENDING) ","
    " $4::int, $5::bigint, $5) ON CONFLICT (identity) DO NOTHING RETURNING id),"
    " s AS (INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"
    " parents_remaining, run_at)"
    " SELECT t.id, u.ord - 1, u.name, " Q(TK__STEP_PENDING) ", u.max_attempts, u.retryable,"
    " u.backoff, CASE WHEN u.parents = 0 AND $20::bigint > $5 THEN -1 ELSE u.parents END,"
    " CASE WHEN u.parents = 0 AND $20 > $5 THEN $20 ELSE $5 END FROM t, unnest($6::text[], $7::int[], $8::boolean[], $9::text[],"
    " $10::int[]) WITH ORDINALITY AS u(name, max_attempts, retryable, backoff, parents, ord)"
    " RETURNING id, idx),"
    " b AS (INSERT INTO batch_steps (step_id, max_in_call_retries, max_item_attempts,"
    " fail_if_any_gave_up) SELECT s.id, u.mic, u.mia, u.fail FROM s JOIN unnest($11::int[],"
    " $12::int[], $13::int[], $14::boolean[]) AS u(idx, mic, mia, fail) ON u.idx = s.idx),"
    " i AS (INSERT INTO items (step_id, seq, key, data) SELECT s.id, u.seq, u.key, u.data"
    " FROM s JOIN unnest($15::int[], $16::int[], $17::text[], $18::text[])"
    " AS u(idx, seq, key, data) ON u.idx = s.idx),"
    " tr AS (INSERT INTO transitions (task_id, to_state, at, reason)"
    " SELECT id, " Q(TK__TASK_PENDING) ", $5, $19::text FROM t),"
    " n AS (SELECT pg_notify('" TK__PG_CHANNEL "', '') FROM t)"
    " SELECT id, (SELECT count(*) FROM n) FROM t";

/* The arrays of CREATE_SQL ($6-$18), in b[0..12]. */
enum { A_NAME, A_MAX, A_RETRYABLE, A_BACKOFF, A_PARENTS, A_BIDX, A_MIC, A_MIA, A_FAIL, A_IIDX,
       A_SEQ, A_KEY, A_DATA, A_COUNT };

static int step_arrays(const tk__new_task *t, tk__buf *b, const char **v) {
  for (int k = 0; k < A_COUNT; k++) tk__pg_array_open(&b[k]);
  for (int i = 0; i < t->nsteps; i++) {
    const tk__new_step *ns = &t->steps[i];
    tk__pg_array_text(&b[A_NAME], ns->name);
    tk__pg_array_i64(&b[A_MAX], ns->max_attempts);
    tk__pg_array_bool(&b[A_RETRYABLE], ns->retryable);
    tk__pg_array_text(&b[A_BACKOFF], ns->backoff);
    tk__pg_array_i64(&b[A_PARENTS], ns->nparents);
    if (!ns->batch) continue;
    tk__pg_array_i64(&b[A_BIDX], i);
    tk__pg_array_i64(&b[A_MIC], ns->max_in_call_retries);
    tk__pg_array_i64(&b[A_MIA], ns->max_item_attempts);
    tk__pg_array_bool(&b[A_FAIL], ns->fail_if_any_gave_up);
    for (int j = 0; j < ns->nitems; j++) {
      tk__pg_array_i64(&b[A_IIDX], i);
      tk__pg_array_i64(&b[A_SEQ], j);
      tk__pg_array_text(&b[A_KEY], ns->items[j].key);
      tk__pg_array_text(&b[A_DATA], ns->items[j].data);
    }
  }
  int ok = 1;
  for (int k = 0; k < A_COUNT; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  return ok;
}

int tk__pg_task_create(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err) {
  return tk__pg_task_create_guarded(s, t, NULL, task_id, existed, err);
}

int tk__pg_task_create_guarded(tk_store *s, const tk__new_task *t, const tk__pg_guard *g,
                               int64_t *task_id, int *existed, tk_err *err) {
  *existed = 0;
  *task_id = 0;
  tk__buf b[A_COUNT];
  memset(b, 0, sizeof b);
  const char *v[A_COUNT];
  if (!step_arrays(t, b, v)) {
    for (int k = 0; k < A_COUNT; k++) tk__buf_free(&b[k]);
    return tk__pg_oom(err, "create task");
  }
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "create task", err);
  if (rc == 0) {
    tk__pg_args a = {0};
    tk__pg_arg_i64(&a, t->template_id);
    tk__pg_arg_text(&a, t->identity);
    tk__pg_arg_text(&a, t->context);
    tk__pg_arg_i64(&a, t->nsteps);
    tk__pg_arg_i64(&a, t->now);
    for (int k = 0; k < A_COUNT; k++) tk__pg_arg_text(&a, v[k]);
    tk__pg_arg_text(&a, TK__REASON_CREATED);
    tk__pg_arg_i64(&a, t->start_at);
    tk__pg_begin(&p);
    if (g && (rc = g->check(&p, g->ud, err)) != 0) goto end;
    int created = tk__pg_pipe_stmt(&p, PG_TASK_CREATE, CREATE_SQL, a.n, a.v);
    int winner = -1;
    if (t->identity != NULL) {
      /* A statement of its own: its snapshot sees the row that won. */
      a.n = 0;
      tk__pg_arg_text(&a, t->identity);
      winner = tk__pg_pipe_stmt(&p, PG_TASK_BY_IDENTITY,
                                "SELECT id FROM tasks WHERE identity = $1::text", a.n, a.v);
    }
    if (g) g->finish(&p, g->ud);
    tk__pg_commit(&p);
    if ((rc = tk__pg_pipe_run(&p, "create task", err)) == 0) {
      PGresult *r = tk__pg_result(&p, created), *w = tk__pg_result(&p, winner);
      if (PQntuples(r) == 1) {
        *task_id = tk__pg_i64(r, 0, 0);
      } else if (w != NULL && PQntuples(w) == 1) {
        *task_id = tk__pg_i64(w, 0, 0);
        *existed = 1;
      } else {
        rc = tk_err_set(err, TK_ESTORE, "postgres: create task: identity \"%s\" neither "
                        "inserted nor found", t->identity ? t->identity : "");
      }
    }
  }
end:
  tk__pg_pipe_end(&p);
  for (int k = 0; k < A_COUNT; k++) tk__buf_free(&b[k]);
  return rc;
}
