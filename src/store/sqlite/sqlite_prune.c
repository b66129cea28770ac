/* The SQLite backend's retention (DESIGN §16): removing finished tasks
 * with everything they own, and the store's size on disk. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The tasks a request selects, oldest finished first, through the
 * tasks_finished index (0009): ?1 ?2 ?3 the cutoffs of complete, error and
 * cancelled (INT64_MIN: none of that state), ?4 the latest of them. */
#define SELECTED                                                                               \
  "SELECT id FROM tasks INDEXED BY tasks_finished WHERE finished_at IS NOT NULL"              \
  " AND finished_at < ?4 AND ((state = 'complete' AND finished_at < ?1)"                      \
  " OR (state = 'error' AND finished_at < ?2) OR (state = 'cancelled' AND finished_at < ?3))"

/* What goes with the tasks of `ids` (a JSON array of ids, ?1), in the
 * order that keeps foreign keys satisfied; counted in the member at
 * `count` (NULL: not counted). */
static const struct {
  const char *sql;
  size_t count;
} removals[] = {
    {"DELETE FROM attempts WHERE step_id IN (SELECT id FROM steps WHERE task_id IN"
     " (SELECT value FROM json_each(?1)))",
     offsetof(tk__prune_counts, attempts)},
    {"DELETE FROM items WHERE step_id IN (SELECT id FROM steps WHERE task_id IN"
     " (SELECT value FROM json_each(?1)))",
     offsetof(tk__prune_counts, items)},
    {"DELETE FROM batch_steps WHERE step_id IN (SELECT id FROM steps WHERE task_id IN"
     " (SELECT value FROM json_each(?1)))",
     (size_t)-1},
    /* Signals to wait steps (0016): not counted, as batch settings. */
    {"DELETE FROM signals WHERE step_id IN (SELECT id FROM steps WHERE task_id IN"
     " (SELECT value FROM json_each(?1)))",
     (size_t)-1},
    {"DELETE FROM callbacks WHERE step_id IN (SELECT id FROM steps WHERE task_id IN"
     " (SELECT value FROM json_each(?1)))",
     (size_t)-1},
    {"DELETE FROM transitions WHERE task_id IN (SELECT value FROM json_each(?1))",
     offsetof(tk__prune_counts, transitions)},
    {"DELETE FROM steps WHERE task_id IN (SELECT value FROM json_each(?1))",
     offsetof(tk__prune_counts, steps)},
    {"DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(?1)) AND finished_at IS NOT"
     " NULL AND state IN ('complete', 'error', 'cancelled')",
     offsetof(tk__prune_counts, tasks)},
};

/* The same removals as counts, for a dry run over every selected task. */
static const char COUNT_SQL[] = TK__PRUNE_COUNT_SQL(SELECTED, "IN (SELECT id FROM t)");

/* Bind ?1-?4 of SELECTED. */
static void bind_cutoffs(sqlite3_stmt *st, const tk__prune_request *r) {
  int64_t cut[TK__PRUNE_STATES + 1];
  tk__prune_cutoffs(r, cut);
  for (int i = 0; i <= TK__PRUNE_STATES; i++) sqlite3_bind_int64(st, i + 1, cut[i]);
}

/* A dry run over every selected task: one read, nothing written. */
static int count_only(tk__sqlite *q, const tk__prune_request *r, tk__prune_counts *out,
                      tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, COUNT_SQL, -1, &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "prune (dry run)", err);
  bind_cutoffs(st, r);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    out->tasks = sqlite3_column_int64(st, 0);
    out->steps = sqlite3_column_int64(st, 1);
    out->attempts = sqlite3_column_int64(st, 2);
    out->transitions = sqlite3_column_int64(st, 3);
    out->items = sqlite3_column_int64(st, 4);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 0 : tk__sq_fail(q, "prune (dry run)", err);
}

/* The ids of the batch as a JSON array in *json (malloc'd); *n how many. */
static int select_batch(tk__sqlite *q, const tk__prune_request *r, char **json, int *n,
                        tk_err *err) {
  sqlite3_stmt *st;
  *n = 0;
  if (sqlite3_prepare_v2(q->db, SELECTED " ORDER BY finished_at LIMIT ?5", -1, &st, NULL) !=
      SQLITE_OK)
    return tk__sq_fail(q, "prune", err);
  bind_cutoffs(st, r);
  sqlite3_bind_int(st, 5, r->limit);
  size_t cap = 2 + (size_t)r->limit * 21, len = 0;
  char *buf = malloc(cap);
  int rc = SQLITE_NOMEM;
  if (buf != NULL) {
    buf[len++] = '[';
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
      len += (size_t)snprintf(buf + len, cap - len, "%s%lld", *n ? "," : "",
                              (long long)sqlite3_column_int64(st, 0)),
          (*n)++;
    buf[len++] = ']';
    buf[len] = '\0';
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    free(buf);
    return buf ? tk__sq_fail(q, "prune", err) : tk_err_set(err, TK_ENOMEM, "prune: out of memory");
  }
  *json = buf;
  return 0;
}

/* Remove the per-minute activity counts of the minutes before `before`. */
static int prune_minutes(tk__sqlite *q, int64_t before, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, "DELETE FROM activity_minutes WHERE minute < ?1", -1, &st,
                         NULL) != SQLITE_OK)
    return tk__sq_fail(q, "prune", err);
  sqlite3_bind_int64(st, 1, before);
  int rc = tk__sq_done(q, st, err);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_prune(tk_store *s, const tk__prune_request *r, tk__prune_counts *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  if (r->dry_run) return count_only(q, r, out, err);
  if (r->limit <= 0)
    return tk_err_set(err, TK_EINVAL, "prune: batch limit %d: expected > 0", r->limit);
  int rc, n;
  char *ids = NULL;
  if ((rc = tk__sq_begin(q, err))) return rc;
  if ((rc = select_batch(q, r, &ids, &n, err))) goto end;
  for (size_t i = 0; n > 0 && i < sizeof removals / sizeof removals[0] && rc == 0; i++) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(q->db, removals[i].sql, -1, &st, NULL) != SQLITE_OK) {
      rc = tk__sq_fail(q, "prune", err);
      break;
    }
    sqlite3_bind_text(st, 1, ids, -1, SQLITE_STATIC);
    rc = tk__sq_done(q, st, err);
    if (rc == 0 && removals[i].count != (size_t)-1)
      *(int64_t *)((char *)out + removals[i].count) += sqlite3_changes(q->db);
    sqlite3_finalize(st);
  }
  if (rc == 0) rc = prune_minutes(q, tk__prune_minutes_before(r), err);
end:
  free(ids);
  if (rc == 0) return tk__sq_commit(q, err);
  tk__sq_rollback(q);
  memset(out, 0, sizeof *out);
  return rc;
}

int tk__sq_size(tk_store *s, int64_t *bytes, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  *bytes = 0;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT page_count * page_size FROM pragma_page_count(),"
                         " pragma_page_size()",
                         -1, &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "store size", err);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *bytes = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return tk__sq_fail(q, "store size", err);
  /* The WAL holds what is committed and not yet checkpointed into the
   * file: part of the store's footprint. */
  const char *file = sqlite3_db_filename(q->db, "main");
  if (file != NULL && *file != '\0') {
    char wal[4096];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", file);
    if (stat(wal, &sb) == 0) *bytes += (int64_t)sb.st_size;
  }
  return 0;
}

int tk__sq_durability(tk_store *s, tk_durability d, tk_err *err) {
  /* In WAL mode FULL syncs the WAL at every commit; NORMAL only at
   * checkpoints: a commit survives the process either way, and after a
   * power cut the store is consistent either way, but only FULL keeps the
   * last commits (sqlite.org/pragma.html#pragma_synchronous). */
  return tk__sq_exec((tk__sqlite *)s,
                     d == TK_DURABILITY_FAST ? "PRAGMA synchronous = NORMAL"
                                             : "PRAGMA synchronous = FULL",
                     err);
}
