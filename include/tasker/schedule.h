/* tasker: schedules (DESIGN §16, docs/schedules.md): a cron expression
 * (tasker/cron.h) in an optional time zone that submits a template with a
 * fixed context once per slot, however many orchestrators run.
 *
 * A slot's task has the identity "schedule:NAME:SLOT" (SLOT in RFC 3339
 * UTC, "2026-11-25T01:00:00Z"), and the schedule's progress (its cursor:
 * every slot at or before it is done) moves by compare-and-set in the
 * same transaction that creates the task: two orchestrators that find the
 * same slot due create one task, and a crash leaves either both or
 * neither.
 *
 * Schedules come from the configuration ([schedules.NAME], source
 * "config", written into the store when an orchestrator starts) or from
 * tk_schedule_add (source "cli"). Names are one namespace: a name is
 * either configured or added, never both.
 *
 * Slots missed while no orchestrator ran: TK_MISSED_SKIP (the default)
 * fires none of them; a slot counts as missed once TK_SCHEDULE_GRACE_MS
 * has passed with no orchestrator getting to it. TK_MISSED_CATCH_UP fires
 * them, oldest first, at most the TK_SCHEDULE_CATCH_UP_MAX latest ones.
 */
#ifndef TASKER_SCHEDULE_H
#define TASKER_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/events.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How late an orchestrator may get to a slot and still fire it under
 * TK_MISSED_SKIP (a busy or just started orchestrator is not a gap). */
#define TK_SCHEDULE_GRACE_MS ((int64_t)60 * 1000)
/* The most missed slots TK_MISSED_CATCH_UP fires after a gap (the latest
 * ones; older ones are skipped), as Kubernetes CronJobs bound theirs. */
#define TK_SCHEDULE_CATCH_UP_MAX 100
/* Names: letters, digits, '_', '-', '.', up to this many bytes. */
#define TK_SCHEDULE_NAME_MAX 64

typedef enum tk_schedule_missed { TK_MISSED_SKIP = 0, TK_MISSED_CATCH_UP } tk_schedule_missed;

typedef struct tk_schedule_def {
  const char *name;
  const char *cron;          /* tasker/cron.h */
  const char *zone;          /* tz database name; NULL: UTC ("" is refused) */
  const char *template_name; /* "name" or "namespace/name" */
  const char *version;       /* NULL: the newest when each slot fires */
  const char *context_json;  /* a JSON object; NULL: {} */
  tk_schedule_missed missed;
} tk_schedule_def;

/* The schedules [schedules.NAME] of a configuration, in the order they
 * were first defined (strings owned by cfg). */
size_t tk_config_schedule_count(const tk_config *cfg);
const tk_schedule_def *tk_config_schedule_at(const tk_config *cfg, size_t i);

/* Where `key` (cron, zone, template, version, context or missed) of the
 * configured schedule i was set, for `tasker config show`: the value's
 * FILE:LINE:COLUMN or its --set; kind TK_CONFIG_DEFAULT when no layer set
 * it. 0, or TK_EINVAL for another key or i out of range. */
int tk_config_schedule_origin(const tk_config *cfg, size_t i, const char *key,
                              tk_config_origin *out);

/* Check a schedule's zone: NULL (UTC) or a name the system's tz database
 * has. "" is refused (TK_EINVAL: leave the zone out for UTC); an unknown
 * name is TK_ENOENT, suggesting the database's name that differs only in
 * case ("europe/berlin": did you mean "Europe/Berlin"?). */
int tk_schedule_zone_check(const char *zone, tk_err *err);

/* Check d (name, expression, zone, context, and that the template exists
 * in s); errors name the setting and value (TK_EINVAL, TK_ESYNTAX,
 * TK_ENOENT). Nothing is stored. */
int tk_schedule_check(tk_store *s, const tk_schedule_def *d, tk_err *err);

/* Check d and store it (source "cli"); its first slot is the first after
 * now. TK_EEXIST when the name is taken (stored, or configured in cfg:
 * cfg may be NULL). Nothing is stored on error. */
int tk_schedule_add(tk_store *s, const tk_config *cfg, const tk_schedule_def *d, int64_t now,
                    tk_err *err);

/* Remove the stored schedule `name` (the tasks it created stay).
 * TK_ENOENT when there is none; TK_ESTATE for a configured one (it comes
 * back when an orchestrator starts: remove it from the configuration). */
int tk_schedule_remove(tk_store *s, const char *name, tk_err *err);

/* Make the store's configured schedules those of cfg, in one transaction:
 * new ones start after now, changed ones keep their progress, ones no
 * longer configured are removed. TK_EEXIST naming the schedule when cfg
 * configures a name added with tk_schedule_add (nothing changes). */
int tk_schedule_sync(tk_store *s, const tk_config *cfg, int64_t now, tk_err *err);

/* JSON text (malloc'd) of every schedule: an array of {name, cron, zone,
 * template, version, missed, source, created_at, context, done_until,
 * last_fired, last_task_id, next: [{at, utc, local}], stored}, the stored
 * ones by name, then those that cfg (may be NULL) configures and no
 * orchestrator has written into the store yet (stored false).
 * docs/cli.md shows one. `next` is the next `nnext` slots still to come
 * (after the schedule's cursor and after now) when `from` is INT64_MIN;
 * otherwise the first `nnext` at or after `from` (ms), fired or not. */
int tk_schedule_list_json(tk_store *s, const tk_config *cfg, int64_t now, int64_t from,
                          int nnext, char **json, tk_err *err);

/* What one firing pass did. */
typedef struct tk_schedule_pass {
  int fired;    /* tasks created */
  int existed;  /* slots whose task existed already (by identity) */
  int skipped;  /* missed slots not fired (skip, or past the catch-up bound) */
  int raced;    /* schedules another orchestrator moved on meanwhile */
  int failed;   /* schedules that could not fire (errors[]: the first one) */
  int64_t next_at; /* the earliest slot still to come; INT64_MAX: none */
} tk_schedule_pass;

/* Fire every schedule's due slots at `now` (each slot and its progress in
 * one transaction; see above for missed slots). A schedule that cannot
 * fire (its template removed, a bad zone) is counted in out->failed with
 * the first such error in err, and does not stop the others; the return
 * value is nonzero only when the schedules could not be read. cfg gives
 * the steps' defaults, as for tk_task_submit. obs (may be NULL) gets
 * task.created for each task created, as tk_task_submit's observer. */
int tk_schedule_fire_due(tk_store *s, const tk_config *cfg, int64_t now, const tk_observer *obs,
                         void *obs_ud, tk_schedule_pass *out, tk_err *err);

/* The identity of schedule name's slot at `slot` (ms): "schedule:NAME:RFC3339Z"
 * into buf (cap bytes; 128 is enough for every valid name). */
void tk_schedule_identity(const char *name, int64_t slot, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
