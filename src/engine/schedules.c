/* The orchestrator's part of schedules (DESIGN §16): at the first pass
 * the configured schedules are written into the store (so every
 * orchestrator fires the same ones), then each pass fires the slots that
 * are due and says when the next one is, for the engine's sleep. The
 * expressions are parsed, and their zones' files read, once per engine
 * (schedule/cron_cache.h), not on every pass.
 *
 * The schedules are read (one small SELECT) at the earliest slot, and
 * after a wait that the store's change notification ended (the WAL watch
 * on SQLite, NOTIFY on PostgreSQL): another process that adds or removes a
 * schedule writes the store, which wakes sleeping engines. Such reads are
 * at most one a second (a busy store notifies often): one due sooner
 * waits for the second's end. Nothing polls on an interval, and an engine
 * driven by tk_engine_tick (which never waits) reads them only at slots. */
#include "engine/engine_internal.h"

#include <stdlib.h>

#include <tasker/schedule.h>

#include "schedule/schedule_internal.h"

/* The least time between two reads of the schedules on wake-ups. */
#define REREAD_MS 1000

struct tk__engine_sched {
  int synced;      /* the configured schedules are in the store */
  int changed;     /* the store changed since the schedules were read */
  int64_t next_at; /* the earliest slot known; INT64_MAX none */
  int64_t read_at; /* when the schedules were last read; INT64_MIN never */
  tk__cron_cache *crons; /* the expressions parsed, their zones read, once */
};

/* task.created of a slot's task, to the engine's observers (which set the
 * orchestrator). */
static void created(const tk_event *ev, void *ud) {
  tk_engine *e = ud;
  tk_event copy = *ev;
  tk__engine_emit(e, &copy);
}

int64_t tk__engine_schedules(tk_engine *e, int64_t now) {
  struct tk__engine_sched *st = e->sched;
  if (st == NULL) {
    if ((st = e->sched = calloc(1, sizeof *st)) == NULL) return INT64_MAX;
    if ((st->crons = tk__cron_cache_new()) == NULL) {
      free(st);
      e->sched = NULL;
      return INT64_MAX;
    }
    st->next_at = INT64_MAX;
    st->read_at = INT64_MIN;
  }
  tk_err err;
  if (!st->synced) {
    if (tk_schedule_sync(e->store, e->config, now, &err) != 0)
      tk__engine_log(e, TK_LOG_ERROR, "schedules: %s", err.msg);
    /* Not again until the next start: a conflict needs an operator. */
    st->synced = 1;
  }
  st->changed |= e->store_changed;
  e->store_changed = 0;
  int read = st->read_at == INT64_MIN || now >= st->next_at ||
             (st->changed && now - st->read_at >= REREAD_MS);
  if (!read) {
    /* A change within the second is read once the second is over. */
    int64_t again = st->read_at + REREAD_MS;
    return st->changed && again < st->next_at ? again : st->next_at;
  }
  tk_schedule_pass p;
  st->read_at = now;
  st->changed = 0;
  tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_BIT(TK_EV_TASK_CREATED), created};
  if (tk__schedule_fire_due(e->store, e->config, st->crons, now,
                            tk__engine_wants(e, TK_EV_TASK_CREATED) ? &obs : NULL, e, &p,
                            &err) != 0) {
    tk__engine_log(e, TK_LOG_ERROR, "schedules: %s", err.msg);
    st->next_at = now + REREAD_MS; /* the store answers again soon, or the reconnect does */
    return INT64_MAX;
  }
  if (p.failed)
    tk__engine_log(e, TK_LOG_ERROR, "schedules: %d could not fire: %s", p.failed, err.msg);
  if (p.fired || p.skipped)
    tk__engine_log(e, TK_LOG_INFO, "schedules: %d slot(s) fired, %d missed slot(s) skipped",
                   p.fired, p.skipped);
  st->next_at = p.next_at;
  return p.next_at;
}

void tk__engine_schedules_free(tk_engine *e) {
  if (e->sched) tk__cron_cache_free(e->sched->crons);
  free(e->sched);
  e->sched = NULL;
}
