/* tasker: cron expressions and their fire times (DESIGN §16).
 *
 * An expression is the five standard fields, minute hour day-of-month
 * month day-of-week, each `*`, a number, a range `a-b`, one of those with
 * a step `/n` (`a/n` runs from a to the end), or a list of those separated
 * by commas; months and weekdays may be names (JAN-DEC, SUN-SAT; 0 and 7
 * are both Sunday). Or one of the shortcuts @yearly (@annually), @monthly,
 * @weekly, @daily (@midnight), @hourly.
 *
 * As in Vixie cron, when both day fields are restricted (neither starts
 * with `*`), a day matches when either does; otherwise only the
 * restricted one counts.
 *
 * Fire times are computed in a time zone from the system's tz database
 * (UTC when none is given). Across a daylight-saving change:
 *  - a local time that does not exist (the hour skipped in spring) fires
 *    once, at the instant the clocks change;
 *  - a local time that happens twice (the hour repeated in autumn) fires
 *    once, at its first occurrence, unless the hour field is `*` (or
 *    says every hour another way: `0-23`, or `*` with step 1): a schedule
 *    that runs every hour keeps running through both. Any other hour
 *    field, every other hour (`*` with step 2) included, fires at the
 *    first occurrence only.
 * So a daily job runs once a day on both change days, and "every 15
 * minutes" never stops for an hour.
 */
#ifndef TASKER_CRON_H
#define TASKER_CRON_H

#include <stdint.h>

#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_cron tk_cron;

/* Parse `expr` for zone `tz` ("Europe/Berlin"; NULL or "" for UTC). Errors:
 * TK_ESYNTAX naming the field, its column (1-based, in err->msg as
 * "column N") and what was expected; TK_EINVAL for an expression that can
 * never fire (e.g. "0 0 30 2 *": February has no 30th); TK_ENOENT for an
 * unknown zone. */
int tk_cron_parse(const char *expr, const char *tz, tk_cron **out, tk_err *err);
void tk_cron_free(tk_cron *c);

/* The first fire time strictly after `after` (ms since the epoch), in ms
 * (always a whole minute, or the instant of a DST change). Never fails for
 * a parsed expression: every one fires within 28 years (leap days). */
int64_t tk_cron_next(const tk_cron *c, int64_t after);

/* The fire times in (after, until], oldest first: the latest `max` of
 * them into out (max >= 1), returning how many; *more (may be NULL) is 1
 * when earlier ones in the range were left out. A long range costs about
 * max steps of tk_cron_next, not one per slot in it. */
int tk_cron_slots(const tk_cron *c, int64_t after, int64_t until, int64_t *out, int max,
                  int *more);

/* Seconds east of UTC in the expression's zone at instant `at` (ms), to
 * show a fire time as local time. */
int32_t tk_cron_utc_offset(const tk_cron *c, int64_t at);

/* The expression as given (shortcuts as written) and the zone's name. */
const char *tk_cron_text(const tk_cron *c);
const char *tk_cron_zone(const tk_cron *c);

#ifdef __cplusplus
}
#endif
#endif
