/* tasker: adding templates and submitting tasks (DESIGN §2).
 *
 * Both validate everything before touching the store, and each is one
 * transaction: a rejected template or submission changes nothing.
 */
#ifndef TASKER_WORKFLOW_H
#define TASKER_WORKFLOW_H

#include <stdint.h>

#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/events.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_template_info {
  int64_t id;
  char namespace_[129], name[129], version[129];
  int steps;
  int existed; /* the same definition was already stored; nothing changed */
} tk_template_info;

/* Validate the TOML template at `path` against `cfg` (backoff profiles)
 * and store it. A different definition under an existing
 * namespace/name/version is refused with TK_EEXIST; new versions are kept
 * beside the old ones. Errors name FILE:LINE:COLUMN. */
int tk_template_add_file(tk_store *s, const tk_config *cfg, const char *path, int64_t now,
                         tk_template_info *out, tk_err *err);

/* tk_template_add_file for n files at once: every file is validated
 * before anything is stored, and they are stored in one transaction, so a
 * bad file or a conflicting version anywhere in the list stores nothing.
 * out (may be NULL) has n slots. */
int tk_template_add_files(tk_store *s, const tk_config *cfg, const char *const *paths, int n,
                          int64_t now, tk_template_info *out, tk_err *err);

/* The range of a task's priority (tk_submit_request.priority). */
#define TK_PRIORITY_MIN (-1000)
#define TK_PRIORITY_MAX 1000

/* The longest deadline a task may have: 100 years, in ms. */
#define TK_DEADLINE_MAX_MS INT64_C(3155760000000)

typedef struct tk_submit_request {
  const char *template_name; /* "name" or "namespace/name" */
  const char *version;       /* NULL: the newest version */
  const char *context_json;  /* a JSON object; NULL means {} */
  const char *identity;      /* NULL: none */
  /* When the task's root steps may start, in ms since the epoch on the
   * store's clock (tk_store_clock); 0 or a time not after `now`: at once.
   * Until then the task is pending and nothing polls for it: an engine's
   * next wake-up is the start time (DESIGN §16). */
  int64_t start_at;
  /* Among the steps ready at a claim, those of tasks of higher priority
   * are claimed first (DESIGN §4; due retries keep their run_at order).
   * TK_PRIORITY_MIN..TK_PRIORITY_MAX, else the submit is refused
   * (TK_EINVAL); 0: the default. */
  int priority;
  /* The task's deadline as a duration from `now` (DESIGN §3,
   * docs/deadlines.md): at it, its unfinished steps are cancelled and it
   * ends in error with the reason "deadline". 0: its template's
   * `deadline`, if any; else 1 to TK_DEADLINE_MAX_MS, overriding the
   * template's; anything else refuses the submit (TK_EINVAL). */
  int64_t deadline_ms;
  /* May be NULL. When a task is created (not when its identity already
   * existed), tk_task_submit emits task.created to it after the commit,
   * on the caller's thread, if its interest has TK_EV_TASK_CREATED; the
   * event is not built otherwise. See <tasker/events.h>. */
  const tk_observer *observer;
  void *observer_ud;
} tk_submit_request;

/* 0 when `ms` is a deadline a submit may give (1 to TK_DEADLINE_MAX_MS),
 * else TK_EINVAL saying so, naming `text` (what the user wrote; NULL:
 * the number): the rule of tk_task_submit, for the CLI and the API. */
int tk_deadline_check(int64_t ms, const char *text, tk_err *err);

/* 0 when `priority` is one a task may have (TK_PRIORITY_MIN to
 * TK_PRIORITY_MAX), else TK_EINVAL saying so: the rule tk_task_submit
 * applies, for callers that read a wider integer (a flag, a JSON body). */
int tk_priority_check(int64_t priority, tk_err *err);

/* Create a task from a stored template. Each step's attempts, retryability
 * and backoff profile are resolved now: the step's retry table, else the
 * template's, else the configuration ([engine] max_attempts, profile
 * "default"). With an identity that exists, *existed = 1 and *task_id is
 * the existing task. */
int tk_task_submit(tk_store *s, const tk_config *cfg, const tk_submit_request *req, int64_t now,
                   int64_t *task_id, int *existed, tk_err *err);

/* Submit n tasks at once (bulk submit): reqs[i] as tk_task_submit takes
 * one, all at `now`, stored in one transaction. Every submission is
 * checked first (its context, its template and version, its batch items);
 * the first bad one refuses the call with its message, *failed (may be
 * NULL; else -1) its index, and nothing is stored. The same holds when the
 * store fails: all of the tasks or none.
 *
 * task_ids[i] gets submission i's task. Identities follow tk_task_submit's
 * rule, as if the submissions were made one after another in order: one
 * whose identity names an existing task, or the task of an earlier
 * submission in this call, creates nothing; existed[i] (existed may be
 * NULL) is then 1 and task_ids[i] that task. New tasks' ids increase with
 * i. After the commit, task.created goes to each created task's
 * reqs[i].observer as tk_task_submit sends it, in order. n <= 0 does
 * nothing. */
int tk_task_submit_many(tk_store *s, const tk_config *cfg, const tk_submit_request *reqs, int n,
                        int64_t now, int64_t *task_ids, int *existed, int *failed, tk_err *err);

/* JSON text (malloc'd) of every stored template: an array of
 * {id, namespace, name, version, created_at, steps, description}. */
int tk_template_list_json(tk_store *s, char **json, tk_err *err);

/* Operator actions, each one transaction (DESIGN §3). */
typedef enum tk_operator_action {
  TK_OP_RETRY = 1, /* a step in error: attempts reset, due now */
  TK_OP_RESOLVE,   /* a pending, waiting or failed step: resolved_manually */
  TK_OP_CANCEL     /* the task: every unfinished step cancelled */
} tk_operator_action;

/* Apply `action` to `step` of task `task_id` (step is ignored for
 * TK_OP_CANCEL). *task_state (may be NULL) gets the task's new state when
 * it changed, else NULL. TK_ENOENT for an unknown task or step, TK_ESTATE
 * when the state does not allow the action; nothing changes on error. */
int tk_task_operate(tk_store *s, tk_operator_action action, int64_t task_id, const char *step,
                    int64_t now, const char **task_state, tk_err *err);

/* Signals to wait steps (DESIGN §18; docs/waiting.md). A step of handler
 * kind "wait" completes with a signal's data as its results, or fails an
 * attempt with its error (under its retry policy: a retry waits again).
 * A signal sent before the step waits is kept and delivered when it does;
 * exactly one of data_json (any JSON text) and error is set; key, when
 * set, makes the signal idempotent: the same key again is answered as the
 * first one was and changes nothing. */
typedef struct tk_signal_request {
  int64_t task_id;
  const char *step;      /* the wait step's name */
  const char *data_json; /* its results, or NULL */
  const char *error;     /* a failed attempt's message, or NULL */
  const char *key;       /* idempotency key, or NULL */
} tk_signal_request;

typedef struct tk_signal_result {
  int64_t signal_id;
  int64_t sent_at;   /* when the signal (the first of its key) was stored */
  int duplicate;     /* the key was seen: nothing new was stored */
  int delivered;     /* the signal was handed to a waiting attempt already */
  char step_state[24]; /* the step's state when the signal came */
} tk_signal_result;

/* Store signal r at now: TK_EINVAL for a body that is not exactly one of
 * valid JSON data or a non-empty error (or a bad key), TK_ENOENT for an
 * unknown task or step, TK_EINVAL for a step that is not a wait step,
 * TK_ESTATE for a step that finished (saying so and when) or that has a
 * signal not delivered yet; the store is unchanged on any error. A running
 * orchestrator delivers it (at once when the step waits already). */
int tk_step_signal(tk_store *s, const tk_signal_request *r, int64_t now, tk_signal_result *out,
                   tk_err *err);

/* JSON text (malloc'd) of a signal's answer: {task, step, signal, sent_at,
 * duplicate, delivered, step_state}. */
int tk_signal_result_json(const tk_signal_request *r, const tk_signal_result *res, char **json,
                          tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
