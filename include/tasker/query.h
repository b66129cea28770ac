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

/* How many tasks match (for a bulk action's confirmation). */
int tk_tasks_count(tk_store *s, const tk_task_filter *f, int64_t *n, tk_err *err);

/* One page of steps in `step_state` (a step state: "error" lists the
 * failed and exhausted ones; TK_EINVAL lists the states) of the tasks that
 * match f (NULL: all), newest task first and each task's steps last to
 * first: {"steps": [...], "next_cursor": "..." or null}. "exhausted" is
 * true when a retryable step used all its attempts (a permanent failure on
 * its last attempt reads as exhausted too: the store does not keep which). */
int tk_steps_json(tk_store *s, const char *step_state, const tk_task_filter *f,
                  const char *cursor, int limit, char **json, tk_err *err);

/* What one bulk action did. */
typedef struct tk_bulk_result {
  int64_t tasks;  /* tasks that matched (acted on or not: a finished task
                     is not cancelled, one without failed steps has none to
                     retry) */
  int64_t done;   /* actions applied: steps retried or resolved, tasks cancelled */
  int64_t failed; /* actions refused (the state changed meanwhile); the first
                     refusal's message is in err->msg with a 0 return ("" when
                     none was) */
} tk_bulk_result;

/* Apply `action` to every task that matches f (checked by
 * tk_bulk_filter_check: no condition needs f->all), a page at a time, each
 * action its own transaction (tk_task_operate): TK_OP_RETRY and
 * TK_OP_RESOLVE act on every step of the task in state error, TK_OP_CANCEL
 * on the task when it is unfinished. At most `max` tasks are acted on (0:
 * no limit); more than max matching is TK_ERANGE and changes nothing. */
int tk_tasks_operate(tk_store *s, tk_operator_action action, const tk_task_filter *f,
                     int64_t max, int64_t now, tk_bulk_result *out, tk_err *err);

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
