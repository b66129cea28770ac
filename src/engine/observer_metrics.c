/* The metrics observer: each engine event adds to tk_metrics' atomics.
 * It runs on the engine's thread for every event, so it only compares a
 * few bytes and adds: no allocation, no lock, no formatting. */
#include "engine/metrics_internal.h"

#include <string.h>

static void bump(atomic_llong *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* The index of an attempt's recorded outcome (engine.c's job_outcome and
 * the reaper's "lease_expired"). */
static int outcome_index(const char *o) {
  if (o == NULL) return TK__OUTCOME_OTHER;
  for (int i = 0; i < TK__OUTCOME_OTHER; i++)
    if (strcmp(o, tk__outcome_labels[i]) == 0) return i;
  return TK__OUTCOME_OTHER;
}

/* An attempt whose outcome was recorded: count it, and how late its
 * handler started and how long it ran when it ran here (a lease the
 * reaper expired has neither). */
static void attempt(tk_metrics *m, const tk_event *ev, int outcome) {
  bump(&m->attempts[outcome]);
  if (ev->has_late_ms) tk__histo_observe(&m->lateness, ev->late_ms * 1000);
  if (ev->has_duration_us) tk__histo_observe(&m->handler, ev->duration_us);
}

static void on_event(const tk_event *ev, void *ud) {
  tk_metrics *m = ud;
  switch (ev->type) {
  case TK_EV_STEP_CLAIMED: tk__histo_observe(&m->claim, ev->u.claimed.claim_us); break;
  case TK_EV_STEP_COMPLETED: attempt(m, ev, TK__OUTCOME_SUCCESS); break;
  case TK_EV_STEP_FAILED:
  case TK_EV_STEP_EXHAUSTED: attempt(m, ev, outcome_index(ev->u.failed.outcome)); break;
  case TK_EV_STEP_RETRY_DEFERRED: bump(&m->retries_deferred); break;
  case TK_EV_STEP_RETRY_SCHEDULED:
    if ((unsigned)ev->u.retry.source < TK__DELAY_SOURCES)
      tk__histo_observe(&m->backoff[ev->u.retry.source], ev->u.retry.delay_ms * 1000);
    break;
  case TK_EV_STEP_LEASE_EXPIRED: bump(&m->lease_expired); break;
  case TK_EV_STEP_FENCED_OUT: bump(&m->fenced); break;
  case TK_EV_TASK_COMPLETED:
  case TK_EV_TASK_FAILED: {
    const char *s = ev->u.finished.state;
    int i = s == NULL                                             ? TK__FINISHED_OTHER
            : strcmp(s, tk__finished_labels[TK__FINISHED_COMPLETE]) == 0 ? TK__FINISHED_COMPLETE
            : strcmp(s, tk__finished_labels[TK__FINISHED_ERROR]) == 0    ? TK__FINISHED_ERROR
                                                                         : TK__FINISHED_OTHER;
    bump(&m->tasks_finished[i]);
    break;
  }
  case TK_EV_ITEM_GAVE_UP: bump(&m->items_gave_up); break;
  default: break;
  }
}

const tk_observer tk_observer_metrics = {TK_OBSERVER_VERSION,
                                         TK_EV_ALL & ~TK_EV_BIT(TK_EV_TASK_CREATED), on_event};
