/* Queues on PostgreSQL (DESIGN §19, 0015_queues.sql): the ops queue_put,
 * queue_list and worker_seen. The claims that obey the limits are in
 * postgres_claim.c. */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q TK__PG_Q

/* The definitions ($1 names, $2 concurrency, $3 rate, $4 burst in effect)
 * inserted or updated at $5 (now): a bucket that had a rate keeps its
 * tokens, refilled to now at the old rate and cut to the new burst; a new
 * one starts full. Then every other queue's limits are cleared. The rows
 * are locked by the update, so a claim that holds a queue's advisory lock
 * meanwhile writes its bucket before or after this, never half. */
static const char PUT_SQL[] =
    "WITH d AS (SELECT * FROM unnest($1::text[], $2::int[], $3::float8[], $4::int[])"
    " AS d(name, concurrency, rate, burst)),"
    " up AS (INSERT INTO queues AS q (name, concurrency, rate, burst, tokens, refilled_at)"
    " SELECT name, concurrency, rate, burst, burst, $5::bigint FROM d"
    " ON CONFLICT (name) DO UPDATE SET concurrency = EXCLUDED.concurrency,"
    " rate = EXCLUDED.rate, burst = EXCLUDED.burst, tokens = CASE WHEN q.rate > 0"
    " THEN LEAST(EXCLUDED.burst, q.burst, q.tokens + GREATEST(0, $5 - q.refilled_at)"
    " * q.rate / 1000.0) ELSE EXCLUDED.burst END, refilled_at = $5 RETURNING 1)"
    " UPDATE queues SET concurrency = 0, rate = 0, burst = 0, tokens = 0"
    " WHERE (concurrency <> 0 OR rate <> 0) AND name <> ALL ($1::text[])"
    " AND (SELECT count(*) FROM up) >= 0";

int tk__pg_queue_put(tk_store *s, const tk__queue_def *defs, int n, tk_err *err) {
  int rc = tk__queue_defs_check(defs, n, err);
  if (rc) return rc;
  tk__buf b[4];
  memset(b, 0, sizeof b);
  for (int k = 0; k < 4; k++) tk__pg_array_open(&b[k]);
  for (int i = 0; i < n; i++) {
    char rate[40];
    snprintf(rate, sizeof rate, "%.17g", defs[i].rate);
    tk__pg_array_text(&b[0], defs[i].name);
    tk__pg_array_i64(&b[1], defs[i].concurrency);
    tk__buf_adds(&b[2], b[2].len > 1 ? "," : "");
    tk__buf_adds(&b[2], rate);
    tk__pg_array_i64(&b[3], tk__queue_burst(&defs[i]));
  }
  char now[24];
  snprintf(now, sizeof now, "%lld", (long long)tk__store_now(s));
  const char *v[5];
  int ok = 1;
  for (int k = 0; k < 4; k++) ok &= (v[k] = tk__pg_array_close(&b[k])) != NULL;
  v[4] = now;
  tk__pg_pipe p;
  if (!ok) rc = tk__pg_oom(err, "store queues");
  if (rc == 0 && (rc = tk__pg_pipe_begin((tk__pg *)s, &p, "store queues", err)) == 0) {
    tk__pg_begin(&p);
    tk__pg_pipe_stmt(&p, PG_QUEUE_PUT, PUT_SQL, 5, v);
    tk__pg_notify(&p); /* claimants waiting on a queue's limits look again */
    tk__pg_commit(&p);
    rc = tk__pg_pipe_run(&p, "store queues", err);
    tk__pg_pipe_end(&p);
  }
  for (int k = 0; k < 4; k++) tk__buf_free(&b[k]);
  return rc;
}

/* A queue's counts at $1 from the ranges of its own in ready (0017: each
 * of its indexes leads with queue): its ready steps, retries and delayed
 * starts; in progress through ready_busy; workers through queue_workers'
 * key ($2: seen since). No other queue's steps, nor finished ones, are
 * read. A fresh step's run_at is when it became ready, so the oldest
 * ready reads its range whole (ordered by priority); a due retry or
 * delayed start is its range's first. */
#define IN_QUEUE(what, cond) "(SELECT " what " FROM ready WHERE queue = q.name AND " cond ")"
#define FIRST_DUE(cond)                                                                         \
  "(SELECT x FROM (SELECT run_at AS x FROM ready WHERE queue = q.name AND " cond                \
  " ORDER BY queue, kind, run_at, step_id LIMIT 1) f WHERE x <= $1)"
#define FRESH "kind = 2"
#define RETRY "kind = 0"
#define LATE "kind = 1"
static const char LIST_SQL[] =
    "SELECT q.name, q.concurrency, q.rate, q.burst,"
    " CASE WHEN q.rate > 0 THEN LEAST(q.burst::float8, q.tokens + GREATEST(0, $1::bigint"
    " - q.refilled_at) * q.rate / 1000.0) ELSE 0 END, q.worker,"
    " " IN_QUEUE("count(*)", FRESH) " + " IN_QUEUE("count(*)", RETRY " AND run_at <= $1")
    " + " IN_QUEUE("count(*)", LATE " AND run_at <= $1") ","
    " " IN_QUEUE("count(*)", RETRY " AND run_at > $1")
    " + " IN_QUEUE("count(*)", LATE " AND run_at > $1") ","
    " (SELECT count(*) FROM ready b WHERE b.queue = q.name AND b.queue IS NOT NULL"
    " AND b.kind = 3),"
    " LEAST(" IN_QUEUE("min(run_at)", FRESH) ", " FIRST_DUE(RETRY) ", " FIRST_DUE(LATE) "),"
    " (SELECT count(*) FROM queue_workers w WHERE w.queue = q.name AND w.last_seen >= $2::bigint)"
    " FROM queues q ORDER BY q.name";

int tk__pg_queue_list(tk_store *s, int64_t now, tk__queue_rec **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_i64(&a, now - 60000);
  PGresult *r;
  int rc = tk__pg_query(s, PG_QUEUE_LIST, LIST_SQL, &a, "list queues", &r, err);
  if (rc) return rc;
  int rows = PQntuples(r);
  if (rows > 0 && (*out = calloc((size_t)rows, sizeof **out)) == NULL) {
    PQclear(r);
    return tk__pg_oom(err, "list queues");
  }
  for (int i = 0; i < rows; i++) {
    tk__queue_rec *q = &(*out)[i];
    tk__pg_copy(q->name, sizeof q->name, r, i, 0);
    q->concurrency = (int)tk__pg_i64(r, i, 1);
    q->rate = strtod(PQgetvalue(r, i, 2), NULL);
    q->burst = q->rate > 0 ? (int)tk__pg_i64(r, i, 3) : 0;
    q->tokens = strtod(PQgetvalue(r, i, 4), NULL);
    q->worker = tk__pg_bool(r, i, 5);
    q->ready = tk__pg_i64(r, i, 6);
    q->scheduled = tk__pg_i64(r, i, 7);
    q->in_progress = tk__pg_i64(r, i, 8);
    q->oldest_ready_at = tk__pg_i64(r, i, 9);
    q->workers_seen = tk__pg_i64(r, i, 10);
  }
  *n = rows;
  PQclear(r);
  return 0;
}

int tk__pg_worker_seen(tk_store *s, const char *queue, const char *worker, int64_t now,
                       tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_text(&a, queue);
  tk__pg_arg_text(&a, worker);
  tk__pg_arg_i64(&a, now);
  PGresult *r;
  int rc = tk__pg_query(s, PG_WORKER_SEEN,
                        "INSERT INTO queue_workers AS w (queue, worker, last_seen)"
                        " VALUES ($1::text, $2::text, $3::bigint) ON CONFLICT (queue, worker)"
                        " DO UPDATE SET last_seen = GREATEST(w.last_seen, EXCLUDED.last_seen)",
                        &a, "worker seen", &r, err);
  PQclear(r);
  return rc;
}
