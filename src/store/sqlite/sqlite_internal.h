/* The SQLite backend's private state and helpers, shared by its files. */
#ifndef TASKER_STORE_SQLITE_INTERNAL_H
#define TASKER_STORE_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "store/rules.h"
#include "store/store.h"

/* Prepared statements, cached by these ids for the life of the connection. */
enum {
  SQ_BEGIN, SQ_COMMIT, SQ_ROLLBACK,
  SQ_CLAIM_RETRY, SQ_CLAIM_FRESH, SQ_CLAIM_STEPS, SQ_ATTEMPT_NEXT_ID, SQ_ATTEMPT_INSERT, SQ_ATTEMPTS_MANY, SQ_TRANSITION, SQ_TRANSITIONS_MANY, SQ_TASK_START,
  SQ_RECORD_STEP, SQ_ATTEMPT_FINISH, SQ_RELEASE_CHILDREN, SQ_TASK_DONE, SQ_TASK_DONE_QUIET, SQ_TASK_ERROR,
  SQ_TASK_PROGRESS, SQ_TASK_FINISH, SQ_COUNT, SQ_HEARTBEAT, SQ_EXPIRED, SQ_NEXT_READY, SQ_NEXT_RETRY,
  SQ_NEXT_LEASE, SQ_HAS_WORK, SQ_STEP_INSERT, SQ_TEMPLATE_BY_ID,
  SQ_CHILDREN, SQ_RELEASE_CHILD, SQ_TASK_CAN_PROGRESS, SQ_TASK_BY_IDENTITY, SQ_TASK_INSERT,
  SQ_BATCH_INSERT, SQ_ITEM_INSERT, SQ_ITEM_UPDATE, SQ_BATCH_GET, SQ_ITEMS_GET, SQ_STEP_HELD,
  SQ_STEP_INPUT,
  SQ_DELAYED_DUE, SQ_DELAYED_RELEASE, SQ_DELAYED_CLEAR, SQ_DELAYED_SET,
  SQ_RETRY_EARLIER_STEP, SQ_RETRY_EARLIER_ATTEMPT, SQ_ACTIVITY_MINUTE,
  SQ_FLOW_MOVE, SQ_FLOW_RESULTS, SQ_FLOW_EXPAND, SQ_FLOW_LIVE_PARENT, SQ_FLOW_RELEASE,
  SQ_FLOW_RUN_AT, SQ_FLOW_MAP_STATE, SQ_FLOW_MAP_COUNT, SQ_FLOW_MAP_LEFT, SQ_FLOW_MAP_RESULTS,
  SQ_FLOW_COUNTERS, SQ_FLOW_INSTANCE_DONE, SQ_FLOW_INSTANCE_LEFT,
  SQ_BULK_NEXT_ID, SQ_BULK_TASK, SQ_BULK_TASKS, SQ_BULK_STEP, SQ_BULK_STEPS,
  SQ_CLAIM_TOKEN, SQ_CLAIM_GET, SQ_STEP_QUEUE,
  SQ_TASK_PRIORITY, SQ_STEPS_PRIORITY, SQ_QUEUE_NAMED, SQ_QUEUE_LANES, SQ_QUEUE_ONE, SQ_QUEUE_BUSY,
  SQ_QUEUE_TOKENS, SQ_LANE_RETRY, SQ_LANE_DELAYED, SQ_QUEUE_PUT, SQ_QUEUE_CLEAR, SQ_QUEUE_LIST, SQ_WORKER_SEEN,
  SQ_BUDGET_GET, SQ_BUDGET_PUT,
  SQ_WAIT_TASK, SQ_WAIT_STEP, SQ_WAIT_BY_KEY, SQ_WAIT_PENDING, SQ_WAIT_FINISHED, SQ_WAIT_SIGNAL_PUT,
  SQ_WAIT_HELD, SQ_WAIT_DELIVERABLE, SQ_WAIT_DELIVER, SQ_WAIT_PARK, SQ_WAIT_DUE, SQ_WAIT_CLAIM,
  SQ_WAIT_RESUME, SQ_WAIT_NEXT, SQ_SIGNALS_LAST,
  SQ_DEADLINE_FIRST, SQ_DEADLINE_DUE, SQ_DEADLINE_DROP, SQ_DEADLINE_SET, SQ_DEADLINE_PUT,
  SQ_CB_ARM, SQ_CB_FIND, SQ_CB_PUT, SQ_CB_EXTEND,
  SQ__COUNT
};

typedef struct tk__sq_dag tk__sq_dag; /* sqlite_edges.c */
typedef struct tk__sq_transition_row tk__sq_transition_row; /* sqlite_transitions.c */

/* What a transaction adds to one row of the per-minute activity counts
 * (sqlite_activity.c); a few rows are kept until the commit. */
#define TK__SQ_MINUTES 4
typedef struct tk__sq_minute {
  int64_t minute;
  char owner[TK__OWNER_MAX];
  int64_t succeeded, failed, retries, lateness_n, lateness_sum_ms, lateness_max_ms;
} tk__sq_minute;

/* A range of ready steps that a claim may take from (0014_queues.sql):
 * the steps of worker queue wq (NULL: an orchestrator's) that name queue
 * `name` (named 0: the steps of no queue), with that queue's limits and
 * its room at the claim (sqlite_queues.c). */
typedef struct tk__sq_lane {
  char name[TK__QUEUE_MAX + 1];
  int named, worker;   /* worker: wq is name, else NULL */
  int64_t id;          /* its queues row; 0: none (no limits) */
  int concurrency, burst;
  double rate, tokens; /* tokens: the bucket refilled to the claim's now */
  int64_t busy;        /* its steps in progress before the claim */
  int room;            /* steps the claim may take from it: INT_MAX, no limit */
  int taken;           /* steps the claim takes from it */
  int cut;             /* a scan of it stopped at a cap: ready steps may be left */
} tk__sq_lane;

typedef struct tk__sqlite {
  tk_store base; /* first: a tk__sqlite is a tk_store */
  sqlite3 *db;
  char *path;
  sqlite3_stmt *stmts[SQ__COUNT];
  int inotify_fd; /* watches the WAL file for other processes' commits */
  int64_t signals_seen; /* the last signal id drain_changes saw */
  int unsure_drains;    /* drains left to look again after a change (sq_drain_changes) */
  int64_t busy_since_ns; /* when the current wait for the write lock began */
  /* The background checkpointer (sqlite_checkpoint.c). */
  pthread_t ckpt_thread;
  pthread_mutex_t ckpt_mu;
  pthread_cond_t ckpt_cv;
  int ckpt_started, ckpt_wanted, ckpt_stop, ckpt_ready;
  /* Templates' edges read so far (sqlite_edges.c). */
  tk__sq_dag *dags;
  int ndags;
  /* Transition rows of the open transaction (sqlite_transitions.c). */
  tk__sq_transition_row *trans;
  int ntrans, trans_cap;
  /* Activity counts of the open transaction (sqlite_activity.c). */
  tk__sq_minute minutes[TK__SQ_MINUTES];
  int nminutes;
  /* The lanes of the claim being made (sqlite_queues.c), which lane each
   * step claimed came from, and the turn that rotates the order in which
   * an orchestrator's claims visit them. */
  tk__sq_lane *lanes;
  int nlanes, lanes_cap;
  int *lane_of;
  int lane_of_cap;
  unsigned turn;
} tk__sqlite;

/* The cached statement `id`, prepared from `sql` on first use and reset and
 * unbound on every later one. NULL (with err set) if it cannot be prepared. */
sqlite3_stmt *tk__sq_stmt(tk__sqlite *q, int id, const char *sql, tk_err *err);

/* Rows per multi-row INSERT (tk__sq_insert_rows). */
#define TK__SQ_ROWS_PER_INSERT 32

/* The cached INSERT `head` VALUES with `rows` rows of `columns` parameters
 * each, under id one_id when rows is 1 and many_id when it is
 * TK__SQ_ROWS_PER_INSERT (the only two sizes): a group of rows written by
 * one statement costs SQLite far less than as many statements. */
sqlite3_stmt *tk__sq_insert_rows(tk__sqlite *q, int one_id, int many_id, const char *head,
                                 int columns, int rows, tk_err *err);

/* Run one statement with no results (or ignore them). */
int tk__sq_exec(tk__sqlite *q, const char *sql, tk_err *err);

/* Prepare (once) and run the cached statement `id` that has no parameters. */
int tk__sq_run(tk__sqlite *q, int id, const char *sql, tk_err *err);

/* Step st once: *found gets 1 for a row and 0 for none; anything else is
 * the statement's error, never "no row". An error may have rolled the
 * transaction back already, and writes made after it as if nothing
 * happened would each commit on their own. */
int tk__sq_row(tk__sqlite *q, sqlite3_stmt *st, const char *what, int *found, tk_err *err);

/* After a loop of sqlite3_step that ended with rc: 0 at the end of the
 * rows, else the statement's error. */
int tk__sq_rows_end(tk__sqlite *q, int rc, const char *what, tk_err *err);

/* Step a statement expecting SQLITE_DONE; a store error otherwise. */
int tk__sq_done(tk__sqlite *q, sqlite3_stmt *st, tk_err *err);

/* The last SQLite error as a TK_ESTORE in err, with `what` for context. */
int tk__sq_fail(tk__sqlite *q, const char *what, tk_err *err);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. A commit that fails rolls back
 * (the transaction is over either way); rollback never fails loudly. */
int tk__sq_begin(tk__sqlite *q, tk_err *err);
int tk__sq_commit(tk__sqlite *q, tk_err *err);
void tk__sq_rollback(tk__sqlite *q);

/* Move checkpoints off the committing thread (init after the connection is
 * open and in WAL mode; stop before closing it). */
void tk__sq_checkpointer_init(tk__sqlite *q);
void tk__sq_checkpointer_stop(tk__sqlite *q);

/* Column helpers: text or NULL, and text as a new json_t (null for NULL). */
const char *tk__sq_text(sqlite3_stmt *st, int col);

/* Column col: text copied (NULL kept; *oom set when a copy fails), or an
 * int64 with TK__NONE for NULL. Shared by the lists, reports and schedules. */
char *tk__sq_col_dup(sqlite3_stmt *st, int col, int *oom);
int64_t tk__sq_col_i64(sqlite3_stmt *st, int col);

/* Add a transition row to the open transaction (from may be NULL, step_id
 * and attempt 0 for none). Rows are written when the transaction commits;
 * tk__sq_transitions_flush writes them earlier (before a statement that
 * inserts transitions itself, so ids stay in order). */
int tk__sq_transition(tk__sqlite *q, int64_t task_id, int64_t step_id, const char *from,
                      const char *to, int64_t at, const char *reason, int attempt, tk_err *err);
int tk__sq_transitions_flush(tk__sqlite *q, tk_err *err);
void tk__sq_transitions_drop(tk__sqlite *q);
void tk__sq_transitions_free(tk__sqlite *q);

/* After a step of task_id ended (complete, resolved or error) or was
 * retried: move the task as tk__settle says. *state gets the task's new
 * state or NULL. Runs inside the caller's transaction. */
int tk__sq_settle_task(tk__sqlite *q, int64_t task_id, int64_t now, const char **state,
                       tk_err *err);

/* Release the children of step idx (of template template_id) of task_id,
 * found by (task_id, idx), which completed with `results` or was resolved
 * (`resolving`); *released gets how many became ready. A template with
 * decisions or maps releases by the flow's rules (sqlite_flow.c). Inside
 * the caller's transaction. */
int tk__sq_release_children(tk__sqlite *q, int64_t task_id, int64_t template_id, int idx,
                            const char *results, int resolving, int64_t now, int *released,
                            tk_err *err);

/* The flow of template_id (store/flow.h), cached with its edges. */
struct tk__flow;
int tk__sq_flow(tk__sqlite *q, int64_t template_id, const struct tk__flow **flow, tk_err *err);

/* sqlite_flow.c, inside the caller's transaction (store/flow.h says what
 * each does). release: the children of step idx, complete with results or
 * resolved. instance_done: an instance of map map_idx finished (complete
 * or error); *settle 1 when that settled the map (the task must be
 * settled too). map_settle: after an operator action on an instance. */
int tk__sq_flow_release(tk__sqlite *q, const struct tk__flow *f, int64_t task_id, int idx,
                        const char *results, int resolving, int64_t now, int *released,
                        tk_err *err);
int tk__sq_flow_instance_done(tk__sqlite *q, const struct tk__flow *f, int64_t task_id,
                              int map_idx, int64_t now, int *released, int *settle, tk_err *err);
int tk__sq_flow_map_settle(tk__sqlite *q, const struct tk__flow *f, int64_t task_id, int map_idx,
                           int64_t now, int *released, tk_err *err);

/* The children of step idx of template_id (*n of them at *children, valid
 * until the connection closes) and the template's flow (*flow, when flow
 * is not NULL), from memory after the template's first look; and the
 * release of that memory. */
struct tk__flow;
int tk__sq_children(tk__sqlite *q, int64_t template_id, int idx, const int **children, int *n,
                    const struct tk__flow **flow, tk_err *err);
void tk__sq_edges_free(tk__sqlite *q);

/* Per-minute activity counts (sqlite_activity.c), inside the caller's
 * transaction: add to the row of started_at's minute and owner (written
 * with the others by tk__sq_minutes_flush, which the caller runs before
 * it commits; a rollback sets nminutes to 0). */
int tk__sq_minutes_add(tk__sqlite *q, int64_t started_at, const char *owner,
                       const tk__sq_minute *add, tk_err *err);
int tk__sq_minutes_flush(tk__sqlite *q, tk_err *err);
/* Whether the counts can be written (their statement prepares: schema
 * 0010 or later); TK_ESTORE saying why not. */
int tk__sq_minutes_ready(tk__sqlite *q, tk_err *err);

/* Add `delta` to the persistent counter `name`, in the caller's transaction. */
int tk__sq_count(tk__sqlite *q, const char *name, int64_t delta, tk_err *err);

/* Batch steps (sqlite_items.c), inside the caller's transaction: store the
 * settings and items of new step step_id; apply item results of an
 * outcome whose fence already held. */
int tk__sq_items_insert(tk__sqlite *q, int64_t step_id, const tk__new_step *ns, tk_err *err);
int tk__sq_items_apply(tk__sqlite *q, int64_t step_id, const tk__item_result *r, int n,
                       tk_err *err);

/* A template's columns, each with `prefix` ("tp." or " "), in the order
 * tk__sq_template_rec reads them from column `col` on into r (strings
 * copied; TK_ENOMEM leaves r empty). */
#define TK__SQ_TEMPLATE_COLUMNS(p)                                                            \
  p "id," p "namespace," p "name," p "version," p "description," p "definition," p "created_at"
int tk__sq_template_rec(sqlite3_stmt *st, int col, tk__template_rec *r);

/* Operations implemented in the backend's files. */
int tk__sq_template_put(tk_store *s, tk__template_row *rows, int n, tk_err *err);
int tk__sq_template_find(tk_store *s, const char *ns, const char *name, const char *version,
                         tk__template_rec *out, int max, int *n, tk_err *err);
int tk__sq_template_get_by_id(tk_store *s, int64_t id, tk__template_rec *out, tk_err *err);
int tk__sq_template_list(tk_store *s, tk__template_rec **out, int *n, tk_err *err);
int tk__sq_task_create(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err);
/* A new step's worker queue (DESIGN §19), set after its row is inserted:
 * nothing for queue NULL, so that submitting other steps costs nothing. */
/* What a new task stores beyond the rows that every schema writes (12;
 * 0014_queues.sql), after its task and step rows are in: its priority on
 * the task and its steps, each step's worker queue and queue, and a queues
 * row for each queue named. Nothing for a task of priority 0 naming no
 * queue. */
int tk__sq_task_extras(tk__sqlite *q, int64_t task_id, const tk__new_task *t, tk_err *err);
/* A claim as the reaper's query and claim_get read it, from columns 0..13
 * of st: step id, task id, template id, template step (a map's for its
 * instance), attempt, max_attempts, retryable, run_at, last_delay_ms,
 * backoff, owner (into owner[cap]), lease expiry, claim id, item_index. */
void tk__sq_claim_columns(sqlite3_stmt *st, tk__claimed *c, char *owner, size_t cap);
/* The claim_get op (sqlite_claims.c). */
int tk__sq_claim_get(tk_store *s, int64_t claim_id, tk__claim_rec *out, tk_err *err);
/* task_create's writes inside the caller's transaction (*existed: the
 * identity existed, nothing written). */
int tk__sq_task_insert(tk__sqlite *q, const tk__new_task *t, int64_t *task_id, int *existed,
                       tk_err *err);
/* Bulk submit (sqlite_tasks.c). */
int tk__sq_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err);
/* Schedules (sqlite_schedules.c). */
int tk__sq_schedule_put(tk_store *s, const tk__schedule_rec *rows, int n,
                        const char *replace_source, tk_err *err);
int tk__sq_schedule_list(tk_store *s, const char *name, tk__schedule_rec **out, int *n,
                         tk_err *err);
int tk__sq_schedule_remove(tk_store *s, const char *name, tk_err *err);
int tk__sq_schedule_fire(tk_store *s, tk__schedule_step *step, tk_err *err);
/* Remove one schedule inside the caller's transaction (TK_ENOENT: none). */
int tk__sq_schedule_remove_in(tk__sqlite *q, const char *name, tk_err *err);
/* Delayed starts (sqlite_delayed.c): release the roots of up to limit
 * tasks due by now (in the caller's transaction). The earliest start not
 * yet released is each lane's (tk__sq_lanes_due). */
int tk__sq_release_delayed(tk__sqlite *q, int64_t now, int limit, tk_err *err);
/* Give a task just inserted its start time (its roots are inserted with
 * parents_remaining -1): a statement of its own, so the insert of every
 * task stays as it was (and works on a schema before 0009). */
int tk__sq_delay_task(tk__sqlite *q, int64_t task_id, int64_t start_at, tk_err *err);
/* Retention (sqlite_prune.c). */
int tk__sq_prune(tk_store *s, const tk__prune_request *r, tk__prune_counts *out, tk_err *err);
int tk__sq_size(tk_store *s, int64_t *bytes, tk_err *err);
int tk__sq_durability(tk_store *s, tk_durability d, tk_err *err);
int tk__sq_record(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                  tk__claim_request *next, tk_err *err);
/* Retry budgets (sqlite_budget.c). */
int tk__sq_retry_earlier(tk_store *s, const tk__retry_ref *v, int n, int64_t run_at, int *moved,
                         tk_err *err);
int tk__sq_budget_update(tk_store *s, const char *key, unsigned char *state, size_t cap,
                         tk__budget_fn fn, void *arg, int64_t now, tk_err *err);
int tk__sq_budget_list(tk_store *s, tk__budget_rec **out, int *n, tk_err *err);
/* Wait steps and signals (sqlite_wait.c). */
int tk__sq_signal_put(tk_store *s, const tk__signal_req *r, tk__signal_ans *out, tk_err *err);
int tk__sq_step_wait(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err);
int tk__sq_wait_take(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                     tk__waited *out, int *n, int64_t *next_at, tk_err *err);
/* Child tasks (sqlite_children.c). */
int tk__sq_child_start(tk_store *s, tk__child_req *c, tk_err *err);
int tk__sq_task_family(tk_store *s, int64_t task_id, tk__child_rec *parent,
                       tk__child_rec **children, int *n, tk_err *err);
/* Store the signal of task_id's end for its parent's step, if it is a
 * child task that has just ended: moved from state `from` into `to`, a
 * terminal state (complete, error or cancelled) other than `from`. Inside
 * the caller's transaction. Called by the two statements that end a task:
 * settling it and cancelling it (0020_child_end_without_trigger.sql).
 * `maybe_child` 0 says the caller knows task_id has no parent claim, which
 * spares the statement. */
int tk__sq_child_end(tk__sqlite *q, int64_t task_id, int maybe_child, const char *from,
                     const char *to, tk_err *err);
/* Cancel task_id's unfinished children (and theirs), each as an operator's
 * cancel would, in the caller's transaction: its parent was cancelled or
 * reached its deadline (tk__sq_cancel_task calls it). */
int tk__sq_children_cancel(tk__sqlite *q, int64_t task_id, int64_t now, tk_err *err);
/* Deadlines (sqlite_deadline.c). */
int tk__sq_deadline_apply(tk_store *s, int64_t now, int limit, int64_t *out, int *n,
                          int64_t *next_at, tk_err *err);
/* The earliest deadline still to look at into *at (INT64_MAX: none). */
int tk__sq_deadline_first(tk__sqlite *q, int64_t *at, tk_err *err);
/* Callbacks of http steps (sqlite_callbacks.c). */
int tk__sq_callback_arm(tk_store *s, const tk__callback_arm *a, tk_err *err);
int tk__sq_callback_put(tk_store *s, const tk__callback_req *r, tk__callback_ans *out,
                        tk_err *err);
int tk__sq_callback_extend(tk_store *s, const tk__callback_req *r, int64_t extend_ms,
                           tk__callback_ans *out, tk_err *err);
/* Store task_id's deadline (tasks.deadline_at and its deadlines row), in
 * the caller's transaction. */
int tk__sq_deadline_put(tk__sqlite *q, int64_t task_id, int64_t deadline_at, tk_err *err);
/* Cancel task_id's unfinished steps and move it to p->task_to (a cancel
 * plan: an operator's or a deadline's), in the caller's transaction. */
struct tk__op_plan;
int tk__sq_cancel_task(tk__sqlite *q, const struct tk__op_plan *p, int64_t task_id,
                       const char *task_state, int64_t now, tk__effects *fx, tk_err *err);
int tk__sq_heartbeat(tk_store *s, int64_t step_id, int64_t claim_id, int64_t expires_at,
                     tk_err *err);
int tk__sq_expired(tk_store *s, int64_t now, int limit, tk__expired *out, int *n, tk_err *err);
/* A signal from columns col.. of st (id, data, error, key, created_at,
 * final, retry_after_ms, source) into *r (sqlite_wait.c); TK_ENOMEM (r
 * freed) when a copy fails. */
int tk__sq_signal_columns(sqlite3_stmt *st, int col, tk__signal_rec *r, tk_err *err);
int tk__sq_next_due(tk_store *s, int64_t *ready_at, int64_t *lease_at, tk_err *err);
int tk__sq_has_work(tk_store *s, int *yes, tk_err *err);
int tk__sq_inputs(tk_store *s, const int64_t *step_ids, int n, json_t **out, tk_err *err);
/* The inputs of the n steps claimed into c[] for request r, in the claim's
 * transaction (tk__claim_request.want_inputs): c[i].input, or NULL for a
 * step whose handler takes none or whose input could not be read. */
void tk__sq_claim_inputs(tk__sqlite *q, tk__claim_request *r, tk__claimed *c, int n);
/* Queues (sqlite_queues.c, 0014_queues.sql). The lanes a claim looks at
 * into q->lanes: a worker's claim of queue wq, its queue's one; an
 * orchestrator's (wq NULL), the steps of no queue first, then each queue an
 * orchestrator's step named; each with its room at now. */
int tk__sq_lanes_load(tk__sqlite *q, const char *wq, int64_t now, tk_err *err);
/* After the claim took lane->taken steps of each lane: the buckets of the
 * lanes with a rate give up what was taken. */
int tk__sq_lanes_spend(tk__sqlite *q, int64_t now, tk_err *err);
/* When the lanes may give more (tk__claim_request.next_due_at) and the
 * earliest retry a claim could take (next_retry_at), both INT64_MAX for
 * none: from each lane's next retry, its fresh steps (fresh: probe them;
 * else a lane cut short has some now), its limits (a lane full by
 * concurrency waits for an outcome; one out of tokens for its next token),
 * and its next delayed start. */
int tk__sq_lanes_due(tk__sqlite *q, int64_t now, int fresh, int64_t *due, int64_t *retry,
                     tk_err *err);
void tk__sq_lanes_free(tk__sqlite *q);
int tk__sq_queue_put(tk_store *s, const tk__queue_def *defs, int n, tk_err *err);
int tk__sq_queue_list(tk_store *s, int64_t now, tk__queue_rec **out, int *n, tk_err *err);
int tk__sq_worker_seen(tk_store *s, const char *queue, const char *worker, int64_t now,
                       tk_err *err);
int tk__sq_operator(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                    int64_t now, tk__effects *fx, tk_err *err);
int tk__sq_task_report(tk_store *s, int64_t task_id, tk__task_report *out, tk_err *err);
int tk__sq_instance_list(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                         tk__step_rec **out, int *n, int64_t *total, tk_err *err);
int tk__sq_status(tk_store *s, int64_t now, tk__status_report *out, tk_err *err);
int tk__sq_items_load(tk_store *s, int64_t step_id, tk__batch_load *out, tk_err *err);
int tk__sq_items_checkpoint(tk_store *s, int64_t step_id, int64_t claim_id,
                            const tk__item_result *r, int n, tk_err *err);
int tk__sq_task_list(tk_store *s, const tk__task_query *f, tk__task_row **out, int *n,
                     tk_err *err);
int tk__sq_task_count(tk_store *s, const tk__task_query *f, int64_t *n, tk_err *err);
int tk__sq_step_list(tk_store *s, const char *step_state, const tk__task_query *f,
                     tk__step_row **out, int *n, tk_err *err);
int tk__sq_activity(tk_store *s, int64_t since, int64_t bucket_ms, int n,
                    tk__activity_bucket *out, tk_err *err);

#endif
