/* Time zones from the system's tz database (TZif files under
 * /usr/share/zoneinfo, or $TZDIR), read by hand: the C library's zones are
 * reached only through the process-wide TZ variable and tzset(), which a
 * library must not touch. A zone is the file's transitions plus its footer
 * rule (RFC 8536), which covers instants after the last transition. */
#ifndef TASKER_SCHEDULE_TZ_H
#define TASKER_SCHEDULE_TZ_H

#include <stdint.h>

#include <tasker/error.h>

/* A POSIX TZ rule ("CET-1CEST,M3.5.0,M10.5.0/3"): standard offset, and
 * optionally a daylight offset with the two dates it starts and ends. */
typedef struct tk__tz_rule_date {
  char kind;   /* 'M' month.week.day, 'J' Julian day 1-365 without Feb 29, 'D' day 0-365 */
  int m, w, d; /* for 'M': month 1-12, week 1-5 (5 = last), weekday 0-6 (Sunday 0); d for J/D */
  int32_t secs; /* local time of day of the change, may be negative or past 24h */
} tk__tz_rule_date;

typedef struct tk__tz_rule {
  int32_t std_off, dst_off; /* seconds east of UTC */
  int has_dst;
  tk__tz_rule_date start, end;
} tk__tz_rule;

typedef struct tk__tz {
  char name[64];
  int64_t *at;     /* transition instants, seconds since the epoch, ascending */
  uint8_t *type;   /* the type that starts at at[i] */
  int32_t *offs;   /* each type's offset, seconds east of UTC */
  int nat, ntypes;
  int has_rule;
  tk__tz_rule rule; /* after the last transition */
} tk__tz;

/* Load zone `name` ("Europe/Berlin", "UTC"; NULL or "" is UTC). TK_ENOENT
 * when the database has no such zone, TK_EINVAL for a name that is not a
 * zone name, TK_ESYNTAX for a file that is not TZif; err names the zone. */
int tk__tz_load(const char *name, tk__tz *out, tk_err *err);
void tk__tz_free(tk__tz *z);

/* Seconds east of UTC in effect at instant t (seconds since the epoch). */
int32_t tk__tz_offset(const tk__tz *z, int64_t t);

/* The first instant after t at which the zone changes its offset or
 * abbreviation (INT64_MAX: never), and the last one at or before t
 * (INT64_MIN: none). Between two of them the offset is constant. */
int64_t tk__tz_change_after(const tk__tz *z, int64_t t);
int64_t tk__tz_change_at_or_before(const tk__tz *z, int64_t t);

/* Parse a POSIX TZ rule (a TZif footer). 0 or TK_ESYNTAX. */
int tk__tz_rule_parse(const char *text, tk__tz_rule *out);

#endif
