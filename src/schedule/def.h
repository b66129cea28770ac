/* A schedule's definition as plain data (tk_schedule_def) and the rules
 * for its values: its name, its zone, `missed` and its context.
 *
 * Which way the dependencies go: the configuration reads [schedules.NAME]
 * tables into tk_schedule_def and checks each value where the file says
 * it, with these rules and tk_cron_parse (cron.c); the running side of
 * schedules (schedules.c: add, sync, list; fire.c: the firing pass) reads
 * the configured definitions through tk_config_schedule_at. This file,
 * cron.c and tz.c call nothing of the configuration's or the store's, so
 * nothing calls back: configuration -> definition rules <- schedules. */
#ifndef TASKER_SCHEDULE_DEF_H
#define TASKER_SCHEDULE_DEF_H

#include <tasker/error.h>
#include <tasker/schedule.h>

/* "skip" / "catch_up" and back (TK_EINVAL for anything else). */
const char *tk__schedule_missed_name(tk_schedule_missed m);
int tk__schedule_missed_parse(const char *text, tk_schedule_missed *out);

/* A schedule's name, and its context (a JSON object; NULL is {}):
 * TK_EINVAL saying what is wrong. */
int tk__schedule_name_check(const char *name, tk_err *err);
int tk__schedule_context_check(const char *text, tk_err *err);

#endif
