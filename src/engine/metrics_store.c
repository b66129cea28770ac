/* The store-wide metrics `tasker serve` exposes: one status read of the
 * store (what `tasker status` shows) as tasker_store_* series. Their names
 * differ from the orchestrators' tasker_* ones, so a sum over a serve and
 * any number of orchestrators never counts a thing twice. */
#include "engine/metrics_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/budget_report.h"
#include "store/store.h"

/* Every state, so that a series exists at 0 before anything is in it
 * (a rate or an alert on a series that appears late misses its start). */
static const char *const task_states[] = {TK__TASK_PENDING, TK__TASK_IN_PROGRESS,
                                          TK__TASK_COMPLETE, TK__TASK_ERROR,
                                          TK__TASK_CANCELLED};
static const char *const step_states[] = {
    TK__STEP_PENDING,  TK__STEP_IN_PROGRESS, TK__STEP_WAITING_FOR_RETRY, TK__STEP_COMPLETE,
    TK__STEP_ERROR,    TK__STEP_CANCELLED,   TK__STEP_RESOLVED,          TK__STEP_SKIPPED,
    TK__STEP_MAPPED,   TK__STEP_WAITING};

static int64_t count_of(const tk__state_count *c, int n, const char *state) {
  for (int i = 0; i < n; i++)
    if (strcmp(c[i].state, state) == 0) return c[i].n;
  return 0;
}

static int known(const char *const *states, int n, const char *state) {
  for (int i = 0; i < n; i++)
    if (strcmp(states[i], state) == 0) return 1;
  return 0;
}

/* A gauge family by state: the known states, then any other the store
 * reported (a newer schema's). */
static void by_state(tk__buf *b, const char *name, const char *help, const char *const *states,
                     int nstates, const tk__state_count *c, int n) {
  tk__prom_family(b, name, "gauge", help);
  for (int i = 0; i < nstates; i++)
    tk__prom_int(b, name, "state", states[i], count_of(c, n, states[i]));
  for (int i = 0; i < n; i++)
    if (!known(states, nstates, c[i].state)) tk__prom_int(b, name, "state", c[i].state, c[i].n);
}

/* The persistent counters the store keeps (its counters table), each
 * rendered even before its first count; a counter another version adds is
 * rendered too, under a generic HELP. */
static const struct {
  const char *name, *help;
} store_counters[] = {
    {"fenced_writes", "Outcomes the store refused because a newer claim fenced them out, by "
                      "any orchestrator, since the store was created."},
    {"lease_expired", "Leases the reaper expired (their attempts recorded as lease_expired), by "
                      "any orchestrator, since the store was created."},
};
#define NSTORE_COUNTERS ((int)(sizeof store_counters / sizeof *store_counters))

/* tasker_store_NAME_total; a metric name allows [a-zA-Z0-9_:], and the
 * counters' names are snake_case already: anything else becomes '_'. */
static void store_counter(tk__buf *b, const char *counter, const char *help, int64_t v) {
  char name[96];
  int k = snprintf(name, sizeof name, "tasker_store_%s_total", counter);
  for (int j = (int)strlen("tasker_store_"); j < k && name[j]; j++) {
    char ch = name[j];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
      name[j] = '_';
  }
  tk__prom_family(b, name, "counter", help);
  tk__prom_int(b, name, NULL, NULL, v);
}

/* The queues' series (DESIGN §19), one sample per queue of each family
 * (a family with no queue is left out: a label-less sample would read as
 * a queue's). A store without queues has none. */
static int queue_families(tk_store *s, int64_t now, tk__buf *b, tk_err *err) {
  if (s->ops->queue_list == NULL) return 0;
  tk__queue_rec *q = NULL;
  int n = 0;
  int rc = s->ops->queue_list(s, now, &q, &n, err);
  if (rc || n == 0) {
    free(q);
    return rc;
  }
  enum { READY, SCHEDULED, IN_PROGRESS, CONCURRENCY, RATE, TOKENS, OLDEST, WORKERS, NFAMILIES };
  static const struct {
    const char *name, *help;
  } families[NFAMILIES] = {
      {"tasker_store_queue_ready", "Steps of the queue a claim could take now but for its limits."},
      {"tasker_store_queue_scheduled",
       "Steps of the queue waiting for a retry or a delayed start not due yet."},
      {"tasker_store_queue_in_progress",
       "Steps of the queue in progress, by orchestrators and outside workers."},
      {"tasker_store_queue_concurrency_limit",
       "The most steps of the queue in progress at once ([queues.NAME] concurrency); queues "
       "without one are left out."},
      {"tasker_store_queue_rate_limit",
       "Steps of the queue started per second at most ([queues.NAME] rate); queues without one "
       "are left out."},
      {"tasker_store_queue_tokens",
       "Starts the queue's token bucket allows now; queues without a rate are left out."},
      {"tasker_store_queue_oldest_ready_age_seconds",
       "How long the queue's oldest ready step has waited; 0 with none ready."},
      {"tasker_store_queue_workers_seen",
       "Outside workers that polled the queue in the last minute."},
  };
  for (int f = 0; f < NFAMILIES; f++) {
    tk__prom_family(b, families[f].name, "gauge", families[f].help);
    for (int i = 0; i < n; i++) {
      const char *name = families[f].name, *queue = q[i].name;
      switch (f) {
      case READY: tk__prom_int(b, name, "queue", queue, q[i].ready); break;
      case SCHEDULED: tk__prom_int(b, name, "queue", queue, q[i].scheduled); break;
      case IN_PROGRESS: tk__prom_int(b, name, "queue", queue, q[i].in_progress); break;
      case CONCURRENCY:
        if (q[i].concurrency > 0) tk__prom_int(b, name, "queue", queue, q[i].concurrency);
        break;
      case RATE:
        if (q[i].rate > 0) tk__prom_float(b, name, "queue", queue, q[i].rate);
        break;
      case TOKENS:
        if (q[i].rate > 0) tk__prom_float(b, name, "queue", queue, q[i].tokens);
        break;
      case OLDEST: {
        int64_t at = q[i].oldest_ready_at;
        tk__prom_float(b, name, "queue", queue,
                       at == TK__NONE || at >= now ? 0 : (double)(now - at) / 1000.0);
        break;
      }
      default: tk__prom_int(b, name, "queue", queue, q[i].workers_seen);
      }
    }
  }
  free(q);
  return 0;
}

/* The retry budgets' series (DESIGN §14), one sample per stored state of
 * each family, labelled budget and host ("" for a budget's shared state),
 * each state read under the figures it was last written with (the
 * report of tasker budgets, src/ops/budgets.c, without a configuration).
 * A store without budget states has none. */
static int budget_families(tk_store *s, int64_t now, tk__buf *b, tk_err *err) {
  tk__budget_report *v = NULL;
  int n = 0;
  int rc = tk__budget_report_read(s, NULL, now, &v, &n, err);
  if (rc || n == 0) {
    free(v);
    return rc;
  }
  enum { AVAILABLE, RESERVED, DEFERRED, EARLIER, FIRSTS, RETRIES, RATIO, FLOOR, WINDOW, UPDATED,
         NFAMILIES };
  static const struct {
    const char *name, *type, *help;
  } families[NFAMILIES] = {
      {"tasker_store_budget_available", "gauge",
       "Retries the budget allows now, asked one after another (0 while deferred retries "
       "wait); states whose figures are unknown are left out."},
      {"tasker_store_budget_reserved", "gauge",
       "Retries the budget deferred that hold a reservation not yet settled."},
      {"tasker_store_budget_deferred_total", "counter",
       "Retries the budget deferred, by any orchestrator, since its state began."},
      {"tasker_store_budget_brought_earlier_total", "counter",
       "Deferred retries brought earlier when the budget had room, since its state began."},
      {"tasker_store_budget_first_attempts_total", "counter",
       "First attempts counted in the budget, since its state began."},
      {"tasker_store_budget_retries_total", "counter",
       "Retries counted in the budget (allowed now or reserved), since its state began."},
      {"tasker_store_budget_ratio", "gauge",
       "Retries per first attempt in the window the budget allows (as last written)."},
      {"tasker_store_budget_min_per_second", "gauge",
       "The budget's floor of retries per second (as last written)."},
      {"tasker_store_budget_window_seconds", "gauge",
       "The budget's sliding window (as last written)."},
      {"tasker_store_budget_updated_timestamp_seconds", "gauge",
       "When an orchestrator last updated the budget's state (Unix time)."},
  };
  for (int f = 0; f < NFAMILIES; f++) {
    tk__prom_family(b, families[f].name, families[f].type, families[f].help);
    for (int i = 0; i < n; i++) {
      const tk__budget_report *r = &v[i];
      double x;
      switch (f) {
      case AVAILABLE: x = (double)r->available; break;
      case RESERVED: x = (double)r->reserved; break;
      case DEFERRED: x = (double)r->deferred; break;
      case EARLIER: x = (double)r->brought_earlier; break;
      case FIRSTS: x = (double)r->first_attempts; break;
      case RETRIES: x = (double)r->retries; break;
      case RATIO: x = r->cfg.ratio; break;
      case FLOOR: x = r->cfg.min_per_second; break;
      case WINDOW: x = (double)r->cfg.window_ms / 1000.0; break;
      default: x = (double)r->updated_at / 1000.0;
      }
      if (r->known || f == UPDATED)
        tk__prom_float2(b, families[f].name, "budget", r->name, "host",
                        r->has_host ? r->host : "", x);
    }
  }
  free(v);
  return 0;
}

int tk_metrics_render_store(tk_store *s, int64_t now, char **text, size_t *len, tk_err *err) {
  *text = NULL;
  tk__status_report r;
  int rc = s->ops->status(s, now, &r, err);
  if (rc) return rc;
  tk__buf b = {0};
  by_state(&b, "tasker_store_tasks", "Tasks in the store by state.", task_states,
           (int)(sizeof task_states / sizeof *task_states), r.tasks, r.ntasks);
  by_state(&b, "tasker_store_steps", "Steps in the store by state.", step_states,
           (int)(sizeof step_states / sizeof *step_states), r.steps, r.nsteps);
  tk__prom_family(&b, "tasker_store_steps_ready", "gauge",
                  "Steps whose run_at has come and whose parents are done: ready to be claimed.");
  tk__prom_int(&b, "tasker_store_steps_ready", NULL, NULL, r.ready_now);
  for (int k = 0; k < NSTORE_COUNTERS; k++) {
    int64_t v = 0;
    for (int i = 0; i < r.ncounters; i++)
      if (strcmp(r.counters[i].name, store_counters[k].name) == 0) v = r.counters[i].value;
    store_counter(&b, store_counters[k].name, store_counters[k].help, v);
  }
  for (int i = 0; i < r.ncounters; i++) {
    int k = 0;
    while (k < NSTORE_COUNTERS && strcmp(r.counters[i].name, store_counters[k].name) != 0) k++;
    if (k == NSTORE_COUNTERS)
      store_counter(&b, r.counters[i].name,
                    "A persistent counter of the store (its counters table), since the store "
                    "was created.",
                    r.counters[i].value);
  }
  if ((rc = queue_families(s, now, &b, err)) != 0 ||
      (rc = budget_families(s, now, &b, err)) != 0) {
    tk__buf_free(&b);
    return rc;
  }
  return tk__prom_take(&b, text, len, err);
}
