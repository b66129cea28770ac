/* The PostgreSQL backend's private state and helpers, shared by its files.
 *
 * Every operation talks to the server through a pipeline (libpq pipeline
 * mode, tk__pg_pipe): the statements of one transaction are sent together
 * and their results read after one sync, so an operation costs one round
 * trip for each point where C must look at results before it can say what
 * to send next. Statements are prepared on a connection's first use of
 * them, inside the same pipeline.
 *
 * Concurrency (READ COMMITTED; any number of orchestrators): rows are
 * locked in one order everywhere, a task's row before the rows of its
 * steps, so that writers queue instead of deadlocking:
 *   - an outcome takes its task's lock before it touches the step, its
 *     children or the task's counters, and a group of outcomes takes its
 *     tasks' locks in ascending id order;
 *   - an operator action takes the task's lock, then locks the steps;
 *   - a claim locks only ready steps (their `ready` rows, then their steps
 *     rows: 0017_ready_table.sql), skipping locked ones, and takes the
 *     locks of the pending tasks it starts only when free: it never waits;
 *     every other writer of a step writes its steps row first and its
 *     ready row after (the triggers of 0017);
 *   - the flow's work (postgres_flow.c: skips, releases, a map's
 *     instances and its settling) runs inside an outcome's or an operator
 *     action's transaction, under that task's lock, and touches only that
 *     task's steps; a map step while mapped is in no readiness index, so
 *     no claim locks it;
 *   - a heartbeat and an item checkpoint lock one step and nothing else;
 *   - the counter of refused writes, a row every orchestrator shares, is
 *     written last, right before COMMIT.
 * Each statement says why its read-modify-write is safe.
 *
 * A task's lock is a transaction-scoped advisory lock keyed by its id
 * (TK__PG_TASK_LOCK_KEY), not a lock on its row: a row lock is written to
 * the WAL (a record of about 100 bytes each time, twice per single-step
 * task: its start and its outcome), an advisory lock lives only in the
 * server's lock table. Every writer of a task's row takes it first, in a
 * statement of its own, so that the statements after it see whatever the
 * previous holder committed (READ COMMITTED: a snapshot per statement); a
 * statement that took it itself (the claim, prune) re-checks its rows'
 * conditions on their newest versions (UPDATE's own WHERE, FOR UPDATE).
 * The keys are tasks' ids offset by "tk" << 48, so that they do not meet
 * the small keys other users of a shared database pick.
 *
 * Plans: statements are prepared once per session, so the server soon
 * runs a generic plan made without the parameters' values, perhaps while
 * the tables were small. Rows are therefore reached by their keys (= ANY
 * of an array, scalar subqueries) rather than by joins whose estimates a
 * LIMIT parameter could inflate, sequential scans are off for the session
 * (postgres_store.c), and the partial indexes' predicates are written so
 * that only the statements meant for them can use them. */
#ifndef TASKER_STORE_POSTGRES_INTERNAL_H
#define TASKER_STORE_POSTGRES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "core/buf.h"
#include "store/rules.h"
#include "store/store.h"

/* Prepared statements, by id (their SQL lives next to the code using it). */
enum {
  PG_BEGIN, PG_COMMIT, PG_ROLLBACK, PG_SAVEPOINT, PG_ROLLBACK_SAVEPOINT, PG_NOTIFY,
  PG_BEGIN_SNAPSHOT, PG_SEQSCAN_ON, PG_GENERIC_PLANS, PG_SERVER_TIME,
  PG_TASK_LOCK, PG_OUTCOME, PG_OUTCOME_ITEMS, PG_CAN_PROGRESS, PG_TASK_WRITE, PG_COUNT,
  PG_TASKS_LOCK, PG_OUTCOMES,
  PG_CLAIM, PG_NEXT_RETRY, PG_HEARTBEAT, PG_EXPIRED, PG_NEXT_DUE, PG_HAS_WORK,
  PG_TASK_CREATE, PG_TASK_BY_IDENTITY,
  PG_TEMPLATE_INSERT, PG_TEMPLATE_DIGEST, PG_ANALYZE_EDGES, PG_TEMPLATE_FIND, PG_TEMPLATE_BY_ID,
  PG_TEMPLATE_LIST,
  PG_INPUTS,
  PG_OP_TASK, PG_OP_STEP, PG_OP_STEP_SET, PG_OP_ITEMS_RESET, PG_OP_TASK_COUNTS, PG_RELEASE,
  PG_OP_CANCEL_STEPS, PG_OP_CANCEL_TASK, PG_TRANSITION,
  PG_REPORT_TASK, PG_REPORT_STEPS, PG_REPORT_ATTEMPTS, PG_REPORT_TRANSITIONS, PG_REPORT_GAVE_UP,
  PG_STATUS_TASKS, PG_STATUS_STEPS, PG_STATUS_READY, PG_STATUS_COUNTERS,
  PG_BATCH_GET, PG_ITEMS_GET, PG_ITEMS_CHECKPOINT,
  PG_PRUNE, PG_PRUNE_COUNT, PG_SIZE,
  PG_RETRY_EARLIER,
  PG_OUTCOME_INSTANCE, PG_FLOW_TEMPLATE, PG_FLOW_SKIP, PG_FLOW_RELEASE, PG_FLOW_RESULTS,
  PG_FLOW_EXPAND, PG_FLOW_MAP_END, PG_FLOW_MAP_COUNT, PG_FLOW_MAP_DONE, PG_FLOW_MAP_REOPEN,
  PG_FLOW_TASK, PG_INSTANCE_LIST, PG_REPORT_INSTANCES,
  PG_CLAIM_QUEUE, PG_CLAIM_GET, PG_TASK_CREATE_QUEUE,
  PG_CLAIM_LOCK, PG_CLAIM_LOCK_QUEUE, PG_CLAIM_LANES, PG_NEXT_QUEUE, PG_QUEUE_PUT, PG_QUEUE_CLEAR,
  PG_QUEUE_LIST, PG_WORKER_SEEN, PG_NEXT_PLAIN,
  PG_BUDGET_LOCK, PG_BUDGET_GET, PG_BUDGET_PUT,
  PG_DEADLINE_FIRST,
  PG__COUNT
};

typedef struct tk__pg {
  tk_store base; /* first: a tk__pg is a tk_store */
  PGconn *conn;
  char prepared[PG__COUNT]; /* on this session (cleared by reconnect) */
  /* change_fd: the socket and "notices queued" (-1 until change_fd is
   * first called; then LISTEN was sent on this connection). */
  int epoll_fd, event_fd;
  int wait_news; /* a notice with TK__PG_WAIT_NEWS came from another session */
  int sync_off; /* TK_DURABILITY_FAST: synchronous_commit = off (again after reconnect) */
  /* The flow (decisions, maps) of each template this connection has seen,
   * read once (postgres_flow.c): a stored template never changes. */
  struct tk__flow **flows;
  int nflows, flows_cap;
  /* Queues (0015_queues.sql, postgres_claim.c): no orchestrator's step
   * named a queue as of this connection's last look (its claims take the
   * plain range alone); the turn that rotates the lanes' order. */
  int no_lanes;
  int64_t turn;
} tk__pg;

/* The notification channel: every transaction that makes work visible to
 * other orchestrators notifies it, so their sleeps end (DESIGN §4). */
#define TK__PG_CHANNEL "tasker"
/* The payload of a notice that a signal was stored (drain_changes). */
#define TK__PG_WAIT_NEWS "wait"

/* ---- Pipelines (postgres_pipe.c) ---- */

/* Commands queued since the last reset and, after tk__pg_pipe_run, their
 * results (tk__pg_result of the slot a queue call returned). */
typedef struct tk__pg_pipe {
  tk__pg *pg;
  PGresult **res;
  int *prepare; /* per command: statement id + 1 for a PQsendPrepare, else 0 */
  int n, cap;   /* commands queued (prepares included) */
  int ran;      /* how many of them were sent and read */
  int nslots;   /* slots handed out */
  int *slot_of; /* per command: its slot, -1 for prepares */
  int failed;   /* after a run: the slot of the first failed command, -1 none */
  /* The claim queued (tk__pg_claim_queue): the slot of its queues' locks
   * (-1: none taken), and whether it looked at the queues' lanes. */
  int claim_lock_slot, claim_lanes;
  int claim_next_plain; /* the claim's look after it is NEXT_PLAIN_SQL's */
  int broken;   /* the connection failed: nothing more can be sent */
  char error[TK_ERR_MSG_MAX]; /* after a run: the first failure's first line */
  char sqlstate[6];
  int active; /* in pipeline mode */
} tk__pg_pipe;

/* Check that the connection is there (TK_EDISCONNECTED when it was lost:
 * the caller reconnects, store.h) and idle (a transaction left open is
 * rolled back). `what` names the operation in the error. */
int tk__pg_usable(tk__pg *pg, const char *what, tk_err *err);
/* tk__pg_usable, then enter pipeline mode. */
int tk__pg_pipe_begin(tk__pg *pg, tk__pg_pipe *p, const char *what, tk_err *err);
/* Queue prepared statement `id` (prepared from sql with nparams
 * parameters on first use) with text parameter values (NULL for SQL
 * NULL). Returns its slot, or -1 when it could not be sent. id < 0: sql
 * is a one-off statement (the lists', whose text depends on the filter),
 * sent unprepared and planned for the values given. */
int tk__pg_pipe_stmt(tk__pg_pipe *p, int id, const char *sql, int nparams,
                     const char *const *values);
/* Send the queued commands, sync, and read every result. 0 when all
 * succeeded; else TK_ESTORE, or TK_EDISCONNECTED when the session is gone
 * (p->broken), with p->failed the first failed slot and err saying
 * "postgres: what: <server message>". A failure ends the batch: later
 * commands were not run, and an open transaction is in its failed state
 * (ROLLBACK TO SAVEPOINT or ROLLBACK next; tk__pg_pipe_end rolls back
 * whatever is left open). */
int tk__pg_pipe_run(tk__pg_pipe *p, const char *what, tk_err *err);
/* Forget the results of the last run (the next commands get slots from 0). */
void tk__pg_pipe_reset(tk__pg_pipe *p);
/* Leave pipeline mode, roll back a transaction left open, free it all. */
void tk__pg_pipe_end(tk__pg_pipe *p);

/* The result of slot's command, or NULL when it did not run or failed. */
PGresult *tk__pg_result(const tk__pg_pipe *p, int slot);

/* ---- Small helpers (postgres_util.c) ---- */

/* Shorthands for the transaction commands. */
int tk__pg_begin(tk__pg_pipe *p);
int tk__pg_commit(tk__pg_pipe *p);
int tk__pg_rollback(tk__pg_pipe *p);
int tk__pg_notify(tk__pg_pipe *p);
/* BEGIN of a read-only transaction whose statements all see one snapshot
 * (REPEATABLE READ). */
int tk__pg_begin_snapshot(tk__pg_pipe *p);
/* BEGIN of a transaction whose statements all run their generic plans
 * (the orchestrator's outcomes and claims, postgres_util.c says why). */
int tk__pg_begin_generic(tk__pg_pipe *p);

/* A parameter list: values as text, numbers written into own buffers. */
#define TK__PG_MAX_PARAMS 24
typedef struct tk__pg_args {
  int n;
  const char *v[TK__PG_MAX_PARAMS];
  char num[TK__PG_MAX_PARAMS][24];
} tk__pg_args;

void tk__pg_arg_i64(tk__pg_args *a, int64_t v);
void tk__pg_arg_text(tk__pg_args *a, const char *v); /* NULL: SQL NULL */
void tk__pg_arg_bool(tk__pg_args *a, int v);
void tk__pg_arg_null(tk__pg_args *a);

/* Run prepared statement id alone (its own implicit transaction; a NULL:
 * no parameters) and hand back its result in *out (PQclear it; NULL when
 * it failed). */
int tk__pg_query(tk_store *s, int id, const char *sql, const tk__pg_args *a, const char *what,
                 PGresult **out, tk_err *err);

/* Array literals, in a core/buf.h tk__buf (tk__buf_free frees it): open
 * with "{", add elements, close with "}". A text element is quoted (NULL:
 * the NULL element); an integer one is bare. */
void tk__pg_array_open(tk__buf *b);
void tk__pg_array_text(tk__buf *b, const char *v);
void tk__pg_array_i64(tk__buf *b, int64_t v);
void tk__pg_array_bool(tk__buf *b, int v);
/* The finished literal (NUL-terminated), or NULL when memory ran out. */
const char *tk__pg_array_close(tk__buf *b);

/* Column values: text or NULL; integers (TK__NONE for NULL); booleans. */
const char *tk__pg_text(const PGresult *r, int row, int col);
int64_t tk__pg_i64(const PGresult *r, int row, int col);
int tk__pg_bool(const PGresult *r, int row, int col);
/* Copy text column col into dst (cap bytes), cut short if it must be. */
void tk__pg_copy(char *dst, size_t cap, const PGresult *r, int row, int col);

/* Text that PostgreSQL accepts: s itself when it is valid UTF-8, else a
 * copy in *tmp (free it) with each bad byte replaced by U+FFFD; NULL stays
 * NULL. Error texts come from handlers' output, which may be any bytes. */
const char *tk__pg_utf8(const char *s, char **tmp);

/* Out of memory while talking to the server. */
int tk__pg_oom(tk_err *err, const char *what);

/* ---- Operations (one file each group) ---- */

int tk__pg_template_put(tk_store *s, tk__template_row *rows, int n, tk_err *err);
int tk__pg_template_find(tk_store *s, const char *ns, const char *name, const char *version,
                         tk__template_rec *out, int max, int *n, tk_err *err);
int tk__pg_template_get_by_id(tk_store *s, int64_t id, tk__template_rec *out, tk_err *err);
int tk__pg_template_list(tk_store *s, tk__template_rec **out, int *n, tk_err *err);
/* task_create with a guard (may be NULL) in the same transaction: right
 * after BEGIN, check queues its statements, runs the pipeline and resets
 * it, returning nonzero (nothing written) to give up; before COMMIT,
 * finish queues the statements that go with the task. */
typedef struct tk__pg_guard {
  int (*check)(tk__pg_pipe *p, void *ud, tk_err *err);
  void (*finish)(tk__pg_pipe *p, void *ud);
  void *ud;
} tk__pg_guard;
int tk__pg_task_create_guarded(tk_store *s, const tk__new_task *t, const tk__pg_guard *g,
                               int64_t *task_id, int *existed, tk_err *err);
/* Child tasks (postgres_children.c). */
int tk__pg_child_start(tk_store *s, tk__child_req *c, tk_err *err);
int tk__pg_task_family(tk_store *s, int64_t task_id, tk__child_rec *parent,
                       tk__child_rec **children, int *n, tk_err *err);
/* Queue the cancel of task_id's unfinished descendants (their locks
 * first, ascending), after its own cancel (tk__pg_cancel_queue). */
void tk__pg_children_cancel_queue(tk__pg_pipe *p, int64_t task_id, int64_t now);
/* Retry budgets (postgres_budget.c). */
int tk__pg_retry_earlier(tk_store *s, const tk__retry_ref *v, int n, int64_t run_at, int *moved,
                         tk_err *err);
int tk__pg_budget_update(tk_store *s, const char *key, unsigned char *state, size_t cap,
                         tk__budget_fn fn, void *arg, int64_t now, tk_err *err);
int tk__pg_budget_list(tk_store *s, tk__budget_rec **out, int *n, tk_err *err);
/* Schedules (postgres_schedules.c). */
int tk__pg_schedule_put(tk_store *s, const tk__schedule_rec *rows, int n,
                        const char *replace_source, tk_err *err);
int tk__pg_schedule_list(tk_store *s, const char *name, tk__schedule_rec **out, int *n,
                         tk_err *err);
int tk__pg_schedule_remove(tk_store *s, const char *name, tk_err *err);
int tk__pg_schedule_fire(tk_store *s, tk__schedule_step *step, tk_err *err);
int tk__pg_task_create(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err);
int tk__pg_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err);
int tk__pg_record(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                  tk__claim_request *next, tk_err *err);
int tk__pg_claim_get(tk_store *s, int64_t claim_id, tk__claim_rec *out, tk_err *err);
int tk__pg_heartbeat(tk_store *s, int64_t step_id, int64_t claim_id, int64_t expires_at,
                     tk_err *err);
int tk__pg_expired(tk_store *s, int64_t now, int limit, tk__expired *out, int *n, tk_err *err);
int tk__pg_next_due(tk_store *s, int64_t *ready_at, int64_t *lease_at, tk_err *err);
int tk__pg_has_work(tk_store *s, int *yes, tk_err *err);
int tk__pg_inputs(tk_store *s, const int64_t *step_ids, int n, json_t **out, tk_err *err);
int tk__pg_operator(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                    int64_t now, tk__effects *fx, tk_err *err);
/* Queue the writes of a cancel plan (an operator's, or a deadline's:
 * tk__deadline_plan) of task_id, found in task_state: every unfinished
 * step cancelled with its transition (reason plan->step_reason), the task
 * to plan->task_to (reason plan->reason). The caller holds the task's
 * lock. */
void tk__pg_cancel_queue(tk__pg_pipe *p, const tk__op_plan *plan, int64_t task_id,
                         const char *task_state, int64_t now);
/* Deadlines (postgres_deadline.c). */
int tk__pg_deadline_apply(tk_store *s, int64_t now, int limit, int64_t *out, int *n,
                          int64_t *next_at, tk_err *err);
/* Queue the read of the earliest deadline still to look at (one column,
 * NULL: none); its slot. */
int tk__pg_deadline_first_queue(tk__pg_pipe *p);
int tk__pg_task_report(tk_store *s, int64_t task_id, tk__task_report *out, tk_err *err);
int tk__pg_status(tk_store *s, int64_t now, tk__status_report *out, tk_err *err);
int tk__pg_items_load(tk_store *s, int64_t step_id, tk__batch_load *out, tk_err *err);
int tk__pg_items_checkpoint(tk_store *s, int64_t step_id, int64_t claim_id,
                            const tk__item_result *r, int n, tk_err *err);
int tk__pg_task_list(tk_store *s, const tk__task_query *f, tk__task_row **out, int *n,
                     tk_err *err);
int tk__pg_task_count(tk_store *s, const tk__task_query *f, int64_t *n, tk_err *err);
int tk__pg_step_list(tk_store *s, const char *step_state, const tk__task_query *f,
                     tk__step_row **out, int *n, tk_err *err);
/* Retention (postgres_prune.c). */
int tk__pg_prune(tk_store *s, const tk__prune_request *r, tk__prune_counts *out, tk_err *err);
int tk__pg_size(tk_store *s, int64_t *bytes, tk_err *err);
int tk__pg_durability(tk_store *s, tk_durability d, tk_err *err);
/* The session's synchronous_commit for pg->sync_off (open, reconnect). */
int tk__pg_durability_apply(tk__pg *pg, tk_err *err);
int tk__pg_activity(tk_store *s, int64_t since, int64_t bucket_ms, int n,
                    tk__activity_bucket *out, tk_err *err);

/* ---- Shared pieces of the state machine's SQL ---- */

/* A stored state name as an SQL literal. States are literals in the SQL,
 * never parameters: the planner matches them against the partial indexes'
 * predicates. */
#define TK__PG_Q(s) "'" s "'"

/* The release of a finished step's children, as an UPDATE ... RETURNING
 * (c.parents_remaining, c.state) of each child, with SQL expressions for
 * the task, the template, the finished step's idx, now, and one more
 * condition. Children are found by (task_id, idx) through template_edges.
 * A child waiting for its last parent becomes due now. Safe only under the
 * task's lock: every other writer of a waiting child's row (an outcome, an
 * operator) holds that lock too, and claims take only children with no
 * parents left, which this never touches. A child no longer pending (a
 * branch its decision skipped, DESIGN §17) is left alone. The children's
 * positions come from the template's edges first, then each row by its
 * (task_id, idx) key: never a walk over the task's other steps. */
#define TK__PG_RELEASE(task, tpl, idx, now, cond)                                        \
  "UPDATE steps c SET parents_remaining = c.parents_remaining - 1,"                      \
  " run_at = CASE WHEN c.parents_remaining = 1 THEN " now " ELSE c.run_at END"           \
  " WHERE c.task_id = " task " AND c.idx = ANY (ARRAY(SELECT e.child_idx"                \
  " FROM template_edges e WHERE e.template_id = " tpl " AND e.parent_idx = " idx "))"    \
  " AND c.parents_remaining > 0 AND c.state = " TK__PG_Q(TK__STEP_PENDING) " AND " cond   \
  " RETURNING c.parents_remaining, c.state"

/* Of such RETURNING rows in `rel`: the children that became ready. */
#define TK__PG_RELEASED(rel)                                                             \
  "(SELECT count(*) FROM " rel " WHERE parents_remaining = 0 AND state = "               \
  TK__PG_Q(TK__STEP_PENDING) ")"

/* A place in a task's history (0009_moves_in_their_rows.sql): the
 * next transitions id, drawn for a transitions row or for a step's move
 * that its attempt row records instead (attempts.claim_seq, outcome_seq). */
#define TK__PG_NEXT_SEQ "nextval('transitions_id_seq')"

/* The advisory lock key of the task whose id is the SQL expression id
 * (see Concurrency above): 0x746B << 48 + id. */
#define TK__PG_TASK_LOCK_KEY(id) "(8388798730907680768 + " id ")"

/* The step state an outcome moves its step to, as its attempt row implies
 * it (attempt outcome, next_run_at): success completes it, a next run
 * makes it wait for a retry, anything else is an error. The writers store
 * attempts.outcome_state only where the state differs from this. */
#define TK__PG_OUTCOME_STATE(outcome, next_run_at)                                       \
  "CASE WHEN " next_run_at " IS NOT NULL THEN " TK__PG_Q(TK__STEP_WAITING_FOR_RETRY)               \
  " WHEN " outcome " = 'success' THEN " TK__PG_Q(TK__STEP_COMPLETE)                     \
  " ELSE " TK__PG_Q(TK__STEP_ERROR) " END"

/* The reason of a task's ordinary finish in `state` (tk__settle's), NULL
 * for a state no ordinary finish reaches. */
#define TK__PG_FINISH_REASON(state)                                                      \
  "CASE " state " WHEN " TK__PG_Q(TK__TASK_COMPLETE) " THEN "                            \
  TK__PG_Q(TK__REASON_ALL_COMPLETE) " WHEN " TK__PG_Q(TK__TASK_ERROR) " THEN "           \
  TK__PG_Q(TK__REASON_TASK_FAILED) " END"

/* The ordinary finish that the tasks row t implies (tasks.finish_seq,
 * 0009_moves_in_their_rows.sql) as its transitions row: id, task_id,
 * step_id, from_state, to_state, at, reason, in the snapshot before the
 * statement moves the task again. A statement that moves a task whose
 * finish_seq is set writes this row (cond selects the tasks) and clears
 * or replaces finish_seq. */
#define TK__PG_FINISH_ROW(cond)                                                          \
  "SELECT t.finish_seq, t.id, NULL::bigint, " TK__PG_Q(TK__TASK_IN_PROGRESS) ", t.state," \
  " t.finished_at, " TK__PG_FINISH_REASON("t.state") " FROM tasks t"                     \
  " WHERE t.finish_seq IS NOT NULL AND " cond

/* Whether a step x of a task can still progress (DESIGN §3). */
#define TK__PG_CAN_PROGRESS(x)                                                           \
  "(" x ".state IN (" TK__PG_Q(TK__STEP_IN_PROGRESS) ", "                                 \
  TK__PG_Q(TK__STEP_WAITING_FOR_RETRY) ", " TK__PG_Q(TK__STEP_WAITING) ") OR ("            \
  x ".state = " TK__PG_Q(TK__STEP_PENDING) " AND " x ".parents_remaining = 0))"

/* Queue the claim of request r (postgres_claim.c), reading the store's
 * clock now; *claim_slot and *retry_slot get the slots whose results
 * tk__pg_claim_read turns into r->out and r->next_retry_at. */
int tk__pg_claim_queue(tk__pg_pipe *p, tk__claim_request *r, int *claim_slot, int *retry_slot);
/* Queue the look at what a claim's lanes may give next (of worker queue
 * worker_queue, or an orchestrator's with NULL) at now: columns next retry,
 * next due, whether an orchestrator's step named a queue. */
int tk__pg_next_queue(tk__pg_pipe *p, int64_t now, const char *worker_queue);
int tk__pg_queue_put(tk_store *s, const tk__queue_def *defs, int n, tk_err *err);
int tk__pg_queue_list(tk_store *s, int64_t now, tk__queue_rec **out, int *n, tk_err *err);
int tk__pg_worker_seen(tk_store *s, const char *queue, const char *worker, int64_t now,
                       tk_err *err);
int tk__pg_claim_read(tk__pg_pipe *p, tk__claim_request *r, int claim_slot, int retry_slot,
                      tk_err *err);

/* Queue the release of the children of step idx of task_id (template
 * template_id): each waits for one parent fewer, and one that waited for
 * it alone becomes due at now. Its result has one row: how many became
 * ready. The caller holds the task's lock. */
int tk__pg_release_queue(tk__pg_pipe *p, int64_t task_id, int64_t template_id, int idx,
                         int64_t now);

/* Queue "the task can still progress" (a step in progress, waiting for a
 * retry, or pending with no parents left): one row, one boolean. Run after
 * the task's lock is held, so it sees every committed change to its steps. */
int tk__pg_can_progress_queue(tk__pg_pipe *p, int64_t task_id);

/* Queue the write of a batch step's item results (postgres_record.c),
 * only while claim_id holds the step: the caller holds a lock that keeps
 * it so (the task's, or a share lock on the step). */
int tk__pg_items_queue(tk__pg_pipe *p, int64_t step_id, int64_t claim_id,
                       const tk__item_result *r, int n);

/* ---- Set-based recording (postgres_record_set.c) ---- */

/* Queue the locks of tasks ids[0..n) (ascending, distinct) in one
 * statement, in ascending id order; of one task, tk__pg_task_lock_queue. */
int tk__pg_tasks_lock_queue(tk__pg_pipe *p, const int64_t *ids, int n);
int tk__pg_task_lock_queue(tk__pg_pipe *p, int64_t task_id);

/* Queue the one statement that writes outcomes o[0..n) (in write order;
 * distinct steps and claims; none with batch items, none of a map's
 * instance, none whose children the flow releases), each fenced by its
 * claim: the step, its attempt row, its transition, the activity counts
 * and the completed steps' children. The caller holds their tasks'
 * locks; the tasks' rows are not written (counters and moves: one write
 * per task afterwards). Its slot, or -1 when it could not be queued. */
/* What the set statement needs to know of an outcome's step besides the
 * outcome: whether it is an instance of a map, whether it has children
 * (a leaf's release is not looked up among the template's edges). */
enum { TK__PG_SET_INSTANCE = 1, TK__PG_SET_PARENT = 2 };
int tk__pg_outcomes_queue(tk__pg_pipe *p, const tk__outcome *const *o, const unsigned char *kind,
                          int n);

/* Row i of that statement's result: outcome o[i]. */
typedef struct tk__pg_outcome_row {
  int recorded; /* 0: refused (fenced) */
  int released; /* children it made ready */
  /* Its task's stored state and counters, without this transaction's
   * outcomes. */
  char task_state[TK__STATE_MAX];
  int done, total, errors;
  int map_left; /* an instance's map: instances it still waits for; -1: not counted */
} tk__pg_outcome_row;
void tk__pg_outcomes_row(const PGresult *res, int i, tk__pg_outcome_row *out);

/* A move of a task that tk__settle chose, at time `at`. */
typedef struct tk__pg_task_move {
  const char *from, *to, *reason;
  int64_t at;
} tk__pg_task_move;

/* Queue the one write of task_id in this transaction: done and errors
 * added to its counters, updated_at = now, and its moves (in order, each
 * with its transition; the last one's `to` is its state). -1 when memory
 * ran out. */
int tk__pg_task_write_queue(tk__pg_pipe *p, int64_t task_id, int done, int errors, int64_t now,
                            const tk__pg_task_move *moves, int nmoves);

/* What one transaction adds to a task: its counters, updated_at = now,
 * and the state of its last move (NULL: no move). */
typedef struct tk__pg_task_sum {
  int64_t task_id;
  int done, errors;
  int64_t now;
  const char *state;
} tk__pg_task_sum;

/* Queue the writes of tasks t[0..n) (distinct; locked by the caller) in
 * one statement, as tk__pg_task_write_queue writes one, with every move
 * of them (moves[j] of task move_task[j], each task's in order). -1 when
 * memory ran out. */
int tk__pg_tasks_write_queue(tk__pg_pipe *p, const tk__pg_task_sum *t, int n,
                             const tk__pg_task_move *moves, const int64_t *move_task,
                             int nmoves);

/* ---- Decisions and map (postgres_flow.c; DESIGN §17) ---- */

struct tk__flow;

/* The flow of template template_id, read on this connection's first need
 * of it and kept (closing the store frees them: tk__pg_flows_free). Runs
 * its statements on p, whose earlier results it discards: call it where
 * nothing queued is still to be read. */
int tk__pg_flow_get(tk__pg_pipe *p, int64_t template_id, const struct tk__flow **out,
                    tk_err *err);
void tk__pg_flows_free(tk__pg *pg);

/* The flow's work inside a transaction that holds task_id's lock: each
 * call runs its statements on p at once (one round trip each, results
 * discarded afterwards) and adds what it changed of the task's counters
 * to done and errors. */
typedef struct tk__pg_flow_run {
  tk__pg_pipe *p;
  const struct tk__flow *f;
  int64_t task_id, now;
  int done, errors; /* the task's counters: what the flow's moves add */
  int released;     /* steps made ready: children, and each instance of a map expanded */
  tk_err *err;
} tk__pg_flow_run;

/* Step idx of the template has just completed or been resolved: release
 * its children under the flow's rules. A decision step: with `results`
 * (its results' JSON text) the branches it did not choose are skipped;
 * with results NULL (resolved by an operator: no choice made) every
 * branch is. A child that becomes ready and is a map expands at once; a
 * child whose parents all ended skipped is skipped, and so on down. */
int tk__pg_flow_finished(tk__pg_flow_run *x, int idx, const char *results, int decided);

/* Map step map_idx's instances changed (the last unfinished one finished,
 * or an operator retried or resolved one): complete or fail the map from
 * its instances' states, or reopen a failed map whose instance was
 * retried. */
int tk__pg_flow_map_settle(tk__pg_flow_run *x, int map_idx);

/* The task's stored state and counters (this transaction's counter
 * writes still to come: the caller adds its own), as settling reads them. */
int tk__pg_flow_task_counts(tk__pg_flow_run *x, char *state, size_t cap, tk__task_counts *c);

/* Instances of a map (store.h instance_list). */
int tk__pg_instance_list(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                         tk__step_rec **out, int *n, int64_t *total, tk_err *err);

/* Queue the move of task_id from `from` to `to` with its transition. */
int tk__pg_settle_queue(tk__pg_pipe *p, int64_t task_id, const char *from, const char *to,
                        const char *reason, int64_t now);

#endif
