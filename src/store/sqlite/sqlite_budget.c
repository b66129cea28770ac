/* Retry budgets on SQLite (store.h: retry_earlier). */
#include "store/sqlite/sqlite_internal.h"

/* One transaction (BEGIN IMMEDIATE: the write lock first, so the checks
 * and the writes see one state). Each step's UPDATE carries the whole
 * fence: still waiting, for this attempt, later than run_at. */
int tk__sq_retry_earlier(tk_store *s, const tk__retry_ref *v, int n, int64_t run_at, int *moved,
                         tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  for (int i = 0; i < n; i++) moved[i] = 0;
  if (n <= 0) return 0;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  for (int i = 0; i < n && rc == 0; i++) {
    sqlite3_stmt *st = tk__sq_stmt(
        q, SQ_RETRY_EARLIER_STEP,
        "UPDATE steps SET run_at = ?1 WHERE id = ?2 AND state = 'waiting_for_retry'"
        " AND run_at > ?1"
        " AND attempts = (SELECT attempt FROM attempts WHERE id = ?3 AND step_id = ?2)"
        " AND NOT EXISTS (SELECT 1 FROM attempts WHERE step_id = ?2 AND id > ?3)",
        err);
    if (st == NULL) {
      rc = TK_ESTORE;
      break;
    }
    sqlite3_bind_int64(st, 1, run_at);
    sqlite3_bind_int64(st, 2, v[i].step_id);
    sqlite3_bind_int64(st, 3, v[i].claim_id);
    if ((rc = tk__sq_done(q, st, err)) != 0 || sqlite3_changes(q->db) == 0) continue;
    moved[i] = 1;
    st = tk__sq_stmt(q, SQ_RETRY_EARLIER_ATTEMPT,
                     "UPDATE attempts SET next_run_at = ?1, delay_ms = ?1 - finished_at"
                     " WHERE id = ?2",
                     err);
    if (st == NULL) {
      rc = TK_ESTORE;
      break;
    }
    sqlite3_bind_int64(st, 1, run_at);
    sqlite3_bind_int64(st, 2, v[i].claim_id);
    rc = tk__sq_done(q, st, err);
  }
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  if (rc != 0)
    for (int i = 0; i < n; i++) moved[i] = 0;
  return rc;
}
