/* tasker: Prometheus metrics (DESIGN §11, docs/metrics.md).
 *
 * Two sources, two sets of names, so that a sum over every scraped target
 * never counts a thing twice:
 *  - one orchestrator's metrics (`tasker run --metrics ADDR`): a tk_metrics
 *    fed by its engine's typed events through tk_observer_metrics, rendered
 *    by tk_metrics_render; names `tasker_*` (tasker_step_attempts_total,
 *    tasker_backoff_delay_seconds, ...), counting what this orchestrator
 *    did since it started;
 *  - the store's (`tasker serve`): what the store holds now and its
 *    persistent counters, read from the store by tk_metrics_render_store
 *    (`serve` calls it from a background thread every few seconds and
 *    answers scrapes with the last result, since counting 10^6 steps by
 *    state takes longer than a scrape should); names `tasker_store_*`.
 *
 * Both render the Prometheus text exposition format 0.0.4 (served with
 * Content-Type "text/plain; version=0.0.4; charset=utf-8"), base units
 * (seconds), counters ending in _total.
 *
 * Threads: events arrive on the engine's thread while renders run on any
 * other (the server's). Every counter and bucket is a C11 atomic updated
 * with relaxed order: each value a render prints is one that was written
 * (never torn), but series are read one after another, so one render may
 * see an attempt in tasker_step_attempts_total and not yet in a histogram
 * (a moment apart, like tk_engine_stats_get). Within one histogram the
 * _count is the sum of the buckets the render read, so `+Inf` always
 * equals `_count`. Nothing allocates per event.
 */
#ifndef TASKER_METRICS_H
#define TASKER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/engine.h>
#include <tasker/error.h>
#include <tasker/events.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Content-Type of what the render functions produce. */
#define TK_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct tk_metrics tk_metrics;

/* A metrics object with every counter at zero. 0, or TK_ENOMEM. */
int tk_metrics_new(tk_metrics **out, tk_err *err);

/* Free it (NULL is fine). The engine it is attached to must be freed
 * first (its observer holds the pointer), and no render may be under way. */
void tk_metrics_free(tk_metrics *m);

/* Subscribe m to e's events (tk_engine_observe with tk_observer_metrics;
 * call before running e) and remember e, whose tk_engine_stats_get gives
 * the in-flight gauge at render time. One engine per tk_metrics (TK_EINVAL
 * for a second); e must stay alive while m is rendered: stop serving
 * before tk_engine_free. Errors of tk_engine_observe pass through. */
int tk_metrics_attach(tk_metrics *m, tk_engine *e, tk_err *err);

/* The observer behind tk_metrics_attach, for callers that register it
 * themselves or feed it events (its ud is the tk_metrics): interest in
 * every engine event but task.created. on_event only adds to atomics. */
extern const tk_observer tk_observer_metrics;

/* The orchestrator's metrics as Prometheus text: *text is malloc'd and
 * NUL-terminated (the caller frees it), *len its length (len may be NULL).
 * Safe from any thread while the engine runs. 0, or TK_ENOMEM (*text
 * NULL). Without an attached engine, tasker_steps_in_flight is left out. */
int tk_metrics_render(tk_metrics *m, char **text, size_t *len, tk_err *err);

/* The store-wide metrics at `now` (ms since the epoch; the store's clock)
 * as Prometheus text, from one status read of the store (the counts
 * behind `tasker status`): tasks and steps by state and steps ready now
 * as gauges, the store's persistent counters as tasker_store_*_total.
 * Uses `s` on the calling thread (a store is not shared between threads).
 * 0, or the store's error (TK_EDISCONNECTED, ...), or TK_ENOMEM. */
int tk_metrics_render_store(tk_store *s, int64_t now, char **text, size_t *len, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
