/* Bulk submit on SQLite: many tasks in one transaction, each written by
 * the cached statements of a single submit (tk__sq_task_insert), so that
 * one commit (one fsync) pays for them all. */
#include "store/sqlite/sqlite_internal.h"

int tk__sq_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  for (int i = 0; rc == 0 && i < n; i++) rc = tk__sq_task_insert(q, &t[i], &task_ids[i], &existed[i], err);
  if (rc) {
    tk__sq_rollback(q);
    return rc;
  }
  return tk__sq_commit(q, err);
}
