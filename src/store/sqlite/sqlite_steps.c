/* The SQLite backend's hot path: creating tasks, claiming ready steps,
 * recording fenced outcomes, leases and the reaper's query. */
#include "store/sqlite/sqlite_internal.h"

#include <string.h>

#include "store/flow.h"

/* The single int64 a cached query returns, or `none` when it returns NULL. */
static int scalar(tk__sqlite *q, int id, const char *sql, int64_t none, int64_t *out,
                  tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_type(st, 0) == SQLITE_NULL ? none : sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? 0 : tk__sq_fail(q, "query", err);
}

int tk__sq_task_create(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc;
  if ((rc = tk__sq_begin(q, err))) return rc;
  if ((rc = tk__sq_task_insert(q, t, task_id, existed, err))) {
    tk__sq_rollback(q);
    return rc;
  }
  if (*existed) {
    tk__sq_rollback(q);
    return 0;
  }
  return tk__sq_commit(q, err);
}

int tk__sq_task_insert(tk__sqlite *q, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err) {
  int rc;
  *existed = 0;
  if (t->identity != NULL) {
    sqlite3_stmt *st =
        tk__sq_stmt(q, SQ_TASK_BY_IDENTITY, "SELECT id FROM tasks WHERE identity = ?", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_text(st, 1, t->identity, -1, SQLITE_STATIC);
    if ((rc = tk__sq_row(q, st, "identity lookup", existed, err))) return rc;
    if (*existed) *task_id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (*existed) return 0;
  }
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_TASK_INSERT,
                                 "INSERT INTO tasks (template_id, identity, context, state,"
                                 " steps_total, created_at, updated_at)"
                                 " VALUES (?, ?, ?, 'pending', ?, ?, ?)",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, t->template_id);
  if (t->identity) sqlite3_bind_text(st, 2, t->identity, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, t->context, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, t->nsteps);
  sqlite3_bind_int64(st, 5, t->now);
  sqlite3_bind_int64(st, 6, t->now);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  *task_id = sqlite3_last_insert_rowid(q->db);
  int later = t->start_at > t->now; /* a delayed start (sqlite_delayed.c) */
  if (later && (rc = tk__sq_delay_task(q, *task_id, t->start_at, err))) return rc;
  if ((rc = tk__sq_transition(q, *task_id, 0, NULL, TK__TASK_PENDING, t->now, TK__REASON_CREATED,
                              0, err)))
    return rc;
  for (int i = 0; i < t->nsteps; i++) {
    const tk__new_step *ns = &t->steps[i];
    st = tk__sq_stmt(q, SQ_STEP_INSERT,
                     "INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable,"
                     " backoff, parents_remaining, run_at) VALUES (?, ?, ?, 'pending', ?, ?,"
                     " ?, ?, ?)",
                     err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, *task_id);
    sqlite3_bind_int(st, 2, i);
    sqlite3_bind_text(st, 3, ns->name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, ns->max_attempts);
    sqlite3_bind_int(st, 5, ns->retryable);
    sqlite3_bind_text(st, 6, ns->backoff, -1, SQLITE_STATIC);
    int delayed = later && ns->nparents == 0;
    sqlite3_bind_int(st, 7, delayed ? TK__DELAYED : ns->nparents);
    sqlite3_bind_int64(st, 8, delayed ? t->start_at : t->now);
    if ((rc = tk__sq_done(q, st, err))) return rc;
    if (ns->batch &&
        (rc = tk__sq_items_insert(q, sqlite3_last_insert_rowid(q->db), ns, err)))
      return rc;
  }
  return tk__sq_task_extras(q, *task_id, t, err);
}

/* One queue's row at submit (0014): inserted if new, with `worker` or
 * `plain` set for the kind of step that named it (kept once set). */
static int queue_named(tk__sqlite *q, const char *name, int worker, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_QUEUE_NAMED,
                                 "INSERT INTO queues (name, worker, plain) VALUES (?1, ?2, 1 - ?2)"
                                 " ON CONFLICT (name) DO UPDATE SET worker = MAX(worker, ?2),"
                                 " plain = MAX(plain, 1 - ?2)"
                                 " WHERE worker < ?2 OR plain < 1 - ?2",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, worker);
  return tk__sq_done(q, st, err);
}

int tk__sq_task_extras(tk__sqlite *q, int64_t task_id, const tk__new_task *t, tk_err *err) {
  int rc;
  if (t->deadline_at != 0 && (rc = tk__sq_deadline_put(q, task_id, t->deadline_at, err)))
    return rc;
  if (t->priority != 0) {
    sqlite3_stmt *st =
        tk__sq_stmt(q, SQ_TASK_PRIORITY, "UPDATE tasks SET priority = ?1 WHERE id = ?2", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int(st, 1, t->priority);
    sqlite3_bind_int64(st, 2, task_id);
    if ((rc = tk__sq_done(q, st, err))) return rc;
    st = tk__sq_stmt(q, SQ_STEPS_PRIORITY, "UPDATE steps SET priority = ?1 WHERE task_id = ?2",
                     err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int(st, 1, t->priority);
    sqlite3_bind_int64(st, 2, task_id);
    if ((rc = tk__sq_done(q, st, err))) return rc;
  }
  for (int i = 0; i < t->nsteps; i++) {
    const tk__new_step *ns = &t->steps[i];
    /* A worker step's queue is its worker queue (store.h). */
    const char *queue = ns->queue ? ns->queue : ns->worker_queue;
    if (queue == NULL) continue;
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_STEP_QUEUE,
                                   "UPDATE steps SET worker_queue = ?1, queue = ?2"
                                   " WHERE task_id = ?3 AND idx = ?4",
                                   err);
    if (st == NULL) return TK_ESTORE;
    if (ns->worker_queue) sqlite3_bind_text(st, 1, ns->worker_queue, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, queue, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, task_id);
    sqlite3_bind_int(st, 4, i);
    if ((rc = tk__sq_done(q, st, err)) || (rc = queue_named(q, queue, ns->worker_queue != NULL, err)))
      return rc;
  }
  return 0;
}

/* The columns a claim reads, from steps s joined with their task t. */
#define CLAIM_COLUMNS                                                                       \
  "SELECT s.id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), s.attempts,"          \
  " s.max_attempts, s.retryable, s.run_at, s.last_delay_ms, s.backoff, s.state, t.state,"   \
  " COALESCE(s.item_index, -1), t.deadline_at FROM steps s"

/* Text column col of st into dst (cap bytes), cut short if it must be:
 * the claim's hot loop, where snprintf showed in profiles. */
static void column_copy(char *dst, size_t cap, sqlite3_stmt *st, int col) {
  const unsigned char *text = sqlite3_column_text(st, col);
  size_t len = text ? (size_t)sqlite3_column_bytes(st, col) : 0;
  if (len >= cap) len = cap - 1;
  if (len) memcpy(dst, text, len);
  dst[len] = '\0';
}

/* Append to out[*count] the rows of the cached claim query `id` (?1: due
 * until, ?2: how many, ?3 and ?4: lane li's worker queue and queue) until
 * *count reaches end, leased for r->lease_ms from now; q->lane_of says
 * which lane each came from. A row already in out[dedupe..*count) (a lane
 * scanned again) is passed over. *more: a row was left after end (one
 * row past it is read to know). Every row is read before any is changed:
 * the claim's updates take rows out of the index scanned. */
static int claim_scan(tk__sqlite *q, int id, const char *sql, int64_t until, int64_t now,
                      const tk__claim_request *r, int li, int end, int dedupe, int *count,
                      int *more, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  const tk__sq_lane *lane = &q->lanes[li];
  tk__claimed *out = r->out;
  int64_t lease_ms = r->lease_ms;
  sqlite3_bind_int64(st, 1, until);
  sqlite3_bind_int(st, 2, end - *count + (*count - dedupe) + 1);
  if (lane->worker) sqlite3_bind_text(st, 3, lane->name, -1, SQLITE_STATIC);
  if (lane->named) sqlite3_bind_text(st, 4, lane->name, -1, SQLITE_STATIC);
  int rc = SQLITE_DONE, from = *count;
  *more = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t step_id = sqlite3_column_int64(st, 0);
    int seen = 0;
    for (int k = dedupe; k < from && !seen; k++) seen = out[k].step_id == step_id;
    if (seen) continue;
    if (*count == end) {
      *more = 1;
      break;
    }
    q->lane_of[*count] = li;
    tk__claimed *c = &out[(*count)++];
    c->step_id = step_id;
    c->task_id = sqlite3_column_int64(st, 1);
    c->template_id = sqlite3_column_int64(st, 2);
    c->idx = sqlite3_column_int(st, 3);
    c->attempt = sqlite3_column_int(st, 4) + 1;
    c->max_attempts = sqlite3_column_int(st, 5);
    c->retryable = sqlite3_column_int(st, 6);
    c->run_at = sqlite3_column_int64(st, 7);
    c->last_delay_ms = sqlite3_column_int64(st, 8);
    column_copy(c->backoff, sizeof c->backoff, st, 9);
    column_copy(c->prev_state, sizeof c->prev_state, st, 10);
    c->task_was_pending = strcmp(tk__sq_text(st, 11), TK__TASK_PENDING) == 0;
    c->item_index = sqlite3_column_int(st, 12);
    c->task_deadline_at = c->task_was_pending ? sqlite3_column_int64(st, 13) : 0;
    c->lease_expires_at = now + lease_ms;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return tk__sq_fail(q, "claim", err);
  return 0;
}

/* Open an attempt row for each of the n steps claimed in out[] (owner,
 * started now, due at the step's run_at) and move the steps to in_progress under their leases, with
 * the attempt row's id as the claim's fence. Attempt ids are MAX(id) + 1
 * onward in claim order (free: the write lock is held), so the rows go in
 * by groups (an INSERT per row cost about 1.6 times as much) and one
 * UPDATE joins the steps to them (measured level with an UPDATE per step,
 * which it replaces). */
static int claim_rows(tk__sqlite *q, tk__claimed *out, int n, const char *owner, int64_t now,
                      tk_err *err) {
  int64_t first_id;
  int rc = scalar(q, SQ_ATTEMPT_NEXT_ID, "SELECT MAX(id) FROM attempts", 0, &first_id, err);
  if (rc) return rc;
  first_id++;
  for (int done = 0; done < n;) {
    int rows = n - done >= TK__SQ_ROWS_PER_INSERT ? TK__SQ_ROWS_PER_INSERT : 1;
    sqlite3_stmt *st =
        tk__sq_insert_rows(q, SQ_ATTEMPT_INSERT, SQ_ATTEMPTS_MANY,
                           "INSERT INTO attempts (id, step_id, attempt, owner, started_at,"
                           " due_at)",
                           6, rows, err);
    if (st == NULL) return TK_ESTORE;
    for (int i = 0; i < rows; i++, done++) {
      tk__claimed *c = &out[done];
      c->claim_id = first_id + done;
      sqlite3_bind_int64(st, 6 * i + 1, c->claim_id);
      sqlite3_bind_int64(st, 6 * i + 2, c->step_id);
      sqlite3_bind_int(st, 6 * i + 3, c->attempt);
      sqlite3_bind_text(st, 6 * i + 4, owner, -1, SQLITE_STATIC);
      /* A retry claimed ahead of its run_at is held until then (the
       * engine's pool): it starts at its run_at, not at the claim. */
      sqlite3_bind_int64(st, 6 * i + 5, c->run_at > now ? c->run_at : now);
      sqlite3_bind_int64(st, 6 * i + 6, c->run_at);
    }
    if ((rc = tk__sq_done(q, st, err))) return rc;
  }
  /* One lease for the whole claim: every row has the same expiry. */
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_CLAIM_STEPS,
                                 "UPDATE steps SET state = 'in_progress', attempts = attempts + 1,"
                                 " lease_owner = ?1, lease_expires_at = ?2, claim_id = a.id"
                                 " FROM attempts a WHERE a.id BETWEEN ?3 AND ?4"
                                 " AND steps.id = a.step_id",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, out[0].lease_expires_at);
  sqlite3_bind_int64(st, 3, first_id);
  sqlite3_bind_int64(st, 4, first_id + n - 1);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  if (sqlite3_changes(q->db) != n)
    return tk_err_set(err, TK_ESTORE, "claim: %d of %d steps moved to in_progress",
                      sqlite3_changes(q->db), n);
  return 0;
}

/* A worker's claims (DESIGN §19): each attempt row keeps its token's
 * hash, never the secret. */
static int claim_tokens(tk__sqlite *q, tk__claimed *c, int n,
                        const unsigned char (*hashes)[TK__TOKEN_HASH_LEN], tk_err *err) {
  for (int i = 0; i < n; i++) {
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_CLAIM_TOKEN,
                                   "UPDATE attempts SET token_hash = ?1 WHERE id = ?2", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_blob(st, 1, hashes[i], TK__TOKEN_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, c[i].claim_id);
    c[i].token_index = i;
    int rc = tk__sq_done(q, st, err);
    if (rc) return rc;
  }
  return 0;
}

/* Count the retries among the n steps just claimed at `now`, and how late
 * each started after its run_at (0 when claimed ahead), in now's minute.
 * A retry is an attempt after the first, or a first one after an
 * operator's retry, which leaves the step waiting for a retry. */
static int activity_claimed(tk__sqlite *q, const tk__claimed *c, int n, const char *owner,
                            int64_t now, tk_err *err) {
  tk__sq_minute add = {0};
  for (int i = 0; i < n; i++) {
    if (c[i].attempt <= 1 && strcmp(c[i].prev_state, TK__STEP_WAITING_FOR_RETRY) != 0) continue;
    int64_t late = now > c[i].run_at ? now - c[i].run_at : 0;
    add.retries++;
    add.lateness_n++;
    add.lateness_sum_ms += late;
    if (late > add.lateness_max_ms) add.lateness_max_ms = late;
  }
  return add.retries ? tk__sq_minutes_add(q, now, owner, &add, err) : 0;
}

/* Step st, an UPDATE of one attempt row RETURNING started_at, owner and
 * outcome, and count what it finished (if it changed the row) in the
 * minute the attempt started, under its owner. */
static int attempt_finished(tk__sqlite *q, sqlite3_stmt *st, const char *what, tk_err *err) {
  int found, rc = tk__sq_row(q, st, what, &found, err);
  if (rc == 0 && found) {
    const char *outcome = tk__sq_text(st, 2);
    int ok = outcome && strcmp(outcome, "success") == 0;
    tk__sq_minute add = {.succeeded = ok, .failed = !ok};
    rc = tk__sq_minutes_add(q, sqlite3_column_int64(st, 0), tk__sq_text(st, 1), &add, err);
  }
  sqlite3_reset(st);
  return rc;
}

/* The claim's two readiness scans (0014_queues.sql): INDEXED BY, each must
 * be a range scan of its partial index (and fails to prepare if a schema
 * change ever makes that impossible), of one lane: ?3 its worker queue,
 * ?4 its queue (both NULL: an orchestrator's steps of no queue). */
static const char RETRY_SQL[] =
    CLAIM_COLUMNS " INDEXED BY steps_retry_due JOIN tasks t ON t.id = s.task_id"
    " WHERE s.state = 'waiting_for_retry' AND s.worker_queue IS ?3 AND s.queue IS ?4"
    " AND s.run_at <= ?1 ORDER BY s.run_at, s.id LIMIT ?2";
static const char FRESH_SQL[] =
    CLAIM_COLUMNS " INDEXED BY steps_fresh JOIN tasks t ON t.id = s.task_id"
    " WHERE s.state = 'pending' AND s.parents_remaining = 0"
    " AND s.worker_queue IS ?3 AND s.queue IS ?4 AND s.run_at <= ?1"
    " ORDER BY s.priority DESC, s.task_id, s.id LIMIT ?2";

/* Claim up to cap more steps of lane li (its room allowing): its due
 * retries, then its fresh steps while *fresh_left lasts. */
static int lane_take(tk__sqlite *q, tk__claim_request *r, int li, int cap, int dedupe,
                     int64_t now, int *count, int *fresh_left, tk_err *err) {
  tk__sq_lane *l = &q->lanes[li];
  int before = *count, rc, more = 0;
  if (l->room - l->taken < cap) cap = l->room - l->taken;
  l->cut = 1; /* rows may be left: unless a scan says there are none */
  if (cap <= 0) return 0;
  int end = *count + cap;
  if ((rc = claim_scan(q, SQ_CLAIM_RETRY, RETRY_SQL, now + r->retry_ahead_ms, now, r, li, end,
                       dedupe < 0 ? *count : dedupe, count, &more, err)))
    return rc;
  if (*count < end) {
    int fend = *fresh_left < end - *count ? *count + *fresh_left : end, from = *count;
    if (fend > *count) {
      if ((rc = claim_scan(q, SQ_CLAIM_FRESH, FRESH_SQL, now, now, r, li, fend,
                           dedupe < 0 ? *count : dedupe, count, &more, err)))
        return rc;
      l->cut = more;
    }
    *fresh_left -= *count - from;
  }
  l->taken += *count - before;
  return 0;
}

/* Claim up to cap more steps of the queues' lanes (1..nlanes), visited in
 * an order that rotates with q->turn. */
static int queues_take(tk__sqlite *q, tk__claim_request *r, int cap, int dedupe, int64_t now,
                       int *count, int *fresh_left, tk_err *err) {
  int nq = q->nlanes - 1, start = (int)(q->turn / 2 % (unsigned)nq), end = *count + cap, rc = 0;
  for (int k = 0; k < nq && *count < end && rc == 0; k++)
    rc = lane_take(q, r, 1 + (start + k) % nq, end - *count, dedupe, now, count, fresh_left, err);
  return rc;
}

/* Claim for request r inside the caller's transaction (DESIGN §4): of each
 * lane it takes from, the retries that are due (or due within
 * r->retry_ahead_ms), earliest first, then ready pending steps, higher
 * priority first and then oldest task first (see migrations 0005 and
 * 0014). A retry has a promised time and fresh work has none, so a
 * backlog of new tasks does not make retries late; and a started task goes
 * on before new ones start, which keeps the pages being written few.
 *
 * Lanes (sqlite_queues.c): a worker's claim takes from its queue's; an
 * orchestrator's from the steps of no queue and from each queue that an
 * orchestrator's step named, each queue only as far as its room (its
 * concurrency less its steps in progress, whoever holds them; its bucket's
 * whole tokens). With no such queue (none was ever named) that is the
 * claim of old. Otherwise the claim divides its limit so that neither side
 * starves the other: one side (the steps of no queue, or the queues, in
 * turn from claim to claim) first takes up to half of it (rounded up), the
 * other up to what is left, then the first what the other left; the
 * queues are visited in an order that rotates from claim to claim. */
static int claim_in_txn(tk__sqlite *q, tk__claim_request *r, tk_err *err) {
  int rc, count = 0;
  int64_t now = r->now = tk__store_now(&q->base);
  r->n = 0;
  r->next_due_at = INT64_MIN;
  /* A claim needs the per-minute counts (0010): on an older schema it
   * fails whole, before anything is claimed. */
  if (tk__sq_minutes_ready(q, err) != 0) return TK_ESTORE;
  if ((rc = tk__sq_lanes_load(q, r->worker_queue, now, err))) return rc;
  if (tk__grow((void **)&q->lane_of, &q->lane_of_cap, r->limit + 1, sizeof *q->lane_of) != 0)
    return tk_err_set(err, TK_ENOMEM, "out of memory claiming");
  int fresh_left = r->fresh_limit < r->limit ? r->fresh_limit : r->limit;
  /* Delayed starts that came due join the fresh steps (migration 0009). */
  if (fresh_left > 0 && (rc = tk__sq_release_delayed(q, now, fresh_left, err))) return rc;
  if (q->nlanes == 1) {
    rc = lane_take(q, r, 0, r->limit, -1, now, &count, &fresh_left, err);
  } else {
    int queues_first = q->turn & 1, half = (r->limit + 1) / 2;
    rc = queues_first ? queues_take(q, r, half, -1, now, &count, &fresh_left, err)
                      : lane_take(q, r, 0, half, -1, now, &count, &fresh_left, err);
    if (rc == 0 && count < r->limit)
      rc = queues_first
               ? lane_take(q, r, 0, r->limit - count, -1, now, &count, &fresh_left, err)
               : queues_take(q, r, r->limit - count, -1, now, &count, &fresh_left, err);
    if (rc == 0 && count < r->limit)
      rc = queues_first ? queues_take(q, r, r->limit - count, 0, now, &count, &fresh_left, err)
                        : lane_take(q, r, 0, r->limit - count, 0, now, &count, &fresh_left, err);
    q->turn++;
  }
  if (rc) return rc;
  if (count > 0 && (rc = tk__sq_lanes_spend(q, now, err))) return rc;
  if (count == 0) return tk__sq_lanes_due(q, now, 0, &r->next_due_at, &r->next_retry_at, err);
  if ((rc = claim_rows(q, r->out, count, r->owner, now, err))) return rc;
  if (r->token_hashes && (rc = claim_tokens(q, r->out, count, r->token_hashes, err))) return rc;
  if ((rc = activity_claimed(q, r->out, count, r->owner, now, err))) return rc;
  for (int i = 0; i < count; i++) {
    tk__claimed *c = &r->out[i];
    if ((rc = tk__sq_transition(q, c->task_id, c->step_id, c->prev_state, TK__STEP_IN_PROGRESS,
                                now, TK__REASON_CLAIMED, c->attempt, err)))
      return rc;
    if (c->task_was_pending) {
      sqlite3_stmt *st = tk__sq_stmt(q, SQ_TASK_START,
                                     "UPDATE tasks SET state = 'in_progress', updated_at = ?"
                                     " WHERE id = ? AND state = 'pending'",
                                     err);
      if (st == NULL) return TK_ESTORE;
      sqlite3_bind_int64(st, 1, now);
      sqlite3_bind_int64(st, 2, c->task_id);
      if ((rc = tk__sq_done(q, st, err))) return rc;
      if (sqlite3_changes(q->db) > 0 &&
          (rc = tk__sq_transition(q, c->task_id, 0, TK__TASK_PENDING, TK__TASK_IN_PROGRESS, now,
                                  TK__REASON_FIRST_CLAIM, 0, err)))
        return rc;
    }
  }
  /* After the steps moved: those claimed are out of the retries' index. */
  if ((rc = tk__sq_lanes_due(q, now, 0, &r->next_due_at, &r->next_retry_at, err))) return rc;
  tk__sq_claim_inputs(q, r, r->out, count);
  r->n = count;
  return 0;
}

/* Count one finished parent off child step `child` of task_id; *ready
 * gets 1 when that was its last parent (it is due now). Two statements
 * instead of RETURNING, which costs SQLite an ephemeral table per call;
 * both find the row through the (task_id, idx) index. */
static int release_child(tk__sqlite *q, int64_t task_id, int child, int64_t now, int *ready,
                         tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_RELEASE_CHILD,
                                 "UPDATE steps SET parents_remaining = 0, run_at = ?1"
                                 " WHERE task_id = ?2 AND idx = ?3 AND parents_remaining = 1",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int64(st, 2, task_id);
  sqlite3_bind_int(st, 3, child);
  int rc = tk__sq_done(q, st, err);
  if (rc) return rc;
  *ready = sqlite3_changes(q->db) == 1;
  if (*ready) return 0;
  st = tk__sq_stmt(q, SQ_RELEASE_CHILDREN,
                   "UPDATE steps SET parents_remaining = parents_remaining - 1"
                   " WHERE task_id = ?1 AND idx = ?2 AND parents_remaining > 1",
                   err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  sqlite3_bind_int(st, 2, child);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  /* A child always waits for the parent that finished: no row means the
   * template and the task's steps disagree, which must not pass for a
   * release. */
  if (sqlite3_changes(q->db) == 0)
    return tk_err_set(err, TK_ESTORE, "step %d of task %lld does not wait for a parent", child,
                      (long long)task_id);
  return 0;
}

int tk__sq_release_children(tk__sqlite *q, int64_t task_id, int64_t template_id, int idx,
                            const char *results, int resolving, int64_t now, int *released,
                            tk_err *err) {
  const tk__flow *flow;
  const int *children;
  int n, total = 0;
  int rc = tk__sq_children(q, template_id, idx, &children, &n, &flow, err);
  if (rc == 0 && flow->special)
    return tk__sq_flow_release(q, flow, task_id, idx, results, resolving, now, released, err);
  for (int i = 0; i < n && rc == 0; i++) {
    int ready = 0;
    rc = release_child(q, task_id, children[i], now, &ready, err);
    total += ready;
  }
  if (rc == 0 && released) *released = total;
  return rc;
}

int tk__sq_settle_task(tk__sqlite *q, int64_t task_id, int64_t now, const char **state,
                       tk_err *err) {
  *state = NULL;
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_TASK_PROGRESS,
      "SELECT state, steps_done, steps_total, steps_error, parent_claim_id IS NOT NULL"
      " FROM tasks WHERE id = ?",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, task_id);
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_reset(st);
    return tk__sq_fail(q, "settle task", err);
  }
  char from[TK__STATE_MAX];
  snprintf(from, sizeof from, "%s", tk__sq_text(st, 0));
  tk__task_counts counts = {from, sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                            sqlite3_column_int(st, 3)};
  int can_progress = 0, child = sqlite3_column_int(st, 4);
  sqlite3_reset(st);
  /* A separate query: SQLite evaluates both sides of AND in a result column. */
  if (tk__settle_needs_scan(&counts)) {
    st = tk__sq_stmt(q, SQ_TASK_CAN_PROGRESS,
                     "SELECT EXISTS (SELECT 1 FROM steps WHERE task_id = ? AND (state IN"
                     " ('in_progress', 'waiting_for_retry', 'waiting') OR (state = 'pending' AND"
                     " parents_remaining = 0)))",
                     err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, task_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) can_progress = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW) return tk__sq_fail(q, "settle task", err);
  }
  const char *reason;
  const char *to = tk__settle(&counts, can_progress, &reason);
  if (to == NULL) return 0;
  st = tk__sq_stmt(q, SQ_TASK_FINISH,
                   "UPDATE tasks SET state = ?, updated_at = ?,"
                   " finished_at = CASE WHEN ? THEN ? ELSE NULL END WHERE id = ?",
                   err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, to, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, now);
  sqlite3_bind_int(st, 3, tk__task_state_terminal(to));
  sqlite3_bind_int64(st, 4, now);
  sqlite3_bind_int64(st, 5, task_id);
  int rc = tk__sq_done(q, st, err);
  if (rc) return rc;
  if ((rc = tk__sq_child_end(q, task_id, child, from, to, err))) return rc;
  if ((rc = tk__sq_transition(q, task_id, 0, from, to, now, reason, 0, err))) return rc;
  *state = to;
  return 0;
}

/* Bump a task's done or error counter. */
static int task_counter(tk__sqlite *q, int id, const char *sql, int64_t task_id, int64_t now,
                        tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int64(st, 2, task_id);
  return tk__sq_done(q, st, err);
}

/* Finish the attempt row of a refused outcome's claim as fenced_out, if it
 * is still open: every claim is accounted for (DESIGN §2). */
static int fenced_out(tk__sqlite *q, const tk__outcome *o, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db,
                         "UPDATE attempts SET finished_at = ?, outcome = 'fenced_out',"
                         " error = ? WHERE id = ? AND outcome IS NULL"
                         " RETURNING started_at, owner, outcome",
                         -1, &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "fenced out", err);
  char why[160];
  tk__fenced_attempt_text(why, sizeof why, o);
  sqlite3_bind_int64(st, 1, o->now);
  sqlite3_bind_text(st, 2, why, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, o->claim_id);
  int rc = attempt_finished(q, st, "fenced out", err);
  sqlite3_finalize(st);
  return rc;
}

/* Record one outcome inside the caller's transaction. TK_EFENCED when the
 * claim no longer holds the step. */
static int record_one(tk__sqlite *q, const tk__outcome *o, tk__effects *fx, tk_err *err) {
  int rc;
  memset(fx, 0, sizeof *fx);
  const char *to = tk__next_state_name(o->next);
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_RECORD_STEP,
      "UPDATE steps SET state = ?1, results = ?2, last_error = ?3,"
      " run_at = CASE WHEN ?4 IS NULL THEN run_at ELSE ?4 END,"
      " last_delay_ms = CASE WHEN ?5 IS NULL THEN last_delay_ms ELSE ?5 END,"
      " lease_owner = NULL, lease_expires_at = NULL, claim_id = NULL"
      " WHERE id = ?6 AND state = 'in_progress' AND claim_id = ?7"
      /* A reaper's lease_expired outcome (?8 = now) is refused if a heartbeat
       * renewed the lease after the reaper looked. */
      " AND (?8 IS NULL OR lease_expires_at <= ?8)",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, to, -1, SQLITE_STATIC);
  if (o->results) sqlite3_bind_text(st, 2, o->results, -1, SQLITE_STATIC);
  if (o->error) sqlite3_bind_text(st, 3, o->error, -1, SQLITE_STATIC);
  if (o->next == TK__NEXT_RETRY) {
    sqlite3_bind_int64(st, 4, o->run_at);
    sqlite3_bind_int64(st, 5, o->delay_ms);
  }
  sqlite3_bind_int64(st, 6, o->step_id);
  sqlite3_bind_int64(st, 7, o->claim_id);
  if (o->fence_lease) sqlite3_bind_int64(st, 8, o->now);
  if ((rc = tk__sq_done(q, st, err))) return rc;
  if (sqlite3_changes(q->db) == 0) {
    /* Fenced out: another claim holds the step now, or it moved on. */
    if ((rc = tk__sq_count(q, "fenced_writes", 1, err))) return rc;
    /* The claim's attempt row says so unless something finished it already
     * (a reaper's lease_expired): after a cancel it would stay open. Not
     * for a refused reaper: the claim it meant to expire is alive, its
     * lease renewed, or was finished by whoever moved the step on. */
    if (!o->fence_lease && (rc = fenced_out(q, o, err))) return rc;
    return tk__fenced_error(err, o);
  }
  int64_t task_id = o->task_id, template_id = o->template_id;
  int idx = o->idx;
  /* A lease the reaper expired, counted store-wide in its transaction. */
  if (tk__outcome_expires_lease(o) && (rc = tk__sq_count(q, "lease_expired", 1, err))) return rc;
  /* The fence held: a batch step's item results go in with the outcome. */
  if (o->nitems > 0 && (rc = tk__sq_items_apply(q, o->step_id, o->items, o->nitems, err)))
    return rc;

  st = tk__sq_stmt(q, SQ_ATTEMPT_FINISH,
                   "UPDATE attempts SET finished_at = ?, outcome = ?, error = ?, delay_ms = ?,"
                   " delay_source = ?, next_run_at = ? WHERE id = ?"
                   " RETURNING started_at, owner, outcome",
                   err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, o->finished_at);
  sqlite3_bind_text(st, 2, o->attempt_outcome, -1, SQLITE_STATIC);
  if (o->error) sqlite3_bind_text(st, 3, o->error, -1, SQLITE_STATIC);
  if (o->next == TK__NEXT_RETRY) {
    sqlite3_bind_int64(st, 4, o->delay_ms);
    sqlite3_bind_text(st, 5, tk_delay_source_name(o->source), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, o->run_at);
  }
  sqlite3_bind_int64(st, 7, o->claim_id);
  if ((rc = attempt_finished(q, st, "finish attempt", err))) return rc;
  if ((rc = tk__sq_transition(q, task_id, o->step_id, TK__STEP_IN_PROGRESS, to, o->now,
                              o->attempt_outcome, o->attempt, err)))
    return rc;

  /* An instance of a map counts in no task counter: its map step does,
   * once the last instance finishes. */
  if (o->instance > 0) {
    if (o->next == TK__NEXT_RETRY) return 0;
    const tk__flow *flow;
    int settle = 0;
    if ((rc = tk__sq_flow(q, template_id, &flow, err)) ||
        (rc = tk__sq_flow_instance_done(q, flow, task_id, idx, o->now, &fx->children_released,
                                        &settle, err)))
      return rc;
    return settle ? tk__sq_settle_task(q, task_id, o->now, &fx->task_state, err) : 0;
  }
  if (o->next == TK__NEXT_COMPLETE) {
    if ((rc = tk__sq_release_children(q, task_id, template_id, idx, o->results, 0, o->now,
                                      &fx->children_released, err)))
      return rc;
    /* Most completions leave a running task with steps to go and none in
     * error, where settling changes nothing: one statement counts those.
     * The others take the general way below. */
    if ((rc = task_counter(q, SQ_TASK_DONE_QUIET,
                           "UPDATE tasks SET steps_done = steps_done + 1, updated_at = ?"
                           " WHERE id = ? AND state = 'in_progress' AND steps_error = 0"
                           " AND steps_done + 1 < steps_total",
                           task_id, o->now, err)))
      return rc;
    if (sqlite3_changes(q->db) == 1) return 0;
    if ((rc = task_counter(q, SQ_TASK_DONE,
                           "UPDATE tasks SET steps_done = steps_done + 1, updated_at = ?"
                           " WHERE id = ?",
                           task_id, o->now, err)))
      return rc;
  } else if (o->next == TK__NEXT_ERROR) {
    if ((rc = task_counter(q, SQ_TASK_ERROR,
                           "UPDATE tasks SET steps_error = steps_error + 1, updated_at = ?"
                           " WHERE id = ?",
                           task_id, o->now, err)))
      return rc;
  }
  if (o->next != TK__NEXT_RETRY) return tk__sq_settle_task(q, task_id, o->now, &fx->task_state, err);
  return 0;
}

int tk__sq_record(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                  tk__claim_request *next, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc, failed = -1;
  tk_err one;
  if (next) next->n = 0;
  for (int i = 0; i < n; i++) tk_err_clear(&errs[i]);
  /* Fast path: the whole group, and the next claim, in one transaction. */
  q->nminutes = 0;
  if ((rc = tk__sq_begin(q, err))) return rc;
  for (int i = 0; i < n && failed < 0; i++) {
    rc = record_one(q, &o[i], &fx[i], &errs[i]);
    if (rc != 0 && rc != TK_EFENCED) failed = i;
  }
  if (failed < 0 && next) {
    if ((rc = claim_in_txn(q, next, &one)) != 0) {
      if (n == 0) { /* a claim alone: its failure is the call's */
        tk__sq_rollback(q);
        tk__claimed_inputs_free(next->out, next->n);
        next->n = 0;
        if (err) *err = one;
        return rc;
      }
      failed = n; /* record without the claim below */
    }
  }
  if (failed < 0 && tk__sq_minutes_flush(q, &one) == 0 && tk__sq_commit(q, &one) == 0) return 0;
  tk__sq_rollback(q);
  if (next) {
    tk__claimed_inputs_free(next->out, next->n);
    next->n = 0;
    next->next_retry_at = next->next_due_at = INT64_MIN; /* unknown: look again soon */
  }
  /* A store error in one outcome (rare) undid the group: record them one
   * per transaction, so that only the failing one is lost (its lease then
   * expires and the reaper retries it), each with its own error. */
  for (int i = 0; i < n; i++) {
    tk_err_clear(&errs[i]);
    q->nminutes = 0;
    if ((rc = tk__sq_begin(q, &errs[i])) == 0) {
      rc = record_one(q, &o[i], &fx[i], &errs[i]);
      if ((rc == 0 || rc == TK_EFENCED) &&
          (tk__sq_minutes_flush(q, &one) != 0 || tk__sq_commit(q, &one) != 0)) {
        errs[i] = one;
        rc = one.code;
      }
    }
    if (rc != 0 && rc != TK_EFENCED) {
      tk__sq_rollback(q);
      memset(&fx[i], 0, sizeof fx[i]);
    }
  }
  return 0;
}

int tk__sq_heartbeat(tk_store *s, int64_t step_id, int64_t claim_id, int64_t expires_at,
                     tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_HEARTBEAT,
                                 "UPDATE steps SET lease_expires_at = ? WHERE id = ? AND"
                                 " state = 'in_progress' AND claim_id = ?",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, expires_at);
  sqlite3_bind_int64(st, 2, step_id);
  sqlite3_bind_int64(st, 3, claim_id);
  int rc = tk__sq_done(q, st, err);
  if (rc) return rc;
  if (sqlite3_changes(q->db) == 0)
    return tk__heartbeat_refused(err, step_id, claim_id);
  return 0;
}

int tk__sq_expired(tk_store *s, int64_t now, int limit, tk__expired *out, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *n = 0;
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_EXPIRED,
      "SELECT s.id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), s.attempts,"
      " s.max_attempts, s.retryable, s.run_at, s.last_delay_ms, s.backoff, s.lease_owner,"
      " s.lease_expires_at, s.claim_id, COALESCE(s.item_index, -1), " TK__SIGNAL_COLUMNS_SQL
      " FROM steps s JOIN tasks t ON t.id = s.task_id"
      " LEFT JOIN signals g ON g.id = (" TK__CLAIM_SIGNAL_SQL ")"
      /* <=: next_due wakes the engine at the expiry itself, which must find it */
      " WHERE s.state = 'in_progress' AND s.lease_expires_at <= ?"
      " ORDER BY s.lease_expires_at LIMIT ?",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int(st, 2, limit);
  int rc;
  int bad = 0;
  while (!bad && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    tk__expired *e = &out[(*n)++];
    memset(e, 0, sizeof *e);
    tk__sq_claim_columns(st, &e->step, e->owner, sizeof e->owner);
    if (sqlite3_column_type(st, 14) != SQLITE_NULL)
      bad = tk__sq_signal_columns(st, 14, &e->sig, err);
  }
  sqlite3_reset(st);
  if (!bad && rc != SQLITE_DONE) bad = tk__sq_fail(q, "expired leases", err);
  if (bad) {
    tk__expired_free_signals(out, *n);
    *n = 0;
  }
  return bad;
}

void tk__sq_claim_columns(sqlite3_stmt *st, tk__claimed *c, char *owner, size_t cap) {
  c->step_id = sqlite3_column_int64(st, 0);
  c->task_id = sqlite3_column_int64(st, 1);
  c->template_id = sqlite3_column_int64(st, 2);
  c->idx = sqlite3_column_int(st, 3);
  c->attempt = sqlite3_column_int(st, 4);
  c->max_attempts = sqlite3_column_int(st, 5);
  c->retryable = sqlite3_column_int(st, 6);
  c->run_at = sqlite3_column_int64(st, 7);
  c->last_delay_ms = sqlite3_column_int64(st, 8);
  snprintf(c->backoff, sizeof c->backoff, "%s", tk__sq_text(st, 9));
  snprintf(owner, cap, "%s", tk__sq_text(st, 10) ? tk__sq_text(st, 10) : "");
  c->lease_expires_at = sqlite3_column_int64(st, 11);
  c->claim_id = sqlite3_column_int64(st, 12);
  c->item_index = sqlite3_column_int(st, 13);
}

int tk__sq_next_due(tk_store *s, int64_t *ready_at, int64_t *lease_at, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = 0;
  if (ready_at) {
    /* An orchestrator's lanes (sqlite_queues.c): the first ready step of
     * each stands for all of its lane, unless its queue has no room. */
    int64_t retry;
    rc = tk__sq_lanes_load(q, NULL, tk__store_now(&q->base), err);
    if (rc == 0) rc = tk__sq_lanes_due(q, tk__store_now(&q->base), 1, ready_at, &retry, err);
    /* A deadline to look at is due work too (16). */
    int64_t deadline = INT64_MAX;
    if (rc == 0) rc = tk__sq_deadline_first(q, &deadline, err);
    if (rc == 0 && deadline < *ready_at) *ready_at = deadline;
  }
  if (rc == 0 && lease_at)
    rc = scalar(q, SQ_NEXT_LEASE,
                "SELECT MIN(lease_expires_at) FROM steps WHERE state = 'in_progress'", INT64_MAX,
                lease_at, err);
  return rc;
}

int tk__sq_has_work(tk_store *s, int *yes, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int64_t v = 0;
  int rc = scalar(q, SQ_HAS_WORK,
                  /* Outside workers' steps (0012) are work left too. */
                  "SELECT EXISTS (SELECT 1 FROM steps INDEXED BY steps_fresh WHERE"
                  " state = 'pending' AND parents_remaining = 0)"
                  " OR EXISTS (SELECT 1 FROM steps INDEXED BY steps_retry_due WHERE"
                  " state = 'waiting_for_retry')"
                  " OR EXISTS (SELECT 1 FROM steps WHERE state = 'in_progress')",
                  0, &v, err);
  *yes = v != 0;
  return rc;
}
