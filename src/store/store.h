/* The store interface (DESIGN §12): a struct of function pointers that each
 * backend fills in, version first. The engine and the CLI are written once
 * against it; SQL lives only in the backends, and the rules of the state
 * machine (which state comes next, operator preconditions and their
 * messages, transition reasons) live in store/rules.h, which every backend
 * calls. Reports come back as typed rows; JSON is built in one place
 * (ops/report.c).
 *
 * Conventions for every operation: returns 0 or a negative TK_E* code with
 * a message in err; each operation that changes state is one transaction
 * and either happens whole or not at all; times are ms since the epoch in
 * the store's clock (tk_store.clock: the database server's on a shared
 * server, see store/store_clock.c), passed in by the caller or, for a
 * claim, read from that clock by the backend just before it claims. */
#ifndef TASKER_STORE_STORE_H
#define TASKER_STORE_STORE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/backoff.h>
#include <tasker/clock.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

/* 2: the batch-step members at the end; 3: no `claim` (record with no
 * outcomes claims), claim requests with fresh_limit, retry_ahead_ms, clock
 * and next_retry_at, no `count` (counters are the backend's own); 4: record
 * reports an error per outcome (errs) instead of a code each and the last
 * message; 5: typed reports (template_find, template_list, task_report,
 * status), inputs for many steps at once, a claim reads the store's own
 * clock, migrate to a target version, process_init and server_time; 6:
 * lists over the whole store (task_list, task_count, step_list, activity,
 * for include/tasker/query.h) and attempts' due_at in task reports; 7:
 * schedules (schedule_put, schedule_list, schedule_remove, schedule_fire;
 * include/tasker/schedule.h); also retention (prune, size) and delayed
 * starts (tk__new_task.start_at); 8: open takes tk_store_open_options
 * (create or not); 9: decisions and map (DESIGN §17): item_index in claims
 * and outcomes, map counts in step records, instance_list; 10: submit_many
 * (bulk submit, at the end); 11: worker steps (DESIGN §19): claim
 * requests with worker_queue and token_hashes, claim_get (at the end);
 * 12: queues and priority (DESIGN §4, §19): tk__new_step.queue,
 * tk__new_task.priority (and in task reports and rows), claim requests'
 * next_due_at, queue_put, queue_list and worker_seen (at the end); 13:
 * retry budgets kept in the store, budget_update (at the end); 14: budget_list
 * (at the end), for the report of budgets (tasker budgets); 15: wait steps
 * and signals (DESIGN §18): signal_put, step_wait, wait_take (at the end); 16:
 * deadlines (DESIGN §3): tk__new_task.deadline_at, the task report's
 * deadline_at, next_due's ready_at counts them, deadline_apply (at the end); 17:
 * callbacks of http steps (DESIGN §18): tk__signal_rec's final and
 * retry_after_ms, callback_arm, callback_put, callback_extend (at the end).
 * 18: child tasks (DESIGN §18): child_start, task_family (at the end). 19:
 * expired's rows carry the signal delivered to the lost claim. */
#define TK__STORE_OPS_VERSION 19
#define TK__OWNER_MAX 64
#define TK__PROFILE_MAX 64
#define TK__STATE_MAX 24
/* A claim token's secret as the store keeps it: its SHA-256. */
#define TK__TOKEN_HASH_LEN 32
/* Longest queue name, without its NUL (handlers/queue_name.c's rule). */
#define TK__QUEUE_MAX 64

/* An integer column that is NULL, in typed rows. */
#define TK__NONE INT64_MIN

/* drain_changes: a signal was stored by another connection. */
#define TK__CHANGED_WAITS 1
/* drain_changes: another connection's commit was seen begun but not yet
 * ended; drain again in TK__CHANGED_RECHECK_MS (with or without a change
 * of change_fd) to see whether it stored a signal. */
#define TK__CHANGED_UNSURE 2
#define TK__CHANGED_RECHECK_MS 1

/* Step states as stored (DESIGN §3). */
#define TK__STEP_PENDING "pending"
#define TK__STEP_IN_PROGRESS "in_progress"
#define TK__STEP_WAITING_FOR_RETRY "waiting_for_retry"
#define TK__STEP_COMPLETE "complete"
#define TK__STEP_ERROR "error"
#define TK__STEP_CANCELLED "cancelled"
#define TK__STEP_RESOLVED "resolved_manually"
/* Issue 21 (DESIGN §17): a branch its decision did not choose, or a step
 * whose parents were all skipped (terminal, counts as finished); a map
 * step whose instances are running (no lease, no worker). */
#define TK__STEP_SKIPPED "skipped"
#define TK__STEP_MAPPED "mapped"
/* Issue 24 (DESIGN §18): a wait step waiting for its signal or its
 * timeout (run_at): no lease, no worker; its claim (claim_id) and that
 * claim's attempt row stay open until a signal or the timeout ends it. */
#define TK__STEP_WAITING "waiting"

#define TK__TASK_PENDING "pending"
#define TK__TASK_IN_PROGRESS "in_progress"
#define TK__TASK_COMPLETE "complete"
#define TK__TASK_ERROR "error"
#define TK__TASK_CANCELLED "cancelled"

/* Item states of a batch step (DESIGN §9). */
#define TK__ITEM_PENDING "pending"
#define TK__ITEM_ACKED "acked"
#define TK__ITEM_GAVE_UP "gave_up"

/* A template as stored: identity plus its normalized JSON definition and
 * the DAG's edges by step position. */
typedef struct tk__template_row {
  int64_t id;
  const char *namespace_, *name, *version, *description;
  const char *definition; /* JSON text */
  const char *digest;
  const int *edges; /* pairs (parent_idx, child_idx) */
  int nedges;
  int64_t created_at;
  int existed; /* out: the same definition was already stored */
} tk__template_row;

/* One item of a new batch step. */
typedef struct tk__new_item {
  const char *key;  /* unique within the step */
  const char *data; /* the element as JSON text when it was an object, else NULL */
} tk__new_item;

/* One step of a new task, resolved from its template and the configuration. */
typedef struct tk__new_step {
  const char *name;
  int nparents;
  int max_attempts;
  int retryable;
  const char *backoff;
  /* Batch steps only (batch = 1): settings resolved at submit, and the
   * items, stored in the task's transaction in this order. */
  int batch;
  int max_in_call_retries, max_item_attempts, fail_if_any_gave_up;
  const tk__new_item *items;
  int nitems;
  /* A worker step (DESIGN §19): the queue its outside workers claim it
   * from (handler = { kind = "worker", queue = ... }); NULL: an
   * orchestrator runs it. Stored as steps.worker_queue. */
  const char *worker_queue;
  /* The queue the step names (DESIGN §19: `queue = "payments"` on any
   * step; a worker step's is its worker_queue), whose limits its claims
   * obey; NULL: none. Stored as steps.queue; a map's instances inherit
   * it. */
  const char *queue;
} tk__new_step;

typedef struct tk__new_task {
  int64_t template_id;
  const char *context; /* JSON text */
  const char *identity; /* may be NULL */
  const tk__new_step *steps;
  int nsteps;
  int64_t now;
  /* When its root steps may start (DESIGN §16); <= now: at once. A later
   * time stores them with parents_remaining = -1 (TK__DELAYED) and run_at
   * = start_at, out of the fresh steps' index until a claim takes them. */
  int64_t start_at;
  /* Higher first (DESIGN §4): among the fresh steps ready at a claim,
   * those of tasks of higher priority are claimed first; due retries keep
   * their run_at order. Stored on the task and copied to its steps (and a
   * map's instances). 0: the default. */
  int priority;
  /* The task's deadline (16; DESIGN §3), ms on the store's clock; 0:
   * none. Stored as tasks.deadline_at, and as a deadline to look at then
   * (deadline_apply). */
  int64_t deadline_at;
} tk__new_task;

/* parents_remaining of a root step waiting for its task's start time
 * (until it is due: then 0, and run_at the start time). */
#define TK__DELAYED (-1)

/* Which finished tasks a prune takes (DESIGN §16): those in state
 * complete, error or cancelled whose finished_at is set and before
 * before[] of their state (TK__PRUNE_*; TK__NONE: none of that state),
 * oldest finished first. */
enum { TK__PRUNE_COMPLETE, TK__PRUNE_ERROR, TK__PRUNE_CANCELLED, TK__PRUNE_STATES };
typedef struct tk__prune_request {
  int64_t before[TK__PRUNE_STATES];
  int limit;   /* tasks at most, > 0 (dry_run: ignored) */
  int dry_run; /* count what would go; change nothing */
} tk__prune_request;

/* The SQL arguments of a prune request, the same for both backends:
 * cut[0..2] before[] with TK__NONE as INT64_MIN (nothing of that state
 * finished before it), cut[3] the latest of them, so that one range scan
 * of tasks_finished bounds the selection. */
void tk__prune_cutoffs(const tk__prune_request *r, int64_t cut[TK__PRUNE_STATES + 1]);

/* A prune's dry run over the tasks `selected` (SQL selecting their ids,
 * with each backend's placeholders): the counts of tk__prune_counts in
 * its order but batch settings, one read with nothing locked. The
 * transitions counted are the tasks' moves (the moves view of each
 * backend: on PostgreSQL some are recorded by other rows), those whose
 * task_id meets `of_t`, the backend's test of belonging to the tasks t
 * (PostgreSQL's must reach the view's parts by key: postgres_prune.c). */
#define TK__PRUNE_COUNT_SQL(selected, of_t)                                                    \
  "WITH t AS (" selected "), s AS (SELECT id FROM steps WHERE task_id IN (SELECT id FROM t))" \
  " SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM s),"                              \
  " (SELECT count(*) FROM attempts WHERE step_id IN (SELECT id FROM s)),"                    \
  " (SELECT count(*) FROM moves WHERE task_id " of_t "),"                                    \
  " (SELECT count(*) FROM items WHERE step_id IN (SELECT id FROM s))"

/* Rows a prune removed (or would), by table. */
typedef struct tk__prune_counts {
  int64_t tasks, steps, attempts, transitions, items;
} tk__prune_counts;

/* A retry waiting in the store: its step and the failed attempt it
 * retries (the claim's attempts row id: never reused). */
typedef struct tk__retry_ref {
  int64_t step_id, claim_id;
} tk__retry_ref;

/* A step handed to the engine by a claim. */
typedef struct tk__claimed {
  int64_t step_id, task_id, template_id;
  int64_t claim_id; /* the claim's attempts row: the fencing token */
  int idx;        /* the template step whose handler runs: a map's, for its instance */
  int item_index; /* an instance of a map step: its element's position; -1: not one */
  int attempt; /* the attempt this claim is: attempts after the increment */
  int max_attempts;
  int retryable;
  int64_t run_at; /* when it became due, for lateness */
  int64_t last_delay_ms;
  int64_t lease_expires_at;
  char backoff[TK__PROFILE_MAX];
  char prev_state[24]; /* pending or waiting_for_retry, for the transition */
  int task_was_pending;
  /* The task's deadline (tasks.deadline_at), read when it was pending:
   * a new task's deadline may come before any the engine knows. 0: none,
   * or the task was not pending. */
  int64_t task_deadline_at;
  /* Its handler input as the `inputs` op builds it, JSON text (compact),
   * built by the claim itself when the request asked for inputs and its
   * template step is not among the request's no_input; malloc'd, the
   * caller's to free (tk__claimed_inputs_free). NULL: not built (not
   * asked for, or it could not be: the caller reads it with `inputs`). */
  char *input;
  /* A worker's claim: which of the request's token_hashes its attempt row
   * keeps (0-based); else 0. */
  int token_index;
} tk__claimed;

/* A claim to make in the same transaction as recording outcomes. */
typedef struct tk__claim_request {
  const char *owner;
  int64_t lease_ms;
  int limit;        /* >= 0; 0 claims nothing (the outcomes are still recorded) */
  int fresh_limit;  /* at most this many of them not retries (limit if larger) */
  int64_t retry_ahead_ms; /* also claim retries due up to this long after now */
  tk__claimed *out; /* limit slots */
  int n;            /* out: how many were claimed */
  int64_t now;      /* out: the store's clock when it claimed (read just
                       before the claim, after the outcomes were written:
                       a retry that came due meanwhile is found) */
  int64_t next_retry_at; /* out: the earliest run_at of a step waiting for a
                            retry after the claim; INT64_MAX: none */
  /* Inputs with the claim (issue 22): with want_inputs, each step claimed
   * comes with its input (tk__claimed.input) built in the claim's own
   * statement or transaction, but for the template steps whose handlers
   * take none: no_input[0..nno_input), sorted keys of tk__step_key. A step
   * of a template the caller does not know yet gets its input. */
  int want_inputs;
  const int64_t *no_input;
  int nno_input;
  /* A worker's claim (11; DESIGN §19): only ready steps of this worker
   * queue (steps.worker_queue), due retries first, then fresh steps
   * (delayed starts that came due included), oldest task first, as an
   * orchestrator's; retry_ahead_ms and fresh_limit apply alike. NULL: an
   * orchestrator's claim, which never takes a step of any worker queue. */
  const char *worker_queue;
  /* With worker_queue: limit hashes of the claims' token secrets
   * (core/claim_token.h); the i-th step claimed keeps token_hashes[i] in
   * its attempt row. */
  const unsigned char (*token_hashes)[TK__TOKEN_HASH_LEN];
  /* out (12): when the claim may find more of what it looks for, the
   * earliest of: the run_at of a retry or a delayed start of its steps
   * (a worker claim: of its queue; an orchestrator's: of every step no
   * worker runs) that it did not take, and the time a queue's token
   * bucket gives its next token while that queue's ready steps wait for
   * one. INT64_MAX: nothing will come due without a change some writer
   * signals (an outcome, a submit, an operator action); INT64_MIN:
   * unknown (look again soon). A backend sets it on every claim. */
  int64_t next_due_at;
} tk__claim_request;

/* A claim as its attempt row names it (claim_get): the step as the claim
 * saw it, for recording its outcome, and whether the claim still holds it. */
typedef struct tk__claim_rec {
  tk__claimed step;   /* claim_id, attempt, run_at (the due_at claimed for), ... */
  char owner[TK__OWNER_MAX];
  char state[TK__STATE_MAX]; /* the step's state now */
  int held;           /* in progress under this claim */
  int64_t started_at;
  int64_t lease_expires_at; /* the step's lease now; TK__NONE: none */
  int has_token;      /* the attempt row has a token hash (a worker's claim) */
  unsigned char token_hash[TK__TOKEN_HASH_LEN];
} tk__claim_rec;

/* The key of template step idx of template template_id in a claim
 * request's no_input. */
static inline int64_t tk__step_key(int64_t template_id, int idx) {
  return template_id * ((int64_t)1 << 32) + idx;
}

/* qsort/bsearch order of tk__step_key values. */
int tk__step_key_cmp(const void *a, const void *b);

/* Whether request r wants the input of a step of template step (template_id,
 * idx) built with the claim. */
int tk__claim_wants_input(const tk__claim_request *r, int64_t template_id, int idx);

/* A handler input that a backend's SQL wrote out as JSON text (built),
 * as the engine hands it over: compact, keys in the order written, as
 * json_dumps makes tk__input_add's; NULL when built is NULL or not a JSON
 * object. malloc'd. */
char *tk__input_text(const char *built);

/* Free the inputs of claims c[0..n) and set them NULL. */
void tk__claimed_inputs_free(tk__claimed *c, int n);

/* What the engine decided for a claimed attempt. */
typedef enum tk__next_state {
  TK__NEXT_COMPLETE = 1,
  TK__NEXT_RETRY, /* waiting_for_retry at run_at */
  TK__NEXT_ERROR
} tk__next_state;

typedef struct tk__outcome {
  int64_t step_id;
  int64_t claim_id; /* fence: the claim this outcome belongs to */
  int64_t task_id, template_id; /* as the claim returned them */
  int idx;
  /* An instance of a map step: 1 + its element's position (the claim's
   * item_index + 1); 0 for any other step, so that a zeroed outcome is
   * never taken for an instance. */
  int instance;
  const char *owner;
  int attempt;
  int64_t now;         /* when it is recorded: transitions, task updates */
  int64_t finished_at; /* when the attempt ended (its row's finished_at) */
  /* The reaper's: refused if the lease no longer ends by now. Its outcome
   * is lease_expired, or a signal's that the lost claim had taken. */
  int fence_lease;
  const char *attempt_outcome; /* success, failure, timeout, lease_expired */
  tk__next_state next;
  const char *error;   /* failure text, or NULL */
  const char *results; /* JSON text for COMPLETE, or NULL */
  int64_t delay_ms;    /* RETRY only */
  tk_delay_source source;
  int64_t run_at;
  /* Batch steps: item results written with the outcome, if it is not
   * fenced out (see tk__item_result). */
  const struct tk__item_result *items;
  int nitems;
} tk__outcome;

/* Whether o is a lease's expiry (counted as lease_expired). */
static inline int tk__outcome_expires_lease(const tk__outcome *o) {
  return o->fence_lease && strcmp(o->attempt_outcome, "lease_expired") == 0;
}

/* What one batch write changes of one item: its new state, and how many
 * deliveries to add to its attempts (an increment, so the write is the
 * same whoever counted before). Written only while the step is held by the
 * writer's claim, and only to an item still pending: an acked or given-up
 * item never changes again. */
typedef struct tk__item_result {
  int64_t seq;       /* the item's position in its step */
  const char *state; /* TK__ITEM_* after this write */
  int32_t delta;     /* deliveries since the last write */
  const char *error; /* the last rejection's reason; NULL keeps the stored one */
  /* Not written; for the engine's events after the commit. */
  const char *key;
  int32_t attempts; /* the item's attempts after this write */
} tk__item_result;

/* A batch step as a claim finds it: its settings, counts of all its items
 * by state, and the pending ones in submission order. items and text are
 * malloc'd (free both); the strings point into text. */
typedef struct tk__pending_item {
  int64_t seq;
  const char *key;
  const char *data; /* NULL when the element was a plain key */
  int32_t attempts; /* deliveries recorded so far (all of them rejected) */
} tk__pending_item;

typedef struct tk__batch_load {
  int max_in_call_retries, max_item_attempts, fail_if_any_gave_up;
  int64_t total, acked, gave_up;
  tk__pending_item *items; /* the pending ones */
  int64_t npending;
  char *text;
} tk__batch_load;

/* What recording an outcome changed beyond the step, for events. */
typedef struct tk__effects {
  int children_released; /* children whose parents are now all done */
  const char *task_state; /* the task's new terminal state, or NULL */
} tk__effects;

/* Wait steps and signals (15; DESIGN §18). A signal as stored for a
 * step: the data (JSON text) that become its results, or the error of a
 * failed attempt. Strings malloc'd (tk__signal_rec_free). */
typedef struct tk__signal_rec {
  int64_t id;        /* 0: none */
  char *data, *error; /* exactly one is set */
  char *key;          /* the idempotency key, or NULL */
  int64_t created_at;
  /* A callback's failure (17): final, not retryable; the delay the caller
   * asked for (ms), or -1. A signal's: 0 and -1. */
  int final;
  int64_t retry_after_ms;
  int callback;  /* a callback (bound to its attempt), not a signal */
  int child_end; /* a child task's end (bound to the attempt that started it) */
} tk__signal_rec;

/* Where a signal row came from, as both backends' queries say it
 * (TK__SIGNAL_SOURCE_SQL over signals g): 0 a signal, 1 a callback (its
 * claim has a callbacks row), 2 a child task's end (bound to a claim
 * that has none). */
#define TK__SIGNAL_SOURCE_SQL                                                                 \
  "CASE WHEN g.for_claim IS NULL THEN 0 WHEN EXISTS (SELECT 1 FROM callbacks cb"              \
  " WHERE cb.claim_id = g.for_claim) THEN 1 ELSE 2 END"
static inline void tk__signal_source(tk__signal_rec *r, int source) {
  r->callback = source == 1;
  r->child_end = source == 2;
}

/* A signal's columns, in the order tk__sq_signal_columns and
 * tk__pg_signal_columns read them, over signals g. */
#define TK__SIGNAL_COLUMNS_SQL                                                                \
  "g.id, g.data, g.error, g.idem_key, g.created_at, g.final,"                                \
  " COALESCE(g.retry_after_ms, -1), " TK__SIGNAL_SOURCE_SQL
/* The id of the signal delivered to the claim step s holds (tk__expired.sig). */
#define TK__CLAIM_SIGNAL_SQL                                                                  \
  "SELECT x.id FROM signals x WHERE x.step_id = s.id AND x.claim_id = s.claim_id"            \
  " ORDER BY x.id LIMIT 1"

static inline void tk__signal_rec_free(tk__signal_rec *r) {
  free(r->data);
  free(r->error);
  free(r->key);
  r->data = r->error = r->key = NULL;
}

/* An expired lease found by the reaper. */
typedef struct tk__expired {
  tk__claimed step; /* as the lost claim saw it */
  char owner[TK__OWNER_MAX];
  /* The signal (a callback's, a child's end) delivered to that claim when
   * its wait ended, which its owner stopped before recording: the reaper
   * records it as the attempt's outcome, so a child's results or a
   * callback are never lost to a retry (id 0: none; the caller frees). */
  tk__signal_rec sig;
} tk__expired;

static inline void tk__expired_free_signals(tk__expired *v, int n) {
  for (int i = 0; i < n; i++) {
    tk__signal_rec_free(&v[i].sig);
    v[i].sig.id = 0;
  }
}

/* Operator actions on one step or task: the public tk_operator_action. */
typedef tk_operator_action tk__operator_action;
#define TK__OP_RETRY TK_OP_RETRY
#define TK__OP_RESOLVE TK_OP_RESOLVE
#define TK__OP_CANCEL TK_OP_CANCEL

/* A stored template. Every string is malloc'd (tk__template_rec_free);
 * definition is NULL where the op says it is left out. */
typedef struct tk__template_rec {
  int64_t id;
  char *namespace_, *name, *version, *description;
  char *definition; /* normalized JSON text */
  int64_t created_at;
} tk__template_rec;

/* Typed rows of one task for `tasker show` and `why` (task_report). Every
 * char * is malloc'd or NULL for a NULL column; every int64_t that may be
 * NULL is TK__NONE then. tk__task_report_free releases it all. */
typedef struct tk__step_rec {
  int64_t id;
  int idx;
  char *name;
  char state[TK__STATE_MAX];
  /* parents_remaining: of a mapped step, its unfinished instances. */
  int attempts, max_attempts, retryable, parents_remaining;
  char *backoff;
  int64_t run_at, lease_expires_at, last_delay_ms;
  char *lease_owner, *last_error, *results;
  /* Batch steps (batch = 1): counts of the step's items by state. */
  int batch;
  int64_t items_pending, items_acked, items_gave_up;
  /* A map step (DESIGN §17) once mapped: counts of its instances; total
   * TK__NONE for any other step. An instance row (instance_list): its
   * element's position and the element (JSON text); item_index -1 and
   * item NULL for an ordinary step. */
  int64_t instances_total, instances_done, instances_failed, instances_waiting;
  int item_index;
  char *item;
} tk__step_rec;

typedef struct tk__attempt_rec {
  int64_t step_id;
  int attempt;
  char *owner;
  int64_t started_at, finished_at, delay_ms, next_run_at;
  int64_t due_at; /* the run_at the claim took the step at; TK__NONE: unknown
                     (written by schema versions before the column) */
  char *outcome, *error, *delay_source;
} tk__attempt_rec;

typedef struct tk__transition_rec {
  int64_t at;
  int64_t step_id; /* TK__NONE: the task's own */
  char *from, *to, *reason;
  int64_t attempt; /* TK__NONE when not about an attempt */
  char *step;      /* the step's name (an instance's "process[3]"); NULL: the task's */
} tk__transition_rec;

/* An item of a batch step that gave up: the first TK__GAVE_UP_SHOWN of
 * each step, in submission order (a step may hold 100,000). */
#define TK__GAVE_UP_SHOWN 100
typedef struct tk__gave_up_rec {
  int64_t step_id;
  char *key;
  int attempts;
  char *last_error;
} tk__gave_up_rec;

typedef struct tk__task_report {
  int64_t id;
  char state[TK__STATE_MAX];
  char *identity;
  int64_t created_at, updated_at, finished_at;
  int steps_total, steps_done, steps_error;
  int priority;               /* (12) tk__new_task.priority as submitted */
  int64_t deadline_at;        /* (16) its deadline; TK__NONE: none */
  char *context;              /* JSON text */
  tk__template_rec template_; /* with its definition */
  tk__step_rec *steps;        /* in template order */
  int nsteps;
  /* A map's instances are not in steps, attempts or transitions (a wide
   * map's would be most of the report): instance_list pages them. */
  tk__attempt_rec *attempts; /* oldest first */
  int nattempts;
  tk__transition_rec *transitions; /* oldest first */
  int ntransitions;
  tk__gave_up_rec *gave_up; /* by step, then submission order */
  int ngave_up;
} tk__task_report;

/* The store-wide counts behind `tasker status`. */
/* Room for every step state: the seven of DESIGN §3, skipped and mapped
 * (§17) and waiting (§18), with one to spare. */
#define TK__STATUS_STATES 11
#define TK__STATUS_COUNTERS 16
typedef struct tk__state_count {
  char state[TK__STATE_MAX];
  int64_t n;
} tk__state_count;

typedef struct tk__status_report {
  tk__state_count tasks[TK__STATUS_STATES]; /* by state, as stored */
  int ntasks;
  tk__state_count steps[TK__STATUS_STATES];
  int nsteps;
  int64_t ready_now;    /* steps ready at `now` */
  struct {
    char name[48];
    int64_t value;
  } counters[TK__STATUS_COUNTERS]; /* by name */
  int ncounters;
} tk__status_report;

/* Which tasks a list reads (ops/query.c fills it from a tk_task_filter).
 * Every member may be zero/NULL: no condition. */
typedef struct tk__task_query {
  const char *state;            /* a task state */
  const char *ns, *name;        /* template: name in namespace ns (NULL: any) */
  int64_t created_since;        /* created_at >= this; 0: any */
  const char *error_text;       /* a substring of any step's last_error, literal
                                   (no wildcards) and case-sensitive */
  int64_t task_id;              /* only this task */
  int64_t before;               /* the cursor: ids below this; 0: from the newest */
  int limit;                    /* rows at most (lists) */
} tk__task_query;

/* A task as lists show it. Strings malloc'd (NULL for NULL);
 * tk__task_rows_free releases an array of them. */
typedef struct tk__task_row {
  int64_t id;
  char state[TK__STATE_MAX];
  char *namespace_, *name, *version; /* its template */
  char *identity;
  int64_t created_at, updated_at, finished_at; /* finished_at may be TK__NONE */
  int steps_total, steps_done, steps_error;
  char *last_error;    /* of the step that failed most recently, or NULL */
  int64_t next_run_at; /* earliest run_at of a step waiting for a retry; TK__NONE */
  int priority;        /* (12) as submitted */
} tk__task_row;

/* A step as lists show it (tk__step_rows_free). */
typedef struct tk__step_row {
  int64_t id, task_id;
  char *name;
  char state[TK__STATE_MAX];
  int attempts, max_attempts, retryable;
  char *last_error;
  char *namespace_, *template_name, *version;
  int64_t updated_at; /* its last transition */
} tk__step_row;

/* Issue 19's additions: activity is counted per minute as attempts are
 * written (each backend's activity_minutes; list_sql.h), so a window of
 * whole minutes of this length is read from those counts. */
#define TK__MINUTE_MS INT64_C(60000)

/* The per-minute counts a prune (not a dry run) removes with the tasks:
 * the rows of minutes that end at or before the earliest cutoff r gives
 * (minute < the value returned; INT64_MIN: none, no cutoff given). */
int64_t tk__prune_minutes_before(const tk__prune_request *r);

/* Attempts that started in [start, start + bucket). Lateness is over the
 * retries whose due_at is known (lateness_n of them), started_at - due_at,
 * 0 for one that started early (claimed ahead). */
typedef struct tk__activity_bucket {
  int64_t start;
  int64_t succeeded, failed; /* finished: success, anything else */
  int64_t retries;           /* attempt > 1, or the step had a claim before */
  int64_t lateness_n, lateness_sum_ms, lateness_max_ms;
} tk__activity_bucket;

/* A stored schedule (DESIGN §16, include/tasker/schedule.h). Strings are
 * malloc'd when a list returns it (tk__schedule_recs_free), borrowed when
 * given to schedule_put. */
typedef struct tk__schedule_rec {
  char *name, *cron;
  char *zone;          /* tz database name, or NULL: UTC */
  char *template_name; /* "name" or "namespace/name" */
  char *version;       /* NULL: the newest when a slot fires */
  char *context;       /* JSON object text */
  char missed[16];     /* "skip" or "catch_up" */
  char source[16];     /* "config" or "cli": who defined it */
  int64_t created_at, updated_at;
  int64_t cursor;       /* every slot at or before this is done (fired or skipped) */
  int64_t last_fired;   /* the latest slot that submitted a task; TK__NONE */
  int64_t last_task_id; /* that task; TK__NONE */
} tk__schedule_rec;

/* One step of a schedule's progress (schedule_fire). */
typedef struct tk__schedule_step {
  const char *name;
  int64_t expected; /* the cursor as read: the step is refused if it moved */
  int64_t cursor;   /* the new cursor (> expected) */
  const tk__new_task *task; /* the slot's task (identity set), or NULL: only skip */
  int64_t slot;             /* the slot task fires, when task is set */
  int64_t task_id;          /* out: the task (created, or existing by identity) */
  int existed;              /* out: the identity existed already */
} tk__schedule_step;

/* A queue's limits as configured ([queues.NAME], DESIGN §19), given to
 * queue_put. 0 in a member: no such limit. */
typedef struct tk__queue_def {
  const char *name;
  int concurrency; /* its steps in progress at once, store-wide */
  double rate;     /* steps started per second (token bucket), store-wide */
  int burst;       /* the bucket's size; 0: max(1, ceil(rate)) */
} tk__queue_def;

/* A queue as `tasker queues` shows it (queue_list): every queue that a
 * stored step names (its queue or worker_queue) or queue_put defined. */
typedef struct tk__queue_rec {
  char name[TK__QUEUE_MAX + 1];
  int concurrency; /* as stored; 0: none */
  double rate;     /* 0: none */
  int burst;       /* the bucket's size in effect; 0 when rate is 0 */
  double tokens;   /* the bucket refilled to now; 0 when rate is 0 */
  int64_t ready;   /* steps a claim could take now but for the limits */
  int64_t scheduled; /* steps waiting for a retry or a delayed start not due yet */
  int64_t in_progress; /* steps in progress (any claimant) */
  int64_t oldest_ready_at; /* the earliest run_at among the ready; TK__NONE: none */
  int64_t workers_seen;    /* distinct workers worker_seen recorded since now - 60 s */
  int worker; /* some stored step of it is a worker step */
} tk__queue_rec;

/* budget_update's change to one stored state: state holds *len bytes
 * (0: none stored yet) in room for cap; change it in place and set *len.
 * 0 keeps the result; a negative TK_E* code writes nothing. */
typedef int (*tk__budget_fn)(void *arg, unsigned char *state, size_t *len, size_t cap);

/* Longest budget_update key, without its NUL: a budget's name and a host. */
#define TK__BUDGET_KEY_MAX 512

/* A stored retry budget state as budget_list reads it: its key, the bytes
 * budget_update last wrote (state: malloc'd, len bytes) and when. */
typedef struct tk__budget_rec {
  char key[TK__BUDGET_KEY_MAX + 1];
  unsigned char *state;
  size_t len;
  int64_t updated_at;
} tk__budget_rec;

/* Free what budget_list returned (v may be NULL). */
static inline void tk__budget_recs_free(tk__budget_rec *v, int n) {
  for (int i = 0; v != NULL && i < n; i++) free(v[i].state);
  free(v);
}

/* A signal to store (signal_put): for step `step` (its name) of task_id,
 * data or error (exactly one), key NULL or the sender's idempotency key. */
typedef struct tk__signal_req {
  int64_t task_id;
  const char *step;
  const char *data, *error, *key;
  int64_t now;
} tk__signal_req;

/* What signal_put did: stored the signal (or, duplicate, found the one
 * stored with the same key, which answers for it); the step's state as
 * it found it. */
typedef struct tk__signal_ans {
  int64_t signal_id, created_at;
  int duplicate;
  int delivered; /* the signal was handed to an attempt of the step already */
  char step_state[TK__STATE_MAX];
} tk__signal_ans;

/* A claimed wait step to park (step_wait): fenced by its claim, like an
 * outcome; timeout_at, in the store's clock, ends its wait. */
typedef struct tk__wait_req {
  int64_t step_id, claim_id, task_id;
  int64_t timeout_at, now;
  const char *reason; /* the move's reason; NULL: TK__REASON_WAITING (17) */
} tk__wait_req;

/* A waiting step that wait_take moved back to in progress under the
 * taker's lease: its claim as the claim that parked it saw it, and why:
 * a signal (sig.id > 0, delivered to this claim) or its timeout. */
typedef struct tk__waited {
  tk__claimed step;
  tk__signal_rec sig;
  int timed_out;
} tk__waited;

/* Callbacks of http steps (17; DESIGN §18, docs/callbacks.md). The token
 * of one attempt (claim) of a step, kept as its hash (core/claim_token.h)
 * with what its heartbeats may do: extend the wait by timeout_ms (or what
 * they ask), never past limit_at (the step's timeout). */
typedef struct tk__callback_arm {
  int64_t step_id, claim_id;
  unsigned char token_hash[TK__TOKEN_HASH_LEN];
  int64_t timeout_ms, limit_at, now;
} tk__callback_arm;

/* A callback (callback_put): for the claim its token names, its secret's
 * hash, and data (the results: success) or error (a failure: final, and
 * retry_after_ms or -1). */
typedef struct tk__callback_req {
  int64_t claim_id;
  unsigned char token_hash[TK__TOKEN_HASH_LEN];
  const char *data, *error;
  int final;
  int64_t retry_after_ms;
  int64_t now;
} tk__callback_req;

/* What callback_put and callback_extend found: the step the token's
 * attempt is of, and its state; until: the wait's timeout after it. */
typedef struct tk__callback_ans {
  int64_t task_id, step_id, signal_id;
  int attempt;
  char step[160]; /* its name (an instance's: the map step's) */
  char step_state[TK__STATE_MAX];
  int64_t until;
} tk__callback_ans;

/* Child tasks (18; DESIGN §18, docs/children.md). A claimed step of kind
 * `task` to park while its child runs (child_start): fenced by its claim,
 * like an outcome; timeout_at (store clock) ends its wait, INT64_MAX for
 * none. task is the child, its identity tk__child_identity's. */
typedef struct tk__child_req {
  int64_t step_id, claim_id, task_id;
  int attempt;
  const tk__new_task *task;
  int64_t timeout_at, now;
  int64_t child_id; /* out: the child (started now, or found by identity) */
  int existed;      /* out: the identity existed: nothing was started */
} tk__child_req;

/* The identity of the child of claim claim_id of step step_id of task
 * task_id into buf: one per attempt row, so a claim taken again never
 * starts a second child. Returns buf. */
char *tk__child_identity(int64_t task_id, int64_t step_id, int64_t claim_id, char *buf,
                         size_t cap);

/* A parent-child link as task_family reads it: the child task, its
 * state, and the parent's task, step (by name, malloc'd) and attempt. */
typedef struct tk__child_rec {
  int64_t task_id;
  char state[TK__STATE_MAX];
  int64_t created_at, finished_at; /* finished_at TK__NONE while it runs */
  int64_t parent_task_id, parent_step_id;
  char *parent_step;
  int attempt;
} tk__child_rec;

static inline void tk__child_recs_free(tk__child_rec *v, int n) {
  for (int i = 0; v != NULL && i < n; i++) free(v[i].parent_step);
  free(v);
}

typedef struct tk__store_ops {
  int version; /* TK__STORE_OPS_VERSION: checked when a store opens */
  const char *scheme;
  /* Once per process before any store of this kind opens (may be NULL):
   * tk_store_process_init. */
  void (*process_init)(void);
  /* Open the store at `location`: the URL as the user gave it (with its
   * scheme, or SQLite's bare path, or a libpq key=value string), creating
   * it only when opts->create says so (opts is never NULL). */
  int (*open)(const char *location, const tk_store_open_options *opts, tk_store **out,
              tk_err *err);
  void (*close)(tk_store *s);
  /* Apply the migrations the store lacks up to `target` (0: all), each
   * whole or not at all; safe when several processes migrate at once. */
  int (*migrate)(tk_store *s, int target, int *applied, int *version, tk_err *err);
  int (*schema_version)(tk_store *s, int *version, tk_err *err);
  /* The store's own clock, when it has one apart from this machine's (a
   * database server): *us the server's time now, in MICROseconds since the
   * epoch (so the measured offset is not off by a truncated millisecond).
   * NULL: the machine clock is the store's. */
  int (*server_time)(tk_store *s, int64_t *us, tk_err *err);

  /* Store n templates and their edges in one transaction: all or none.
   * A namespace/name/version that exists with the same digest sets the
   * row's `existed` and changes nothing; with another digest, TK_EEXIST
   * and nothing is stored. Each row's id is filled in. */
  int (*template_put)(tk_store *s, tk__template_row *rows, int n, tk_err *err);
  /* Templates called `name`, in namespace ns (NULL: any) and of `version`
   * (NULL: any), most recently added first: up to max into out, *n how
   * many (with definitions). The rules of lookup (ambiguity, messages) are
   * tk__template_lookup's. */
  int (*template_find)(tk_store *s, const char *ns, const char *name, const char *version,
                       tk__template_rec *out, int max, int *n, tk_err *err);
  /* One template by id, with its definition; TK_ENOENT when missing. */
  int (*template_get_by_id)(tk_store *s, int64_t id, tk__template_rec *out, tk_err *err);
  /* Every template (definitions included) by namespace, name, then age,
   * into a malloc'd array (free with tk__template_recs_free). */
  int (*template_list)(tk_store *s, tk__template_rec **out, int *n, tk_err *err);

  /* Create a task and its steps in one transaction. With an identity that
   * already exists, *existed = 1 and *task_id is the existing task (also
   * when another connection creates it at the same moment). */
  int (*task_create)(tk_store *s, const tk__new_task *t, int64_t *task_id, int *existed,
                     tk_err *err);

  /* Record n outcomes, each atomic and fenced by its claim, in as few
   * transactions as the backend can (group commit): errs[i].code is 0,
   * TK_EFENCED when the step is no longer held by that claim (nothing
   * changes but the fenced-writes counter and the claim's attempt row), or
   * an error that undid outcome i alone; errs[i].msg says which. With
   * `next` (may be NULL) the same transaction then
   * claims up to next->limit ready steps (DESIGN §4: due retries first,
   * earliest run_at first, then ready pending steps, oldest task first),
   * so a finished step's released children start without another commit;
   * next->n gets how many (0 if that part failed). n may be 0: a claim
   * alone (tk__store_claim), whose failure is returned. Otherwise the
   * return value is nonzero only when nothing could be recorded at all. */
  int (*record)(tk_store *s, const tk__outcome *o, int n, tk__effects *fx, tk_err *errs,
                tk__claim_request *next, tk_err *err);
  /* Extend a lease, fenced like record. */
  int (*heartbeat)(tk_store *s, int64_t step_id, int64_t claim_id, int64_t expires_at,
                   tk_err *err);
  /* Up to `limit` in-progress steps whose lease expired by now (rows that
   * another reaper is taking may be skipped). */
  int (*expired)(tk_store *s, int64_t now, int limit, tk__expired *out, int *n, tk_err *err);
  /* When something becomes due: *ready_at the earliest run_at of a step
   * whose parents are done, or the earliest deadline still to look at
   * (16: deadline_apply) if that comes first, *lease_at the earliest
   * lease expiry; INT64_MAX for none. Either pointer may be NULL. */
  int (*next_due)(tk_store *s, int64_t *ready_at, int64_t *lease_at, tk_err *err);
  /* Whether any task has work left: a step pending with no parents left,
   * waiting for a retry, or in progress. */
  int (*has_work)(tk_store *s, int *yes, tk_err *err);

  /* The handler inputs of n steps, in one read: out[i] a new
   * {"context": ..., "parents": {name: results}} for step_ids[i], built
   * with tk__input_add. TK_ENOENT if a step is missing (out[] all NULL). */
  int (*inputs)(tk_store *s, const int64_t *step_ids, int n, json_t **out, tk_err *err);

  /* Operator actions (DESIGN §3) in one transaction, under the rules of
   * tk__operator_plan; `step` is the step's name (NULL for CANCEL). */
  int (*operator)(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                  int64_t now, tk__effects *fx, tk_err *err);

  /* Reports, as typed rows (ops/report.c makes them JSON). */
  int (*task_report)(tk_store *s, int64_t task_id, tk__task_report *out, tk_err *err);
  int (*status)(tk_store *s, int64_t now, tk__status_report *out, tk_err *err);
  /* A file descriptor that becomes readable when another connection may
   * have changed the store (so a sleeping engine looks again), or -1 when
   * the backend has none; `drain` consumes what made it readable and says
   * whether a wait's news was among it (TK__CHANGED_WAITS: a signal was
   * stored since the last drain), which the engine then takes at once
   * instead of at its next look at the waits (TK__WAIT_LOOK_MS after the
   * last). A backend that cannot tell returns 0: news is never lost, only
   * taken at that next look. TK__CHANGED_UNSURE: a commit was seen whose
   * end may not be visible yet; drain again soon. */
  int (*change_fd)(tk_store *s);
  int (*drain_changes)(tk_store *s);

  /* Batch steps (DESIGN §9). Load the step's settings and pending items
   * (TK_ENOENT when the step is not a batch step). Read-only: a claim
   * calls it right after claiming the step. */
  int (*items_load)(tk_store *s, int64_t step_id, tk__batch_load *out, tk_err *err);
  /* Write item results between two handler calls of one claim, in one
   * transaction fenced like record: TK_EFENCED (nothing written) when the
   * claim no longer holds the step. So a crash between calls loses no
   * ack. */
  int (*items_checkpoint)(tk_store *s, int64_t step_id, int64_t claim_id,
                          const tk__item_result *r, int n, tk_err *err);

  /* Connection faults. An op that finds the connection to a server lost
   * (or the server restarting) fails with TK_EDISCONNECTED, having changed
   * nothing it did not commit. `reconnect` opens the connection again and
   * sets up what the old one had (LISTEN, prepared statements); its failure
   * is TK_EDISCONNECTED too while the server cannot be reached. NULL for a
   * backend that has no connection to lose. */
  int (*reconnect)(tk_store *s, tk_err *err);

  /* Lists over the whole store (6; include/tasker/query.h). Each is one
   * read, paginated in the database: a page is an index range, not a scan
   * of history (each backend's migrations say which index serves which
   * filter, and where a filter must scan). Tasks matching q, newest (id)
   * first, ids below q->before, at most q->limit: a malloc'd array
   * (tk__task_rows_free). */
  int (*task_list)(tk_store *s, const tk__task_query *q, tk__task_row **out, int *n,
                   tk_err *err);
  /* How many tasks match q (before and limit ignored). */
  int (*task_count)(tk_store *s, const tk__task_query *q, int64_t *n, tk_err *err);
  /* Steps in step_state of the tasks matching q, newest task first and a
   * task's steps last to first; q->before is a step id (the steps after
   * it in that order); at most q->limit (tk__step_rows_free). */
  int (*step_list)(tk_store *s, const char *step_state, const tk__task_query *q,
                   tk__step_row **out, int *n, tk_err *err);
  /* Attempts that started in [since, since + n * bucket_ms) into out[n]
   * (zeroed and each start set by the backend), by the bucket they started
   * in: from the per-minute counts when since and bucket_ms are whole
   * minutes (TK__MINUTE_MS), else from the attempts themselves. */
  int (*activity)(tk_store *s, int64_t since, int64_t bucket_ms, int n,
                  tk__activity_bucket *out, tk_err *err);

  /* Schedules (7; DESIGN §16). One namespace of names. Store n schedules
   * in one transaction (NOTIFY so sleeping engines re-read them). With
   * replace_source NULL, each is new: TK_EEXIST (nothing stored) when the
   * name is taken. With replace_source ("config"), the rows are that
   * source's whole set: each is inserted or updated keeping its cursor and
   * last fired slot, rows of that source not among them are removed, and a
   * name taken by another source is TK_EEXIST naming it (nothing changed).
   * A new row's cursor is the one given. */
  int (*schedule_put)(tk_store *s, const tk__schedule_rec *rows, int n,
                      const char *replace_source, tk_err *err);
  /* Every schedule by name into a malloc'd array (tk__schedule_recs_free);
   * with name not NULL only that one (TK_ENOENT when missing). */
  int (*schedule_list)(tk_store *s, const char *name, tk__schedule_rec **out, int *n,
                       tk_err *err);
  /* Remove one schedule: TK_ENOENT when missing; the tasks it created stay. */
  int (*schedule_remove)(tk_store *s, const char *name, tk_err *err);
  /* Advance a schedule's cursor from step->expected to step->cursor and,
   * with step->task, create that task (by identity: existing is no error)
   * and record step->slot as its last fired slot: all in one transaction.
   * TK_ESTATE, changing nothing, when the cursor is no longer
   * step->expected (another orchestrator moved it) or the schedule is gone. */
  int (*schedule_fire)(tk_store *s, tk__schedule_step *step, tk_err *err);

  /* Retention (7; DESIGN §16). Remove the tasks r selects, at most
   * r->limit of them, with their steps, attempts, transitions, items and
   * batch settings, in one transaction; *out counts the rows removed. With
   * r->dry_run, count what removing every task r selects would remove (the
   * limit ignored) and change nothing. A task not finished is never taken; on a shared
   * server, tasks another prune (or an operator) holds are skipped, not
   * waited for. */
  int (*prune)(tk_store *s, const tk__prune_request *r, tk__prune_counts *out, tk_err *err);
  /* The bytes the store takes on disk: SQLite's file and its WAL;
   * PostgreSQL's tables of the current schema with their indexes and
   * TOAST. */
  int (*size)(tk_store *s, int64_t *bytes, tk_err *err);
  /* tk_store_set_durability: kept for connections made again. */
  int (*durability)(tk_store *s, tk_durability d, tk_err *err);

  /* Retry budgets (DESIGN §14; docs/retry.md). Bring retries that a budget
   * deferred earlier, to run_at, now that the budget has room: in one
   * transaction, for each v[i] whose step still waits for the retry of
   * the failed attempt v[i].claim_id (state waiting_for_retry, that
   * attempt its newest, steps.attempts its number) with a run_at later
   * than run_at, set the step's run_at and that attempt row's next_run_at
   * to run_at (its delay_ms to run_at - finished_at). Nothing else
   * changes: no attempt is spent, no state moves, a run_at never moves
   * later. moved[i] says whether v[i] moved; a step that is not waiting
   * any more (claimed, cancelled, retried by an operator, or locked by
   * another transaction on a shared server) is left alone. Wakes
   * sleeping orchestrators when one moved. */
  int (*retry_earlier)(tk_store *s, const tk__retry_ref *v, int n, int64_t run_at, int *moved,
                       tk_err *err);

  /* Map steps (9; DESIGN §17). The instances of map step map_idx (its
   * template position) of task_id whose item_index is after `after` (-1:
   * from the first), in element order, at most `limit`: a malloc'd array
   * of step records (tk__step_recs_free) with item_index and item set;
   * *total the map's instance count. One index range, not a scan of the
   * task. */
  int (*instance_list)(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                       tk__step_rec **out, int *n, int64_t *total, tk_err *err);

  /* Bulk submit (10). Create the n tasks t[] (n >= 1) in one transaction,
   * as task_create creates one: all of them or none. Their identities are
   * distinct (the caller folds repeats: tk_task_submit_many); one that
   * already exists writes nothing and gives existed[i] = 1 and its task's
   * id in task_ids[i], also when another connection creates it at the
   * same moment. New tasks' ids increase with i. */
  int (*submit_many)(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids, int *existed,
                     tk_err *err);

  /* Worker claims (11; DESIGN §19). The claim claim_id (its attempts
   * row) with its step as it is now, one read: TK_ENOENT when no attempt
   * row has that id. */
  int (*claim_get)(tk_store *s, int64_t claim_id, tk__claim_rec *out, tk_err *err);

  /* Queues (12; DESIGN §19). Make defs[0..n) the limits of their queues,
   * and every other queue's limits none, in one transaction (the
   * configuration's whole set, as schedule_put with a source). A queue's
   * bucket keeps its tokens (cut to the new burst); a new one starts
   * full. The next claim anywhere obeys them; wakes sleeping claimants. */
  int (*queue_put)(tk_store *s, const tk__queue_def *defs, int n, tk_err *err);
  /* Every queue (see tk__queue_rec) by name, counted at now, one read:
   * a malloc'd array (free()). */
  int (*queue_list)(tk_store *s, int64_t now, tk__queue_rec **out, int *n, tk_err *err);
  /* Record that `worker` polled `queue` at `now` (for workers_seen). The
   * caller calls it at most every few seconds per worker; one small write. */
  int (*worker_seen)(tk_store *s, const char *queue, const char *worker, int64_t now,
                     tk_err *err);

  /* Retry budgets kept in the store (13; DESIGN §14, docs/retry.md). One
   * transaction on the state stored under `key` (1 to TK__BUDGET_KEY_MAX
   * bytes): read it into state (room for cap bytes), holding it against
   * every other connection's budget_update of that key until the commit,
   * call fn(arg, state, &len, cap) once, write what it leaves (with now as
   * the row's updated_at) and commit. fn must not call the store. When fn
   * fails, or the store does, nothing is written and that code returns.
   * So two orchestrators applying their changes to one key take turns, each
   * on the state the other left: one state for the whole fleet. */
  int (*budget_update)(tk_store *s, const char *key, unsigned char *state, size_t cap,
                       tk__budget_fn fn, void *arg, int64_t now, tk_err *err);
  /* Every stored budget state (14), by key, in one read that takes no
   * lock a budget_update waits for: a malloc'd array (tk__budget_recs_free;
   * NULL when there is none). */
  int (*budget_list)(tk_store *s, tk__budget_rec **out, int *n, tk_err *err);

  /* Wait steps and signals (15; DESIGN §18, docs/waiting.md). Store a
   * signal for a step, in one transaction, under tk__signal_plan's rules
   * (a repeated key answers as its first signal did, storing nothing;
   * TK_ENOENT for an unknown task or step; TK_ESTATE for a finished
   * step, or one that has a signal not yet delivered). Whether the step
   * is a wait step is the caller's to check (its template's). Wakes
   * sleeping orchestrators: one delivers it (wait_take) when the step
   * waits, or at once if it waits already. */
  int (*signal_put)(tk_store *s, const tk__signal_req *r, tk__signal_ans *out, tk_err *err);
  /* Park claimed wait step w (in progress under claim w->claim_id) in one
   * transaction: if a signal for it is stored and not delivered (or was
   * delivered to an attempt that ended without applying it: lease_expired
   * or fenced_out), hand it to this claim (*sig, malloc'd strings) and
   * leave the step in progress: the caller records its outcome at once
   * through `record`. Otherwise move it to waiting: no lease, run_at =
   * w->timeout_at, its claim kept; sig->id 0. TK_EFENCED when the claim
   * no longer holds the step. */
  int (*step_wait)(tk_store *s, const tk__wait_req *w, tk__signal_rec *sig, tk_err *err);
  /* Up to limit waiting steps that a signal is stored for or whose
   * timeout passed by now, moved back to in progress under owner's lease
   * (now + lease_ms), each with its signal delivered to its claim (or
   * timed_out): the caller records each one's outcome through `record`,
   * fenced by the claim as ever. Steps another taker holds are skipped;
   * a step is taken once. *next_at: the earliest timeout of the steps
   * still waiting (INT64_MAX: none). out[i].sig: tk__signal_rec_free. */
  int (*wait_take)(tk_store *s, int64_t now, const char *owner, int64_t lease_ms, int limit,
                   tk__waited *out, int *n, int64_t *next_at, tk_err *err);

  /* Deadlines (16; DESIGN §3, docs/deadlines.md). Look at up to limit
   * deadlines due by now, earliest first, each in one transaction that
   * holds its task: under tk__deadline_plan's rule, a task still pending
   * or in progress has every unfinished step cancelled (pending,
   * waiting_for_retry, waiting, mapped, in progress: an in-progress
   * step's late outcome is then fenced out as a lost lease's) with its
   * transition (reason TK__REASON_STEP_DEADLINE) and ends in error
   * (reason TK__REASON_DEADLINE); a task that finished first is left
   * alone. Either way that deadline is never looked at again. A deadline
   * another taker holds is skipped, so each is applied once. out[0..*n)
   * the tasks ended (room for limit). *next_at: the earliest deadline
   * still to look at after them (INT64_MAX: none; now when some are left
   * due). Wakes sleeping orchestrators when a task ended. */
  int (*deadline_apply)(tk_store *s, int64_t now, int limit, int64_t *out, int *n,
                        int64_t *next_at, tk_err *err);

  /* Callbacks (17; DESIGN §18, docs/callbacks.md). Keep the token hash of
   * claim a->claim_id (in progress under it: TK_EFENCED otherwise), before
   * its request goes out. */
  int (*callback_arm)(tk_store *s, const tk__callback_arm *a, tk_err *err);
  /* Store callback r as a signal bound to its claim, in one transaction:
   * TK_ENOENT when no armed claim has that token (id and hash); TK_ESTATE
   * when the claim no longer holds its step in progress or waiting (an
   * earlier attempt's token), or a callback for it came already. Delivered
   * as any signal (step_wait, wait_take), to that claim only. Wakes
   * sleeping orchestrators. */
  int (*callback_put)(tk_store *s, const tk__callback_req *r, tk__callback_ans *out,
                      tk_err *err);
  /* A heartbeat: the waiting step of claim r->claim_id (its token checked
   * as by callback_put) waits until min(now + extend_ms, its limit) from
   * now on (extend_ms 0: the armed timeout); out->until. A step still in
   * progress (its request not answered yet) is left as it is, until its
   * current lease. */
  int (*callback_extend)(tk_store *s, const tk__callback_req *r, int64_t extend_ms,
                         tk__callback_ans *out, tk_err *err);
  /* Child tasks (18; DESIGN §18, docs/children.md). In one transaction:
   * create the child c->task (by its identity: one that exists starts
   * nothing, c->existed) with its parent's task, step, attempt and claim,
   * and park the parent's step as waiting (no lease, run_at
   * c->timeout_at, its claim and attempt row kept open), as step_wait
   * does. TK_EFENCED, nothing written, when the claim no longer holds
   * the step. The child's end (complete, error, cancelled; by any path)
   * stores a signal bound to that claim in its own transaction, which
   * wait_take delivers: complete, the results of its leaf steps by name;
   * else an error that fails the attempt. */
  int (*child_start)(tk_store *s, tk__child_req *c, tk_err *err);
  /* A task's family, one read: *parent the link of task_id to its parent
   * (parent->task_id 0: it has none), *children its children, oldest
   * first (malloc'd, tk__child_recs_free; NULL when none). */
  int (*task_family)(tk_store *s, int64_t task_id, tk__child_rec *parent,
                     tk__child_rec **children, int *n, tk_err *err);
} tk__store_ops;

/* Every backend's store struct starts with this. */
struct tk_store {
  const tk__store_ops *ops;
  /* The store's clock: the machine's, the database server's (corrected by
   * the measured offset, store_clock.c), or one a test installed. */
  tk_clock clock;
  struct tk__store_clock *server; /* the offset kept for server_time, or NULL */
};

static inline int64_t tk__store_now(const tk_store *s) { return tk_clock_now(&s->clock); }

extern const tk__store_ops tk__sqlite_store_ops;
extern const tk__store_ops tk__postgres_store_ops;

/* Claim up to `limit` ready steps for `owner` in a transaction of their
 * own: a claim request with no outcomes, given to `record`. */
int tk__store_claim(tk_store *s, const char *owner, int64_t lease_ms, int limit,
                    tk__claimed *out, int *n, tk_err *err);

/* Find a template by name ("ns/name" or "name": a bare name must not be
 * ambiguous across namespaces) and version (NULL: the newest). */
int tk__template_lookup(tk_store *s, const char *name, const char *version,
                        tk__template_rec *out, tk_err *err);

/* Add one row of a step's input to *slot: the task's context (JSON text)
 * and, when parent is not NULL, that parent's results (JSON text or
 * NULL). Creates {"context", "parents"} on the first row. */
int tk__input_add(json_t **slot, const char *context, const char *parent, const char *results);
/* An instance's element and its position into its input (DESIGN §17):
 * members "item" (the element, from JSON text) and "item_index". */
int tk__input_item(json_t *input, int64_t item_index, const char *item);

/* Free what typed rows own. */
void tk__template_rec_free(tk__template_rec *r);
void tk__template_recs_free(tk__template_rec *r, int n);
void tk__task_report_free(tk__task_report *r);
void tk__step_recs_free(tk__step_rec *r, int n);
void tk__task_rows_free(tk__task_row *r, int n);
void tk__step_rows_free(tk__step_row *r, int n);
void tk__schedule_recs_free(tk__schedule_rec *r, int n);
/* Free a batch load's items and text and zero it (NULL allowed). */
void tk__batch_load_free(tk__batch_load *b);

/* Grow *arr (of elements of `size` bytes, *cap of them) to hold at least
 * need; new elements are zeroed. */
int tk__grow(void **arr, int *cap, int need, size_t size);

/* strdup that keeps NULL; *oom is set when memory ran out. */
char *tk__dup(const char *s, int *oom);

#endif
