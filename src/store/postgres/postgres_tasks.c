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

/* Bulk submit: CREATE_SQL for many tasks, as arrays with one element per
 * task, per step, per batch step and per item, each tied to its task by
 * the task's position (ord, from 1) in the chunk. The ids are drawn from
 * the tasks' sequence in that order first, so that the answer maps every
 * position to its id; a task whose identity exists draws none (a file
 * submitted again leaves no gap in the ids) and is not inserted, nor is
 * one whose identity another session inserts meanwhile (ON CONFLICT):
 * nothing of it is written. Steps go in by task and
 * position, so their ids increase as a single submit's do.
 * $1 now; $2-$6 tasks' template, identity, context, steps, start time;
 * $7-$13 steps' ord, idx, name, max_attempts, retryable, backoff,
 * parents; $14-$18 batch steps' ord, idx and settings; $19-$23 items'
 * ord, step idx, seq, key, data; $24 the first transition's reason.
 * Answer: each task's ord, id and whether it was created. */
static const char CREATE_MANY_SQL[] =
    "WITH u AS MATERIALIZED (SELECT CASE WHEN v.identity IS NULL OR NOT EXISTS (SELECT 1"
    " FROM tasks x WHERE x.identity = v.identity) THEN"
    " nextval((SELECT pg_get_serial_sequence('tasks', 'id')::regclass)) END AS id, v.*"
    " FROM (SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::int[],"
    " $6::bigint[]) WITH ORDINALITY AS v(template_id, identity, context, nsteps, start_at, ord)"
    " ORDER BY ord) v),"
    " t AS (INSERT INTO tasks (id, template_id, identity, context, state, steps_total,"
    " created_at, updated_at) SELECT id, template_id, identity, context, " Q(TK__TASK_PENDING)
    ", nsteps, $1::bigint, $1 FROM u WHERE id IS NOT NULL ORDER BY ord"
    " ON CONFLICT (identity) DO NOTHING RETURNING id),"
    " s AS (INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"
    " parents_remaining, run_at)"
    " SELECT t.id, v.idx, v.name, " Q(TK__STEP_PENDING) ", v.max_attempts, v.retryable,"
    " v.backoff, CASE WHEN v.parents = 0 AND u.start_at > $1 THEN -1 ELSE v.parents END,"
    " CASE WHEN v.parents = 0 AND u.start_at > $1 THEN u.start_at ELSE $1 END"
    " FROM unnest($7::int[], $8::int[], $9::text[], $10::int[], $11::boolean[], $12::text[],"
    " $13::int[]) AS v(ord, idx, name, max_attempts, retryable, backoff, parents)"
    " JOIN u ON u.ord = v.ord JOIN t ON t.id = u.id ORDER BY v.ord, v.idx"
    " RETURNING id, task_id, idx),"
    " b AS (INSERT INTO batch_steps (step_id, max_in_call_retries, max_item_attempts,"
    " fail_if_any_gave_up) SELECT s.id, v.mic, v.mia, v.fail FROM unnest($14::int[],"
    " $15::int[], $16::int[], $17::int[], $18::boolean[]) AS v(ord, idx, mic, mia, fail)"
    " JOIN u ON u.ord = v.ord JOIN s ON s.task_id = u.id AND s.idx = v.idx),"
    " i AS (INSERT INTO items (step_id, seq, key, data) SELECT s.id, v.seq, v.key, v.data"
    " FROM unnest($19::int[], $20::int[], $21::int[], $22::text[], $23::text[])"
    " AS v(ord, idx, seq, key, data) JOIN u ON u.ord = v.ord"
    " JOIN s ON s.task_id = u.id AND s.idx = v.idx),"
    " tr AS (INSERT INTO transitions (task_id, to_state, at, reason)"
    " SELECT id, " Q(TK__TASK_PENDING) ", $1, $24::text FROM t),"
    " n AS (SELECT pg_notify('" TK__PG_CHANNEL "', '') WHERE EXISTS (SELECT 1 FROM t))"
    " SELECT u.ord, u.id, t.id IS NOT NULL, (SELECT count(*) FROM n) FROM u"
    " LEFT JOIN t ON t.id = u.id";

/* The tasks (by their position in the chunk) whose identity is taken:
 * a statement of its own, whose snapshot sees the rows that won. */
static const char BY_IDENTITIES_SQL[] =
    "SELECT v.ord, t.id FROM unnest($1::text[]) WITH ORDINALITY AS v(identity, ord)"
    " JOIN tasks t ON t.identity = v.identity";

/* The arrays of CREATE_MANY_SQL ($2-$23) in m[]; then the chunk's
 * identities for BY_IDENTITIES_SQL. */
enum { M_TEMPLATE, M_IDENTITY, M_CONTEXT, M_NSTEPS, M_START, M_SORD, M_SIDX, M_NAME, M_MAX,
       M_RETRYABLE, M_BACKOFF, M_PARENTS, M_BORD, M_BIDX, M_MIC, M_MIA, M_FAIL, M_IORD, M_IIDX,
       M_SEQ, M_KEY, M_DATA, M_COUNT };

/* Tasks per statement: large enough that a round trip and a plan are
 * little beside the rows, small enough that the arrays stay a few MB. */
#define CHUNK 2000

static int many_arrays(const tk__new_task *t, int n, tk__buf *m, const char **v) {
  for (int k = 0; k < M_COUNT; k++) tk__pg_array_open(&m[k]);
  for (int ord = 1; ord <= n; ord++) {
    const tk__new_task *task = &t[ord - 1];
    tk__pg_array_i64(&m[M_TEMPLATE], task->template_id);
    tk__pg_array_text(&m[M_IDENTITY], task->identity);
    tk__pg_array_text(&m[M_CONTEXT], task->context);
    tk__pg_array_i64(&m[M_NSTEPS], task->nsteps);
    tk__pg_array_i64(&m[M_START], task->start_at);
    for (int i = 0; i < task->nsteps; i++) {
      const tk__new_step *ns = &task->steps[i];
      tk__pg_array_i64(&m[M_SORD], ord);
      tk__pg_array_i64(&m[M_SIDX], i);
      tk__pg_array_text(&m[M_NAME], ns->name);
      tk__pg_array_i64(&m[M_MAX], ns->max_attempts);
      tk__pg_array_bool(&m[M_RETRYABLE], ns->retryable);
      tk__pg_array_text(&m[M_BACKOFF], ns->backoff);
      tk__pg_array_i64(&m[M_PARENTS], ns->nparents);
      if (!ns->batch) continue;
      tk__pg_array_i64(&m[M_BORD], ord);
      tk__pg_array_i64(&m[M_BIDX], i);
      tk__pg_array_i64(&m[M_MIC], ns->max_in_call_retries);
      tk__pg_array_i64(&m[M_MIA], ns->max_item_attempts);
      tk__pg_array_bool(&m[M_FAIL], ns->fail_if_any_gave_up);
      for (int j = 0; j < ns->nitems; j++) {
        tk__pg_array_i64(&m[M_IORD], ord);
        tk__pg_array_i64(&m[M_IIDX], i);
        tk__pg_array_i64(&m[M_SEQ], j);
        tk__pg_array_text(&m[M_KEY], ns->items[j].key);
        tk__pg_array_text(&m[M_DATA], ns->items[j].data);
      }
    }
  }
  int ok = 1;
  for (int k = 0; k < M_COUNT; k++) ok &= (v[k] = tk__pg_array_close(&m[k])) != NULL;
  return ok;
}

/* One chunk's statements queued: *created its CREATE_MANY_SQL slot,
 * *winners its BY_IDENTITIES_SQL slot (-1 when no task has an identity).
 * The arrays in m[] must live until the pipeline runs. */
static int queue_chunk(tk__pg_pipe *p, const tk__new_task *t, int n, tk__buf *m,
                       int *created, int *winners, tk_err *err) {
  const char *v[M_COUNT];
  if (!many_arrays(t, n, m, v)) return tk__pg_oom(err, "submit tasks");
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, t[0].now);
  for (int k = 0; k < M_COUNT; k++) tk__pg_arg_text(&a, v[k]);
  tk__pg_arg_text(&a, TK__REASON_CREATED);
  *created = tk__pg_pipe_stmt(p, -1, CREATE_MANY_SQL, a.n, a.v);
  *winners = -1;
  for (int i = 0; i < n; i++) {
    if (t[i].identity == NULL) continue;
    *winners = tk__pg_pipe_stmt(p, -1, BY_IDENTITIES_SQL, 1, &v[M_IDENTITY]);
    break;
  }
  return 0;
}

/* A chunk's answers into task_ids[] and existed[] (its n tasks). */
static int read_chunk(tk__pg_pipe *p, const tk__new_task *t, int n, int created, int winners,
                      int64_t *task_ids, int *existed, tk_err *err) {
  PGresult *r = tk__pg_result(p, created), *w = tk__pg_result(p, winners);
  for (int i = 0; i < n; i++) task_ids[i] = 0;
  for (int row = 0; r && row < PQntuples(r); row++) {
    int i = (int)tk__pg_i64(r, row, 0) - 1;
    if (i < 0 || i >= n) continue;
    existed[i] = !tk__pg_bool(r, row, 2);
    if (!existed[i]) task_ids[i] = tk__pg_i64(r, row, 1);
  }
  for (int row = 0; w && row < PQntuples(w); row++) {
    int i = (int)tk__pg_i64(w, row, 0) - 1;
    if (i >= 0 && i < n && existed[i]) task_ids[i] = tk__pg_i64(w, row, 1);
  }
  for (int i = 0; i < n; i++)
    if (task_ids[i] == 0)
      return tk_err_set(err, TK_ESTORE, "postgres: submit tasks: identity \"%s\" neither "
                        "inserted nor found", t[i].identity ? t[i].identity : "");
  return 0;
}

int tk__pg_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err) {
  int chunks = (n + CHUNK - 1) / CHUNK;
  tk__buf *m = calloc((size_t)chunks * M_COUNT, sizeof *m);
  int *slots = calloc((size_t)chunks * 2, sizeof *slots);
  if (m == NULL || slots == NULL) {
    free(m);
    free(slots);
    return tk__pg_oom(err, "submit tasks");
  }
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "submit tasks", err);
  if (rc == 0) {
    tk__pg_begin(&p);
    for (int c = 0; rc == 0 && c < chunks; c++) {
      int first = c * CHUNK, len = n - first < CHUNK ? n - first : CHUNK;
      rc = queue_chunk(&p, t + first, len, m + c * M_COUNT, &slots[2 * c], &slots[2 * c + 1],
                       err);
    }
    if (rc == 0) {
      tk__pg_commit(&p);
      rc = tk__pg_pipe_run(&p, "submit tasks", err);
    }
    for (int c = 0; rc == 0 && c < chunks; c++) {
      int first = c * CHUNK, len = n - first < CHUNK ? n - first : CHUNK;
      rc = read_chunk(&p, t + first, len, slots[2 * c], slots[2 * c + 1], task_ids + first,
                      existed + first, err);
    }
  }
  tk__pg_pipe_end(&p);
  for (int k = 0; k < chunks * M_COUNT; k++) tk__buf_free(&m[k]);
  free(m);
  free(slots);
  return rc;
}
