/* tasker: durations as users write them.
 *
 * A duration is written as a number with a unit ("150ms", "2s", "5m", "1h"),
 * several of them in a row ("1m30s"), or a plain number of seconds ("30",
 * "1.5"). Values are integer milliseconds; fractions of a millisecond are
 * rounded to the nearest millisecond.
 */
#ifndef TASKER_DURATION_H
#define TASKER_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parse `text` into *ms (>= 0). Returns 0, or TK_ESYNTAX / TK_ERANGE with a
 * message in `err` naming the text and the accepted forms. *ms is untouched
 * on error. */
int tk_duration_parse(const char *text, int64_t *ms, tk_err *err);

/* Convert a number of seconds (as a TOML float or integer would give it) to
 * ms. Returns TK_ERANGE for negative, non-finite or overflowing values. */
int tk_duration_from_seconds(double seconds, int64_t *ms, tk_err *err);

/* Write `ms` in the shortest readable form ("0ms", "150ms", "1.5s", "2m",
 * "1h30m", "2h0m0.25s") into buf; returns what snprintf would. Negative
 * values are written with a leading '-'. */
int tk_duration_format(int64_t ms, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
