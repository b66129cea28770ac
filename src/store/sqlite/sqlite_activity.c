/* The per-minute activity counts of the SQLite backend (migration 0010):
 * what a transaction of claims and outcomes adds to them, summed in memory
 * by minute and orchestrator and written as one upsert per row just before
 * the commit (tk__sq_record). A statement per outcome cost about a fifth
 * of the engine's time per step; a group of outcomes touches one or two
 * rows. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

/* The upsert of one row. */
static sqlite3_stmt *minute_stmt(tk__sqlite *q, tk_err *err) {
  return tk__sq_stmt(q, SQ_ACTIVITY_MINUTE,
                     "INSERT INTO activity_minutes (minute, orchestrator, succeeded, failed,"
                     " retries, lateness_n, lateness_sum_ms, lateness_max_ms)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                     " ON CONFLICT (minute, orchestrator) DO UPDATE SET"
                     " succeeded = succeeded + excluded.succeeded,"
                     " failed = failed + excluded.failed, retries = retries + excluded.retries,"
                     " lateness_n = lateness_n + excluded.lateness_n,"
                     " lateness_sum_ms = lateness_sum_ms + excluded.lateness_sum_ms,"
                     " lateness_max_ms = MAX(lateness_max_ms, excluded.lateness_max_ms)",
                     err);
}

int tk__sq_minutes_ready(tk__sqlite *q, tk_err *err) {
  return minute_stmt(q, err) ? 0 : TK_ESTORE;
}

int tk__sq_minutes_flush(tk__sqlite *q, tk_err *err) {
  for (int i = 0; i < q->nminutes; i++) {
    const tk__sq_minute *m = &q->minutes[i];
    sqlite3_stmt *st = minute_stmt(q, err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, m->minute);
    sqlite3_bind_text(st, 2, m->owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, m->succeeded);
    sqlite3_bind_int64(st, 4, m->failed);
    sqlite3_bind_int64(st, 5, m->retries);
    sqlite3_bind_int64(st, 6, m->lateness_n);
    sqlite3_bind_int64(st, 7, m->lateness_sum_ms);
    sqlite3_bind_int64(st, 8, m->lateness_max_ms);
    int rc = tk__sq_done(q, st, err);
    if (rc) return rc;
  }
  q->nminutes = 0;
  return 0;
}

int tk__sq_minutes_add(tk__sqlite *q, int64_t started_at, const char *owner,
                       const tk__sq_minute *add, tk_err *err) {
  int64_t minute = started_at - ((started_at % TK__MINUTE_MS) + TK__MINUTE_MS) % TK__MINUTE_MS;
  int i = 0;
  while (i < q->nminutes &&
         (q->minutes[i].minute != minute || strcmp(q->minutes[i].owner, owner) != 0))
    i++;
  if (i == TK__SQ_MINUTES) { /* rows enough for now: write them */
    int rc = tk__sq_minutes_flush(q, err);
    if (rc) return rc;
    i = 0;
  }
  tk__sq_minute *m = &q->minutes[i];
  if (i == q->nminutes) {
    memset(m, 0, sizeof *m);
    m->minute = minute;
    snprintf(m->owner, sizeof m->owner, "%s", owner);
    q->nminutes++;
  }
  m->succeeded += add->succeeded;
  m->failed += add->failed;
  m->retries += add->retries;
  m->lateness_n += add->lateness_n;
  m->lateness_sum_ms += add->lateness_sum_ms;
  if (add->lateness_max_ms > m->lateness_max_ms) m->lateness_max_ms = add->lateness_max_ms;
  return 0;
}
