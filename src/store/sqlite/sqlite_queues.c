/* Queues on SQLite (DESIGN §19, 0014_queues.sql): the lanes a claim takes
 * from and their room, the buckets, and the ops queue_put, queue_list and
 * worker_seen. Every claim holds the write lock (BEGIN IMMEDIATE), so a
 * lane's count of steps in progress and its bucket are read and written
 * with no other claim in between. */
#include "store/sqlite/sqlite_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"

/* Lane `i` of q->lanes, made room for and zeroed. */
static tk__sq_lane *lane_add(tk__sqlite *q, tk_err *err) {
  if (tk__grow((void **)&q->lanes, &q->lanes_cap, q->nlanes + 1, sizeof *q->lanes) != 0) {
    tk_err_set(err, TK_ENOMEM, "out of memory reading queues");
    return NULL;
  }
  tk__sq_lane *l = &q->lanes[q->nlanes++];
  memset(l, 0, sizeof *l);
  l->room = INT_MAX;
  return l;
}

/* The limits of columns 0..5 of st (id, concurrency, rate, burst, tokens,
 * refilled_at) into l, and its room at now: concurrency less its steps in
 * progress now, and the bucket's whole tokens. */
static int lane_limits(tk__sqlite *q, tk__sq_lane *l, sqlite3_stmt *st, int64_t now,
                       tk_err *err) {
  l->id = sqlite3_column_int64(st, 0);
  l->concurrency = sqlite3_column_int(st, 1);
  l->rate = sqlite3_column_double(st, 2);
  l->burst = sqlite3_column_int(st, 3);
  l->tokens = tk__queue_tokens(sqlite3_column_double(st, 4), sqlite3_column_int64(st, 5),
                               l->rate, l->burst, now);
  if (l->rate > 0) l->room = tk__queue_room(l->tokens);
  if (l->concurrency <= 0) return 0;
  sqlite3_stmt *busy = tk__sq_stmt(q, SQ_QUEUE_BUSY,
                                   "SELECT count(*) FROM steps INDEXED BY steps_leases"
                                   " WHERE state = 'in_progress' AND queue = ?1",
                                   err);
  if (busy == NULL) return TK_ESTORE;
  sqlite3_bind_text(busy, 1, l->name, -1, SQLITE_STATIC);
  int found, rc = tk__sq_row(q, busy, "queue in progress", &found, err);
  l->busy = found ? sqlite3_column_int64(busy, 0) : 0;
  sqlite3_reset(busy);
  if (rc) return rc;
  int64_t left = l->concurrency - l->busy;
  if (left < l->room) l->room = left < 0 ? 0 : (int)left;
  return 0;
}

int tk__sq_lanes_load(tk__sqlite *q, const char *wq, int64_t now, tk_err *err) {
  q->nlanes = 0;
  int rc = 0;
  if (wq != NULL) {
    tk__sq_lane *l = lane_add(q, err);
    if (l == NULL) return TK_ENOMEM;
    snprintf(l->name, sizeof l->name, "%s", wq);
    l->named = l->worker = 1;
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_QUEUE_ONE,
                                   "SELECT id, concurrency, rate, burst, tokens, refilled_at"
                                   " FROM queues WHERE name = ?1",
                                   err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_text(st, 1, wq, -1, SQLITE_STATIC);
    int found;
    if ((rc = tk__sq_row(q, st, "queue", &found, err)) == 0 && found)
      rc = lane_limits(q, l, st, now, err);
    sqlite3_reset(st);
    return rc;
  }
  if (lane_add(q, err) == NULL) return TK_ENOMEM; /* the steps of no queue */
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_QUEUE_LANES,
                                 "SELECT id, concurrency, rate, burst, tokens, refilled_at, name"
                                 " FROM queues INDEXED BY queues_plain WHERE plain = 1",
                                 err);
  if (st == NULL) return TK_ESTORE;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    tk__sq_lane *l = lane_add(q, err);
    if (l == NULL) {
      rc = TK_ENOMEM;
      break;
    }
    snprintf(l->name, sizeof l->name, "%s", tk__sq_text(st, 6));
    l->named = 1;
    /* The busy count is another statement: read this row's columns first. */
    if ((rc = lane_limits(q, l, st, now, err))) break;
  }
  if (rc == 0) rc = tk__sq_rows_end(q, step, "queues", err);
  sqlite3_reset(st);
  return rc;
}

int tk__sq_lanes_spend(tk__sqlite *q, int64_t now, tk_err *err) {
  for (int i = 0; i < q->nlanes; i++) {
    tk__sq_lane *l = &q->lanes[i];
    if (l->rate <= 0 || l->taken == 0) continue;
    sqlite3_stmt *st = tk__sq_stmt(
        q, SQ_QUEUE_TOKENS, "UPDATE queues SET tokens = ?1, refilled_at = ?2 WHERE id = ?3", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_double(st, 1, l->tokens - l->taken);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, l->id);
    int rc = tk__sq_done(q, st, err);
    if (rc) return rc;
  }
  return 0;
}

/* The first time of lane l in the cached probe `id` (INT64_MAX: none). */
static int lane_first(tk__sqlite *q, int id, const char *sql, const tk__sq_lane *l,
                      int64_t *at, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  if (l->worker) sqlite3_bind_text(st, 1, l->name, -1, SQLITE_STATIC);
  if (l->named) sqlite3_bind_text(st, 2, l->name, -1, SQLITE_STATIC);
  int found, rc = tk__sq_row(q, st, "next due", &found, err);
  *at = found ? sqlite3_column_int64(st, 0) : INT64_MAX;
  sqlite3_reset(st);
  return rc;
}

int tk__sq_lanes_due(tk__sqlite *q, int64_t now, int fresh, int64_t *due, int64_t *retry,
                     tk_err *err) {
  *due = *retry = INT64_MAX;
  int rc = 0;
  for (int i = 0; i < q->nlanes && rc == 0; i++) {
    tk__sq_lane *l = &q->lanes[i];
    /* Full: only an outcome (which wakes claimants) makes room. */
    if (l->concurrency > 0 && l->busy + l->taken >= l->concurrency) continue;
    int64_t r_at, d_at, late_at;
    if ((rc = lane_first(q, SQ_LANE_RETRY,
                         "SELECT run_at FROM steps INDEXED BY steps_retry_due"
                         " WHERE state = 'waiting_for_retry' AND queue IS ?2"
                         " AND worker_queue IS ?1 ORDER BY run_at LIMIT 1",
                         l, &r_at, err)))
      break;
    /* The lane's first delayed start, through the delayed tasks in start
     * order (their roots are in no readiness index): one probe when none
     * waits, which is the common case. */
    if ((rc = lane_first(q, SQ_LANE_DELAYED,
                         "SELECT t.start_at FROM tasks t INDEXED BY tasks_delayed"
                         " JOIN steps s ON s.task_id = t.id WHERE t.start_at IS NOT NULL"
                         " AND s.parents_remaining = -1 AND s.state = 'pending'"
                         " AND s.queue IS ?2 AND s.worker_queue IS ?1"
                         " ORDER BY t.start_at LIMIT 1",
                         l, &late_at, err)))
      break;
    d_at = r_at < late_at ? r_at : late_at;
    if (fresh) {
      int64_t f_at;
      if ((rc = lane_first(q, SQ_NEXT_READY,
                           "SELECT run_at FROM steps INDEXED BY steps_fresh"
                           " WHERE state = 'pending' AND parents_remaining = 0"
                           " AND queue IS ?2 AND worker_queue IS ?1 LIMIT 1",
                           l, &f_at, err)))
        break;
      if (f_at < d_at) d_at = f_at;
    } else if (l->cut && now < d_at) {
      d_at = now;
    }
    if (l->rate > 0) { /* what waits, waits for a token */
      int64_t token_at = tk__queue_token_at(l->tokens - l->taken, l->rate, now);
      if (d_at != INT64_MAX && d_at < token_at) d_at = token_at;
      if (r_at != INT64_MAX && r_at < token_at) r_at = token_at;
    }
    if (d_at < *due) *due = d_at;
    if (r_at < *retry) *retry = r_at;
  }
  return rc;
}

void tk__sq_lanes_free(tk__sqlite *q) {
  free(q->lanes);
  free(q->lane_of);
  q->lanes = NULL;
  q->lane_of = NULL;
  q->nlanes = q->lanes_cap = q->lane_of_cap = 0;
}

/* queue_put: each definition inserted or updated (a bucket that had a
 * rate keeps its tokens, refilled to now at the old rate and cut to the
 * new burst; a new one starts full), then every other row's limits
 * cleared. One transaction. */
int tk__sq_queue_put(tk_store *s, const tk__queue_def *defs, int n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__queue_defs_check(defs, n, err);
  if (rc) return rc;
  json_t *names = json_array();
  for (int i = 0; names && i < n; i++)
    if (json_array_append_new(names, json_string(defs[i].name)) != 0) {
      json_decref(names);
      names = NULL;
    }
  char *text = names ? json_dumps(names, JSON_COMPACT) : NULL;
  json_decref(names);
  if (text == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory storing queues");
  int64_t now = tk__store_now(&q->base);
  if ((rc = tk__sq_begin(q, err))) {
    free(text);
    return rc;
  }
  for (int i = 0; i < n && rc == 0; i++) {
    sqlite3_stmt *st = tk__sq_stmt(
        q, SQ_QUEUE_PUT,
        "INSERT INTO queues (name, concurrency, rate, burst, tokens, refilled_at)"
        " VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT (name) DO UPDATE SET"
        " concurrency = excluded.concurrency, rate = excluded.rate, burst = excluded.burst,"
        " tokens = CASE WHEN queues.rate > 0 THEN MIN(excluded.burst, queues.burst,"
        " queues.tokens + MAX(0, ?5 - queues.refilled_at) * queues.rate / 1000.0)"
        " ELSE excluded.burst END, refilled_at = ?5",
        err);
    if (st == NULL) {
      rc = TK_ESTORE;
      break;
    }
    sqlite3_bind_text(st, 1, defs[i].name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, defs[i].concurrency);
    sqlite3_bind_double(st, 3, defs[i].rate);
    sqlite3_bind_int(st, 4, tk__queue_burst(&defs[i]));
    sqlite3_bind_int64(st, 5, now);
    rc = tk__sq_done(q, st, err);
  }
  if (rc == 0) {
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_QUEUE_CLEAR,
                                   "UPDATE queues SET concurrency = 0, rate = 0, burst = 0,"
                                   " tokens = 0 WHERE (concurrency <> 0 OR rate <> 0)"
                                   " AND name NOT IN (SELECT value FROM json_each(?1))",
                                   err);
    if (st == NULL) rc = TK_ESTORE;
    else {
      sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
      rc = tk__sq_done(q, st, err);
    }
  }
  free(text);
  if (rc) {
    tk__sq_rollback(q);
    return rc;
  }
  return tk__sq_commit(q, err);
}

/* A queue's counts at ?1 from the ranges of its own (0014: each readiness
 * index leads with queue): its ready steps and its retries waiting; its
 * delayed roots through the delayed tasks (tasks_delayed, whose steps are
 * in no readiness index: a look at every delayed task's steps); in
 * progress through steps_leases (every step in progress); workers through queue_workers' key
 * (?2: seen since). No other queue's steps, nor finished ones, are read. */
#define DELAYED(what, when)                                                                     \
  "(SELECT " what " FROM tasks t INDEXED BY tasks_delayed JOIN steps s ON s.task_id = t.id"     \
  " WHERE t.start_at IS NOT NULL AND " when " AND s.parents_remaining = -1"                     \
  " AND s.state = 'pending' AND s.queue = q.name)"
static const char LIST_SQL[] =
    "SELECT q.name, q.concurrency, q.rate, q.burst, q.tokens, q.refilled_at, q.worker,"
    " (SELECT count(*) FROM steps INDEXED BY steps_fresh WHERE state = 'pending'"
    " AND parents_remaining = 0 AND queue = q.name),"
    " (SELECT MIN(run_at) FROM steps INDEXED BY steps_fresh WHERE state = 'pending'"
    " AND parents_remaining = 0 AND queue = q.name),"
    " (SELECT count(*) FROM steps INDEXED BY steps_retry_due WHERE state = 'waiting_for_retry'"
    " AND queue = q.name AND run_at <= ?1),"
    " (SELECT run_at FROM steps INDEXED BY steps_retry_due WHERE state = 'waiting_for_retry'"
    " AND queue = q.name ORDER BY run_at LIMIT 1),"
    " (SELECT count(*) FROM steps INDEXED BY steps_retry_due WHERE state = 'waiting_for_retry'"
    " AND queue = q.name AND run_at > ?1),"
    " " DELAYED("count(*)", "t.start_at <= ?1") ", " DELAYED("MIN(t.start_at)", "t.start_at <= ?1")
    ", " DELAYED("count(*)", "t.start_at > ?1") ","
    " (SELECT count(*) FROM steps INDEXED BY steps_leases WHERE state = 'in_progress'"
    " AND queue = q.name),"
    " (SELECT count(*) FROM queue_workers w WHERE w.queue = q.name AND w.last_seen >= ?2)"
    " FROM queues q ORDER BY q.name";

/* The least of two times where TK__NONE (NULL) is none. */
static int64_t earliest(int64_t a, int64_t b) {
  if (a == TK__NONE) return b;
  if (b == TK__NONE) return a;
  return a < b ? a : b;
}

int tk__sq_queue_list(tk_store *s, int64_t now, tk__queue_rec **out, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *out = NULL;
  *n = 0;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_QUEUE_LIST, LIST_SQL, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int64(st, 2, now - 60000);
  int cap = 0, step, rc = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)out, &cap, *n + 1, sizeof **out) != 0) {
      rc = tk_err_set(err, TK_ENOMEM, "out of memory listing queues");
      break;
    }
    tk__queue_rec *r = &(*out)[(*n)++];
    snprintf(r->name, sizeof r->name, "%s", tk__sq_text(st, 0));
    r->concurrency = sqlite3_column_int(st, 1);
    r->rate = sqlite3_column_double(st, 2);
    r->burst = r->rate > 0 ? sqlite3_column_int(st, 3) : 0;
    r->tokens = tk__queue_tokens(sqlite3_column_double(st, 4), sqlite3_column_int64(st, 5),
                                 r->rate, r->burst, now);
    r->worker = sqlite3_column_int(st, 6) != 0;
    r->ready = sqlite3_column_int64(st, 7) + sqlite3_column_int64(st, 9) +
               sqlite3_column_int64(st, 12);
    int64_t oldest = tk__sq_col_i64(st, 8);
    if (sqlite3_column_int64(st, 9) > 0) oldest = earliest(oldest, tk__sq_col_i64(st, 10));
    r->oldest_ready_at = earliest(oldest, tk__sq_col_i64(st, 13));
    r->scheduled = sqlite3_column_int64(st, 11) + sqlite3_column_int64(st, 14);
    r->in_progress = sqlite3_column_int64(st, 15);
    r->workers_seen = sqlite3_column_int64(st, 16);
  }
  if (rc == 0) rc = tk__sq_rows_end(q, step, "list queues", err);
  sqlite3_reset(st);
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

int tk__sq_worker_seen(tk_store *s, const char *queue, const char *worker, int64_t now,
                       tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_WORKER_SEEN,
                                 "INSERT INTO queue_workers (queue, worker, last_seen)"
                                 " VALUES (?1, ?2, ?3) ON CONFLICT (queue, worker) DO UPDATE"
                                 " SET last_seen = MAX(last_seen, excluded.last_seen)",
                                 err);
  if (st == NULL) rc = TK_ESTORE;
  else {
    sqlite3_bind_text(st, 1, queue, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, worker, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now);
    rc = tk__sq_done(q, st, err);
  }
  if (rc) {
    tk__sq_rollback(q);
    return rc;
  }
  return tk__sq_commit(q, err);
}
