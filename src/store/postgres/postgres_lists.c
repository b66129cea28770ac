/* The PostgreSQL backend's lists over the whole store (store.h: task_list,
 * task_count, step_list, activity). The SQL is store/list_sql.c's; each
 * statement is sent unprepared, so that the server plans it for the values
 * given (a generic plan could not use the partial index tasks_with_errors, and
 * the text depends on the filter anyway). */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/list_sql.h"

/* Run sql (build_rc: how building it went) alone; its result in *res. */
static int run(tk_store *s, tk__sql *sql, int build_rc, const char *what, PGresult **res,
               tk_err *err) {
  *res = NULL;
  char *tmp[TK__SQL_MAX_ARGS] = {0};
  int rc = build_rc;
  if (rc) {
    rc = tk_err_set(err, rc, "postgres: %s: %s", what,
                    rc == TK_ENOMEM ? "out of memory" : "bad arguments");
  } else {
    tk__pg_args a = {0};
    for (int i = 0; i < sql->nargs; i++) {
      if (sql->args[i].is_text)
        tk__pg_arg_text(&a, tk__pg_utf8(sql->args[i].t, &tmp[i]));
      else
        tk__pg_arg_i64(&a, sql->args[i].i);
    }
    rc = tk__pg_query(s, -1, sql->text.p, &a, what, res, err);
  }
  for (int i = 0; i < TK__SQL_MAX_ARGS; i++) free(tmp[i]);
  tk__sql_free(sql);
  return rc;
}

/* A malloc'd array of the result's rows, `size` bytes each, each filled
 * by `read`; `release` frees them when memory ran out. */
static int list_rows(tk_store *s, tk__sql *sql, int build_rc, const char *what, size_t size,
                     void (*read)(const PGresult *, int, void *, int *),
                     void (*release)(void *, int), void **out, int *n, tk_err *err) {
  PGresult *res;
  int rc = run(s, sql, build_rc, what, &res, err);
  int rows = rc ? 0 : PQntuples(res);
  if (rc == 0 && rows > 0 && (*out = calloc((size_t)rows, size)) == NULL)
    rc = tk__pg_oom(err, what);
  int oom = 0;
  for (int i = 0; rc == 0 && i < rows; i++) read(res, i, (char *)*out + size * (size_t)i, &oom);
  if (rc == 0) *n = rows;
  PQclear(res);
  if (rc == 0 && oom) {
    release(*out, *n);
    *out = NULL;
    *n = 0;
    rc = tk__pg_oom(err, what);
  }
  return rc;
}

static void read_task(const PGresult *res, int i, void *row, int *oom) {
  tk__task_row *r = row;
  r->id = tk__pg_i64(res, i, 0);
  tk__pg_copy(r->state, sizeof r->state, res, i, 1);
  r->namespace_ = tk__dup(tk__pg_text(res, i, 2), oom);
  r->name = tk__dup(tk__pg_text(res, i, 3), oom);
  r->version = tk__dup(tk__pg_text(res, i, 4), oom);
  r->identity = tk__dup(tk__pg_text(res, i, 5), oom);
  r->created_at = tk__pg_i64(res, i, 6);
  r->updated_at = tk__pg_i64(res, i, 7);
  r->finished_at = tk__pg_i64(res, i, 8);
  r->steps_total = (int)tk__pg_i64(res, i, 9);
  r->steps_done = (int)tk__pg_i64(res, i, 10);
  r->steps_error = (int)tk__pg_i64(res, i, 11);
  r->last_error = tk__dup(tk__pg_text(res, i, 12), oom);
  r->next_run_at = tk__pg_i64(res, i, 13);
  r->priority = (int)tk__pg_i64(res, i, 14);
}

static void read_step(const PGresult *res, int i, void *row, int *oom) {
  tk__step_row *r = row;
  r->id = tk__pg_i64(res, i, 0);
  r->task_id = tk__pg_i64(res, i, 1);
  r->name = tk__dup(tk__pg_text(res, i, 2), oom);
  tk__pg_copy(r->state, sizeof r->state, res, i, 3);
  r->attempts = (int)tk__pg_i64(res, i, 4);
  r->max_attempts = (int)tk__pg_i64(res, i, 5);
  r->retryable = tk__pg_bool(res, i, 6);
  r->last_error = tk__dup(tk__pg_text(res, i, 7), oom);
  r->namespace_ = tk__dup(tk__pg_text(res, i, 8), oom);
  r->template_name = tk__dup(tk__pg_text(res, i, 9), oom);
  r->version = tk__dup(tk__pg_text(res, i, 10), oom);
  r->updated_at = tk__pg_i64(res, i, 11);
}

static void free_tasks(void *rows, int n) { tk__task_rows_free(rows, n); }
static void free_steps(void *rows, int n) { tk__step_rows_free(rows, n); }

int tk__pg_task_list(tk_store *s, const tk__task_query *f, tk__task_row **out, int *n,
                     tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0 || f->limit <= 0) return rc;
  tk__sql sql = {.pg = 1};
  return list_rows(s, &sql, tk__sql_task_list(&sql, f, &tp), "list tasks", sizeof **out, read_task,
                   free_tasks, (void **)out, n, err);
}

int tk__pg_task_count(tk_store *s, const tk__task_query *f, int64_t *n, tk_err *err) {
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0) return rc;
  tk__sql sql = {.pg = 1};
  PGresult *res;
  if ((rc = run(s, &sql, tk__sql_task_count(&sql, f, &tp), "count tasks", &res, err))) return rc;
  *n = tk__pg_i64(res, 0, 0);
  PQclear(res);
  return 0;
}

int tk__pg_step_list(tk_store *s, const char *step_state, const tk__task_query *f,
                     tk__step_row **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0 || f->limit <= 0) return rc;
  tk__sql sql = {.pg = 1};
  return list_rows(s, &sql, tk__sql_step_list(&sql, step_state, f, &tp), "list steps", sizeof **out,
                   read_step, free_steps, (void **)out, n, err);
}

int tk__pg_activity(tk_store *s, int64_t since, int64_t bucket_ms, int n, tk__activity_bucket *out,
                    tk_err *err) {
  memset(out, 0, (size_t)n * sizeof *out);
  for (int i = 0; i < n; i++) out[i].start = since + i * bucket_ms;
  tk__sql sql = {.pg = 1};
  PGresult *res;
  int rc = run(s, &sql, tk__sql_activity(&sql, since, bucket_ms, n), "activity", &res, err);
  if (rc) return rc;
  for (int i = 0; i < PQntuples(res); i++) {
    int64_t b = tk__pg_i64(res, i, 0);
    if (b < 0 || b >= n) continue;
    tk__activity_bucket *a = &out[b];
    a->succeeded = tk__pg_i64(res, i, 1);
    a->failed = tk__pg_i64(res, i, 2);
    a->retries = tk__pg_i64(res, i, 3);
    a->lateness_n = tk__pg_i64(res, i, 4);
    a->lateness_sum_ms = tk__pg_i64(res, i, 5);
    a->lateness_max_ms = tk__pg_i64(res, i, 6);
  }
  PQclear(res);
  return 0;
}
