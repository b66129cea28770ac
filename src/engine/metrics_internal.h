/* The metrics' private pieces (metrics.c, observer_metrics.c,
 * metrics_text.c, metrics_store.c): histograms of fixed buckets in atomics,
 * the tk_metrics registry, and the Prometheus text helpers. */
#ifndef TASKER_METRICS_INTERNAL_H
#define TASKER_METRICS_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include <tasker/metrics.h>

#include "core/buf.h"

/* A histogram's bucket bounds: upper bounds in microseconds, ascending,
 * with their `le` label as Prometheus shows it (seconds). */
#define TK__HISTO_BUCKETS_MAX 20
typedef struct tk__buckets {
  int n;
  struct {
    int64_t us;
    const char *le;
  } b[TK__HISTO_BUCKETS_MAX];
} tk__buckets;

/* One histogram series. counts[i] holds observations in bucket i alone
 * (not cumulative), counts[n] those above the last bound; the render
 * accumulates. The sum is kept in integer microseconds so it is one atomic
 * add, exact, and printed without rounding. */
typedef struct tk__histo {
  const tk__buckets *buckets;
  atomic_llong counts[TK__HISTO_BUCKETS_MAX + 1];
  atomic_llong sum_us;
} tk__histo;

/* Add one observation of `us` microseconds (negative counts as 0). Any
 * thread; no allocation. */
void tk__histo_observe(tk__histo *h, int64_t us);

/* The bucket tables (metrics.c; their choice is in docs/metrics.md). */
extern const tk__buckets tk__buckets_backoff, tk__buckets_lateness, tk__buckets_claim,
    tk__buckets_handler;

/* Labels of the counters kept by label value. */
enum { TK__OUTCOME_SUCCESS, TK__OUTCOME_FAILURE, TK__OUTCOME_TIMEOUT, TK__OUTCOME_LEASE_EXPIRED,
       TK__OUTCOME_OTHER, TK__OUTCOMES };
enum { TK__FINISHED_COMPLETE, TK__FINISHED_ERROR, TK__FINISHED_OTHER, TK__FINISHED_STATES };
#define TK__DELAY_SOURCES 4 /* tk_delay_source: computed, server, in_call, budget */

extern const char *const tk__outcome_labels[TK__OUTCOMES];
extern const char *const tk__finished_labels[TK__FINISHED_STATES];

struct tk_metrics {
  _Atomic(tk_engine *) engine; /* attached engine (renders read it), or NULL */
  atomic_llong attempts[TK__OUTCOMES];
  atomic_llong tasks_finished[TK__FINISHED_STATES];
  atomic_llong fenced, lease_expired, retries_deferred, items_gave_up;
  tk__histo backoff[TK__DELAY_SOURCES]; /* by tk_delay_source */
  tk__histo lateness, claim, handler;
};

/* ---- the text exposition format 0.0.4 (metrics_text.c) ---------------- */

/* "# HELP name help\n# TYPE name type\n"; help is escaped. */
void tk__prom_family(tk__buf *b, const char *name, const char *type, const char *help);
/* One sample `name{label="value"} v\n`; label NULL: no labels. The value
 * is escaped (backslash, double quote, newline). */
void tk__prom_int(tk__buf *b, const char *name, const char *label, const char *value,
                  int64_t v);
/* tk__prom_int with a real value (printed with up to 15 digits). */
void tk__prom_float(tk__buf *b, const char *name, const char *label, const char *value,
                    double v);
/* tk__prom_float with two labels (`name{l1="v1",l2="v2"} v`), both values
 * escaped. */
void tk__prom_float2(tk__buf *b, const char *name, const char *l1, const char *v1,
                     const char *l2, const char *v2, double v);
/* Every line of one histogram series: cumulative _bucket{...,le} up to
 * +Inf, _sum (seconds) and _count (the buckets' total as read, so equal to
 * +Inf). label NULL: no label but le. */
void tk__prom_histo(tk__buf *b, const char *name, const char *label, const char *value,
                    const tk__histo *h);
/* Finish a render: the buffer's text into *text and its length into
 * *len (len may be NULL), or TK_ENOMEM. */
int tk__prom_take(tk__buf *b, char **text, size_t *len, tk_err *err);

#endif
