/* Creating tasks: the task, its steps, its batch steps' items and its
 * first transition in one statement, one round trip. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#include "store/rules.h"

#define Q TK__PG_Q

/* The steps come as parallel arrays (task_arrays' M_SIDX..M_RUNAT), the
 * batch settings and items as arrays keyed by the step's idx. An identity
 * that exists already makes the INSERT of the task do nothing, and with
 * no task row nothing else is written. Also when another session inserts
 * the same identity at this moment: ON CONFLICT waits for it to commit
 * and then does nothing (the lookup after this statement then sees its
 * row). NOTIFY only for a task actually created.
 * $1 template, $2 identity, $3 context, $4 steps, $5 now, $6-$12 the
 * steps' idx, name, max_attempts, retryable, backoff, parents_remaining,
 * run_at; $13-$16 batch steps' idx and settings; $17-$20 items' step idx,
 * seq, key, data; $21 the reason of the first transition; a task with a
 * worker step (DESIGN §19, 0013) $22 the steps' worker queues (queue and
 * its parts: STEP_QUEUE; a task of no worker step writes no such column,
 * so that it can be stored at any schema version). */
#define CREATE_SQL_FOR(tcol, tval, col, val, arr, name, more)                                   \
    "WITH t AS (INSERT INTO tasks (template_id, identity, context, state, steps_total,"         \
    " created_at, updated_at" tcol ") VALUES ($1::bigint, $2::text, $3::text, "                 \
    Q(TK__TASK_PENDING) ", $4::int, $5::bigint, $5" tval ") ON CONFLICT (identity) WHERE identity IS NOT NULL DO NOTHING"    \
    " RETURNING id),"                                                                           \
    " s AS (INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"    \
    " parents_remaining, run_at" col ")"                                                        \
    " SELECT t.id, u.idx, u.name, " Q(TK__STEP_PENDING) ", u.max_attempts, u.retryable,"        \
    " u.backoff, u.parents, u.run_at" val " FROM t, unnest($6::int[], $7::text[], $8::int[],"   \
    " $9::boolean[], $10::text[], $11::int[], $12::bigint[]" arr ")"                            \
    " AS u(idx, name, max_attempts, retryable, backoff, parents, run_at" name ") RETURNING id, idx),"\
    " b AS (INSERT INTO batch_steps (step_id, max_in_call_retries, max_item_attempts,"          \
    " fail_if_any_gave_up) SELECT s.id, u.mic, u.mia, u.fail FROM s JOIN unnest($13::int[],"    \
    " $14::int[], $15::int[], $16::boolean[]) AS u(idx, mic, mia, fail) ON u.idx = s.idx),"     \
    " i AS (INSERT INTO items (step_id, seq, key, data) SELECT s.id, u.seq, u.key, u.data"      \
    " FROM s JOIN unnest($17::int[], $18::int[], $19::text[], $20::text[])"                     \
    " AS u(idx, seq, key, data) ON u.idx = s.idx),"                                             \
    " tr AS (INSERT INTO transitions (task_id, to_state, at, reason)"                           \
    " SELECT id, " Q(TK__TASK_PENDING) ", $5, $21::text FROM t),"                               \
    more                                                                                        \
    " n AS (SELECT pg_notify('" TK__PG_CHANNEL "', '') FROM t)"                                 \
    " SELECT id, (SELECT count(*) FROM n) FROM t"

/* A queues row for each queue the steps name (0015), with `worker` or
 * `plain` set for the kinds of step that named it, kept once set: worker
 * queues w, queues q (arrays of one element per step), rows written only
 * when `when` holds. */
#define QUEUES_NAMED(w, q, when)                                                               \
    "INSERT INTO queues (name, worker, plain) SELECT u.q, bool_or(u.w IS NOT NULL),"            \
    " bool_or(u.w IS NULL) FROM unnest(" w ", " q ") AS u(w, q) WHERE u.q IS NOT NULL AND "     \
    when " GROUP BY u.q ON CONFLICT (name) DO UPDATE SET"                                       \
    " worker = queues.worker OR EXCLUDED.worker, plain = queues.plain OR EXCLUDED.plain"        \
    " WHERE (EXCLUDED.worker AND NOT queues.worker) OR (EXCLUDED.plain AND NOT queues.plain)"

static const char CREATE_SQL[] = CREATE_SQL_FOR("", "", "", "", "", "", "");

/* The deadlines ($1 task ids, $2 their deadlines) of tasks just written:
 * tasks.deadline_at and the row to look at then (0019). */
static const char DEADLINES_SQL[] =
    "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS v(id, d)),"
    " u AS (UPDATE tasks t SET deadline_at = v.d FROM v WHERE t.id = v.id)"
    " INSERT INTO deadlines (task_id, deadline_at) SELECT id, d FROM v";

/* A single submit's deadline ($1), after CREATE_SQL in its transaction:
 * the task its INSERT drew an id for, if it wrote the row (an identity
 * that existed drew one and wrote none: then nothing here). */
static const char DEADLINE_SQL[] =
    "WITH u AS (UPDATE tasks SET deadline_at = $1::bigint"
    " WHERE id = currval(pg_get_serial_sequence('tasks', 'id')) AND created_at = $2::bigint"
    " AND deadline_at IS NULL RETURNING id)"
    " INSERT INTO deadlines (task_id, deadline_at) SELECT id, $1 FROM u";
/* A task with a priority or a step naming a queue (12): $22 the steps'
 * worker queues, $23 their queues, $24 the priority. */
static const char CREATE_QUEUE_SQL[] = CREATE_SQL_FOR(
    ", priority", ", $24::int", ", worker_queue, queue, priority", ", u.wq, u.queue, $24",
    ", $22::text[], $23::text[]", ", wq, queue",
    " qn AS (" QUEUES_NAMED("$22", "$23", "EXISTS (SELECT 1 FROM t)") "),");

/* The arrays of new tasks' rows, one element per task (M_ID..M_NSTEPS),
 * per step (M_STASK..M_RUNAT, and M_QUEUE), per batch step
 * (M_BTASK..M_FAIL) and per item (M_ITASK..M_DATA): bulk submit's
 * statements take them all, a single submit's CREATE_SQL the steps',
 * batch steps' and items' without their task column. */
enum { M_ID, M_TEMPLATE, M_IDENTITY, M_CONTEXT, M_NSTEPS,
       M_STASK, M_SIDX, M_NAME, M_MAX, M_RETRYABLE, M_BACKOFF, M_PARENTS, M_RUNAT,
       M_BTASK, M_BIDX, M_MIC, M_MIA, M_FAIL,
       M_ITASK, M_IIDX, M_SEQ, M_KEY, M_DATA, M_QUEUE, M_SQUEUE, M_SPRIO, M_PRIO, M_COUNT };

/* Every array of m[] empty, open for elements. */
static void arrays_open(tk__buf *m) {
  for (int k = 0; k < M_COUNT; k++) tk__pg_array_open(&m[k]);
}

/* The arrays' texts into v[]; 0 when one ran out of memory. */
static int arrays_close(tk__buf *m, const char **v) {
  int ok = 1;
  for (int k = 0; k < M_COUNT; k++) ok &= (v[k] = tk__pg_array_close(&m[k])) != NULL;
  return ok;
}

/* Append task t's rows, as task `id`, to the arrays m[]; *batch set when
 * it has a batch step, *queue when it has a priority or a step naming a
 * queue (a worker step's queue is its worker queue: store.h). A root step of a task that starts later waits with
 * parents_remaining TK__DELAYED until its run_at, the start time (0005). */
static void task_arrays(const tk__new_task *t, int64_t id, tk__buf *m, int *batch,
                        int *queue, int *plain) {
  tk__pg_array_i64(&m[M_ID], id);
  tk__pg_array_i64(&m[M_TEMPLATE], t->template_id);
  tk__pg_array_text(&m[M_IDENTITY], t->identity);
  tk__pg_array_text(&m[M_CONTEXT], t->context);
  tk__pg_array_i64(&m[M_NSTEPS], t->nsteps);
  tk__pg_array_i64(&m[M_PRIO], t->priority);
  *queue |= t->priority != 0;
  for (int j = 0; j < t->nsteps; j++) {
    const tk__new_step *ns = &t->steps[j];
    int delayed = t->start_at > t->now && ns->nparents == 0;
    tk__pg_array_i64(&m[M_STASK], id);
    tk__pg_array_i64(&m[M_SIDX], j);
    tk__pg_array_text(&m[M_NAME], ns->name);
    tk__pg_array_i64(&m[M_MAX], ns->max_attempts);
    tk__pg_array_bool(&m[M_RETRYABLE], ns->retryable);
    tk__pg_array_text(&m[M_BACKOFF], ns->backoff);
    tk__pg_array_i64(&m[M_PARENTS], delayed ? TK__DELAYED : ns->nparents);
    tk__pg_array_i64(&m[M_RUNAT], delayed ? t->start_at : t->now);
    tk__pg_array_text(&m[M_QUEUE], ns->worker_queue);
    tk__pg_array_text(&m[M_SQUEUE], ns->queue ? ns->queue : ns->worker_queue);
    *plain |= ns->queue != NULL && ns->worker_queue == NULL;
    tk__pg_array_i64(&m[M_SPRIO], t->priority);
    *queue |= ns->worker_queue != NULL || ns->queue != NULL;
    if (!ns->batch) continue;
    *batch = 1;
    tk__pg_array_i64(&m[M_BTASK], id);
    tk__pg_array_i64(&m[M_BIDX], j);
    tk__pg_array_i64(&m[M_MIC], ns->max_in_call_retries);
    tk__pg_array_i64(&m[M_MIA], ns->max_item_attempts);
    tk__pg_array_bool(&m[M_FAIL], ns->fail_if_any_gave_up);
    for (int e = 0; e < ns->nitems; e++) {
      tk__pg_array_i64(&m[M_ITASK], id);
      tk__pg_array_i64(&m[M_IIDX], j);
      tk__pg_array_i64(&m[M_SEQ], e);
      tk__pg_array_text(&m[M_KEY], ns->items[e].key);
      tk__pg_array_text(&m[M_DATA], ns->items[e].data);
    }
  }
}

/* The arrays' memory (m[] zeroed or used, closed or not). */
static void arrays_free(tk__buf *m) {
  for (int k = 0; k < M_COUNT; k++) tk__buf_free(&m[k]);
}

int tk__pg_task_create(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err) {
  return tk__pg_task_create_guarded(s, t, NULL, task_id, existed, err);
}

int tk__pg_task_create_guarded(tk_store *s, const tk__new_task *t, const tk__pg_guard *g,
                               int64_t *task_id, int *existed, tk_err *err) {
  *existed = 0;
  *task_id = 0;
  tk__buf m[M_COUNT];
  memset(m, 0, sizeof m);
  const char *v[M_COUNT];
  int batch = 0, queue = 0, plain = 0;
  arrays_open(m);
  task_arrays(t, 0, m, &batch, &queue, &plain);
  /* This connection's claims look at the queues' lanes from now on. */
  if (plain) ((tk__pg *)s)->no_lanes = 0;
  if (!arrays_close(m, v)) {
    arrays_free(m);
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
    for (int k = M_SIDX; k <= M_RUNAT; k++) tk__pg_arg_text(&a, v[k]);
    for (int k = M_BIDX; k <= M_FAIL; k++) tk__pg_arg_text(&a, v[k]);
    for (int k = M_IIDX; k <= M_DATA; k++) tk__pg_arg_text(&a, v[k]);
    tk__pg_arg_text(&a, TK__REASON_CREATED);
    if (queue) {
      tk__pg_arg_text(&a, v[M_QUEUE]);
      tk__pg_arg_text(&a, v[M_SQUEUE]);
      tk__pg_arg_i64(&a, t->priority);
    }
    tk__pg_begin(&p);
    if (g && (rc = g->check(&p, g->ud, err)) != 0) goto end;
    int created = queue ? tk__pg_pipe_stmt(&p, PG_TASK_CREATE_QUEUE, CREATE_QUEUE_SQL, a.n, a.v)
                        : tk__pg_pipe_stmt(&p, PG_TASK_CREATE, CREATE_SQL, a.n, a.v);
    if (t->deadline_at != 0) {
      a.n = 0;
      tk__pg_arg_i64(&a, t->deadline_at);
      tk__pg_arg_i64(&a, t->now);
      tk__pg_pipe_stmt(&p, -1, DEADLINE_SQL, a.n, a.v);
    }
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
  arrays_free(m);
  return rc;
}

/* Bulk submit, in two round trips of one transaction. First each task's
 * id: the existing task of its identity, else one drawn from the tasks'
 * sequence (none for an existing identity: a file submitted again leaves
 * no gap). Then the rows, by plain INSERTs from arrays (one element per
 * task, per step, per batch step, per item) that need no join but the
 * batch steps' to their step: every id and value is known beforehand.
 * Another session inserting one of the identities in between makes the
 * task INSERT fail on the unique identity: the whole call is then tried
 * again, and finds that task in its first round trip. */
static const char IDS_SQL[] =
    "SELECT v.ord, t.id, CASE WHEN t.id IS NULL THEN"
    " nextval((SELECT pg_get_serial_sequence('tasks', 'id')::regclass)) END"
    " FROM unnest($1::text[]) WITH ORDINALITY AS v(identity, ord)"
    " LEFT JOIN tasks t ON t.identity = v.identity";

#define TASKS_SQL_FOR(col, val, arr, name)                                                     \
    "INSERT INTO tasks (id, template_id, identity, context, state, steps_total, created_at,"    \
    " updated_at" col ") SELECT v.id, v.template_id, v.identity, v.context, "                  \
    Q(TK__TASK_PENDING) ", v.nsteps, $1::bigint, $1" val " FROM unnest($2::bigint[],"          \
    " $3::bigint[], $4::text[], $5::text[], $6::int[]" arr ")"                                 \
    " AS v(id, template_id, identity, context, nsteps" name ")"
static const char TASKS_SQL[] = TASKS_SQL_FOR("", "", "", "");
/* A chunk with a priority or a queue (12): $7 the tasks' priorities. */
static const char TASKS_PRIORITY_SQL[] =
    TASKS_SQL_FOR(", priority", ", v.priority", ", $7::int[]", ", priority");
static const char QUEUES_NAMED_SQL[] = QUEUES_NAMED("$1::text[]", "$2::text[]", "true");

/* Steps in task and position order, so that their ids increase as a
 * single submit's do; a delayed root step's parents_remaining and run_at
 * come computed (TK__DELAYED, the start time). Worker queues ($9) only in
 * a chunk that has a worker step, as CREATE_SQL_FOR. */
#define STEPS_SQL_FOR(col, val, arr, name)                                                     \
    "INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"          \
    " parents_remaining, run_at" col ") SELECT v.task_id, v.idx, v.name, " Q(TK__STEP_PENDING) \
    ", v.max_attempts, v.retryable, v.backoff, v.parents, v.run_at" val " FROM unnest("        \
    "$1::bigint[], $2::int[], $3::text[], $4::int[], $5::boolean[], $6::text[], $7::int[],"   \
    " $8::bigint[]" arr ") AS v(task_id, idx, name, max_attempts, retryable, backoff, parents," \
    " run_at" name ")"
static const char STEPS_SQL[] = STEPS_SQL_FOR("", "", "", "");
/* $9 worker queues, $10 queues, $11 priorities (12). */
static const char STEPS_QUEUE_SQL[] =
    STEPS_SQL_FOR(", worker_queue, queue, priority", ", v.wq, v.queue, v.priority",
                  ", $9::text[], $10::text[], $11::int[]", ", wq, queue, priority");

static const char CREATED_SQL[] =
    "INSERT INTO transitions (task_id, to_state, at, reason)"
    " SELECT id, " Q(TK__TASK_PENDING) ", $1::bigint, $2::text FROM unnest($3::bigint[]) AS v(id)";

static const char BATCH_SQL[] =
    "INSERT INTO batch_steps (step_id, max_in_call_retries, max_item_attempts,"
    " fail_if_any_gave_up) SELECT s.id, v.mic, v.mia, v.fail FROM unnest($1::bigint[],"
    " $2::int[], $3::int[], $4::int[], $5::boolean[]) AS v(task_id, idx, mic, mia, fail)"
    " JOIN steps s ON s.task_id = v.task_id AND s.idx = v.idx";

static const char ITEMS_SQL[] =
    "INSERT INTO items (step_id, seq, key, data) SELECT s.id, v.seq, v.key, v.data"
    " FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[], $5::text[])"
    " AS v(task_id, idx, seq, key, data) JOIN steps s ON s.task_id = v.task_id AND s.idx = v.idx";

/* Tasks per chunk of statements: large enough that a round trip and a
 * plan are little beside the rows, small enough that the arrays stay a
 * few MB. */
#define CHUNK 5000

/* The arrays of the tasks t[0..n) that are to be created (existed[i] 0),
 * into m[]; *created how many, *batch whether any has a batch step,
 * *queue a worker step. */
static int chunk_arrays(const tk__new_task *t, int n, const int64_t *ids, const int *existed,
                        tk__buf *m, const char **v, int *created, int *batch, int *queue,
                        int *plain) {
  arrays_open(m);
  *created = *batch = *queue = 0;
  for (int i = 0; i < n; i++) {
    if (existed[i]) continue;
    (*created)++;
    task_arrays(&t[i], ids[i], m, batch, queue, plain);
  }
  return arrays_close(m, v);
}

/* Queue the deadlines of the tasks of a chunk that are created and have
 * one (none: nothing queued). */
static int queue_deadlines(tk__pg_pipe *p, const tk__new_task *t, int n, const int64_t *ids,
                           const int *existed, tk_err *err) {
  tk__buf b[2] = {{0}};
  tk__pg_array_open(&b[0]);
  tk__pg_array_open(&b[1]);
  int any = 0;
  for (int i = 0; i < n; i++) {
    if (existed[i] || t[i].deadline_at == 0) continue;
    any = 1;
    tk__pg_array_i64(&b[0], ids[i]);
    tk__pg_array_i64(&b[1], t[i].deadline_at);
  }
  const char *v[2] = {tk__pg_array_close(&b[0]), tk__pg_array_close(&b[1])};
  int rc = v[0] && v[1] ? 0 : tk__pg_oom(err, "submit tasks");
  if (rc == 0 && any) tk__pg_pipe_stmt(p, -1, DEADLINES_SQL, 2, v);
  tk__buf_free(&b[0]);
  tk__buf_free(&b[1]);
  return rc;
}

/* Queue the statements of one chunk (arrays in m[], which must live until
 * the pipeline runs). */
static int queue_chunk(tk__pg_pipe *p, const tk__new_task *t, int n, const int64_t *ids,
                       const int *existed, tk__buf *m, tk_err *err) {
  const char *v[M_COUNT];
  int created, batch, queue, plain = 0;
  if (!chunk_arrays(t, n, ids, existed, m, v, &created, &batch, &queue, &plain))
    return tk__pg_oom(err, "submit tasks");
  if (plain) p->pg->no_lanes = 0; /* this connection's claims look at the lanes */
  if (created == 0) return 0;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, t[0].now);
  for (int k = M_ID; k <= M_NSTEPS; k++) tk__pg_arg_text(&a, v[k]);
  if (queue) tk__pg_arg_text(&a, v[M_PRIO]);
  tk__pg_pipe_stmt(p, -1, queue ? TASKS_PRIORITY_SQL : TASKS_SQL, a.n, a.v);
  const char *steps[M_RUNAT - M_STASK + 4];
  memcpy(steps, v + M_STASK, (M_RUNAT - M_STASK + 1) * sizeof *steps);
  steps[M_RUNAT - M_STASK + 1] = v[M_QUEUE];
  steps[M_RUNAT - M_STASK + 2] = v[M_SQUEUE];
  steps[M_RUNAT - M_STASK + 3] = v[M_SPRIO];
  tk__pg_pipe_stmt(p, -1, queue ? STEPS_QUEUE_SQL : STEPS_SQL,
                   M_RUNAT - M_STASK + 1 + (queue ? 3 : 0), steps);
  if (queue) tk__pg_pipe_stmt(p, -1, QUEUES_NAMED_SQL, 2, v + M_QUEUE);
  a.n = 0;
  tk__pg_arg_i64(&a, t[0].now);
  tk__pg_arg_text(&a, TK__REASON_CREATED);
  tk__pg_arg_text(&a, v[M_ID]);
  tk__pg_pipe_stmt(p, -1, CREATED_SQL, a.n, a.v);
  if (batch) {
    tk__pg_pipe_stmt(p, -1, BATCH_SQL, M_FAIL - M_BTASK + 1, v + M_BTASK);
    tk__pg_pipe_stmt(p, -1, ITEMS_SQL, M_DATA - M_ITASK + 1, v + M_ITASK);
  }
  return queue_deadlines(p, t, n, ids, existed, err);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The first round trip: BEGIN, and each task's id into task_ids[] (with
 * existed[]); drawn ids go to the new tasks in order. */
static int ids_read(tk__pg_pipe *p, const tk__new_task *t, int n, int64_t *task_ids,
                    int *existed, tk_err *err) {
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int i = 0; i < n; i++) tk__pg_array_text(&b, t[i].identity);
  const char *v = tk__pg_array_close(&b);
  if (v == NULL) {
    tk__buf_free(&b);
    return tk__pg_oom(err, "submit tasks");
  }
  tk__pg_begin(p);
  int slot = tk__pg_pipe_stmt(p, -1, IDS_SQL, 1, &v);
  int rc = tk__pg_pipe_run(p, "submit tasks", err);
  tk__buf_free(&b);
  if (rc) return rc;
  PGresult *r = tk__pg_result(p, slot);
  int64_t *drawn = malloc(((size_t)n + 1) * sizeof *drawn);
  if (drawn == NULL) return tk__pg_oom(err, "submit tasks");
  int ndrawn = 0;
  for (int i = 0; i < n; i++) existed[i] = -1;
  for (int row = 0; r && row < PQntuples(r); row++) {
    int i = (int)tk__pg_i64(r, row, 0) - 1;
    if (i < 0 || i >= n) continue;
    existed[i] = !PQgetisnull(r, row, 1);
    if (existed[i]) task_ids[i] = tk__pg_i64(r, row, 1);
    else drawn[ndrawn++] = tk__pg_i64(r, row, 2);
  }
  qsort(drawn, (size_t)ndrawn, sizeof *drawn, cmp_i64);
  for (int i = 0, k = 0; i < n; i++)
    if (existed[i] == 0) task_ids[i] = k < ndrawn ? drawn[k++] : 0;
  free(drawn);
  for (int i = 0; i < n; i++)
    if (existed[i] < 0 || task_ids[i] <= 0)
      return tk_err_set(err, TK_ESTORE, "postgres: submit tasks: no id for task %d of %d", i + 1,
                        n);
  tk__pg_pipe_reset(p);
  return 0;
}

/* One try of the whole call; *conflict when another session took one of
 * the identities meanwhile (then nothing was stored). */
static int submit_once(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, int *conflict, tk_err *err) {
  int chunks = (n + CHUNK - 1) / CHUNK;
  tk__buf *m = calloc((size_t)chunks * M_COUNT, sizeof *m);
  if (m == NULL) return tk__pg_oom(err, "submit tasks");
  *conflict = 0;
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "submit tasks", err);
  if (rc == 0) rc = ids_read(&p, t, n, task_ids, existed, err);
  int any = 0;
  for (int i = 0; rc == 0 && i < n; i++) any |= !existed[i];
  for (int c = 0; rc == 0 && c < chunks; c++) {
    int first = c * CHUNK, len = n - first < CHUNK ? n - first : CHUNK;
    rc = queue_chunk(&p, t + first, len, task_ids + first, existed + first, m + c * M_COUNT, err);
  }
  if (rc == 0) {
    if (any) tk__pg_notify(&p);
    tk__pg_commit(&p);
    rc = tk__pg_pipe_run(&p, "submit tasks", err);
    *conflict = rc == TK_ESTORE && strcmp(p.sqlstate, "23505") == 0;
  }
  tk__pg_pipe_end(&p);
  for (int c = 0; c < chunks; c++) arrays_free(m + c * M_COUNT);
  free(m);
  return rc;
}

int tk__pg_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err) {
  int conflict, rc;
  for (int tries = 0;; tries++) {
    rc = submit_once(s, t, n, task_ids, existed, &conflict, err);
    if (rc == 0 || !conflict || tries == 3) return rc;
  }
}
