/* Schedules (tasker/schedule.h): checking, storing and listing them. The
 * firing pass is fire.c. */
#include <tasker/schedule.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/cron.h>

#include "core/civil.h"
#include "schedule/def.h"
#include "schedule/schedule_internal.h"
#include "store/store.h"

void tk__schedule_time_text(int64_t ms, int32_t offset_s, char *buf, size_t cap) {
  int64_t local = ms + (int64_t)offset_s * 1000;
  int64_t days = local / 86400000 - (local % 86400000 < 0);
  int64_t rem = local - days * 86400000;
  int y, mo, d;
  tk__civil_from_days(days, &y, &mo, &d);
  int h = (int)(rem / 3600000), mi = (int)(rem / 60000 % 60), s = (int)(rem / 1000 % 60);
  int frac = (int)(rem % 1000);
  char zone[16] = "Z";
  if (offset_s != 0)
    snprintf(zone, sizeof zone, "%c%02d:%02d", offset_s < 0 ? '-' : '+',
             abs(offset_s) / 3600 % 100, abs(offset_s) / 60 % 60);
  if (frac)
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%s", y, mo, d, h, mi, s, frac, zone);
  else
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d%s", y, mo, d, h, mi, s, zone);
}

void tk_schedule_identity(const char *name, int64_t slot, char *buf, size_t cap) {
  char t[48];
  tk__schedule_time_text(slot, 0, t, sizeof t);
  snprintf(buf, cap, "schedule:%s:%s", name, t);
}

int tk_schedule_check(tk_store *s, const tk_schedule_def *d, tk_err *err) {
  int rc = tk__schedule_name_check(d->name, err);
  if (rc) return rc;
  if ((rc = tk_schedule_zone_check(d->zone, err))) return rc;
  tk_cron *c = NULL;
  if ((rc = tk_cron_parse(d->cron ? d->cron : "", d->zone, &c, err))) return rc;
  tk_cron_free(c);
  if ((rc = tk__schedule_context_check(d->context_json, err))) return rc;
  if (d->template_name == NULL || *d->template_name == '\0')
    return tk_err_set(err, TK_EINVAL, "schedule %s: which template? none given", d->name);
  tk__template_rec t;
  if ((rc = tk__template_lookup(s, d->template_name, d->version, &t, err))) return rc;
  tk__template_rec_free(&t);
  return 0;
}

/* A row for d (borrowing its strings) from `source`, starting after now. */
static tk__schedule_rec row_of(const tk_schedule_def *d, const char *source, int64_t now) {
  tk__schedule_rec r = {
      .name = (char *)d->name,
      .cron = (char *)d->cron,
      .zone = d->zone && *d->zone ? (char *)d->zone : NULL,
      .template_name = (char *)d->template_name,
      .version = d->version && *d->version ? (char *)d->version : NULL,
      .context = (char *)(d->context_json ? d->context_json : "{}"),
      .created_at = now,
      .updated_at = now,
      .cursor = now,
      .last_fired = TK__NONE,
      .last_task_id = TK__NONE,
  };
  snprintf(r.missed, sizeof r.missed, "%s", tk__schedule_missed_name(d->missed));
  snprintf(r.source, sizeof r.source, "%s", source);
  return r;
}

int tk_schedule_add(tk_store *s, const tk_config *cfg, const tk_schedule_def *d, int64_t now,
                    tk_err *err) {
  int rc = tk_schedule_check(s, d, err);
  if (rc) return rc;
  for (size_t i = 0; cfg && i < tk_config_schedule_count(cfg); i++)
    if (strcmp(tk_config_schedule_at(cfg, i)->name, d->name) == 0)
      return tk_err_set(err, TK_EEXIST, "schedule \"%s\" is defined in the configuration "
                        "([schedules.%s]): choose another name", d->name, d->name);
  /* The context is stored as given once it is known to be an object. */
  tk__schedule_rec r = row_of(d, TK__SCHEDULE_CLI, now);
  return s->ops->schedule_put(s, &r, 1, NULL, err);
}

int tk_schedule_remove(tk_store *s, const char *name, tk_err *err) {
  tk__schedule_rec *r = NULL;
  int n = 0;
  int rc = s->ops->schedule_list(s, name, &r, &n, err);
  if (rc) return rc;
  int configured = strcmp(r[0].source, TK__SCHEDULE_CONFIG) == 0;
  tk__schedule_recs_free(r, n);
  if (configured)
    return tk_err_set(err, TK_ESTATE, "schedule \"%s\" is defined in the configuration "
                      "([schedules.%s]): remove it there; orchestrators remove it from the "
                      "store when they next start", name, name);
  return s->ops->schedule_remove(s, name, err);
}

int tk_schedule_sync(tk_store *s, const tk_config *cfg, int64_t now, tk_err *err) {
  size_t n = tk_config_schedule_count(cfg);
  tk__schedule_rec *rows = calloc(n ? n : 1, sizeof *rows);
  if (rows == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory syncing schedules");
  for (size_t i = 0; i < n; i++) rows[i] = row_of(tk_config_schedule_at(cfg, i), TK__SCHEDULE_CONFIG, now);
  int rc = s->ops->schedule_put(s, rows, (int)n, TK__SCHEDULE_CONFIG, err);
  free(rows);
  if (rc == TK_EEXIST) {
    char msg[TK_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
    rc = tk_err_set(err, TK_EEXIST, "configured schedules not synced: %s; remove one of the "
                    "two (tasker schedule remove NAME, or the [schedules.NAME] table)", msg);
  }
  return rc;
}

/* One schedule as JSON, with its next n slots after now (or from `from`). */
static json_t *schedule_json(tk__cron_cache *crons, const tk__schedule_rec *r, int64_t now,
                             int64_t from, int nnext) {
  char t[40];
  json_t *o = json_pack("{s:s, s:s, s:s?, s:s, s:s?, s:s, s:s, s:I}", "name", r->name, "cron",
                        r->cron, "zone", r->zone, "template", r->template_name, "version",
                        r->version, "missed", r->missed, "source", r->source, "created_at",
                        (json_int_t)r->created_at);
  if (o == NULL) return NULL;
  json_t *ctx = json_loads(r->context, JSON_DECODE_ANY, NULL);
  json_object_set_new(o, "context", ctx ? ctx : json_null());
  tk__schedule_time_text(r->cursor, 0, t, sizeof t);
  json_object_set_new(o, "done_until", json_string(t));
  if (r->last_fired != TK__NONE) {
    tk__schedule_time_text(r->last_fired, 0, t, sizeof t);
    json_object_set_new(o, "last_fired", json_string(t));
    json_object_set_new(o, "last_task_id", json_integer(r->last_task_id));
  } else {
    json_object_set_new(o, "last_fired", json_null());
    json_object_set_new(o, "last_task_id", json_null());
  }
  const tk_cron *c = NULL;
  tk_err perr;
  json_t *next = json_array();
  if (tk__cron_cache_get(crons, r->cron, r->zone, &c, &perr) != 0) {
    json_object_set_new(o, "error", json_string(perr.msg));
  } else {
    /* Slots still to come: after the cursor and after now; or those from
     * `from` on (a slot at `from` included), done or not. */
    int64_t at = from != INT64_MIN ? from - 1 : r->cursor > now ? r->cursor : now;
    for (int i = 0; i < nnext; i++) {
      at = tk_cron_next(c, at);
      char utc[40], local[40];
      tk__schedule_time_text(at, 0, utc, sizeof utc);
      tk__schedule_time_text(at, tk_cron_utc_offset(c, at), local, sizeof local);
      json_array_append_new(next, json_pack("{s:I, s:s, s:s}", "at", (json_int_t)at, "utc",
                                            utc, "local", local));
    }
  }
  json_object_set_new(o, "next", next);
  return o;
}

/* What a listing shows of each schedule: its next slots, and the
 * expressions parsed for them. */
typedef struct listing {
  tk__cron_cache *crons;
  int64_t now, from;
  int nnext;
} listing;

/* Append schedule r (stored or not) to arr; 0, or -1 out of memory. */
static int append(json_t *arr, const listing *l, const tk__schedule_rec *r, int stored) {
  json_t *o = schedule_json(l->crons, r, l->now, l->from, l->nnext);
  if (o == NULL) return -1;
  json_object_set_new(o, "stored", json_boolean(stored));
  return json_array_append_new(arr, o);
}

int tk_schedule_list_json(tk_store *s, const tk_config *cfg, int64_t now, int64_t from,
                          int nnext, char **json, tk_err *err) {
  *json = NULL;
  tk__schedule_rec *r = NULL;
  int n = 0;
  listing l = {tk__cron_cache_new(), now, from, nnext};
  if (l.crons == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory listing schedules");
  int rc = s->ops->schedule_list(s, NULL, &r, &n, err);
  if (rc) {
    tk__cron_cache_free(l.crons);
    return rc;
  }
  json_t *arr = json_array();
  for (int i = 0; arr && i < n; i++)
    if (append(arr, &l, &r[i], 1) != 0) {
      json_decref(arr);
      arr = NULL;
    }
  /* Configured here and not yet written by an orchestrator: shown as they
   * will be, from now. */
  for (size_t k = 0; arr && k < tk_config_schedule_count(cfg); k++) {
    const tk_schedule_def *d = tk_config_schedule_at(cfg, k);
    int found = 0;
    for (int i = 0; i < n && !found; i++) found = strcmp(r[i].name, d->name) == 0;
    tk__schedule_rec c = row_of(d, TK__SCHEDULE_CONFIG, now);
    if (!found && append(arr, &l, &c, 0) != 0) {
      json_decref(arr);
      arr = NULL;
    }
  }
  tk__schedule_recs_free(r, n);
  tk__cron_cache_free(l.crons);
  if (arr) *json = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(arr);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory listing schedules");
}
