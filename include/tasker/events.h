/* tasker: typed events and observers (DESIGN §11).
 *
 * The engine and tk_task_submit describe each state change as a tk_event
 * and hand it to the observers that subscribed to its type. An event is
 * built only when at least one registered observer's interest mask has its
 * type: with nobody listening, nothing is filled in, formatted or
 * allocated. The JSON-lines writer (tk_event_json, tk_observer_jsonl) is
 * one observer among others (metrics, the server).
 *
 * Contracts:
 *  - Observers run synchronously on the thread that emits: the engine's
 *    thread for engine events (never a worker thread), the caller's thread
 *    for task.created. They must return quickly and must not call back into
 *    the engine that emits (no tk_engine_tick/run/free from on_event);
 *    tk_engine_stats_get, tk_engine_stop and tk_engine_wake are allowed.
 *  - The tk_event and every string it points to live only for the call.
 *  - For one engine, events reach each observer in the order they happen,
 *    observers in the order they were registered.
 *  - Engine events are emitted after the change they describe is committed.
 *  - The library never prints: writing JSON lines is the job of a sink.
 */
#ifndef TASKER_EVENTS_H
#define TASKER_EVENTS_H

#include <stdint.h>

#include <tasker/backoff.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every event type; the JSON "type" is tk_event_type_name(). */
typedef enum tk_event_type {
  TK_EV_TASK_CREATED = 0,     /* "task.created" (tk_task_submit) */
  TK_EV_STEP_CLAIMED,         /* "step.claimed" */
  TK_EV_STEP_COMPLETED,       /* "step.completed" */
  TK_EV_STEP_FAILED,          /* "step.failed": an attempt failed (retried or not) */
  TK_EV_STEP_RETRY_DEFERRED,  /* "step.retry_deferred": a retry budget moved it */
  TK_EV_STEP_RETRY_SCHEDULED, /* "step.retry_scheduled" */
  TK_EV_STEP_EXHAUSTED,       /* "step.exhausted": attempts ran out */
  TK_EV_STEP_LEASE_EXPIRED,   /* "step.lease_expired" */
  TK_EV_STEP_FENCED_OUT,      /* "step.fenced_out" */
  TK_EV_TASK_COMPLETED,       /* "task.completed" */
  TK_EV_TASK_FAILED,          /* "task.failed" */
  TK_EV_ITEM_GAVE_UP,         /* "item.gave_up" (batch steps) */
  TK_EV__COUNT
} tk_event_type;

/* Interest masks. */
#define TK_EV_BIT(type) (UINT32_C(1) << (type))
#define TK_EV_ALL ((UINT32_C(1) << TK_EV__COUNT) - 1)

/* One event. The common fields first, then the part of `u` its type names
 * (see each member). Fields a type does not use are zero / NULL. */
typedef struct tk_event {
  tk_event_type type;
  int64_t at;               /* ms since the epoch, on the store's clock */
  const char *orchestrator; /* the engine's id; NULL for task.created
                               (but a schedule's slot: the engine's) */
  int64_t task;
  const char *step;         /* step and item events; NULL otherwise */
  int attempt;              /* step and item events */
  /* How late after its run_at the handler was called (ms); has_late_ms
   * says whether it is known (outcome events of attempts that started;
   * always for step.claimed). */
  int has_late_ms;
  int64_t late_ms;
  union {
    struct { /* TK_EV_TASK_CREATED */
      const char *template_name;
      const char *version;  /* as requested; NULL: the newest */
      const char *identity; /* NULL: none */
    } created;
    struct { /* TK_EV_STEP_CLAIMED */
      int max_attempts;
      int64_t claim_us; /* the claim transaction's duration */
    } claimed;
    struct { /* TK_EV_STEP_COMPLETED */
      int64_t children_released;
    } completed;
    struct { /* TK_EV_STEP_FAILED, TK_EV_STEP_EXHAUSTED, TK_EV_STEP_FENCED_OUT */
      const char *error;   /* NULL for step.fenced_out */
      const char *outcome; /* the attempt's recorded outcome */
    } failed;
    struct { /* TK_EV_STEP_RETRY_DEFERRED */
      const char *budget;
      const char *host; /* NULL: the budget's shared state */
      int64_t computed_delay_ms;
      tk_delay_source computed_source;
      int64_t computed_run_at;
      int64_t deferred_until;
    } deferred;
    struct { /* TK_EV_STEP_RETRY_SCHEDULED */
      int64_t delay_ms;
      tk_delay_source source;
      int64_t run_at;
    } retry;
    struct { /* TK_EV_STEP_LEASE_EXPIRED */
      const char *owner; /* the orchestrator whose lease expired */
    } lease;
    struct { /* TK_EV_TASK_COMPLETED, TK_EV_TASK_FAILED */
      const char *state;
    } finished;
    struct { /* TK_EV_ITEM_GAVE_UP */
      const char *item;
      int item_attempts;
      const char *error;
    } item;
  } u;
  /* How long the attempt's handler ran (microseconds, monotonic clock; a
   * batch step's calls and the waits between them included); has_duration_us
   * says whether it is known: the events of an attempt's outcome
   * (step.completed, step.failed, step.exhausted, step.fenced_out and the
   * step.retry_* after a failure) whose handler this engine called. Placed after `u`: tk_event only grows at its end, so an
   * observer built against an older header reads the same offsets. */
  int has_duration_us;
  int64_t duration_us;
} tk_event;

/* The version of tk_observer's layout. tk_event grows only at its end
 * (fields an older observer does not know are simply not read), so adding
 * event fields keeps it at 1. */
#define TK_OBSERVER_VERSION 1

/* An observer. `version` first (TK_OBSERVER_VERSION) so that the struct
 * can grow; `interest` is a mask of TK_EV_BIT(type): on_event is called
 * only for those types, and no event is built for a type no observer
 * wants. */
typedef struct tk_observer {
  int version;
  uint32_t interest;
  void (*on_event)(const tk_event *ev, void *ud);
} tk_observer;

/* "step.claimed" etc.; "unknown" out of range. */
const char *tk_event_type_name(tk_event_type type);

/* The event as one JSON object without a newline (malloc'd; NULL when out
 * of memory): {"type", "at", "orchestrator" (engine events), then the
 * type's fields}, the shape of docs/cli.md's --events lines. */
char *tk_event_json(const tk_event *ev);

/* The JSON-lines observer: interest TK_EV_ALL; its ud is a
 * tk_jsonl_sink, whose fn receives each tk_event_json line. */
typedef struct tk_jsonl_sink {
  void (*fn)(const char *line, void *ud);
  void *ud;
} tk_jsonl_sink;
extern const tk_observer tk_observer_jsonl;

#ifdef __cplusplus
}
#endif
#endif
