/* The SQLite backend's schedules (store.h: schedule_put, schedule_list,
 * schedule_remove, schedule_fire). Not on the engine's hot path: each
 * statement is prepared per call. */
#include "store/sqlite/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

/* Prepare sql on q's connection; NULL with err set when it cannot be. */
static sqlite3_stmt *prepare(tk__sqlite *q, const char *sql, tk_err *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) {
    tk__sq_fail(q, "schedules", err);
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

/* Bind text or NULL. */
static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, i);
}

/* Run a prepared statement to its end and finalize it: 0 or TK_ESTORE. */
static int run(tk__sqlite *q, sqlite3_stmt *st, const char *what, tk_err *err) {
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, what, err);
  sqlite3_finalize(st);
  return rc;
}

/* The source of schedule `name`, copied into src (cap bytes); "" when there
 * is none. */
static int source_of(tk__sqlite *q, const char *name, char *src, size_t cap, tk_err *err) {
  sqlite3_stmt *st = prepare(q, "SELECT source FROM schedules WHERE name = ?", err);
  if (st == NULL) return TK_ESTORE;
  bind_text(st, 1, name);
  int rc = sqlite3_step(st);
  src[0] = '\0';
  if (rc == SQLITE_ROW) {
    const char *v = tk__sq_text(st, 0);
    strncat(src, v ? v : "", cap - 1);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : tk__sq_fail(q, "schedule lookup", err);
}

/* Insert row r, or with `keep` update the definition of the row of that
 * name, keeping its cursor and last fired slot. */
static int put_one(tk__sqlite *q, const tk__schedule_rec *r, int keep, tk_err *err) {
  sqlite3_stmt *st = prepare(
      q,
      keep ? "UPDATE schedules SET cron = ?2, zone = ?3, template = ?4, version = ?5,"
             " context = ?6, missed = ?7, source = ?8, updated_at = ?10 WHERE name = ?1"
           : "INSERT INTO schedules (name, cron, zone, template, version, context, missed,"
             " source, created_at, updated_at, cursor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
             " ?9, ?10, ?11)",
      err);
  if (st == NULL) return TK_ESTORE;
  bind_text(st, 1, r->name);
  bind_text(st, 2, r->cron);
  bind_text(st, 3, r->zone);
  bind_text(st, 4, r->template_name);
  bind_text(st, 5, r->version);
  bind_text(st, 6, r->context);
  bind_text(st, 7, r->missed);
  bind_text(st, 8, r->source);
  sqlite3_bind_int64(st, 9, r->created_at);
  sqlite3_bind_int64(st, 10, r->updated_at);
  if (!keep) sqlite3_bind_int64(st, 11, r->cursor);
  return run(q, st, "schedule put", err);
}

/* Remove the rows of `source` whose names are not among rows[0..n). */
static int remove_others(tk__sqlite *q, const char *source, const tk__schedule_rec *rows, int n,
                         tk_err *err) {
  sqlite3_stmt *st = prepare(q, "SELECT name FROM schedules WHERE source = ?", err);
  if (st == NULL) return TK_ESTORE;
  bind_text(st, 1, source);
  char **gone = NULL;
  int ngone = 0, cap = 0, rc, oom = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = tk__sq_text(st, 0);
    int kept = 0;
    for (int i = 0; i < n && !kept; i++) kept = strcmp(rows[i].name, name) == 0;
    if (kept) continue;
    if (tk__grow((void **)&gone, &cap, ngone + 1, sizeof *gone) != 0) {
      oom = 1;
      break;
    }
    if ((gone[ngone++] = tk__dup(name, &oom)) == NULL) break;
  }
  int end = oom ? tk_err_set(err, TK_ENOMEM, "out of memory syncing schedules")
                : tk__sq_rows_end(q, rc == SQLITE_ROW ? SQLITE_DONE : rc, "schedules", err);
  sqlite3_finalize(st);
  for (int i = 0; end == 0 && i < ngone; i++) end = tk__sq_schedule_remove_in(q, gone[i], err);
  for (int i = 0; i < ngone; i++) free(gone[i]);
  free(gone);
  return end;
}

int tk__sq_schedule_remove_in(tk__sqlite *q, const char *name, tk_err *err) {
  sqlite3_stmt *st = prepare(q, "DELETE FROM schedules WHERE name = ?", err);
  if (st == NULL) return TK_ESTORE;
  bind_text(st, 1, name);
  int rc = run(q, st, "schedule remove", err);
  if (rc == 0 && sqlite3_changes(q->db) == 0)
    rc = tk_err_set(err, TK_ENOENT, "schedule \"%s\": no such schedule", name);
  return rc;
}

int tk__sq_schedule_put(tk_store *s, const tk__schedule_rec *rows, int n,
                        const char *replace_source, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  for (int i = 0; i < n && rc == 0; i++) {
    char src[16];
    if ((rc = source_of(q, rows[i].name, src, sizeof src, err))) break;
    int taken = src[0] != '\0';
    if (taken && (replace_source == NULL || strcmp(src, replace_source) != 0))
      rc = tk_err_set(err, TK_EEXIST, "schedule \"%s\" exists already (%s)", rows[i].name,
                      strcmp(src, "config") == 0 ? "defined in the configuration"
                                                 : "added with `tasker schedule add`");
    else
      rc = put_one(q, &rows[i], taken, err);
  }
  if (rc == 0 && replace_source) rc = remove_others(q, replace_source, rows, n, err);
  if (rc) {
    tk__sq_rollback(q);
    return rc;
  }
  return tk__sq_commit(q, err);
}

int tk__sq_schedule_remove(tk_store *s, const char *name, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  if ((rc = tk__sq_schedule_remove_in(q, name, err))) {
    tk__sq_rollback(q);
    return rc;
  }
  return tk__sq_commit(q, err);
}

/* Read the columns of a schedules row into r (strings copied). */
static int read_rec(sqlite3_stmt *st, tk__schedule_rec *r) {
  int oom = 0;
  r->name = tk__sq_col_dup(st, 0, &oom);
  r->cron = tk__sq_col_dup(st, 1, &oom);
  r->zone = tk__sq_col_dup(st, 2, &oom);
  r->template_name = tk__sq_col_dup(st, 3, &oom);
  r->version = tk__sq_col_dup(st, 4, &oom);
  r->context = tk__sq_col_dup(st, 5, &oom);
  snprintf(r->missed, sizeof r->missed, "%s", tk__sq_text(st, 6));
  snprintf(r->source, sizeof r->source, "%s", tk__sq_text(st, 7));
  r->created_at = sqlite3_column_int64(st, 8);
  r->updated_at = sqlite3_column_int64(st, 9);
  r->cursor = sqlite3_column_int64(st, 10);
  r->last_fired = tk__sq_col_i64(st, 11);
  r->last_task_id = tk__sq_col_i64(st, 12);
  return oom;
}

int tk__sq_schedule_list(tk_store *s, const char *name, tk__schedule_rec **out, int *n,
                         tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st = prepare(q,
                             "SELECT name, cron, zone, template, version, context, missed,"
                             " source, created_at, updated_at, cursor, last_fired, last_task_id"
                             " FROM schedules WHERE ?1 IS NULL OR name = ?1 ORDER BY name",
                             err);
  if (st == NULL) return TK_ESTORE;
  bind_text(st, 1, name);
  tk__schedule_rec *rows = NULL;
  int cap = 0, count = 0, rc, oom = 0;
  while (!oom && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)&rows, &cap, count + 1, sizeof *rows) != 0) {
      oom = 1;
      break;
    }
    oom = read_rec(st, &rows[count++]);
  }
  int end = oom ? tk_err_set(err, TK_ENOMEM, "out of memory reading schedules")
                : tk__sq_rows_end(q, rc, "schedules", err);
  sqlite3_finalize(st);
  if (end == 0 && name != NULL && count == 0)
    end = tk_err_set(err, TK_ENOENT, "schedule \"%s\": no such schedule", name);
  if (end) {
    tk__schedule_recs_free(rows, count);
    return end;
  }
  *out = rows;
  *n = count;
  return 0;
}

int tk__sq_schedule_fire(tk_store *s, tk__schedule_step *step, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  step->task_id = TK__NONE;
  step->existed = 0;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  /* The compare-and-set: under BEGIN IMMEDIATE this connection holds the
   * write lock, so no other orchestrator moves the cursor until COMMIT. */
  sqlite3_stmt *st = prepare(q,
                             "UPDATE schedules SET cursor = ?3 WHERE name = ?1"
                             " AND cursor = ?2",
                             err);
  if (st == NULL) {
    rc = TK_ESTORE;
    goto fail;
  }
  bind_text(st, 1, step->name);
  sqlite3_bind_int64(st, 2, step->expected);
  sqlite3_bind_int64(st, 3, step->cursor);
  if ((rc = run(q, st, "schedule fire", err))) goto fail;
  if (sqlite3_changes(q->db) == 0) {
    rc = tk_err_set(err, TK_ESTATE, "schedule \"%s\": moved on by another orchestrator",
                    step->name);
    goto fail;
  }
  if (step->task != NULL) {
    if ((rc = tk__sq_task_insert(q, step->task, &step->task_id, &step->existed, err)))
      goto fail;
    st = prepare(q, "UPDATE schedules SET last_fired = ?2, last_task_id = ?3 WHERE name = ?1",
                 err);
    if (st == NULL) {
      rc = TK_ESTORE;
      goto fail;
    }
    bind_text(st, 1, step->name);
    sqlite3_bind_int64(st, 2, step->slot);
    sqlite3_bind_int64(st, 3, step->task_id);
    if ((rc = run(q, st, "schedule fire", err))) goto fail;
  }
  return tk__sq_commit(q, err);
fail:
  tk__sq_rollback(q);
  return rc;
}
