/* The SQLite backend's lists over the whole store (store.h: task_list,
 * task_count, step_list, activity). The SQL is store/list_sql.c's; this
 * file binds it and reads the rows. Each statement is prepared per call:
 * its text depends on the filter, and a list is not on the engine's path. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/list_sql.h"

/* Prepare sql's text and bind its arguments; frees the text. */
static int prepare(tk__sqlite *q, tk__sql *sql, int rc, const char *what, sqlite3_stmt **st,
                   tk_err *err) {
  *st = NULL;
  if (rc == 0 && sqlite3_prepare_v2(q->db, sql->text.p, -1, st, NULL) != SQLITE_OK)
    rc = tk__sq_fail(q, what, err);
  else if (rc)
    rc = tk_err_set(err, rc, "sqlite %s: %s: %s", q->path, what,
                    rc == TK_ENOMEM ? "out of memory" : "bad arguments");
  for (int i = 0; rc == 0 && i < sql->nargs; i++) {
    if (sql->args[i].is_text)
      sqlite3_bind_text(*st, i + 1, sql->args[i].t, -1, SQLITE_STATIC);
    else
      sqlite3_bind_int64(*st, i + 1, sql->args[i].i);
  }
  tk__sql_free(sql);
  return rc;
}

/* Read every row of the statement built from sql (build_rc: how building
 * it went) into a malloc'd array of `size`-byte rows, each by `read`;
 * `release` frees the rows on failure. */
static int list_rows(tk__sqlite *q, tk__sql *sql, int build_rc, const char *what, size_t size,
                     void (*read)(sqlite3_stmt *, void *, int *), void (*release)(void *, int),
                     void **out, int *n, tk_err *err) {
  sqlite3_stmt *st;
  int rc = prepare(q, sql, build_rc, what, &st, err);
  if (rc) return rc;
  int cap = 0, oom = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow(out, &cap, *n + 1, size)) {
      oom = 1;
      break;
    }
    read(st, (char *)*out + size * (size_t)(*n)++, &oom);
  }
  rc = oom ? tk_err_set(err, TK_ENOMEM, "sqlite %s: out of memory: %s", q->path, what)
           : tk__sq_rows_end(q, rc, what, err);
  sqlite3_finalize(st);
  if (rc) {
    release(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

static void read_task(sqlite3_stmt *st, void *row, int *oom) {
  tk__task_row *r = row;
  r->id = sqlite3_column_int64(st, 0);
  snprintf(r->state, sizeof r->state, "%s", tk__sq_text(st, 1));
  r->namespace_ = tk__sq_col_dup(st, 2, oom);
  r->name = tk__sq_col_dup(st, 3, oom);
  r->version = tk__sq_col_dup(st, 4, oom);
  r->identity = tk__sq_col_dup(st, 5, oom);
  r->created_at = sqlite3_column_int64(st, 6);
  r->updated_at = sqlite3_column_int64(st, 7);
  r->finished_at = tk__sq_col_i64(st, 8);
  r->steps_total = sqlite3_column_int(st, 9);
  r->steps_done = sqlite3_column_int(st, 10);
  r->steps_error = sqlite3_column_int(st, 11);
  r->last_error = tk__sq_col_dup(st, 12, oom);
  r->next_run_at = tk__sq_col_i64(st, 13);
  r->priority = sqlite3_column_int(st, 14);
}

static void read_step(sqlite3_stmt *st, void *row, int *oom) {
  tk__step_row *r = row;
  r->id = sqlite3_column_int64(st, 0);
  r->task_id = sqlite3_column_int64(st, 1);
  r->name = tk__sq_col_dup(st, 2, oom);
  snprintf(r->state, sizeof r->state, "%s", tk__sq_text(st, 3));
  r->attempts = sqlite3_column_int(st, 4);
  r->max_attempts = sqlite3_column_int(st, 5);
  r->retryable = sqlite3_column_int(st, 6);
  r->last_error = tk__sq_col_dup(st, 7, oom);
  r->namespace_ = tk__sq_col_dup(st, 8, oom);
  r->template_name = tk__sq_col_dup(st, 9, oom);
  r->version = tk__sq_col_dup(st, 10, oom);
  r->updated_at = sqlite3_column_int64(st, 11);
}

static void free_tasks(void *rows, int n) { tk__task_rows_free(rows, n); }
static void free_steps(void *rows, int n) { tk__step_rows_free(rows, n); }

int tk__sq_task_list(tk_store *s, const tk__task_query *f, tk__task_row **out, int *n,
                     tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0 || f->limit <= 0) return rc;
  tk__sql sql = {0};
  return list_rows((tk__sqlite *)s, &sql, tk__sql_task_list(&sql, f, &tp), "list tasks",
                   sizeof **out, read_task, free_tasks, (void **)out, n, err);
}

int tk__sq_task_count(tk_store *s, const tk__task_query *f, int64_t *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0) return rc;
  tk__sql sql = {0};
  sqlite3_stmt *st;
  if ((rc = prepare(q, &sql, tk__sql_task_count(&sql, f, &tp), "count tasks", &st, err))) return rc;
  int found;
  rc = tk__sq_row(q, st, "count tasks", &found, err);
  if (found) *n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_step_list(tk_store *s, const char *step_state, const tk__task_query *f,
                     tk__step_row **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__sql_templates tp;
  int rc = tk__sql_templates_find(s, f, &tp, err);
  if (rc || tp.n == 0 || f->limit <= 0) return rc;
  tk__sql sql = {0};
  return list_rows((tk__sqlite *)s, &sql, tk__sql_step_list(&sql, step_state, f, &tp), "list steps",
                   sizeof **out, read_step, free_steps, (void **)out, n, err);
}

int tk__sq_activity(tk_store *s, int64_t since, int64_t bucket_ms, int n, tk__activity_bucket *out,
                    tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, (size_t)n * sizeof *out);
  for (int i = 0; i < n; i++) out[i].start = since + i * bucket_ms;
  tk__sql sql = {0};
  sqlite3_stmt *st;
  int rc = prepare(q, &sql, tk__sql_activity(&sql, since, bucket_ms, n), "activity", &st, err);
  if (rc) return rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t b = sqlite3_column_int64(st, 0);
    if (b < 0 || b >= n) continue;
    tk__activity_bucket *a = &out[b];
    a->succeeded = sqlite3_column_int64(st, 1);
    a->failed = sqlite3_column_int64(st, 2);
    a->retries = sqlite3_column_int64(st, 3);
    a->lateness_n = sqlite3_column_int64(st, 4);
    a->lateness_sum_ms = sqlite3_column_int64(st, 5);
    a->lateness_max_ms = sqlite3_column_int64(st, 6);
  }
  rc = tk__sq_rows_end(q, rc, "activity", err);
  sqlite3_finalize(st);
  return rc;
}
