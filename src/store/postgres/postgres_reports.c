/* Reads for people and handlers: one task's report (`tasker show`), the
 * store-wide status, and the handler inputs of claimed steps. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#define Q TK__PG_Q

static const char REPORT_TASK_SQL[] =
    "SELECT t.id, t.state, t.identity, t.created_at, t.updated_at, t.finished_at,"
    " t.steps_total, t.steps_done, t.steps_error, t.context, tp.id, tp.namespace, tp.name,"
    " tp.version, tp.description, tp.definition, tp.created_at, t.priority,"
    " t.deadline_at FROM tasks t JOIN templates tp ON tp.id = t.template_id"
    " WHERE t.id = $1::bigint";

/* The columns of a step record (fill_step), of the steps s. */
#define STEP_COLUMNS                                                                        \
  "s.id, s.idx, s.name, s.state, s.attempts, s.max_attempts, s.retryable,"                 \
  " s.parents_remaining, s.backoff, s.run_at, s.lease_expires_at, s.last_delay_ms,"        \
  " s.lease_owner, s.last_error, s.results"

/* The template's steps in template order (a map's instances are not
 * among them), a batch step with the counts of its items, a map step with
 * those of its instances (by state: done, failed; one range of
 * steps_instances for each step). */
static const char REPORT_STEPS_SQL[] =
    "SELECT " STEP_COLUMNS ", b.step_id IS NOT NULL,"
    " COALESCE(ic.pending, 0), COALESCE(ic.acked, 0), COALESCE(ic.gave_up, 0),"
    " mc.total, mc.done, mc.failed, -1, NULL, mc.waiting"
    " FROM steps s LEFT JOIN batch_steps b ON b.step_id = s.id"
    " CROSS JOIN LATERAL (SELECT count(*) AS total,"
    " count(*) FILTER (WHERE i.state IN (" Q(TK__STEP_COMPLETE) ", " Q(TK__STEP_RESOLVED) "))"
    " AS done, count(*) FILTER (WHERE i.state = " Q(TK__STEP_ERROR) ") AS failed,"
    " count(*) FILTER (WHERE i.state IN (" Q(TK__STEP_PENDING) ", " Q(TK__STEP_IN_PROGRESS)
    ", " Q(TK__STEP_WAITING_FOR_RETRY) ")) AS waiting"
    " FROM steps i WHERE i.task_id = s.task_id AND i.map_idx = s.idx) mc"
    " LEFT JOIN LATERAL (SELECT"
    " count(*) FILTER (WHERE i.state = " Q(TK__ITEM_PENDING) ") AS pending,"
    " count(*) FILTER (WHERE i.state = " Q(TK__ITEM_ACKED) ") AS acked,"
    " count(*) FILTER (WHERE i.state = " Q(TK__ITEM_GAVE_UP) ") AS gave_up"
    " FROM items i WHERE i.step_id = b.step_id) ic ON b.step_id IS NOT NULL"
    " WHERE s.task_id = $1::bigint AND s.map_idx IS NULL ORDER BY s.idx";

/* Instances of map step $2 of task $1 after element $3, at most $4, in
 * element order (one range of steps_instances), as step records; and how
 * many the map has. */
static const char INSTANCES_SQL[] =
    "SELECT " STEP_COLUMNS ", false, 0, 0, 0, NULL, NULL, NULL, s.item_index, s.item"
    " FROM steps s WHERE s.task_id = $1::bigint AND s.map_idx = $2::int"
    " AND s.item_index > $3::int ORDER BY s.item_index LIMIT $4::int";
static const char INSTANCES_TOTAL_SQL[] =
    "SELECT count(*) FROM steps WHERE task_id = $1::bigint AND map_idx = $2::int";

static const char REPORT_ATTEMPTS_SQL[] =
    "SELECT a.step_id, a.attempt, a.owner, a.started_at, a.finished_at, a.delay_ms,"
    " a.next_run_at, a.outcome, a.error, a.delay_source, a.due_at"
    " FROM steps s JOIN attempts a ON a.step_id = s.id WHERE s.task_id = $1::bigint"
    " AND s.map_idx IS NULL ORDER BY a.id";

/* The task's history: its own moves and its template steps' (a map's
 * instances are not among them), in the order of the transitions ids each
 * drew when written. The moves view (0012_moves_view.sql) holds the
 * transitions rows and the moves that attempt rows and the tasks row
 * record instead; each of its parts is read by task_id through keys, the
 * instances left out where their steps are read. */
static const char REPORT_TRANSITIONS_SQL[] =
    "SELECT at, step_id, from_state, to_state, reason, attempt, step FROM moves"
    " WHERE task_id = $1::bigint AND map_idx IS NULL ORDER BY seq";

/* The first TK__GAVE_UP_SHOWN items that gave up, per batch step. */
#define STR_(x) #x
#define STR(x) STR_(x)
static const char REPORT_GAVE_UP_SQL[] =
    "SELECT g.step_id, g.key, g.attempts, g.last_error FROM steps s"
    " JOIN batch_steps b ON b.step_id = s.id"
    " CROSS JOIN LATERAL (SELECT i.step_id, i.key, i.attempts, i.last_error, i.seq FROM items i"
    " WHERE i.step_id = s.id AND i.state = " Q(TK__ITEM_GAVE_UP)
    " ORDER BY i.seq LIMIT " STR(TK__GAVE_UP_SHOWN) ") g"
    " WHERE s.task_id = $1::bigint ORDER BY s.idx, g.seq";

/* Fill the task and its template from row 0 of r. */
static void fill_task(tk__task_report *out, const PGresult *r, int *oom) {
  out->id = tk__pg_i64(r, 0, 0);
  tk__pg_copy(out->state, sizeof out->state, r, 0, 1);
  out->identity = tk__dup(tk__pg_text(r, 0, 2), oom);
  out->created_at = tk__pg_i64(r, 0, 3);
  out->updated_at = tk__pg_i64(r, 0, 4);
  out->finished_at = tk__pg_i64(r, 0, 5);
  out->steps_total = (int)tk__pg_i64(r, 0, 6);
  out->steps_done = (int)tk__pg_i64(r, 0, 7);
  out->steps_error = (int)tk__pg_i64(r, 0, 8);
  out->context = tk__dup(tk__pg_text(r, 0, 9), oom);
  tk__template_rec *tp = &out->template_;
  tp->id = tk__pg_i64(r, 0, 10);
  tp->namespace_ = tk__dup(tk__pg_text(r, 0, 11), oom);
  tp->name = tk__dup(tk__pg_text(r, 0, 12), oom);
  tp->version = tk__dup(tk__pg_text(r, 0, 13), oom);
  tp->description = tk__dup(tk__pg_text(r, 0, 14), oom);
  tp->definition = tk__dup(tk__pg_text(r, 0, 15), oom);
  tp->created_at = tk__pg_i64(r, 0, 16);
  out->priority = (int)tk__pg_i64(r, 0, 17);
  out->deadline_at = tk__pg_i64(r, 0, 18);
}

/* Room for rows elements of size in *arr; 0 when memory ran out. */
static int rows_room(void **arr, int rows, size_t size) {
  int cap = 0;
  *arr = NULL;
  return rows == 0 || tk__grow(arr, &cap, rows, size) == 0;
}

/* Row i of r (STEP_COLUMNS, then batch and map counts, item) into s. */
static void fill_step(tk__step_rec *s, const PGresult *r, int i, int *oom) {
  s->id = tk__pg_i64(r, i, 0);
  s->idx = (int)tk__pg_i64(r, i, 1);
  s->name = tk__dup(tk__pg_text(r, i, 2), oom);
  tk__pg_copy(s->state, sizeof s->state, r, i, 3);
  s->attempts = (int)tk__pg_i64(r, i, 4);
  s->max_attempts = (int)tk__pg_i64(r, i, 5);
  s->retryable = tk__pg_bool(r, i, 6);
  s->parents_remaining = (int)tk__pg_i64(r, i, 7);
  s->backoff = tk__dup(tk__pg_text(r, i, 8), oom);
  s->run_at = tk__pg_i64(r, i, 9);
  s->lease_expires_at = tk__pg_i64(r, i, 10);
  s->last_delay_ms = tk__pg_i64(r, i, 11);
  s->lease_owner = tk__dup(tk__pg_text(r, i, 12), oom);
  s->last_error = tk__dup(tk__pg_text(r, i, 13), oom);
  s->results = tk__dup(tk__pg_text(r, i, 14), oom);
  s->batch = tk__pg_bool(r, i, 15);
  s->items_pending = tk__pg_i64(r, i, 16);
  s->items_acked = tk__pg_i64(r, i, 17);
  s->items_gave_up = tk__pg_i64(r, i, 18);
  /* A map step's instances, once it has any (DESIGN §17). */
  int64_t total = tk__pg_i64(r, i, 19);
  s->instances_total = s->instances_done = s->instances_failed = s->instances_waiting =
      TK__NONE;
  if (total != TK__NONE && total > 0) {
    s->instances_total = total;
    s->instances_done = tk__pg_i64(r, i, 20);
    s->instances_failed = tk__pg_i64(r, i, 21);
    s->instances_waiting = tk__pg_i64(r, i, 24);
  }
  /* A mapped step waits for its unfinished instances (the store's
   * contract, as SQLite's column holds it); here its countdown has a
   * table of its own (0008_map_countdowns.sql) and the row says 0. */
  if (strcmp(s->state, TK__STEP_MAPPED) == 0 && s->instances_waiting != TK__NONE)
    s->parents_remaining = (int)s->instances_waiting;
  s->item_index = (int)tk__pg_i64(r, i, 22);
  s->item = tk__dup(tk__pg_text(r, i, 23), oom);
}

static void fill_steps(tk__task_report *out, const PGresult *r, int *oom) {
  int rows = PQntuples(r);
  if (!rows_room((void **)&out->steps, rows, sizeof *out->steps)) {
    *oom = 1;
    return;
  }
  for (int i = 0; i < rows; i++) {
    out->nsteps = i + 1;
    fill_step(&out->steps[i], r, i, oom);
  }
}

static void fill_attempts(tk__task_report *out, const PGresult *r, int *oom) {
  int rows = PQntuples(r);
  if (!rows_room((void **)&out->attempts, rows, sizeof *out->attempts)) {
    *oom = 1;
    return;
  }
  for (int i = 0; i < rows; i++) {
    tk__attempt_rec *a = &out->attempts[i];
    out->nattempts = i + 1;
    a->step_id = tk__pg_i64(r, i, 0);
    a->attempt = (int)tk__pg_i64(r, i, 1);
    a->owner = tk__dup(tk__pg_text(r, i, 2), oom);
    a->started_at = tk__pg_i64(r, i, 3);
    a->finished_at = tk__pg_i64(r, i, 4);
    a->delay_ms = tk__pg_i64(r, i, 5);
    a->next_run_at = tk__pg_i64(r, i, 6);
    a->outcome = tk__dup(tk__pg_text(r, i, 7), oom);
    a->error = tk__dup(tk__pg_text(r, i, 8), oom);
    a->delay_source = tk__dup(tk__pg_text(r, i, 9), oom);
    a->due_at = tk__pg_i64(r, i, 10);
  }
}

static void fill_transitions(tk__task_report *out, const PGresult *r, int *oom) {
  int rows = PQntuples(r);
  if (!rows_room((void **)&out->transitions, rows, sizeof *out->transitions)) {
    *oom = 1;
    return;
  }
  for (int i = 0; i < rows; i++) {
    tk__transition_rec *t = &out->transitions[i];
    out->ntransitions = i + 1;
    t->at = tk__pg_i64(r, i, 0);
    t->step_id = tk__pg_i64(r, i, 1);
    t->from = tk__dup(tk__pg_text(r, i, 2), oom);
    t->to = tk__dup(tk__pg_text(r, i, 3), oom);
    t->reason = tk__dup(tk__pg_text(r, i, 4), oom);
    t->attempt = tk__pg_i64(r, i, 5);
    t->step = tk__dup(tk__pg_text(r, i, 6), oom);
  }
}

static void fill_gave_up(tk__task_report *out, const PGresult *r, int *oom) {
  int rows = PQntuples(r);
  if (!rows_room((void **)&out->gave_up, rows, sizeof *out->gave_up)) {
    *oom = 1;
    return;
  }
  for (int i = 0; i < rows; i++) {
    tk__gave_up_rec *g = &out->gave_up[i];
    out->ngave_up = i + 1;
    g->step_id = tk__pg_i64(r, i, 0);
    g->key = tk__dup(tk__pg_text(r, i, 1), oom);
    g->attempts = (int)tk__pg_i64(r, i, 2);
    g->last_error = tk__dup(tk__pg_text(r, i, 3), oom);
  }
}

/* The begin of a read that sees one moment: REPEATABLE READ gives every
 * statement of the report the same snapshot. */
static int begin_snapshot(tk__pg_pipe *p) {
  tk__pg_begin_snapshot(p);
  /* Counting whole tables is what sequential scans are for (the session
   * has them off: postgres_store.c). */
  return tk__pg_pipe_stmt(p, PG_SEQSCAN_ON, "SET LOCAL enable_seqscan = on", 0, NULL);
}

int tk__pg_task_report(tk_store *s, int64_t task_id, tk__task_report *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "task report", err);
  if (rc) return rc;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  begin_snapshot(&p);
  int task = tk__pg_pipe_stmt(&p, PG_REPORT_TASK, REPORT_TASK_SQL, a.n, a.v);
  int steps = tk__pg_pipe_stmt(&p, PG_REPORT_STEPS, REPORT_STEPS_SQL, a.n, a.v);
  int attempts = tk__pg_pipe_stmt(&p, PG_REPORT_ATTEMPTS, REPORT_ATTEMPTS_SQL, a.n, a.v);
  int trans = tk__pg_pipe_stmt(&p, PG_REPORT_TRANSITIONS, REPORT_TRANSITIONS_SQL, a.n, a.v);
  int gave_up = tk__pg_pipe_stmt(&p, PG_REPORT_GAVE_UP, REPORT_GAVE_UP_SQL, a.n, a.v);
  tk__pg_commit(&p);
  if ((rc = tk__pg_pipe_run(&p, "task report", err)) == 0) {
    int oom = 0;
    if (PQntuples(tk__pg_result(&p, task)) == 0) {
      rc = tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
    } else {
      fill_task(out, tk__pg_result(&p, task), &oom);
      fill_steps(out, tk__pg_result(&p, steps), &oom);
      fill_attempts(out, tk__pg_result(&p, attempts), &oom);
      fill_transitions(out, tk__pg_result(&p, trans), &oom);
      fill_gave_up(out, tk__pg_result(&p, gave_up), &oom);
      if (oom) rc = tk__pg_oom(err, "task report");
    }
  }
  tk__pg_pipe_end(&p);
  if (rc) {
    tk__task_report_free(out);
    memset(out, 0, sizeof *out);
  }
  return rc;
}

/* Rows (name, count) of r into at most max counts. */
static int fill_counts(tk__state_count *c, int max, const PGresult *r) {
  int n = 0;
  for (int i = 0; i < PQntuples(r) && n < max; i++, n++) {
    tk__pg_copy(c[n].state, sizeof c[n].state, r, i, 0);
    c[n].n = tk__pg_i64(r, i, 1);
  }
  return n;
}

int tk__pg_status(tk_store *s, int64_t now, tk__status_report *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "status", err);
  if (rc) return rc;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  begin_snapshot(&p);
  int tasks = tk__pg_pipe_stmt(&p, PG_STATUS_TASKS,
                               "SELECT state, count(*) FROM tasks GROUP BY state ORDER BY state",
                               0, NULL);
  int steps = tk__pg_pipe_stmt(&p, PG_STATUS_STEPS,
                               "SELECT state, count(*) FROM steps GROUP BY state ORDER BY state",
                               0, NULL);
  int ready = tk__pg_pipe_stmt(
      &p, PG_STATUS_READY,
      "SELECT (SELECT count(*) FROM ready WHERE kind = 2 AND run_at <= $1::bigint)"
      " + (SELECT count(*) FROM ready WHERE kind = 0 AND run_at <= $1)",
      a.n, a.v);
  int counters = tk__pg_pipe_stmt(&p, PG_STATUS_COUNTERS,
                                  "SELECT name, value FROM counters ORDER BY name", 0, NULL);
  tk__pg_commit(&p);
  if ((rc = tk__pg_pipe_run(&p, "status", err)) == 0) {
    out->ntasks = fill_counts(out->tasks, TK__STATUS_STATES, tk__pg_result(&p, tasks));
    out->nsteps = fill_counts(out->steps, TK__STATUS_STATES, tk__pg_result(&p, steps));
    out->ready_now = tk__pg_i64(tk__pg_result(&p, ready), 0, 0);
    PGresult *r = tk__pg_result(&p, counters);
    for (int i = 0; i < PQntuples(r) && out->ncounters < TK__STATUS_COUNTERS; i++) {
      tk__pg_copy(out->counters[out->ncounters].name, sizeof out->counters[0].name, r, i, 0);
      out->counters[out->ncounters++].value = tk__pg_i64(r, i, 1);
    }
  }
  tk__pg_pipe_end(&p);
  return rc;
}

/* A step id and where it goes in the caller's arrays, for the lookup of
 * each row's step. */
typedef struct wanted {
  int64_t id;
  int i;
} wanted;

static int by_id(const void *a, const void *b) {
  const wanted *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

/* One row per (step, parent) and one for a step with none: each row adds
 * its parent's results to its step's input (tk__input_add). An instance
 * of a map step has its map's parents (DESIGN §17), and its element. */
static const char INPUTS_SQL[] =
    "SELECT s.id, t.context, p.name, p.results, s.item, s.item_index FROM steps s"
    " JOIN tasks t ON t.id = s.task_id"
    " LEFT JOIN template_edges e ON e.template_id = t.template_id"
    " AND e.child_idx = COALESCE(s.map_idx, s.idx)"
    " LEFT JOIN steps p ON p.task_id = s.task_id AND p.idx = e.parent_idx"
    " WHERE s.id = ANY ($1::bigint[]) ORDER BY s.id, e.parent_idx";

/* An instance's element and its position into its input (once). */
static int add_item(json_t *input, const PGresult *r, int row) {
  if (PQgetisnull(r, row, 5) || json_object_get(input, "item_index") != NULL) return 0;
  json_t *item = json_loads(tk__pg_text(r, row, 4), JSON_DECODE_ANY, NULL);
  if (item == NULL) item = json_null();
  if (json_object_set_new(input, "item", item) != 0) return -1;
  return json_object_set_new(input, "item_index", json_integer(tk__pg_i64(r, row, 5)));
}

int tk__pg_inputs(tk_store *s, const int64_t *step_ids, int n, json_t **out, tk_err *err) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (n <= 0) return 0;
  wanted *w = malloc((size_t)n * sizeof *w);
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int i = 0; i < n; i++) tk__pg_array_i64(&b, step_ids[i]);
  const char *ids = tk__pg_array_close(&b);
  if (w == NULL || ids == NULL) {
    free(w);
    tk__buf_free(&b);
    return tk__pg_oom(err, "step inputs");
  }
  for (int i = 0; i < n; i++) w[i] = (wanted){step_ids[i], i};
  qsort(w, (size_t)n, sizeof *w, by_id);
  tk__pg_args a = {0};
  tk__pg_arg_text(&a, ids);
  PGresult *r;
  int rc = tk__pg_query(s, PG_INPUTS, INPUTS_SQL, &a, "step inputs", &r, err);
  tk__buf_free(&b);
  for (int row = 0; rc == 0 && row < PQntuples(r); row++) {
    wanted key = {tk__pg_i64(r, row, 0), 0};
    wanted *hit = bsearch(&key, w, (size_t)n, sizeof *w, by_id);
    /* A step asked for twice gets its rows twice. */
    while (hit > w && hit[-1].id == key.id) hit--;
    for (; hit && hit < w + n && hit->id == key.id && rc == 0; hit++)
      if (tk__input_add(&out[hit->i], tk__pg_text(r, row, 1), tk__pg_text(r, row, 2),
                        tk__pg_text(r, row, 3)) != 0 ||
          add_item(out[hit->i], r, row) != 0)
        rc = tk_err_set(err, TK_ENOMEM,
                        "postgres: step inputs: cannot build the input of step %lld",
                        (long long)key.id);
  }
  for (int i = 0; rc == 0 && i < n; i++)
    if (out[i] == NULL)
      rc = tk_err_set(err, TK_ENOENT, "no step with id %lld", (long long)step_ids[i]);
  if (rc)
    for (int i = 0; i < n; i++) {
      json_decref(out[i]);
      out[i] = NULL;
    }
  PQclear(r);
  free(w);
  return rc;
}

int tk__pg_instance_list(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                         tk__step_rec **out, int *n, int64_t *total, tk_err *err) {
  *out = NULL;
  *n = 0;
  *total = 0;
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "instances", err);
  if (rc) return rc;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, task_id);
  tk__pg_arg_i64(&a, map_idx);
  tk__pg_arg_i64(&a, after);
  tk__pg_arg_i64(&a, limit > 0 ? limit : 0);
  tk__pg_begin_snapshot(&p);
  int rows_slot = tk__pg_pipe_stmt(&p, PG_INSTANCE_LIST, INSTANCES_SQL, a.n, a.v);
  int total_slot = tk__pg_pipe_stmt(&p, PG_REPORT_INSTANCES, INSTANCES_TOTAL_SQL, 2, a.v);
  tk__pg_commit(&p);
  if ((rc = tk__pg_pipe_run(&p, "instances", err)) == 0) {
    PGresult *r = tk__pg_result(&p, rows_slot);
    int rows = PQntuples(r), oom = 0;
    *total = tk__pg_i64(tk__pg_result(&p, total_slot), 0, 0);
    if (!rows_room((void **)out, rows, sizeof **out)) oom = 1;
    for (int i = 0; !oom && i < rows; i++) {
      *n = i + 1;
      fill_step(&(*out)[i], r, i, &oom);
    }
    if (oom) {
      tk__step_recs_free(*out, *n);
      *out = NULL;
      *n = 0;
      rc = tk__pg_oom(err, "instances");
    }
  }
  tk__pg_pipe_end(&p);
  return rc;
}
