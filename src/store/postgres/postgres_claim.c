/* The PostgreSQL backend's claims (DESIGN §4), leases, the reaper's query
 * and the questions an idle engine asks (what is due, is there work). */
#include "store/postgres/postgres_internal.h"
#include "store/postgres/postgres_wait.h"

#include <stdio.h>
#include <string.h>

#include "store/rules.h"

#define Q TK__PG_Q

/* One statement claims the whole batch. The two readiness scans lock their
 * rows with SKIP LOCKED, so concurrent claims divide the ready steps
 * between them instead of queueing on each other, and each locked row is
 * read as it is after every committed change (a row another claim took
 * meanwhile no longer matches and is dropped), so the attempt number
 * written is the one the step gets. Then: an attempt row per step (due at
 * the run_at it was claimed for, for lateness), whose id becomes the
 * step's claim_id (the fence), the steps in progress under the lease, the
 * pending tasks started (their locks taken only when free, as SKIP
 * LOCKED would: a task whose lock another claim holds is being started by
 * it, one an operator holds is being cancelled; either way this claim need
 * not wait; the update checks the task is still pending on its newest
 * version, since the lock was taken after this statement's snapshot). The
 * moves are
 * recorded by those rows (0009_moves_in_their_rows.sql): a step's
 * (pending or waiting_for_retry -> in_progress, reason TK__REASON_CLAIMED)
 * by its attempt row (claim_seq, claim_from_retry), a task's start
 * (pending -> in_progress, reason TK__REASON_FIRST_CLAIM) by its row
 * (start_seq, started_at), the tasks' places in the history drawn after
 * every step's (their update waits for every attempt row), as the one
 * insert of their transitions rows had them. Due retries
 * come first, earliest run_at first, then delayed starts that came due,
 * earliest first (kind 1: parents_remaining -1 until claimed,
 * 0005_delayed_and_retention.sql), then ready pending steps, higher
 * priority first, then oldest task first (DESIGN §4), each a range scan of
 * its partial index of `ready` (0017_ready_table.sql: one row per step
 * that is ready, delayed, waiting for a retry or leased, kept by triggers
 * on steps, with what these scans filter and order by), the steps rows
 * locked (READY_STEP). Rows of tables are reached by their
 * keys (= ANY of an array, a scalar subquery) rather than by joins, so
 * that the plan stays a few index lookups per step when the server uses
 * its generic plan for this prepared statement, whose estimate of the
 * LIMIT (a parameter) would otherwise make it hash whole tables.
 * $1 owner, $2 now, $3 lease expiry, $4 retries due until, $5 limit,
 * $6 fresh limit, $7 the tk__step_key of the template steps that take no
 * input (NULL: no inputs at all; tk__claim_request.no_input).
 * An instance of a map step (DESIGN §17) is claimed as any ready row and
 * handed out as its map's template step (idx) with its element's
 * position (item_index; -1 for any other step).
 *
 * Lanes (0015): `ready` is the range a claim takes from, `lim` how many
 * it may take from it. An orchestrator's plain claim (CLAIM_SQL) takes
 * the steps of no worker queue and no queue, up to $5, as before queues
 * existed; it is the claim while no orchestrator's step ever named a
 * queue (the connection's no_lanes, which each claim's look after it,
 * NEXT_SQL, renews). Otherwise CLAIM_LANES_SQL takes from that range and
 * from each queue an orchestrator's step named (LANE_SCANS), each queue
 * as far as its room (ROOM: concurrency less its steps in progress,
 * whoever holds them; its bucket's whole tokens), and then divides $5
 * between the lanes: the candidates are ranked within their lane, and
 * rank by rank the lanes take turns (the first turn rotating with $8 from
 * claim to claim), so that no lane starves another: when every lane has
 * more ready than its share, each gets an equal share of the claim. A
 * worker's claim (CLAIM_QUEUE_SQL) takes only its queue's ($8: worker
 * queue and queue), up to its room. A queue with limits is claimed only
 * under its advisory lock, taken by LOCK_SQL in a statement before (so
 * that the count of its steps in progress sees the commit of the claim
 * that held it before): the lanes of the queues locked are named by the
 * transaction's setting tasker.lanes. Each scan is ordered by its index's
 * leading columns first: the planner takes `IS NULL` for no equality,
 * and would sort every row of the range otherwise. A worker's claim also
 * numbers the steps it picked (`picked`), writes hash number tok of its
 * token hashes ($9) into each attempt row (hash_col, hash_val) and returns
 * tok after the input (tok_out, tk__claimed.token_index); `spent` takes
 * the steps claimed from the buckets of their queues. */
/* A scan takes its order from `ready` and locks the steps rows (SKIP
 * LOCKED), never the ready rows: every writer of a step locks its steps
 * row before its ready row (the triggers of 0017), the claim too, so none
 * waits for another the other way round. The ready row read is the
 * statement's snapshot's; the step locked is its newest version, which
 * STILL checks is of the kind the scan looked for (another claim may have
 * taken it since) and reads the attempt number from. Each ready row's
 * step is locked by a lateral subquery on its key (READY_STEP), so the
 * plan is a probe of steps per ready row whatever the generic plan's
 * estimates: joined, the generic plan read steps by a filtered walk of
 * their whole primary key, materialized, for every claim, past every
 * step done (20,000 single-step tasks, 1 orchestrator: 196 -> 53 us of
 * the claim's statement per task, pg_stat_statements). */
#define PICK_COLS(kind) "s.id, s.task_id, s.attempts, s.run_at, " kind " AS kind, s.priority"
#define STILL(kind, until)                                                                     \
    "tasker_ready_kind(s.state, s.parents_remaining) = " kind " AND s.run_at <= " until
#define READY_STEP(kind, until)                                                                \
    "ready r CROSS JOIN LATERAL (SELECT s.id, s.task_id, s.attempts, s.run_at, s.priority"     \
    " FROM steps s WHERE s.id = r.step_id AND " STILL(kind, until) " FOR UPDATE SKIP LOCKED) s"
#define SCANS(name, kind_extra, ready, lim, fresh_lim, late_cnt, due_cnt)                       \
    " " name "due AS (SELECT " PICK_COLS("0") kind_extra " FROM " READY_STEP("0", "$4::bigint")  \
    " WHERE r.kind = 0 AND " ready " AND r.run_at <= $4::bigint"                                \
    " ORDER BY r.queue, r.kind, r.run_at, r.step_id LIMIT GREATEST(0, " lim ")),"              \
    " " name "late AS (SELECT " PICK_COLS("1") kind_extra " FROM " READY_STEP("1", "$2::bigint") \
    " WHERE r.kind = 1 AND " ready " AND r.run_at <= $2::bigint"                                \
    " ORDER BY r.queue, r.kind, r.run_at, r.step_id"                                            \
    " LIMIT GREATEST(0, LEAST(" fresh_lim ", " lim " - " due_cnt "))),"                        \
    " " name "fresh AS (SELECT " PICK_COLS("2") kind_extra " FROM " READY_STEP("2", "$2::bigint")\
    " WHERE r.kind = 2 AND " ready " AND r.run_at <= $2::bigint"                                \
    " ORDER BY r.queue, r.priority DESC, r.task_id, r.step_id"                                  \
    " LIMIT GREATEST(0, LEAST(" fresh_lim " - " late_cnt ", " lim " - " due_cnt " - " late_cnt \
    "))),"

/* The plain scans of one range, as three CTEs due, late and fresh. */
#define PLAIN_SCANS(ready, lim)                                                                 \
    SCANS("", "", ready, lim, "$6::int", "(SELECT count(*) FROM late)",                       \
          "(SELECT count(*) FROM due)")

/* A queue's bucket refilled to $2 (its tokens; 0 with no rate), and the
 * steps its limits let a claim start now, of the queues row q (NULL: no
 * limit). */
#define TOKENS(q)                                                                               \
    "CASE WHEN " q ".rate > 0 THEN LEAST(" q ".burst::float8, " q ".tokens"                     \
    " + GREATEST(0, $2::bigint - " q ".refilled_at) * " q ".rate / 1000.0) ELSE 0 END"
#define ROOM(q)                                                                                 \
    "LEAST(CASE WHEN " q ".concurrency > 0 THEN " q ".concurrency - (SELECT count(*)"         \
    " FROM ready b WHERE b.queue = " q ".name AND b.queue IS NOT NULL AND b.kind = 3) END,"    \
                                             \
    " CASE WHEN " q ".rate > 0 THEN floor(" TOKENS(q) " + 1e-9) END)"

/* The lanes of the queues (rows of queues q meeting cond) whose steps the
 * claim may take: those with no limits, and those locked by LOCK_SQL. */
#define LANES(cond)                                                                             \
    " lanes AS MATERIALIZED (SELECT q.id, q.name, q.rate, " TOKENS("q") " AS tokens,"          \
    " LEAST($5::int, COALESCE(" ROOM("q") ", $5))::int AS room,"                                \
    " row_number() OVER (ORDER BY q.name) AS li FROM queues q WHERE " cond                      \
    " AND ((q.concurrency = 0 AND q.rate = 0) OR q.id = ANY (string_to_array(NULLIF("           \
    "current_setting('tasker.lanes', true), ''), ',')::bigint[]))),"

#define CLAIM_SQL_FOR(pre, scans, picked, spent, hash_col, hash_val, tok_out)                   \
    "WITH" pre scans                                                                            \
    " picked AS (" picked "),"                                                                  \
    " att AS (INSERT INTO attempts (step_id, attempt, owner, started_at, due_at, claim_seq,"    \
    " claim_from_retry" hash_col ")"                                                            \
    " SELECT id, attempts + 1, $1::text, GREATEST($2, run_at), run_at, " TK__PG_NEXT_SEQ ","      \
    " kind = 0" hash_val                                                                        \
    " FROM picked RETURNING id, step_id),"                                                      \
    " moved AS (UPDATE steps s SET state = " Q(TK__STEP_IN_PROGRESS) ", attempts = s.attempts + 1,"\
    " parents_remaining = 0,"                                                                   \
    " lease_owner = $1, lease_expires_at = $3::bigint,"                                         \
    " claim_id = (SELECT att.id FROM att WHERE att.step_id = s.id)"                             \
    " WHERE s.id = ANY (ARRAY(SELECT step_id FROM att))"                                        \
    " RETURNING s.id, s.task_id, COALESCE(s.map_idx, s.idx) AS idx, s.attempts, s.max_attempts,"\
    " s.retryable, s.run_at, s.last_delay_ms, s.backoff, s.claim_id, s.item_index, s.item),"    \
    " started AS (UPDATE tasks t SET state = " Q(TK__TASK_IN_PROGRESS) ", updated_at = $2,"     \
    " start_seq = " TK__PG_NEXT_SEQ ", started_at = $2"                                         \
    " WHERE t.id = ANY (ARRAY(SELECT id FROM tasks"                                             \
    " WHERE id = ANY (ARRAY(SELECT task_id FROM picked)) AND state = " Q(TK__TASK_PENDING)      \
    " AND pg_try_advisory_xact_lock(" TK__PG_TASK_LOCK_KEY("id") ")))"                          \
    " AND t.state = " Q(TK__TASK_PENDING) " AND (SELECT count(*) FROM att) > 0"                 \
    " RETURNING t.id),"                                                                         \
    spent                                                                                       \
    /* The retries among them in the per-minute counts (migration 0006): an                     \
     * attempt after the first, or a first one after an operator's retry                        \
     * (the step was waiting for one), and how late each started. */                            \
    " act AS (INSERT INTO activity_minutes (minute, orchestrator, retries, lateness_n,"         \
    " lateness_sum_ms, lateness_max_ms) SELECT $2 - $2 % 60000, $1, count(*), count(*),"        \
    " SUM(GREATEST($2 - run_at, 0)), MAX(GREATEST($2 - run_at, 0)) FROM picked"                 \
    " WHERE kind = 0 OR attempts > 0 HAVING count(*) > 0"                                       \
    " ON CONFLICT (minute, orchestrator) DO UPDATE SET"                                         \
    " retries = activity_minutes.retries + EXCLUDED.retries,"                                   \
    " lateness_n = activity_minutes.lateness_n + EXCLUDED.lateness_n,"                          \
    " lateness_sum_ms = activity_minutes.lateness_sum_ms + EXCLUDED.lateness_sum_ms,"           \
    " lateness_max_ms = GREATEST(activity_minutes.lateness_max_ms, EXCLUDED.lateness_max_ms))"  \
    " SELECT m.id, m.task_id, t.template_id,"                                                   \
    " m.idx, m.attempts, m.max_attempts, m.retryable, m.run_at, m.last_delay_ms, m.backoff,"    \
    " m.claim_id, p.kind, m.task_id IN (SELECT id FROM started), COALESCE(m.item_index, -1),"   \
    " t.deadline_at,"                                                                           \
    /* The handler input (issue 22), as INPUTS_SQL's rows make it, but                          \
     * written out as JSON text here: the server only concatenates the                          \
     * stored JSON texts, parsing none of them. */                                              \
    " CASE WHEN $7::bigint[] IS NOT NULL"                                                       \
    " AND NOT (t.template_id * 4294967296 + m.idx = ANY ($7::bigint[])) THEN"                   \
    " '{\"context\":' || t.context || ',\"parents\":{' || COALESCE((SELECT"                     \
    " string_agg(to_json(q.name)::text || ':' || COALESCE(q.results, 'null'), ','"              \
    " ORDER BY e.parent_idx) FROM template_edges e"                                             \
    " JOIN steps q ON q.task_id = m.task_id AND q.idx = e.parent_idx"                           \
    " WHERE e.template_id = t.template_id AND e.child_idx = m.idx), '') || '}'"                 \
    " || CASE WHEN m.item_index IS NULL THEN '' ELSE ',\"item\":' || COALESCE(m.item, 'null')"  \
    " || ',\"item_index\":' || m.item_index END || '}' END"                                     \
    tok_out                                                                                     \
    " FROM moved m JOIN picked p ON p.id = m.id"                                                \
    " CROSS JOIN LATERAL (SELECT template_id, context, deadline_at FROM tasks"                  \
    " WHERE id = m.task_id) t"                                                                  \
    " ORDER BY p.kind, CASE WHEN p.kind < 2 THEN p.run_at END,"                                 \
    " CASE p.kind WHEN 2 THEN -p.priority END, CASE p.kind WHEN 2 THEN p.task_id END, p.id"

#define PICKED "SELECT * FROM due UNION ALL SELECT * FROM late UNION ALL SELECT * FROM fresh"
#define NO_QUEUE "r.queue IS NULL AND NOT r.worker"
static const char CLAIM_SQL[] = CLAIM_SQL_FOR("", PLAIN_SCANS(NO_QUEUE, "$5::int"), PICKED, "",
                                              "", "", "");

/* The candidates of the queues' lanes: each lane's scans, limited by its
 * room, as the plain scans (a lateral join per lane). */
#define LANE_SCAN(name, kind, until, order, lim)                                                \
    " " name " AS (SELECT x.*, l.li FROM lanes l CROSS JOIN LATERAL (SELECT " PICK_COLS(kind)  \
    " FROM " READY_STEP(kind, until) " WHERE r.kind = " kind " AND r.run_at <= " until          \
    " AND NOT r.worker AND r.queue = l.name ORDER BY r.queue, " order                            \
    " LIMIT GREATEST(0, " lim ")) x),"
#define LANE_COUNT(cte) "(SELECT count(*) FROM " cte " c WHERE c.li = l.li)"
#define LANE_SCANS                                                                              \
    LANE_SCAN("qdue", "0", "$4::bigint", "r.kind, r.run_at, r.step_id", "l.room")               \
    LANE_SCAN("qlate", "1", "$2::bigint", "r.kind, r.run_at, r.step_id",                        \
              "LEAST($6::int, l.room - " LANE_COUNT("qdue") ")")                                \
    LANE_SCAN("qfresh", "2", "$2::bigint", "r.priority DESC, r.task_id, r.step_id",             \
              "LEAST($6::int - " LANE_COUNT("qlate") ", l.room - " LANE_COUNT("qdue")           \
              " - " LANE_COUNT("qlate") ")")                                                    \
    " cand AS (SELECT *, 0::bigint AS li FROM (" PICKED ") u UNION ALL SELECT * FROM qdue"      \
    " UNION ALL SELECT * FROM qlate UNION ALL SELECT * FROM qfresh),"                           \
    " ranked AS (SELECT c.*, row_number() OVER (PARTITION BY c.li, c.kind > 0 ORDER BY c.kind," \
    " CASE WHEN c.kind < 2 THEN c.run_at END, CASE WHEN c.kind = 2 THEN -c.priority END,"       \
    " CASE WHEN c.kind = 2 THEN c.task_id END, c.id) AS rk FROM cand c),"                       \
    " ordered AS (SELECT r.*, row_number() OVER w AS ord, sum((r.kind > 0)::int) OVER w AS nf"  \
    " FROM ranked r WINDOW w AS (ORDER BY r.kind > 0, r.rk,"                                    \
    " (r.li + $8::bigint) % ((SELECT count(*) FROM lanes) + 1), r.id)),"

/* What the claim took from each queue's bucket (rows of `lanes` l, taken
 * n steps each by `taken`: li, n). */
#define SPENT(taken)                                                                            \
    " spent AS (UPDATE queues q SET tokens = l.tokens - c.n, refilled_at = $2"                  \
    " FROM lanes l JOIN (" taken ") c ON c.li = l.li WHERE q.id = l.id AND l.rate > 0),"

static const char CLAIM_LANES_SQL[] = CLAIM_SQL_FOR(
    LANES("q.plain"), PLAIN_SCANS(NO_QUEUE, "$5::int") LANE_SCANS,
    "SELECT id, task_id, attempts, run_at, kind, priority, li FROM ordered"
    " WHERE ord <= $5 AND (kind = 0 OR nf <= $6)",
    SPENT("SELECT li, count(*) AS n FROM picked GROUP BY li"), "", "", "");

/* A worker's claim of queue $8: its lane's room, or all of $5 when the
 * queue has no row (or no limits); nothing when its lock is another's. */
static const char CLAIM_QUEUE_SQL[] = CLAIM_SQL_FOR(
    LANES("q.name = $8::text")
    " wl AS (SELECT COALESCE((SELECT room FROM lanes), (SELECT 0 FROM queues"
    " WHERE name = $8), $5::int) AS lim),",
    PLAIN_SCANS("r.queue = $8::text AND r.worker", "(SELECT lim FROM wl)"),
    "SELECT *, row_number() OVER () AS tok FROM (" PICKED ") u",
    SPENT("SELECT 1::bigint AS li, count(*) AS n FROM picked HAVING count(*) > 0"),
    ", token_hash", ", ($9::bytea[])[tok]", ", p.tok");

/* The advisory lock of each queue with limits whose lane a claim looks
 * at (orchestrator's: every queue an orchestrator's step named; a
 * worker's: its queue $1), taken only when free (a claim never waits for
 * another: it leaves that queue to it), and the ids of those it took in
 * the transaction's setting tasker.lanes for the claim's statement. The
 * result: how many were busy. Keys are the queues' ids offset by "tq" <<
 * 48, apart from the tasks' (TK__PG_TASK_LOCK_KEY). */
#define TK__PG_QUEUE_LOCK_KEY(id) "(8390487580767944704 + " id ")"
#define LOCK_SQL_FOR(cond)                                                                      \
    "SELECT set_config('tasker.lanes', COALESCE(string_agg(id::text, ',') FILTER (WHERE got),"  \
    " ''), true), count(*) FILTER (WHERE NOT got) FROM (SELECT id, pg_try_advisory_xact_lock("  \
    TK__PG_QUEUE_LOCK_KEY("id") ") AS got FROM (SELECT id FROM queues WHERE " cond              \
    " AND (concurrency > 0 OR rate > 0) ORDER BY id OFFSET 0) c) x"
static const char LOCK_SQL[] = LOCK_SQL_FOR("plain");
static const char LOCK_QUEUE_SQL[] = LOCK_SQL_FOR("name = $1::text");

/* When the lanes of a claim may give more, after it (its own snapshot:
 * what it claimed is in progress): per lane, its first retry, its first
 * delayed start and whether fresh steps are ready ($1: now); a lane full
 * by concurrency gives nothing until an outcome (which notifies), one out
 * of tokens nothing before its next token. Columns: the earliest retry
 * (next_retry_at), the earliest of all (next_due_at), and whether an
 * orchestrator's step ever named a queue (the connection's no_lanes).
 * `first(cond, order)`: the run_at of the lane's first step by cond. */
#define LANE_DUE(first)                                                                         \
    " d AS (SELECT l.*, " first("kind = 0", "kind, run_at, step_id") " AS r_at,"                \
    " LEAST(" first("kind = 1", "kind, run_at, step_id")                                        \
    ", " first("kind = 2", "priority DESC, task_id, step_id") ") AS f_at,"                      \
    " CASE WHEN l.rate <= 0 THEN NULL WHEN floor(l.tokens + 1e-9) >= 1 THEN $1::bigint ELSE $1::bigint"\
    " + GREATEST(1, ceil((1 - l.tokens) * 1000 / l.rate - 1e-6))::bigint END AS token_at"      \
    " FROM l WHERE l.concurrency <= 0 OR (SELECT count(*) FROM ready b WHERE b.queue = l.name"  \
    " AND b.queue IS NOT NULL AND b.kind = 3) < l.concurrency)"                                 \
    " SELECT min(CASE WHEN r_at IS NOT NULL THEN GREATEST(r_at, token_at) END),"               \
    " min(CASE WHEN LEAST(r_at, f_at) IS NOT NULL THEN GREATEST(LEAST(r_at, f_at), token_at) END)"
/* $2 in TOKENS is now here: the statements below pass now as both. */
#define FIRST_PLAIN(cond, order)                                                                \
    "CASE WHEN l.li = 0 THEN (SELECT run_at FROM ready r WHERE " cond " AND " NO_QUEUE           \
    " ORDER BY queue, " order " LIMIT 1) ELSE (SELECT run_at FROM ready WHERE "                 \
    cond " AND NOT worker AND queue = l.name ORDER BY queue, " order " LIMIT 1) END"
#define FIRST_QUEUE(cond, order)                                                                \
    "(SELECT run_at FROM ready WHERE " cond " AND worker AND queue = $3::text"                  \
    " ORDER BY queue, " order " LIMIT 1)"
static const char NEXT_SQL[] =
    "WITH l AS (SELECT 0 AS li, NULL::text AS name, 0 AS concurrency, 0::float8 AS rate,"
    " 0::float8 AS tokens UNION ALL SELECT 1, q.name, q.concurrency, q.rate, " TOKENS("q")
    " FROM queues q WHERE q.plain AND $2::bigint IS NOT NULL),"
    LANE_DUE(FIRST_PLAIN) ", EXISTS (SELECT 1 FROM queues WHERE plain) FROM d";
static const char NEXT_QUEUE_SQL[] =
    "WITH l AS (SELECT q.name, q.concurrency, q.rate, " TOKENS("q") " AS tokens FROM queues q"
    " WHERE q.name = $3::text UNION ALL SELECT $3, 0, 0, 0 WHERE NOT EXISTS (SELECT 1"
    " FROM queues WHERE name = $3) AND $2::bigint IS NOT NULL),"
    LANE_DUE(FIRST_QUEUE) ", false FROM d";

/* The look after an orchestrator's plain claim (CLAIM_SQL, no lanes): the
 * first retry and the first delayed start of the steps of no queue, and
 * whether an orchestrator's step named a queue, each a probe of an index;
 * whether ready steps were left, the claim's own rows say (a look of
 * NEXT_SQL's shape cost three to eight times this one on a store of
 * ready steps: pgbench, a few tenths of a ms against under one). */
static const char NEXT_PLAIN_SQL[] =
    "SELECT (SELECT run_at FROM ready r WHERE kind = 0 AND " NO_QUEUE
    " ORDER BY queue, kind, run_at, step_id LIMIT 1), (SELECT run_at FROM ready r WHERE kind = 1"
    " AND " NO_QUEUE " ORDER BY queue, kind, run_at, step_id LIMIT 1),"
    " EXISTS (SELECT 1 FROM queues WHERE plain)";

int tk__pg_claim_queue(tk__pg_pipe *p, tk__claim_request *r, int *claim_slot, int *retry_slot) {
  /* The store's clock, read right before the claim is sent (after the
   * outcomes of the same transaction were queued): a retry that came due
   * meanwhile is found. */
  tk__pg *pg = p->pg;
  r->now = tk__store_now(&pg->base);
  *claim_slot = -1;
  p->claim_lock_slot = -1;
  p->claim_lanes = 0;
  if (r->limit > 0) {
    int fresh = r->fresh_limit < r->limit ? r->fresh_limit : r->limit;
    int lanes = r->worker_queue == NULL && !pg->no_lanes;
    tk__pg_args a = {0};
    if (r->worker_queue) {
      tk__pg_arg_text(&a, r->worker_queue);
      p->claim_lock_slot = tk__pg_pipe_stmt(p, PG_CLAIM_LOCK_QUEUE, LOCK_QUEUE_SQL, a.n, a.v);
      a.n = 0;
    } else if (lanes) {
      p->claim_lock_slot = tk__pg_pipe_stmt(p, PG_CLAIM_LOCK, LOCK_SQL, 0, NULL);
    }
    p->claim_lanes = lanes;
    tk__pg_arg_text(&a, r->owner);
    tk__pg_arg_i64(&a, r->now);
    tk__pg_arg_i64(&a, r->now + r->lease_ms);
    tk__pg_arg_i64(&a, r->now + (r->retry_ahead_ms > 0 ? r->retry_ahead_ms : 0));
    tk__pg_arg_i64(&a, r->limit);
    tk__pg_arg_i64(&a, fresh > 0 ? fresh : 0);
    tk__buf keys = {0};
    if (r->want_inputs) {
      tk__pg_array_open(&keys);
      for (int i = 0; i < r->nno_input; i++) tk__pg_array_i64(&keys, r->no_input[i]);
    }
    /* Out of memory for the keys: no inputs (the caller reads them). */
    tk__pg_arg_text(&a, r->want_inputs ? tk__pg_array_close(&keys) : NULL);
    tk__buf hashes = {0};
    if (r->worker_queue) {
      /* bytea[] as text: {"\\x00ff...",...}, hex only, so nothing to escape. */
      tk__pg_arg_text(&a, r->worker_queue);
      tk__buf_adds(&hashes, "{");
      for (int i = 0; i < r->limit; i++) {
        tk__buf_adds(&hashes, i ? ",\"\\\\x" : "\"\\\\x");
        for (int k = 0; k < TK__TOKEN_HASH_LEN; k++)
          tk__buf_addf(&hashes, "%02x", r->token_hashes[i][k]);
        tk__buf_adds(&hashes, "\"");
      }
      tk__buf_adds(&hashes, "}");
      tk__pg_arg_text(&a, hashes.oom ? NULL : hashes.p);
    } else if (lanes) {
      tk__pg_arg_i64(&a, pg->turn++); /* $8: the lane that goes first */
    }
    *claim_slot = r->worker_queue ? tk__pg_pipe_stmt(p, PG_CLAIM_QUEUE, CLAIM_QUEUE_SQL, a.n, a.v)
                  : lanes         ? tk__pg_pipe_stmt(p, PG_CLAIM_LANES, CLAIM_LANES_SQL, a.n, a.v)
                                  : tk__pg_pipe_stmt(p, PG_CLAIM, CLAIM_SQL, a.n, a.v);
    tk__buf_free(&keys);
    tk__buf_free(&hashes);
    if (*claim_slot < 0) return -1;
  }
  p->claim_next_plain = r->worker_queue == NULL && pg->no_lanes;
  *retry_slot = p->claim_next_plain
                    ? tk__pg_pipe_stmt(p, PG_NEXT_PLAIN, NEXT_PLAIN_SQL, 0, NULL)
                    : tk__pg_next_queue(p, r->now, r->worker_queue);
  return *retry_slot < 0 ? -1 : 0;
}

int tk__pg_next_queue(tk__pg_pipe *p, int64_t now, const char *worker_queue) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_i64(&a, now); /* TOKENS' $2 */
  if (worker_queue) {
    tk__pg_arg_text(&a, worker_queue);
    return tk__pg_pipe_stmt(p, PG_NEXT_QUEUE, NEXT_QUEUE_SQL, a.n, a.v);
  }
  return tk__pg_pipe_stmt(p, PG_NEXT_RETRY, NEXT_SQL, a.n, a.v);
}

/* An absent time (SQL NULL) as "never". */
static int64_t or_never(int64_t t) { return t == TK__NONE ? INT64_MAX : t; }

int tk__pg_claim_read(tk__pg_pipe *p, tk__claim_request *r, int claim_slot, int retry_slot,
                      tk_err *err) {
  r->n = 0;
  PGresult *res = tk__pg_result(p, claim_slot);
  int rows = res ? PQntuples(res) : 0;
  if (rows > r->limit) /* cannot happen: LIMIT says so */
    return tk_err_set(err, TK_ESTORE, "postgres: claim: %d rows for %d slots", rows, r->limit);
  for (int i = 0; i < rows; i++) {
    tk__claimed *c = &r->out[i];
    memset(c, 0, sizeof *c);
    c->step_id = tk__pg_i64(res, i, 0);
    c->task_id = tk__pg_i64(res, i, 1);
    c->template_id = tk__pg_i64(res, i, 2);
    c->idx = (int)tk__pg_i64(res, i, 3);
    c->attempt = (int)tk__pg_i64(res, i, 4);
    c->max_attempts = (int)tk__pg_i64(res, i, 5);
    c->retryable = tk__pg_bool(res, i, 6);
    c->run_at = tk__pg_i64(res, i, 7);
    c->last_delay_ms = tk__pg_i64(res, i, 8);
    tk__pg_copy(c->backoff, sizeof c->backoff, res, i, 9);
    c->claim_id = tk__pg_i64(res, i, 10);
    snprintf(c->prev_state, sizeof c->prev_state, "%s",
             tk__pg_i64(res, i, 11) == 0 ? TK__STEP_WAITING_FOR_RETRY : TK__STEP_PENDING);
    c->task_was_pending = tk__pg_bool(res, i, 12);
    c->item_index = (int)tk__pg_i64(res, i, 13);
    int64_t deadline_at = tk__pg_i64(res, i, 14);
    c->task_deadline_at = c->task_was_pending && deadline_at != TK__NONE ? deadline_at : 0;
    c->lease_expires_at = r->now + r->lease_ms;
    c->input = tk__input_text(tk__pg_text(res, i, 15));
    if (r->worker_queue) c->token_index = (int)tk__pg_i64(res, i, 16) - 1;
  }
  r->n = rows;
  PGresult *next = tk__pg_result(p, retry_slot);
  r->next_retry_at = or_never(tk__pg_i64(next, 0, 0));
  r->next_due_at = or_never(tk__pg_i64(next, 0, 1));
  if (p->claim_next_plain) {
    /* NEXT_PLAIN_SQL: ready steps were left when the claim took as many as
     * it could (its limit, or its fresh limit of steps not retries). */
    int fresh = r->fresh_limit < r->limit ? r->fresh_limit : r->limit, nfresh = 0;
    for (int i = 0; i < rows; i++) nfresh += tk__pg_i64(res, i, 11) != 0;
    if (r->next_retry_at < r->next_due_at) r->next_due_at = r->next_retry_at;
    if (r->limit == 0) r->next_due_at = INT64_MIN; /* it did not look */
    else if ((rows >= r->limit || nfresh >= fresh) && r->now < r->next_due_at)
      r->next_due_at = r->now;
  }
  if (r->worker_queue == NULL) {
    int lanes = tk__pg_bool(next, 0, 2);
    /* A claim that did not look at the queues that exist now: look again. */
    if (lanes && !p->claim_lanes && r->limit > 0) r->next_due_at = INT64_MIN;
    p->pg->no_lanes = !lanes;
  }
  /* A queue whose lock another claim held was not looked at: soon. */
  PGresult *lock = tk__pg_result(p, p->claim_lock_slot);
  if (lock && PQntuples(lock) == 1 && tk__pg_i64(lock, 0, 1) > 0) r->next_due_at = INT64_MIN;
  return 0;
}

/* A heartbeat changes nothing but the lease, and only while the claim
 * still holds the step: the row lock the UPDATE takes and the condition
 * it checks on the newest row version make the fence exact. */
int tk__pg_heartbeat(tk_store *s, int64_t step_id, int64_t claim_id, int64_t expires_at,
                     tk_err *err) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, step_id);
  tk__pg_arg_i64(&a, claim_id);
  tk__pg_arg_i64(&a, expires_at);
  PGresult *r;
  int rc = tk__pg_query(s, PG_HEARTBEAT,
                        "UPDATE steps SET lease_expires_at = $3::bigint"
                        " WHERE id = $1::bigint AND state = " Q(TK__STEP_IN_PROGRESS)
                        " AND claim_id = $2::bigint",
                        &a, "heartbeat", &r, err);
  if (rc == 0 && strcmp(PQcmdTuples(r), "1") != 0)
    rc = tk__heartbeat_refused(err, step_id, claim_id);
  PQclear(r);
  return rc;
}

/* A claim as the reaper's query and claim_get read it, from columns 0..13
 * of row i: step id, task id, template id, template step (a map's for its
 * instance), attempt, max_attempts, retryable, run_at, last_delay_ms,
 * backoff, owner (into owner[cap]), lease expiry, claim id, item_index. */
static void claim_columns(PGresult *r, int i, tk__claimed *c, char *owner, size_t cap) {
  c->step_id = tk__pg_i64(r, i, 0);
  c->task_id = tk__pg_i64(r, i, 1);
  c->template_id = tk__pg_i64(r, i, 2);
  c->idx = (int)tk__pg_i64(r, i, 3);
  c->attempt = (int)tk__pg_i64(r, i, 4);
  c->max_attempts = (int)tk__pg_i64(r, i, 5);
  c->retryable = tk__pg_bool(r, i, 6);
  c->run_at = tk__pg_i64(r, i, 7);
  c->last_delay_ms = tk__pg_i64(r, i, 8);
  tk__pg_copy(c->backoff, sizeof c->backoff, r, i, 9);
  tk__pg_copy(owner, cap, r, i, 10);
  c->lease_expires_at = tk__pg_i64(r, i, 11);
  c->claim_id = tk__pg_i64(r, i, 12);
  c->item_index = (int)tk__pg_i64(r, i, 13);
}

/* Expired leases, oldest first. SKIP LOCKED: a row locked now belongs to
 * a transaction recording its outcome or to another reaper's look, and is
 * left to it; several reapers at once each take what is free. (A reaper
 * that finds a step another already failed is fenced when it records.) */
int tk__pg_expired(tk_store *s, int64_t now, int limit, tk__expired *out, int *n, tk_err *err) {
  *n = 0;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, now);
  tk__pg_arg_i64(&a, limit);
  PGresult *r;
  int rc = tk__pg_query(
      s, PG_EXPIRED,
      "SELECT s.id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), s.attempts,"
      " s.max_attempts, s.retryable, s.run_at, s.last_delay_ms, s.backoff, s.lease_owner,"
      " s.lease_expires_at, s.claim_id, COALESCE(s.item_index, -1), " TK__SIGNAL_COLUMNS_SQL
      " FROM ready r JOIN steps s ON s.id = r.step_id JOIN tasks t ON t.id = s.task_id"
      " LEFT JOIN signals g ON g.id = (" TK__CLAIM_SIGNAL_SQL ")"
      /* <=: next_due wakes the engine at the expiry itself, which must find it */
      " WHERE r.kind = 3 AND r.lease_expires_at <= $1::bigint"
      /* the newest version of the step locked (READY_STEP) */
      " AND s.state = " Q(TK__STEP_IN_PROGRESS) " AND s.lease_expires_at <= $1"
      " ORDER BY r.lease_expires_at LIMIT $2::int FOR UPDATE OF s SKIP LOCKED",
      &a, "expired leases", &r, err);
  for (int i = 0; rc == 0 && i < PQntuples(r) && i < limit; i++) {
    tk__expired *e = &out[i];
    memset(e, 0, sizeof *e);
    claim_columns(r, i, &e->step, e->owner, sizeof e->owner);
    if (!PQgetisnull(r, i, 14) && (rc = tk__pg_signal_columns(r, i, 14, &e->sig, err))) break;
    *n = i + 1;
  }
  PQclear(r);
  if (rc) tk__expired_free_signals(out, *n);
  if (rc) *n = 0;
  return rc;
}

int tk__pg_next_due(tk_store *s, int64_t *ready_at, int64_t *lease_at, tk_err *err) {
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "next due", err);
  if (rc) return rc;
  /* An orchestrator's lanes as its claim's look after it sees them (the
   * first ready step of each stands for all of its lane, unless its queue
   * has no room), and the earliest lease. */
  int next = tk__pg_next_queue(&p, tk__store_now(s), NULL);
  int lease = tk__pg_pipe_stmt(&p, PG_NEXT_DUE,
                               "SELECT MIN(lease_expires_at) FROM ready WHERE kind = 3",
                               0, NULL);
  /* A deadline to look at is due work too (16). */
  int deadline = ready_at ? tk__pg_deadline_first_queue(&p) : -1;
  if ((rc = tk__pg_pipe_run(&p, "next due", err)) == 0) {
    PGresult *r = tk__pg_result(&p, next);
    if (ready_at) {
      int64_t first = or_never(tk__pg_i64(tk__pg_result(&p, deadline), 0, 0));
      *ready_at = or_never(tk__pg_i64(r, 0, 1));
      if (first < *ready_at) *ready_at = first;
    }
    if (lease_at) *lease_at = or_never(tk__pg_i64(tk__pg_result(&p, lease), 0, 0));
    ((tk__pg *)s)->no_lanes = !tk__pg_bool(r, 0, 2);
  }
  tk__pg_pipe_end(&p);
  return rc;
}

int tk__pg_has_work(tk_store *s, int *yes, tk_err *err) {
  *yes = 0;
  PGresult *r;
  int rc = tk__pg_query(
      s, PG_HAS_WORK,
      /* Outside workers' steps (0013) are work left too. */
      "SELECT EXISTS (SELECT 1 FROM ready WHERE kind = 2)"
      " OR EXISTS (SELECT 1 FROM ready WHERE kind = 0)"
      " OR EXISTS (SELECT 1 FROM ready WHERE kind = 3)",
      NULL, "has work", &r, err);
  if (rc == 0) *yes = tk__pg_bool(r, 0, 0);
  PQclear(r);
  return rc;
}

/* The hex digit c's value, or -1. */
static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* A worker's claim by its attempt row (DESIGN §19), with its step as it
 * is now: one read by keys (the attempt's, the step's, the task's). The
 * reaper's columns (claim_columns), as the claim saw them: its attempt
 * number, owner and due time are the attempt row's. */
int tk__pg_claim_get(tk_store *s, int64_t claim_id, tk__claim_rec *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, claim_id);
  PGresult *r;
  int rc = tk__pg_query(
      s, PG_CLAIM_GET,
      "SELECT a.step_id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), a.attempt,"
      " s.max_attempts, s.retryable, a.due_at, s.last_delay_ms, s.backoff, a.owner,"
      " s.lease_expires_at, a.id, COALESCE(s.item_index, -1), s.state, a.started_at,"
      " s.state = " Q(TK__STEP_IN_PROGRESS) " AND s.claim_id = a.id,"
      " encode(a.token_hash, 'hex')"
      " FROM attempts a JOIN steps s ON s.id = a.step_id JOIN tasks t ON t.id = s.task_id"
      " WHERE a.id = $1::bigint",
      &a, "claim", &r, err);
  if (rc == 0 && PQntuples(r) != 1)
    rc = tk_err_set(err, TK_ENOENT, "no claim %lld", (long long)claim_id);
  if (rc == 0) {
    claim_columns(r, 0, &out->step, out->owner, sizeof out->owner);
    out->lease_expires_at = out->step.lease_expires_at;
    tk__pg_copy(out->state, sizeof out->state, r, 0, 14);
    out->started_at = tk__pg_i64(r, 0, 15);
    out->held = tk__pg_bool(r, 0, 16);
    const char *hex = PQgetisnull(r, 0, 17) ? NULL : PQgetvalue(r, 0, 17);
    if (hex && strlen(hex) == 2 * TK__TOKEN_HASH_LEN) {
      out->has_token = 1;
      for (int i = 0; i < TK__TOKEN_HASH_LEN; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) out->has_token = 0;
        out->token_hash[i] = (unsigned char)(hi << 4 | (lo & 15));
      }
    }
  }
  PQclear(r);
  return rc;
}
