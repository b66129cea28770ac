/* tasker: the engine (DESIGN §4-5): claims ready steps, runs their
 * handlers on a pool of workers, and records each outcome in one fenced
 * transaction, with every retry delay from tk_backoff_delay().
 *
 * One engine is one orchestrator with its own id; any number may share a
 * store. The engine never prints: events and log lines go to the sinks in
 * the options.
 */
#ifndef TASKER_ENGINE_H
#define TASKER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/events.h>
#include <tasker/retry.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a handler says about one attempt. */
typedef enum tk_handler_status {
  TK_HANDLER_SUCCESS = 0,
  TK_HANDLER_RETRY,    /* retryable failure; retry_after_ms may ask a delay */
  TK_HANDLER_PERMANENT /* non-retryable failure */
} tk_handler_status;

/* The call a handler receives. Strings live until the handler returns. */
typedef struct tk_handler_call {
  int64_t task_id;
  const char *step;      /* the step's name */
  int attempt;           /* 1 for the first try */
  int max_attempts;
  const char *input;     /* JSON {"context": ..., "parents": {name: results}} */
  const char *spec;      /* the handler's table from the template, as JSON */
  int64_t deadline_ms;   /* the step's timeout as an absolute time, or 0 */
} tk_handler_call;

/* What the handler fills in; zeroed before the call, status SUCCESS. */
typedef struct tk_handler_result {
  tk_handler_status status;
  char *results;          /* malloc'd JSON object text, or NULL; the engine frees it */
  char error[512];        /* why it failed */
  int64_t retry_after_ms; /* a server-requested delay, or -1 for none */
  int timed_out;          /* the failure was the step's timeout */
  /* The service the attempt called, "host" or "host:port" (the http
   * handler sets it from the request's URL), or "" when not known: a
   * per_host retry budget keeps one state per downstream (DESIGN §14); an
   * attempt without one counts in the budget's shared state. */
  char downstream[256];
} tk_handler_result;

/* An in-process handler. Runs on a worker thread; must be thread-safe. */
typedef void (*tk_handler_fn)(const tk_handler_call *call, tk_handler_result *out, void *ud);

/* Sinks. `line` is one JSON object without a newline. */
typedef void (*tk_event_sink)(const char *line, void *ud);
typedef enum tk_log_level { TK_LOG_DEBUG, TK_LOG_INFO, TK_LOG_WARN, TK_LOG_ERROR } tk_log_level;
typedef void (*tk_log_sink)(tk_log_level level, const char *msg, void *ud);

typedef struct tk_engine_options {
  tk_store *store;           /* required; used only by the engine's thread */
  const tk_config *config;   /* required: engine settings and backoff profiles */
  /* zeroed: the store's clock (the machine's on SQLite, the database
   * server's on PostgreSQL; see tk_store_clock). A clock given here (a
   * test's manual clock) is installed as the store's, so what the engine
   * plans and what the store writes come from one clock. */
  tk_clock clock;
  uint64_t seed;             /* jitter; 0: from entropy */
  const char *id;            /* orchestrator id; NULL: "HOST-PID" */
  int workers;               /* 0: inline on the engine's thread; <0: config */
  tk_event_sink on_event;    /* may be NULL; else the JSON-lines observer
                                (tk_observer_jsonl) is registered first,
                                writing each event's line here */
  void *event_ud;
  tk_log_sink on_log;        /* may be NULL */
  void *log_ud;
} tk_engine_options;

typedef struct tk_engine tk_engine;

/* Counters since the engine started. */
typedef struct tk_engine_stats {
  int64_t claimed, completed, retried, failed, exhausted;
  int64_t fenced;        /* outcomes refused by the fence */
  int64_t lease_expired; /* leases this engine's reaper expired */
  int64_t tasks_completed, tasks_failed; /* tasks this engine's outcomes finished */
  int64_t in_flight;
  int64_t retries_deferred; /* retries a retry budget moved later (also in `retried`) */
  int64_t retries_brought_earlier; /* deferred ones brought earlier when the budget had room */
} tk_engine_stats;

int tk_engine_new(const tk_engine_options *opts, tk_engine **out, tk_err *err);
/* Stop the worker threads, waiting for the handlers they are running, and
 * free the engine. Attempts claimed and not yet recorded (only possible
 * when driven by tk_engine_tick with workers) are left to their leases,
 * which the reaper turns into lease_expired retries. */
void tk_engine_free(tk_engine *e);

/* Register an in-process handler, used by steps whose handler is
 * { kind = "function", name = NAME }. Call before running: a template's
 * steps are bound to the registered functions when the engine first loads
 * the template (docs/handlers.md). */
int tk_engine_register(tk_engine *e, const char *name, tk_handler_fn fn, void *ud, tk_err *err);

/* ---- batch steps (DESIGN §9, docs/batch.md) -----------------------------
 *
 * A batch step owns items. Each call of its handler offers only the items
 * still pending; the handler acks or rejects each one. Within one attempt
 * the engine calls again, after the step's backoff delay, for the items
 * left, up to max_in_call_retries times; an item rejected
 * max_item_attempts times gives up and is never offered again. */

/* One item offered to a batch handler. */
typedef struct tk_batch_item {
  const char *key;  /* unique within the step */
  const char *data; /* the submitted element as JSON text when it was an
                       object, else NULL (the element was the key) */
  int64_t index;    /* position in the submitted array, from 0 */
  int attempt;      /* this delivery of the item: 1 the first time */
} tk_batch_item;

/* One call of a batch handler. Strings live until the handler returns. */
typedef struct tk_batch_call {
  const tk_handler_call *step; /* the step's attempt: task, step, input, spec */
  const tk_batch_item *items;  /* the pending items, in submission order */
  size_t n;                    /* >= 1 */
  int call;                    /* 1 for the attempt's first call, then 2, ... */
} tk_batch_call;

/* A batch handler; runs on a worker thread and must be thread-safe.
 * `out` is zeroed with status SUCCESS and retry_after_ms -1. On SUCCESS it
 * fills reports[i] for every items[i]: TK_ITEM_ACKED, or TK_ITEM_REJECTED
 * with an optional reason (valid until the handler is called again); an
 * item left without a verdict fails the call. retry_after_ms >= 0 asks for
 * that delay before the next call. A failure of the whole call (the
 * service is down) sets status RETRY or PERMANENT and error instead; no
 * report is read then. out->results is not used (the step's results are
 * the item counts). */
typedef void (*tk_batch_fn)(const tk_batch_call *call, tk_item_report *reports,
                            tk_handler_result *out, void *ud);

/* Register an in-process batch handler, used by batch steps whose handler
 * is { kind = "function", name = NAME }. Names are shared with
 * tk_engine_register: TK_EEXIST when taken, TK_EINVAL without fn. Call
 * before running. */
int tk_engine_register_batch(tk_engine *e, const char *name, tk_batch_fn fn, void *ud,
                             tk_err *err);

/* One pass: reap expired leases, record finished attempts, claim and start
 * ready steps (running them to completion when workers = 0). *next_due
 * (may be NULL) gets the earliest time anything becomes due, INT64_MAX if
 * nothing is scheduled. For tests that drive a manual clock. */
int tk_engine_tick(tk_engine *e, int64_t *next_due, tk_err *err);

/* Run until tk_engine_stop(), or with until_idle until no orchestrator has
 * work left (no step it runs ready, running or waiting for a retry; the
 * steps of worker queues, run by outside workers, do not count). Sleeps until the
 * earliest due time or until woken; never polls on a fixed interval. */
int tk_engine_run(tk_engine *e, int until_idle, tk_err *err);

/* Ask a running engine to stop after its current pass; thread-safe and
 * async-signal-safe. In-flight attempts are finished and recorded. */
void tk_engine_stop(tk_engine *e);

/* Wake a sleeping engine to look for work now; thread-safe. */
void tk_engine_wake(tk_engine *e);

/* Counters so far. Safe from any thread while the engine runs: each
 * counter is an atomic (C11 <stdatomic.h>), so every value is one the
 * engine wrote, though two counters may be read a moment apart. */
tk_engine_stats tk_engine_stats_get(tk_engine *e);

/* Subscribe `obs` (copied; obs->version must be TK_OBSERVER_VERSION) to the
 * engine's events of the types in obs->interest; on_event gets `ud`. Call
 * before running (not while tk_engine_run or tk_engine_tick is under way).
 * TK_EINVAL for a bad version or no on_event, TK_ENOMEM beyond 8
 * observers. See <tasker/events.h> for what observers may do. */
int tk_engine_observe(tk_engine *e, const tk_observer *obs, void *ud, tk_err *err);

/* Store-wide summaries used by the CLI, as JSON text (malloc'd); their
 * shapes are documented in docs/cli.md. */
int tk_engine_task_json(tk_store *s, int64_t task_id, int64_t now, char **json, tk_err *err);
int tk_engine_status_json(tk_store *s, int64_t now, char **json, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
