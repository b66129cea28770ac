/* One orchestrator's metrics (DESIGN §11): the registry the metrics
 * observer adds to, its bucket tables, and its rendering as Prometheus
 * text. docs/metrics.md lists every series. */
#include "engine/metrics_internal.h"

#include <stdlib.h>

/* Retry delays run from a fraction of a second (a schedule's first steps)
 * to hours (a server's Retry-After, a budget's deferral; the default
 * server cap is 1 h); 2 s and 5 s sit at the default policy's first
 * delays. */
const tk__buckets tk__buckets_backoff = {
    17,
    {{100000, "0.1"}, {250000, "0.25"}, {500000, "0.5"}, {1000000, "1"}, {2000000, "2"},
     {5000000, "5"}, {10000000, "10"}, {30000000, "30"}, {60000000, "60"},
     {120000000, "120"}, {300000000, "300"}, {600000000, "600"}, {1800000000, "1800"},
     {3600000000, "3600"}, {7200000000, "7200"}, {21600000000, "21600"},
     {86400000000, "86400"}}};

/* Lateness is known to the millisecond: from on time (<= 1 ms) to minutes
 * (a backlog, an orchestrator that was down). */
const tk__buckets tk__buckets_lateness = {
    15,
    {{1000, "0.001"}, {5000, "0.005"}, {10000, "0.01"}, {25000, "0.025"}, {50000, "0.05"},
     {100000, "0.1"}, {250000, "0.25"}, {500000, "0.5"}, {1000000, "1"}, {2500000, "2.5"},
     {5000000, "5"}, {10000000, "10"}, {30000000, "30"}, {60000000, "60"},
     {300000000, "300"}}};

/* A claim transaction takes ~100 us on a local SQLite file and
 * milliseconds on a busy PostgreSQL; seconds mean lock contention. */
const tk__buckets tk__buckets_claim = {
    14,
    {{100, "0.0001"}, {250, "0.00025"}, {500, "0.0005"}, {1000, "0.001"}, {2500, "0.0025"},
     {5000, "0.005"}, {10000, "0.01"}, {25000, "0.025"}, {50000, "0.05"}, {100000, "0.1"},
     {250000, "0.25"}, {500000, "0.5"}, {1000000, "1"}, {5000000, "5"}}};

/* Handlers range from in-process functions (microseconds) through HTTP
 * calls to commands that run for an hour (a step's timeout). */
const tk__buckets tk__buckets_handler = {
    17,
    {{1000, "0.001"}, {5000, "0.005"}, {10000, "0.01"}, {25000, "0.025"}, {50000, "0.05"},
     {100000, "0.1"}, {250000, "0.25"}, {500000, "0.5"}, {1000000, "1"}, {2500000, "2.5"},
     {5000000, "5"}, {10000000, "10"}, {30000000, "30"}, {60000000, "60"},
     {300000000, "300"}, {900000000, "900"}, {3600000000, "3600"}}};

const char *const tk__outcome_labels[TK__OUTCOMES] = {"success", "failure", "timeout",
                                                      "lease_expired", "other"};
const char *const tk__finished_labels[TK__FINISHED_STATES] = {"complete", "error", "other"};

void tk__histo_observe(tk__histo *h, int64_t us) {
  if (us < 0) us = 0;
  const tk__buckets *bk = h->buckets;
  int i = 0;
  while (i < bk->n && us > bk->b[i].us) i++;
  atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

int tk_metrics_new(tk_metrics **out, tk_err *err) {
  /* calloc's zero bytes are the atomics' zero values on every platform we
   * build for; atomic_init would say the same at more length. */
  tk_metrics *m = calloc(1, sizeof *m);
  *out = m;
  if (m == NULL) return tk_err_set(err, TK_ENOMEM, "metrics: out of memory");
  for (int i = 0; i < TK__DELAY_SOURCES; i++) m->backoff[i].buckets = &tk__buckets_backoff;
  m->lateness.buckets = &tk__buckets_lateness;
  m->claim.buckets = &tk__buckets_claim;
  m->handler.buckets = &tk__buckets_handler;
  return 0;
}

void tk_metrics_free(tk_metrics *m) { free(m); }

int tk_metrics_attach(tk_metrics *m, tk_engine *e, tk_err *err) {
  if (e == NULL || atomic_load(&m->engine) != NULL)
    return tk_err_set(err, TK_EINVAL, "metrics: %s (expected one engine per metrics object)",
                      e == NULL ? "no engine" : "already attached to an engine");
  int rc = tk_engine_observe(e, &tk_observer_metrics, m, err);
  if (rc == 0) atomic_store(&m->engine, e);
  return rc;
}

static long long load(atomic_llong *c) { return atomic_load_explicit(c, memory_order_relaxed); }

/* A counter family without labels. */
static void counter(tk__buf *b, const char *name, const char *help, atomic_llong *c) {
  tk__prom_family(b, name, "counter", help);
  tk__prom_int(b, name, NULL, NULL, load(c));
}

/* A counter family by one label; the last label ("other") only when not
 * zero: it is for values this build does not know, normally none. */
static void counter_by(tk__buf *b, const char *name, const char *help, const char *label,
                       const char *const *values, atomic_llong *c, int n) {
  tk__prom_family(b, name, "counter", help);
  for (int i = 0; i < n; i++) {
    long long v = load(&c[i]);
    if (i < n - 1 || v != 0) tk__prom_int(b, name, label, values[i], v);
  }
}

static void histo(tk__buf *b, const char *name, const char *help, const tk__histo *h) {
  tk__prom_family(b, name, "histogram", help);
  tk__prom_histo(b, name, NULL, NULL, h);
}

int tk_metrics_render(tk_metrics *m, char **text, size_t *len, tk_err *err) {
  tk__buf b = {0};
  counter_by(&b, "tasker_step_attempts_total",
             "Attempts whose outcome this orchestrator recorded, by outcome.", "outcome",
             tk__outcome_labels, m->attempts, TK__OUTCOMES);
  tk__prom_family(&b, "tasker_backoff_delay_seconds", "histogram",
                  "Delays of the retries this orchestrator scheduled, by where the delay came "
                  "from (computed: the policy; server: a handler's hint or Retry-After; "
                  "in_call: a batch step's in-call retries ran out; budget: a retry budget "
                  "deferred it).");
  for (int s = 0; s < TK__DELAY_SOURCES; s++)
    tk__prom_histo(&b, "tasker_backoff_delay_seconds", "source",
                   tk_delay_source_name((tk_delay_source)s), &m->backoff[s]);
  counter(&b, "tasker_retries_deferred_total",
          "Retries a retry budget moved later than their computed run_at.",
          &m->retries_deferred);
  counter(&b, "tasker_fenced_writes_total",
          "Outcomes of this orchestrator the store refused: another claim fenced them out.",
          &m->fenced);
  counter(&b, "tasker_lease_expired_total",
          "Leases this orchestrator's reaper expired (of any orchestrator).", &m->lease_expired);
  histo(&b, "tasker_ready_lateness_seconds",
        "How late after its run_at each attempt's handler was called (queueing in this "
        "orchestrator included).",
        &m->lateness);
  histo(&b, "tasker_claim_duration_seconds",
        "Duration of the claim transaction, observed once per step it claimed.", &m->claim);
  histo(&b, "tasker_handler_duration_seconds",
        "How long each attempt's handler ran (a batch step's calls and waits included).",
        &m->handler);
  counter_by(&b, "tasker_tasks_finished_total",
             "Tasks this orchestrator's outcomes finished, by final state.", "state",
             tk__finished_labels, m->tasks_finished, TK__FINISHED_STATES);
  counter(&b, "tasker_items_gave_up_total", "Batch items that gave up (rejected too often).",
          &m->items_gave_up);
  tk_engine *e = atomic_load(&m->engine);
  if (e != NULL) {
    tk__prom_family(&b, "tasker_steps_in_flight", "gauge",
                    "Attempts this orchestrator has claimed and not yet recorded.");
    tk__prom_int(&b, "tasker_steps_in_flight", NULL, NULL, tk_engine_stats_get(e).in_flight);
  }
  return tk__prom_take(&b, text, len, err);
}
