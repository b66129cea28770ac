/* Schedules' shared helpers (schedules.c, fire.c, the configuration). */
#ifndef TASKER_SCHEDULE_INTERNAL_H
#define TASKER_SCHEDULE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/schedule.h>

/* The sources of a stored schedule (tk__schedule_rec.source). */
#define TK__SCHEDULE_CONFIG "config"
#define TK__SCHEDULE_CLI "cli"

/* ms as RFC 3339 at offset_s seconds east of UTC ("Z" for 0), with
 * milliseconds only when there are some. */
void tk__schedule_time_text(int64_t ms, int32_t offset_s, char *buf, size_t cap);

/* "skip" / "catch_up" and back (TK_EINVAL for anything else). */
const char *tk__schedule_missed_name(tk_schedule_missed m);
int tk__schedule_missed_parse(const char *text, tk_schedule_missed *out);

/* A schedule's name, and its context (a JSON object; NULL is {}):
 * TK_EINVAL saying what is wrong. */
int tk__schedule_name_check(const char *name, tk_err *err);
int tk__schedule_context_check(const char *text, tk_err *err);

#endif
