/* The PostgreSQL backend's schedules (store.h: schedule_put,
 * schedule_list, schedule_remove, schedule_fire). Not on the engine's hot
 * path: one-off statements. Concurrency: a put locks the table against
 * other puts (SHARE ROW EXCLUSIVE), so two orchestrators syncing their
 * configurations queue; a fire's compare-and-set locks the schedule's row,
 * and a second orchestrator's UPDATE then re-reads it after the first
 * commits (READ COMMITTED) and finds the cursor moved. */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "postgres: what: message" unless a step already said it. */
static int run(tk__pg_pipe *p, const char *what, tk_err *err) {
  return tk__pg_pipe_run(p, what, err);
}

int tk__pg_schedule_put(tk_store *s, const tk__schedule_rec *rows, int n,
                        const char *replace_source, tk_err *err) {
  tk__pg_pipe p;
  tk__buf names = {0};
  tk__pg_array_open(&names);
  for (int i = 0; i < n; i++) tk__pg_array_text(&names, rows[i].name);
  const char *names_v = tk__pg_array_close(&names);
  if (names_v == NULL) {
    tk__buf_free(&names);
    return tk__pg_oom(err, "put schedules");
  }
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "put schedules", err);
  if (rc == 0) {
    tk__pg_begin(&p);
    tk__pg_pipe_stmt(&p, -1, "LOCK TABLE schedules IN SHARE ROW EXCLUSIVE MODE", 0, NULL);
    const char *v1[] = {names_v};
    int taken = tk__pg_pipe_stmt(&p, -1,
                                 "SELECT name, source FROM schedules WHERE name = ANY($1::text[])",
                                 1, v1);
    rc = run(&p, "put schedules", err);
    PGresult *r = rc == 0 ? tk__pg_result(&p, taken) : NULL;
    for (int i = 0; r && rc == 0 && i < PQntuples(r); i++) {
      const char *src = tk__pg_text(r, i, 1);
      if (replace_source == NULL || strcmp(src, replace_source) != 0)
        rc = tk_err_set(err, TK_EEXIST, "schedule \"%s\" exists already (%s)",
                        tk__pg_text(r, i, 0),
                        strcmp(src, "config") == 0 ? "defined in the configuration"
                                                   : "added with `tasker schedule add`");
    }
    if (rc == 0) {
      tk__pg_pipe_reset(&p);
      for (int i = 0; i < n; i++) {
        const tk__schedule_rec *w = &rows[i];
        tk__pg_args a = {0};
        tk__pg_arg_text(&a, w->name);
        tk__pg_arg_text(&a, w->cron);
        tk__pg_arg_text(&a, w->zone);
        tk__pg_arg_text(&a, w->template_name);
        tk__pg_arg_text(&a, w->version);
        tk__pg_arg_text(&a, w->context);
        tk__pg_arg_text(&a, w->missed);
        tk__pg_arg_text(&a, w->source);
        tk__pg_arg_i64(&a, w->created_at);
        tk__pg_arg_i64(&a, w->updated_at);
        tk__pg_arg_i64(&a, w->cursor);
        /* An update keeps the row's progress: cursor and last fired slot. */
        tk__pg_pipe_stmt(&p, -1,
                         "INSERT INTO schedules (name, cron, zone, template, version, context,"
                         " missed, source, created_at, updated_at, cursor) VALUES ($1::text,"
                         " $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text,"
                         " $9::bigint, $10::bigint, $11::bigint) ON CONFLICT (name) DO UPDATE"
                         " SET cron = EXCLUDED.cron, zone = EXCLUDED.zone, template ="
                         " EXCLUDED.template, version = EXCLUDED.version, context ="
                         " EXCLUDED.context, missed = EXCLUDED.missed, updated_at ="
                         " EXCLUDED.updated_at",
                         a.n, a.v);
      }
      if (replace_source) {
        const char *v2[] = {replace_source, names_v};
        tk__pg_pipe_stmt(&p, -1,
                         "DELETE FROM schedules WHERE source = $1::text"
                         " AND NOT (name = ANY($2::text[]))",
                         2, v2);
      }
      tk__pg_notify(&p);
      tk__pg_commit(&p);
      rc = run(&p, "put schedules", err);
    }
  }
  tk__pg_pipe_end(&p);
  tk__buf_free(&names);
  return rc;
}

int tk__pg_schedule_list(tk_store *s, const char *name, tk__schedule_rec **out, int *n,
                         tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "list schedules", err);
  if (rc == 0) {
    const char *v[] = {name};
    int slot = tk__pg_pipe_stmt(&p, -1,
                                "SELECT name, cron, zone, template, version, context, missed,"
                                " source, created_at, updated_at, cursor, last_fired,"
                                " last_task_id FROM schedules WHERE $1::text IS NULL OR name ="
                                " $1::text ORDER BY name COLLATE \"C\"",
                                1, v);
    rc = run(&p, "list schedules", err);
    PGresult *r = rc == 0 ? tk__pg_result(&p, slot) : NULL;
    int rows = r ? PQntuples(r) : 0;
    tk__schedule_rec *recs = rows ? calloc((size_t)rows, sizeof *recs) : NULL;
    int oom = rows && recs == NULL;
    for (int i = 0; !oom && i < rows; i++) {
      tk__schedule_rec *w = &recs[i];
      w->name = tk__dup(tk__pg_text(r, i, 0), &oom);
      w->cron = tk__dup(tk__pg_text(r, i, 1), &oom);
      w->zone = tk__dup(tk__pg_text(r, i, 2), &oom);
      w->template_name = tk__dup(tk__pg_text(r, i, 3), &oom);
      w->version = tk__dup(tk__pg_text(r, i, 4), &oom);
      w->context = tk__dup(tk__pg_text(r, i, 5), &oom);
      tk__pg_copy(w->missed, sizeof w->missed, r, i, 6);
      tk__pg_copy(w->source, sizeof w->source, r, i, 7);
      w->created_at = tk__pg_i64(r, i, 8);
      w->updated_at = tk__pg_i64(r, i, 9);
      w->cursor = tk__pg_i64(r, i, 10);
      w->last_fired = tk__pg_i64(r, i, 11);
      w->last_task_id = tk__pg_i64(r, i, 12);
    }
    if (rc == 0 && oom) rc = tk__pg_oom(err, "list schedules");
    if (rc == 0 && name != NULL && rows == 0)
      rc = tk_err_set(err, TK_ENOENT, "schedule \"%s\": no such schedule", name);
    if (rc == 0) {
      *out = recs;
      *n = rows;
    } else {
      tk__schedule_recs_free(recs, rows);
    }
  }
  tk__pg_pipe_end(&p);
  return rc;
}

int tk__pg_schedule_remove(tk_store *s, const char *name, tk_err *err) {
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "remove schedule", err);
  if (rc == 0) {
    const char *v[] = {name};
    tk__pg_begin(&p);
    int slot = tk__pg_pipe_stmt(&p, -1, "DELETE FROM schedules WHERE name = $1::text RETURNING 1",
                                1, v);
    tk__pg_notify(&p);
    tk__pg_commit(&p);
    rc = run(&p, "remove schedule", err);
    if (rc == 0 && PQntuples(tk__pg_result(&p, slot)) == 0)
      rc = tk_err_set(err, TK_ENOENT, "schedule \"%s\": no such schedule", name);
  }
  tk__pg_pipe_end(&p);
  return rc;
}

/* Queue the compare-and-set of step's cursor (its slot returned). */
static int queue_cas(tk__pg_pipe *p, const tk__schedule_step *step, tk__pg_args *a) {
  a->n = 0;
  tk__pg_arg_text(a, step->name);
  tk__pg_arg_i64(a, step->expected);
  tk__pg_arg_i64(a, step->cursor);
  return tk__pg_pipe_stmt(p, -1,
                          "UPDATE schedules SET cursor = $3::bigint WHERE name = $1::text"
                          " AND cursor = $2::bigint RETURNING 1",
                          a->n, a->v);
}

static int moved(const tk__schedule_step *step, tk_err *err) {
  return tk_err_set(err, TK_ESTATE, "schedule \"%s\": moved on by another orchestrator",
                    step->name);
}

/* The guard of a slot's task: the compare-and-set, alone in the first
 * round trip, so that a cursor that moved writes no task. */
static int guard_check(tk__pg_pipe *p, void *ud, tk_err *err) {
  tk__schedule_step *step = ud;
  tk__pg_args a;
  int slot = queue_cas(p, step, &a);
  int rc = run(p, "fire schedule", err);
  if (rc == 0 && PQntuples(tk__pg_result(p, slot)) != 1) rc = moved(step, err);
  tk__pg_pipe_reset(p);
  return rc;
}

static void guard_finish(tk__pg_pipe *p, void *ud) {
  tk__schedule_step *step = ud;
  tk__pg_args a = {0};
  tk__pg_arg_text(&a, step->name);
  tk__pg_arg_i64(&a, step->slot);
  tk__pg_arg_text(&a, step->task->identity);
  tk__pg_pipe_stmt(p, -1,
                   "UPDATE schedules SET last_fired = $2::bigint, last_task_id = (SELECT id"
                   " FROM tasks WHERE identity = $3::text) WHERE name = $1::text",
                   a.n, a.v);
}

int tk__pg_schedule_fire(tk_store *s, tk__schedule_step *step, tk_err *err) {
  step->task_id = TK__NONE;
  step->existed = 0;
  if (step->task != NULL) {
    tk__pg_guard g = {guard_check, guard_finish, step};
    return tk__pg_task_create_guarded(s, step->task, &g, &step->task_id, &step->existed, err);
  }
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "fire schedule", err);
  if (rc == 0) {
    tk__pg_args a;
    tk__pg_begin(&p);
    int slot = queue_cas(&p, step, &a);
    tk__pg_commit(&p);
    rc = run(&p, "fire schedule", err);
    if (rc == 0 && PQntuples(tk__pg_result(&p, slot)) != 1) rc = moved(step, err);
  }
  tk__pg_pipe_end(&p);
  return rc;
}
