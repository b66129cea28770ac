/* Retry budgets on SQLite (store.h: retry_earlier, budget_update, budget_list). */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One BEGIN IMMEDIATE transaction: the write lock is taken before the
 * read, so no other connection's update of any key can come between the
 * read and the write (SQLite has one writer at a time). */
int tk__sq_budget_update(tk_store *s, const char *key, unsigned char *state, size_t cap,
                         tk__budget_fn fn, void *arg, int64_t now, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__budget_key_check(key, err);
  if (rc || (rc = tk__sq_begin(q, err))) return rc;
  size_t len = 0;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_BUDGET_GET, "SELECT state FROM retry_budgets WHERE key = ?1",
                                 err);
  if (st == NULL) rc = TK_ESTORE;
  if (rc == 0) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      size_t n = (size_t)sqlite3_column_bytes(st, 0);
      len = n <= cap ? n : 0; /* not a state this engine wrote: fn starts afresh */
      if (len) memcpy(state, sqlite3_column_blob(st, 0), len);
      step = sqlite3_step(st);
    }
    if (step != SQLITE_DONE) rc = tk__sq_fail(q, "read a retry budget", err);
    sqlite3_reset(st);
  }
  if (rc == 0) rc = fn(arg, state, &len, cap);
  if (rc == 0) {
    st = tk__sq_stmt(q, SQ_BUDGET_PUT,
                     "INSERT INTO retry_budgets (key, state, updated_at) VALUES (?1, ?2, ?3)"
                     " ON CONFLICT (key) DO UPDATE SET state = excluded.state,"
                     " updated_at = excluded.updated_at",
                     err);
    if (st == NULL) rc = TK_ESTORE;
    else {
      sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
      sqlite3_bind_blob(st, 2, state, (int)len, SQLITE_STATIC);
      sqlite3_bind_int64(st, 3, now);
      rc = tk__sq_done(q, st, err);
    }
  }
  if (rc == 0) rc = tk__sq_commit(q, err);
  else tk__sq_rollback(q);
  return rc;
}

/* One SELECT (a read: it waits for no writer under WAL). Prepared each
 * time: a report reads it now and then, not on any hot path. */
int tk__sq_budget_list(tk_store *s, tk__budget_rec **out, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, "SELECT key, state, updated_at FROM retry_budgets ORDER BY key",
                         -1, &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "list retry budgets", err);
  tk__budget_rec *v = NULL;
  int len = 0, cap = 0, rc = 0, step;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (len == cap) {
      int grown_cap = cap ? 2 * cap : 8;
      tk__budget_rec *grown = realloc(v, (size_t)grown_cap * sizeof *grown);
      if (grown == NULL) {
        rc = tk_err_set(err, TK_ENOMEM, "out of memory listing retry budgets");
        break;
      }
      v = grown;
      cap = grown_cap;
    }
    tk__budget_rec *r = &v[len];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", (const char *)sqlite3_column_text(st, 0));
    r->len = (size_t)sqlite3_column_bytes(st, 1);
    r->updated_at = sqlite3_column_int64(st, 2);
    len++;
    if (r->len > 0 && (r->state = malloc(r->len)) == NULL)
      rc = tk_err_set(err, TK_ENOMEM, "out of memory listing retry budgets");
    else if (r->len > 0)
      memcpy(r->state, sqlite3_column_blob(st, 1), r->len);
  }
  if (rc == 0 && step != SQLITE_DONE) rc = tk__sq_fail(q, "list retry budgets", err);
  sqlite3_finalize(st);
  if (rc) {
    tk__budget_recs_free(v, len);
    return rc;
  }
  *out = v;
  *n = len;
  return 0;
}
