/* The rules of the task state machine (DESIGN §3, §5), written once for
 * every backend: which state a task settles in, what an operator action
 * may do and what it changes, and the reasons transitions record. A
 * backend gathers the facts with SQL, asks here, and writes the answer. */
#ifndef TASKER_STORE_RULES_H
#define TASKER_STORE_RULES_H

#include <stdint.h>

#include "store/store.h"

/* Transition reasons, as stored. */
#define TK__REASON_CREATED "created"
#define TK__REASON_CLAIMED "claimed"
#define TK__REASON_FIRST_CLAIM "first step claimed"
#define TK__REASON_TASK_CANCELLED "task cancelled"
#define TK__REASON_ALL_COMPLETE "all steps complete"
#define TK__REASON_TASK_FAILED "a step failed and nothing else can progress"
#define TK__REASON_TASK_RESUMED "a failed step was retried or resolved"

/* The stored name of an outcome's next step state. */
const char *tk__next_state_name(tk__next_state n);

/* A task's counters, as settling reads them. */
typedef struct tk__task_counts {
  const char *state; /* the task's state now */
  int done, total, errors;
} tk__task_counts;

/* Whether settling must also know if any of the task's steps can still
 * progress (one is in progress, waiting for a retry, or pending with no
 * parents left): only a task with a step in error does. */
int tk__settle_needs_scan(const tk__task_counts *c);

/* The state a task moves to after one of its steps ended, was retried or
 * was resolved, or NULL for none; *reason the transition's reason. */
const char *tk__settle(const tk__task_counts *c, int can_progress, const char **reason);

/* Whether `to` is a terminal task state (finished_at is set). */
int tk__task_state_terminal(const char *to);

/* Whether an operator may cancel a task in `task_state`: every state but
 * complete and cancelled. A task in error is finished but not closed (a
 * retry or resolve of its failed step resumes it); cancelling it closes
 * it for good. The one rule behind `tasker cancel` (one task or by
 * filter), the API and the dashboard's button (the task JSON's
 * "cancellable"). */
int tk__task_cancellable(const char *task_state);

/* Whether `action` may apply to a task in `task_state` at all: cancel as
 * tk__task_cancellable; retry and resolve (of a step) to any task but a
 * cancelled one. tk__operator_plan refuses the rest, and a bulk action by
 * filter passes over them. */
int tk__task_operable(tk__operator_action action, const char *task_state);

/* What an operator action changes, decided from the states before it. */
typedef struct tk__op_plan {
  tk__operator_action action;
  const char *step_to; /* the step's new state (retry, resolve) */
  /* retry: attempts = 0, run_at = now, last_delay_ms = 0, and a batch
   * step's given-up items pending again with attempts 0 */
  int reset_attempts;
  int steps_done_delta, steps_error_delta; /* the task's counters */
  int release_children;                    /* resolve: the step counts as complete */
  /* cancel: every step still pending, in progress or waiting moves to
   * cancelled (transition reason step_reason) and the task to cancelled */
  int cancel_task;
  /* cancel_task: the task's new state (cancelled; a deadline's: error) */
  const char *task_to;
  const char *reason;      /* the transition's reason */
  const char *step_reason; /* cancel: each step's transition reason */
  int settle;              /* settle the task afterwards (tk__settle) */
  /* Decisions and map (DESIGN §17). skip_branches: resolving a decision
   * step skips every branch it decides (reason "not chosen by STEP"; no
   * choice was made, so nothing runs that nobody chose); its other
   * children are released. map_settle: the step is an instance, which
   * counts in no task counter; afterwards its map step is settled again
   * from its instances' states (a failed map reopens when an instance is
   * retried, and completes when the last one is resolved). */
  int skip_branches;
  int map_settle;
} tk__op_plan;

/* What a step is in the flow, for operator plans. */
typedef struct tk__op_step_kind {
  int decision; /* a decision step */
  int map;      /* a map step (the template step, not an instance) */
  int instance; /* an instance of a map step */
  const char *map_state; /* an instance's map step's state; NULL: not an instance */
} tk__op_step_kind;

/* The plan for `action` on task task_id (in task_state) and, for retry and
 * resolve, its step `step` (in step_state, of `kind`: NULL for an ordinary
 * step); TK_ESTATE with the operator's message when the action is not
 * allowed. A map step is never retried itself (its instances are). */
int tk__operator_plan(tk__operator_action action, int64_t task_id, const char *task_state,
                      const char *step, const char *step_state, const tk__op_step_kind *kind,
                      tk__op_plan *plan, tk_err *err);

/* Retry budgets kept in the store (store.h: budget_update): TK_EINVAL
 * with its length when a key is empty or longer than TK__BUDGET_KEY_MAX. */
int tk__budget_key_check(const char *key, tk_err *err);

/* Queues' limits (queue_rules.c; DESIGN §19). */
/* TK_EINVAL naming the queue and the value when a definition is not valid:
 * a name by tk__queue_name_ok's rule, given once; no negative limit. */
int tk__queue_defs_check(const tk__queue_def *defs, int n, tk_err *err);
/* The size of d's bucket: burst, or max(1, ceil(rate)); 0 with no rate. */
int tk__queue_burst(const tk__queue_def *d);
/* A bucket of `tokens` as of refilled_at refilled to now at rate tokens a
 * second, up to burst; 0 with no rate. */
double tk__queue_tokens(double tokens, int64_t refilled_at, double rate, int burst, int64_t now);
/* The steps a bucket of `tokens` lets start: its whole tokens. */
int tk__queue_room(double tokens);
/* When a bucket of `tokens` at now has a whole token (now if it has one);
 * INT64_MAX with no rate. */
int64_t tk__queue_token_at(double tokens, double rate, int64_t now);

/* Wait steps and signals (DESIGN §18). Transition reasons of a wait. */
#define TK__REASON_WAITING "waiting for a signal"
#define TK__REASON_SIGNAL "signal"
#define TK__REASON_WAIT_TIMEOUT "wait timed out"
/* The error text of a wait's timeout attempt. */
#define TK__WAIT_TIMEOUT_ERROR "no signal came before the wait's timeout"

/* Whether a step in `state` has finished: complete, error, resolved,
 * skipped or cancelled (no attempt of it will run again unless an
 * operator retries it). */
int tk__step_state_finished(const char *state);

/* Whether a signal may be stored for step `step` of task_id (the one
 * rule behind `tasker signal`, the API and the dashboard): TK_ESTATE with
 * the sender's message for a task that is complete or cancelled, a step
 * that finished (complete, error, resolved, skipped, cancelled: saying
 * so and when, finished_at, TK__NONE unknown), or one that has a signal
 * not yet delivered (pending_at: when it was sent; TK__NONE: none). A
 * step pending, in progress, waiting for a retry or waiting takes it: it
 * is delivered when the step waits. A repeated key is the caller's to
 * answer before asking here. */
int tk__signal_plan(int64_t task_id, const char *task_state, const char *step,
                    const char *step_state, int64_t finished_at, int64_t pending_at,
                    tk_err *err);

/* A signal's data text (the CLI's --data: any JSON value) parsed into
 * *data (the caller's to json_decref); TK_EINVAL naming the line and the
 * column where it stops being JSON. */
int tk__signal_data_parse(const char *text, json_t **data, tk_err *err);

/* The one rule of a signal's body, for the CLI, the API and the dashboard
 * alike, on data already parsed (so no sender parses them twice): data
 * (any JSON value) or a failure's error, exactly one; an error not empty;
 * a key, when given, of 1 to 200 bytes. TK_EINVAL saying which is wrong,
 * *place (may be NULL) the member at fault ("data", "error" or "key").
 * On success *compact (compact may be NULL: not wanted) is data as compact
 * JSON text (malloc'd; NULL for an error), the step's results as a
 * handler's are stored. */
int tk__signal_check(const json_t *data, const char *error, const char *key, char **compact,
                     const char **place, tk_err *err);

/* The same rule on data as JSON text (NULL: none), parsed to be checked:
 * for a store's signal_put, whose caller has checked them already. */
int tk__signal_body_check(const char *data, const char *error, const char *key, tk_err *err);

/* Deadlines (DESIGN §3; docs/deadlines.md). The task's transition
 * reason, and each step's that the deadline cancelled. */
#define TK__REASON_DEADLINE "deadline"
#define TK__REASON_STEP_DEADLINE "task deadline"

/* The one rule of a task's deadline, which every backend's deadline_apply
 * asks with the task's state read under its lock: 1 and *plan (a cancel
 * of every unfinished step, the task to error, reason "deadline") when
 * the deadline (deadline_at, ms on the store's clock) has come by now and
 * the task is still pending or in progress; 0 when it is to be left
 * alone (finished first, or not due: a deadline is looked at once, at its
 * time, and a finished task is never touched). */
int tk__deadline_plan(const char *task_state, int64_t deadline_at, int64_t now,
                      tk__op_plan *plan);

/* The message of a refused (fenced) outcome, and of a refused heartbeat. */
int tk__fenced_error(tk_err *err, const tk__outcome *o);
int tk__heartbeat_refused(tk_err *err, int64_t step_id, int64_t claim_id);
/* The text a fenced-out attempt row keeps as its error. */
void tk__fenced_attempt_text(char *buf, size_t cap, const tk__outcome *o);

/* Callbacks of http steps (DESIGN §18, docs/callbacks.md). */
#define TK__REASON_CALLBACK_WAITING "waiting for a callback"
#define TK__REASON_CALLBACK "callback"
#define TK__CALLBACK_TIMEOUT_ERROR "no callback came before the wait's timeout"

/* Whether a callback for attempt `attempt` of step `step` of task_id may
 * be stored (the one rule behind the callback routes, on both backends):
 * held, its claim still holds the step (in progress or waiting), and no
 * callback came for that attempt before (prior_at, TK__NONE: none).
 * TK_ESTATE with the caller's message otherwise: an earlier attempt's
 * token changes nothing. */
int tk__callback_plan(int64_t task_id, const char *step, int attempt, int held,
                      const char *step_state, int64_t prior_at, tk_err *err);
/* The new end of a wait a heartbeat at now extends: by extend_ms (0: the
 * armed timeout_ms), never past limit_at (the step's timeout). */
int64_t tk__callback_until(int64_t now, int64_t extend_ms, int64_t timeout_ms, int64_t limit_at);

/* Child tasks (DESIGN §18; docs/children.md): the parent step's move to
 * waiting when its child starts, and its timed-out attempt's error. */
#define TK__REASON_CHILD_WAITING "waiting for its child task"
/* A child task (and each of its unfinished steps) cancelled because its
 * parent was cancelled or reached its deadline. */
#define TK__REASON_PARENT_ENDED "parent task ended"
/* A task step's wait ended by its child's end (complete, error, cancelled). */
#define TK__REASON_CHILD_ENDED "child task ended"
#define TK__CHILD_TIMEOUT_ERROR "the child task did not finish before the step's timeout"

#endif
