/* tasker: lists over the whole store, for operators (DESIGN §15).
 *
 * What `tasker tasks`, the bulk operator commands and `tasker serve` read:
 * tasks and steps by filter, a page at a time, and recent activity. Every
 * list is paginated in the database (newest first, keyed by id), so a page
 * costs the same with 100 tasks stored or 1,000,000; the exceptions scan
 * what the other conditions leave: text in errors (no index finds a
 * substring), and steps in a state other than error.
 *
 * Results are JSON text (malloc'd; the caller frees), in the shapes
 * documented in docs/api.md; the CLI prints them, the server sends them.
 */
#ifndef TASKER_QUERY_H
#define TASKER_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/error.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most rows one page holds. */
#define TK_PAGE_MAX 1000

/* Which tasks. Every member may be left zero/NULL: no condition. */
typedef struct tk_task_filter {
  const char *state;         /* a task state: pending, in_progress, complete, error,
                                cancelled */
  const char *template_name; /* "name" (in any namespace) or "namespace/name",
                                any version */
  int64_t created_since;     /* ms since the epoch: created at or after; 0: any */
  const char *error_text;    /* a substring (as typed, case-sensitive; % and _
                                are plain characters) of the last error of
                                any of the task's steps */
  int all;                   /* bulk actions only: 1 says that a filter with no
                                condition means every task on purpose
                                (tk_bulk_filter_check) */
} tk_task_filter;

/* Check a filter before it is used: TK_EINVAL naming the member, the value
 * and what was expected (an unknown state lists the states). A template
 * that does not exist is not an error: nothing matches. */
int tk_task_filter_check(const tk_task_filter *f, tk_err *err);

/* Check the filter of a bulk action (the one rule behind the CLI's
 * --all, the API's "all" and the dashboard's "retry all matching"):
 * tk_task_filter_check, and a filter with no condition (NULL included) is
 * TK_EINVAL unless f->all says every task is meant, so that a forgotten
 * filter never reaches every task. */
int tk_bulk_filter_check(const tk_task_filter *f, tk_err *err);

/* A time given as an argument (`--since`, `?since=`): a duration such as
 * "90s" or "1h" means that long before `now`; an RFC 3339 time
 * ("2026-11-24T05:00:00Z", an offset or Z required) means that instant.
 * *ms gets ms since the epoch; TK_EINVAL says what was expected. */
int tk_time_arg_parse(const char *text, int64_t now, int64_t *ms, tk_err *err);

/* One page of the tasks that match, newest first:
 *   {"tasks": [...], "next_cursor": "..." or null}
 * cursor: NULL or "" for the first page, else a next_cursor returned
 * before (an opaque string; TK_EINVAL when it is not one). limit: 1 to
 * TK_PAGE_MAX. A cursor stays valid while tasks change state: a page never
 * repeats or skips a task that matched throughout. */
int tk_tasks_json(tk_store *s, const tk_task_filter *f, const char *cursor, int limit,
                  char **json, tk_err *err);

/* How many tasks match. */
int tk_tasks_count(tk_store *s, const tk_task_filter *f, int64_t *n, tk_err *err);

/* One page of steps in `step_state` (a step state: "error" lists the
 * failed and exhausted ones; TK_EINVAL lists the states) of the tasks that
 * match f (NULL: all), newest task first and each task's steps last to
 * first: {"steps": [...], "next_cursor": "..." or null}. "exhausted" is
 * true when a retryable step used all its attempts (a permanent failure on
 * its last attempt reads as exhausted too: the store does not keep which). */
int tk_steps_json(tk_store *s, const char *step_state, const tk_task_filter *f,
                  const char *cursor, int limit, char **json, tk_err *err);

/* One page of the instances of map step `step` of a task (DESIGN §17), in
 * element order, those whose item_index is after `after` (-1: from the
 * first), at most `limit` (1 to TK_PAGE_MAX), each with why it is not
 * running at `now` (a step's "why" of tk_engine_task_json):
 *   {"total", "instances": [{item_index, name, state, attempts,
 *    max_attempts, run_at, lease_expires_at, last_error, item, results,
 *    id, why}],
 *    "next_after": the after of the next page, or null, "task", "step"}
 * Read through one index range of the store (instance_list). TK_ENOENT:
 * no such task or step; TK_EINVAL: a bad limit or after, or a step that
 * is not a map. */
int tk_instances_json(tk_store *s, int64_t task_id, const char *step, int after, int limit,
                      int64_t now, char **json, tk_err *err);

/* ---- Bulk actions ----
 *
 * One action on many tasks, each its own transaction (tk_task_operate).
 * The tasks come from a filter (tk_tasks_operate) or a list
 * (tk_bulk_operate). Every refusal is counted by reason; the first
 * TK_BULK_KEPT are kept with their task and step. */

/* Why an action of a bulk request was refused. */
typedef enum tk_bulk_reason {
  TK_BULK_STATE,          /* "state": the task's or step's state did not
                             allow it (it changed meanwhile, or a listed
                             task or step was not in one that does) */
  TK_BULK_NOT_FOUND,      /* "not_found": no such task, or no such step */
  TK_BULK_NO_FAILED_STEP, /* "no_failed_step": a listed task had no step in
                             error to retry or resolve */
  TK_BULK_REASONS
} tk_bulk_reason;

/* The reason's name, as the JSON says it ("state", ...). */
const char *tk_bulk_reason_name(tk_bulk_reason r);

/* Refusals a result keeps with their task and step. */
#define TK_BULK_KEPT 20

typedef struct tk_bulk_refusal {
  int64_t task;
  char *step; /* NULL: about the task (malloc'd) */
  tk_bulk_reason reason;
  char *message; /* as the one-task form words it (malloc'd) */
} tk_bulk_refusal;

/* What one bulk action did (tk_bulk_result_free releases it). */
typedef struct tk_bulk_result {
  int64_t tasks;  /* tasks taken: by filter, those the action applies to
                     (see tk_tasks_operate); by list, those listed */
  int64_t done;   /* actions applied: steps retried or resolved, tasks
                     cancelled */
  int64_t failed; /* actions refused: the sum of refused[] */
  int64_t refused[TK_BULK_REASONS]; /* refusals by reason */
  int kept;                         /* refusals in first[] */
  tk_bulk_refusal first[TK_BULK_KEPT]; /* the first ones, in order */
} tk_bulk_result;

void tk_bulk_result_free(tk_bulk_result *r);

/* The result as JSON text (malloc'd), the shape docs/api.md documents:
 *   {"matched", "done", "failed", "refused": {"state", "not_found",
 *    "no_failed_step"}, "errors": [{"task", "step", "reason", "message"}]}
 * errors: the kept refusals (step null when about the task). */
int tk_bulk_result_json(const tk_bulk_result *r, char **json, tk_err *err);

/* What `action` takes of the tasks that match f (checked by
 * tk_bulk_filter_check: no condition needs f->all): a task the action
 * applies to by its state (TK_OP_CANCEL: any task but a complete or
 * cancelled one; TK_OP_RETRY and TK_OP_RESOLVE: any task but a cancelled
 * one, and of it every step in error, so a task still in progress with a
 * failed step is taken too). The others are passed over, neither done nor
 * refused. *tasks gets how many tasks, *actions how many actions (tasks to
 * cancel, steps to retry or resolve); nothing changes. */
int tk_tasks_preview(tk_store *s, tk_operator_action action, const tk_task_filter *f,
                     int64_t *tasks, int64_t *actions, tk_err *err);

/* Apply `action` to what tk_tasks_preview counts, read a page at a time
 * (ids and step names only). At most `max` tasks are acted on (0: no
 * limit); more than max is TK_ERANGE and changes nothing. A refusal (the
 * state changed meanwhile, the task or step is gone) is counted in *out
 * and the rest go on; another error (the store) stops and is returned.
 * *out is filled either way (tk_bulk_result_free). */
int tk_tasks_operate(tk_store *s, tk_operator_action action, const tk_task_filter *f,
                     int64_t max, int64_t now, tk_bulk_result *out, tk_err *err);

/* One task or step of a list. */
typedef struct tk_bulk_target {
  int64_t task;
  const char *step; /* NULL: the task (cancel it; retry or resolve each of
                       its steps in error, none being a refusal) */
} tk_bulk_target;

/* Apply `action` to each of n targets, in order, as tk_tasks_operate does
 * (out->tasks = n); what the state does not allow, or is not there, is a
 * refusal. */
int tk_bulk_operate(tk_store *s, tk_operator_action action, const tk_bulk_target *targets,
                    size_t n, int64_t now, tk_bulk_result *out, tk_err *err);

/* Attempts over [now - window_ms, now) in buckets of bucket_ms, oldest
 * first (whole buckets, the last ending at now: since = now - n * bucket_ms
 * with n = window_ms / bucket_ms rounded up, at most 1440), each attempt
 * in the bucket it started in: the finished ones by outcome (succeeded:
 * success; failed: any other), the retries started (an attempt after the
 * first, or the first after an operator's retry), and how late those
 * started after the run_at they were claimed for (0 when claimed early;
 * null when no retry of the bucket has that time, as attempts stored
 * before SQLite schema 7 / PostgreSQL 3):
 *   {"since", "bucket_ms", "buckets": [{"start", "succeeded", "failed",
 *    "retries", "lateness_avg_ms", "lateness_max_ms"}]}
 * It reads the attempts of the window only (found by binary search on
 * their ids, which grow with started_at but for the clock skew between
 * orchestrators), so it costs what the window holds. */
int tk_activity_json(tk_store *s, int64_t now, int64_t window_ms, int64_t bucket_ms,
                     char **json, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
