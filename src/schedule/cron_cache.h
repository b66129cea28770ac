/* Parsed cron expressions with their zones, kept across firing passes:
 * an orchestrator reads a zone's file once per expression and zone it
 * fires, not on every pass (a pass is a few microseconds per schedule
 * then, not a file read and a parse). Expressions are immutable once
 * parsed, so schedules with the same expression and zone share one.
 *
 * A zone's file is read when its expression is first got: a tzdata
 * update reaches an orchestrator when it restarts, as with cron daemons.
 * Not thread-safe: one cache per engine, used by its thread. */
#ifndef TASKER_SCHEDULE_CRON_CACHE_H
#define TASKER_SCHEDULE_CRON_CACHE_H

#include <tasker/cron.h>
#include <tasker/error.h>

typedef struct tk__cron_cache tk__cron_cache;

/* An empty cache, or NULL when out of memory. */
tk__cron_cache *tk__cron_cache_new(void);
void tk__cron_cache_free(tk__cron_cache *k);

/* The expression `cron` in `zone` (NULL or "": UTC), parsed once and
 * kept in k (owned by k: do not free it); errors as tk_cron_parse's, and
 * an expression that does not parse is not kept. */
int tk__cron_cache_get(tk__cron_cache *k, const char *cron, const char *zone,
                       const tk_cron **out, tk_err *err);

/* Drop the expressions not got since the previous sweep (schedules that
 * were removed or changed), so that the cache holds what is in use. */
void tk__cron_cache_sweep(tk__cron_cache *k);

/* How many expressions k holds (for tests). */
int tk__cron_cache_size(const tk__cron_cache *k);

#endif
