/* Proleptic Gregorian calendar arithmetic, shared by the TOML date-time
 * reader and the HTTP-date parser. */
#ifndef TASKER_CORE_CIVIL_H
#define TASKER_CORE_CIVIL_H

#include <stdint.h>

/* Days in `month` (1-12) of `year`, leap years included. */
int tk__days_in_month(int year, int month);

/* Days since 1970-01-01 of year-month-day (any year, month 1-12). */
int64_t tk__days_from_civil(int year, int month, int day);

/* The date of day `days` since 1970-01-01. */
void tk__civil_from_days(int64_t days, int *year, int *month, int *day);

/* The year that contains `ms` milliseconds since the Unix epoch. */
int tk__year_of_ms(int64_t ms);

#endif
