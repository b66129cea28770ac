/* The running side's shared helpers (schedules.c, fire.c); the rules for
 * a definition's values are def.h. */
#ifndef TASKER_SCHEDULE_INTERNAL_H
#define TASKER_SCHEDULE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/schedule.h>

#include "schedule/cron_cache.h"

/* The sources of a stored schedule (tk__schedule_rec.source). */
#define TK__SCHEDULE_CONFIG "config"
#define TK__SCHEDULE_CLI "cli"

/* ms as RFC 3339 at offset_s seconds east of UTC ("Z" for 0), with
 * milliseconds only when there are some. */
void tk__schedule_time_text(int64_t ms, int32_t offset_s, char *buf, size_t cap);

/* tk_schedule_fire_due with the caller's cache of parsed expressions
 * (an engine keeps one across its passes, so that zone files are read
 * once, not on every pass); the pass sweeps from it the expressions no
 * schedule uses any more. */
int tk__schedule_fire_due(tk_store *s, const tk_config *cfg, tk__cron_cache *crons,
                          int64_t now, const tk_observer *obs, void *obs_ud,
                          tk_schedule_pass *out, tk_err *err);

#endif
