/* The firing pass (tasker/schedule.h: tk_schedule_fire_due): each due
 * slot's task and the schedule's cursor in one store transaction. */
#include <tasker/schedule.h>

#include <stdio.h>
#include <string.h>

#include <tasker/cron.h>

#include "schedule/cron_cache.h"
#include "schedule/def.h"
#include "schedule/schedule_internal.h"
#include "store/store.h"
#include "workflow/submit.h"

/* Slots a skip schedule may find due at once: those of the grace window
 * (a minute's worth: one, or two around a DST change). */
#define SKIP_DUE_MAX 8

/* Keep the first error of a pass in err, prefixed with the schedule. */
static void keep_error(tk_schedule_pass *out, tk_err *err, const char *name, const tk_err *e) {
  if (out->failed++ == 0 && err)
    tk_err_set(err, e->code, "schedule %s: %s", name, e->msg);
}

/* Move r's cursor from *cursor to `to` with no task (skipped slots). 0, or
 * TK_ESTATE when another orchestrator moved it first. */
static int skip_to(tk_store *s, const tk__schedule_rec *r, int64_t *cursor, int64_t to,
                   tk_err *e) {
  tk__schedule_step st = {.name = r->name, .expected = *cursor, .cursor = to};
  int rc = s->ops->schedule_fire(s, &st, e);
  if (rc == 0) *cursor = to;
  return rc;
}

/* Who hears of the tasks a pass creates. */
typedef struct watcher {
  const tk_observer *obs;
  void *ud;
} watcher;

/* Fire slot `slot` of r: its task and the cursor, in one transaction. */
static int fire_slot(tk_store *s, const tk_config *cfg, const tk__schedule_rec *r,
                     int64_t *cursor, int64_t slot, int64_t now, const watcher *w,
                     tk_schedule_pass *out, tk_err *e) {
  char identity[160];
  tk_schedule_identity(r->name, slot, identity, sizeof identity);
  tk_submit_request req = {.template_name = r->template_name, .version = r->version,
                           .context_json = r->context, .identity = identity};
  tk__built_task b;
  int rc = tk__task_build(s, cfg, &req, now, &b, e);
  if (rc) return rc;
  tk__schedule_step st = {.name = r->name, .expected = *cursor, .cursor = slot, .task = &b.t,
                          .slot = slot};
  rc = s->ops->schedule_fire(s, &st, e);
  tk__built_task_free(&b);
  if (rc) return rc;
  *cursor = slot;
  if (st.existed) {
    out->existed++;
    return 0;
  }
  out->fired++;
  if (w->obs && w->obs->on_event && (w->obs->interest & TK_EV_BIT(TK_EV_TASK_CREATED))) {
    tk_event ev = {.type = TK_EV_TASK_CREATED, .at = now, .task = st.task_id};
    ev.u.created.template_name = r->template_name;
    ev.u.created.version = r->version;
    ev.u.created.identity = identity;
    w->obs->on_event(&ev, w->ud);
  }
  return 0;
}

/* The slots of r due at now, after the missed ones are dealt with by its
 * policy; then each one fired in order. */
static void fire_schedule(tk_store *s, const tk_config *cfg, tk__cron_cache *crons,
                          const tk__schedule_rec *r, int64_t now, const watcher *w,
                          tk_schedule_pass *out, tk_err *err) {
  tk_err e = {0};
  const tk_cron *c = NULL;
  if (tk__cron_cache_get(crons, r->cron, r->zone, &c, &e) != 0) {
    keep_error(out, err, r->name, &e);
    return;
  }
  tk_schedule_missed missed = TK_MISSED_SKIP;
  tk__schedule_missed_parse(r->missed, &missed);
  int64_t cursor = r->cursor, due[TK_SCHEDULE_CATCH_UP_MAX];
  int n = 0, more = 0, rc = 0;
  if (missed == TK_MISSED_SKIP) {
    /* Slots older than the grace window were missed: step over them. */
    int64_t edge = now - TK_SCHEDULE_GRACE_MS;
    if (tk_cron_next(c, cursor) <= edge) {
      int64_t last;
      int skipped = tk_cron_slots(c, cursor, edge, &last, 1, &more);
      if ((rc = skip_to(s, r, &cursor, edge, &e)) == 0) out->skipped += skipped + more;
    }
    if (rc == 0) n = tk_cron_slots(c, cursor, now, due, SKIP_DUE_MAX, NULL);
  } else {
    n = tk_cron_slots(c, cursor, now, due, TK_SCHEDULE_CATCH_UP_MAX, &more);
    /* Beyond the bound: every slot before the oldest one kept is skipped. */
    if (more && (rc = skip_to(s, r, &cursor, due[0] - 1, &e)) == 0) out->skipped++;
  }
  for (int i = 0; rc == 0 && i < n; i++) rc = fire_slot(s, cfg, r, &cursor, due[i], now, w, out, &e);
  if (rc == TK_ESTATE) out->raced++;
  else if (rc) keep_error(out, err, r->name, &e);
  /* After a failure the due slot stays due: it is tried again at the next
   * slot to come (or the next pass), not in a tight loop. */
  int64_t next = tk_cron_next(c, rc ? now : (cursor > now ? cursor : now));
  if (next < out->next_at) out->next_at = next;
}

int tk__schedule_fire_due(tk_store *s, const tk_config *cfg, tk__cron_cache *crons,
                          int64_t now, const tk_observer *obs, void *obs_ud,
                          tk_schedule_pass *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  out->next_at = INT64_MAX;
  tk__schedule_rec *r = NULL;
  int n = 0;
  int rc = s->ops->schedule_list(s, NULL, &r, &n, err);
  if (rc) return rc;
  watcher w = {obs, obs_ud};
  for (int i = 0; i < n; i++) fire_schedule(s, cfg, crons, &r[i], now, &w, out, err);
  tk__schedule_recs_free(r, n);
  /* Every schedule got its expression: the others' are no longer used. */
  tk__cron_cache_sweep(crons);
  return 0;
}

int tk_schedule_fire_due(tk_store *s, const tk_config *cfg, int64_t now, const tk_observer *obs,
                         void *obs_ud, tk_schedule_pass *out, tk_err *err) {
  /* One pass's cache: schedules with the same expression share a parse. */
  tk__cron_cache *crons = tk__cron_cache_new();
  if (crons == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory firing schedules");
  int rc = tk__schedule_fire_due(s, cfg, crons, now, obs, obs_ud, out, err);
  tk__cron_cache_free(crons);
  return rc;
}
