/* The SQLite backend's delayed starts (DESIGN §16, migration 0009): a task
 * submitted with a later start keeps it in tasks.start_at, its root steps
 * wait with parents_remaining = -1, and a claim releases the tasks that
 * came due before it looks for fresh steps. */
#include "store/sqlite/sqlite_internal.h"

/* Tasks released by one claim at most (the rest by the next claims): the
 * ids are held in arrays of this size while the index is read. */
enum { RELEASE_MAX = 64 };

/* Release the root steps of up to `limit` tasks whose start came by now,
 * earliest start first, inside the caller's transaction: their steps
 * become ready pending steps due at the start time, and the task leaves
 * tasks_delayed. The first look is one probe of an index that is empty
 * when nothing is delayed, so the claim's path pays next to nothing. */
int tk__sq_release_delayed(tk__sqlite *q, int64_t now, int limit, tk_err *err) {
  sqlite3_stmt *due = tk__sq_stmt(q, SQ_DELAYED_DUE,
                                  "SELECT id, start_at FROM tasks INDEXED BY tasks_delayed"
                                  " WHERE start_at <= ?1 ORDER BY start_at, id LIMIT ?2",
                                  err);
  if (due == NULL) return TK_ESTORE;
  sqlite3_bind_int64(due, 1, now);
  sqlite3_bind_int(due, 2, limit < RELEASE_MAX ? limit : RELEASE_MAX);
  /* Read them all before changing any: the updates take rows out of the
   * index scanned. limit is a claim's size, at most claim_batch. */
  int64_t ids[RELEASE_MAX], starts[RELEASE_MAX];
  int n = 0, rc;
  while (n < RELEASE_MAX && (rc = sqlite3_step(due)) == SQLITE_ROW) {
    ids[n] = sqlite3_column_int64(due, 0);
    starts[n++] = sqlite3_column_int64(due, 1);
  }
  if (n < RELEASE_MAX && rc != SQLITE_DONE) {
    sqlite3_reset(due);
    return tk__sq_fail(q, "delayed starts", err);
  }
  sqlite3_reset(due);
  for (int i = 0; i < n; i++) {
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_DELAYED_RELEASE,
                                   "UPDATE steps SET parents_remaining = 0, run_at = ?1"
                                   " WHERE task_id = ?2 AND parents_remaining = -1"
                                   " AND state = 'pending'",
                                   err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, starts[i]);
    sqlite3_bind_int64(st, 2, ids[i]);
    if ((rc = tk__sq_done(q, st, err))) return rc;
    st = tk__sq_stmt(q, SQ_DELAYED_CLEAR, "UPDATE tasks SET start_at = NULL WHERE id = ?", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, ids[i]);
    if ((rc = tk__sq_done(q, st, err))) return rc;
  }
  return 0;
}

int tk__sq_delay_task(tk__sqlite *q, int64_t task_id, int64_t start_at, tk_err *err) {
  sqlite3_stmt *st =
      tk__sq_stmt(q, SQ_DELAYED_SET, "UPDATE tasks SET start_at = ?1 WHERE id = ?2", err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, start_at);
  sqlite3_bind_int64(st, 2, task_id);
  return tk__sq_done(q, st, err);
}
