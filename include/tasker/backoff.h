/* tasker: the one backoff policy (DESIGN §6).
 *
 * tk_backoff_delay() is the only function in tasker that turns a failure
 * into a delay. It is pure: the result depends only on its arguments and the
 * state of the injected random source. It never allocates and is defined
 * for every attempt number from 1 to INT32_MAX and every multiplier >= 1.
 */
#ifndef TASKER_BACKOFF_H
#define TASKER_BACKOFF_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/error.h>
#include <tasker/rand.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TK_BACKOFF_SCHEDULE_MAX 32

typedef enum tk_jitter {
  TK_JITTER_NONE = 0,
  TK_JITTER_PROPORTIONAL, /* uniform in [d(1-f), d(1+f)] */
  TK_JITTER_FULL,         /* uniform in [0, d] */
  TK_JITTER_EQUAL,        /* uniform in [d/2, d] */
  TK_JITTER_DECORRELATED  /* uniform in [base, 3 * previous delay] */
} tk_jitter;

/* Where a delay came from; stored with each attempt. */
typedef enum tk_delay_source {
  TK_DELAY_COMPUTED = 0, /* the policy */
  TK_DELAY_SERVER,       /* a handler's hint or Retry-After */
  TK_DELAY_IN_CALL,      /* a batch step's in-call retries ran out (docs/batch.md) */
  TK_DELAY_BUDGET        /* a retry budget deferred the retry (DESIGN §14) */
} tk_delay_source;

typedef struct tk_backoff_policy {
  int64_t schedule_ms[TK_BACKOFF_SCHEDULE_MAX]; /* explicit first delays */
  int schedule_len;                             /* 0..TK_BACKOFF_SCHEDULE_MAX */
  int64_t base_ms;        /* first delay when the schedule is empty; >= 0 */
  double multiplier;      /* growth past the schedule; >= 1 */
  int64_t max_delay_ms;   /* cap, applied after jitter; >= min_delay_ms */
  int64_t min_delay_ms;   /* floor, applied after jitter; >= 0 */
  tk_jitter jitter;
  double jitter_fraction; /* for TK_JITTER_PROPORTIONAL, in [0, 1] */
  int64_t max_server_delay_ms; /* cap on server-requested delays; >= 0 */
} tk_backoff_policy;

/* What one computation produced, for callers that report it. */
typedef struct tk_backoff_result {
  int64_t raw_ms;    /* step 1: schedule or geometric growth, saturated */
  int64_t capped_ms; /* step 2: min(raw, max_delay) */
  int64_t delay_ms;  /* the delay to use */
  tk_delay_source source;
} tk_backoff_result;

/* Fill `p` with the built-in default policy: no schedule, base 1s,
 * multiplier 2, max 5m, min 0, proportional jitter 0.1, server cap 1h.
 * Configuration starts from these; nothing else hard-codes a delay. */
void tk_backoff_policy_default(tk_backoff_policy *p);

/* Check the invariants stated on the fields; 0 or TK_ERANGE with a message
 * naming the field, its value and what is allowed. */
int tk_backoff_policy_validate(const tk_backoff_policy *p, tk_err *err);

/* raw(n): schedule[n-1] while n <= schedule_len, then the last schedule
 * entry times multiplier^(n - schedule_len); with an empty schedule,
 * base * multiplier^(n - 1). Saturates at INT64_MAX. Requires n >= 1. */
int64_t tk_backoff_raw(const tk_backoff_policy *p, int32_t n);

/* The delay before retrying after the n-th failure (n >= 1).
 *  - hint_ms >= 0 is a server-requested delay: the result is
 *    min(hint_ms, max_server_delay_ms), unjittered, source SERVER.
 *    hint_ms < 0 means no hint.
 *  - prev_delay_ms is the delay chosen after the previous failure of the
 *    same step (0 if none); only decorrelated jitter reads it.
 *  - rng supplies the jitter; it is not touched for TK_JITTER_NONE or a hint.
 * Fills *out (may be NULL) and returns the delay. Requires a valid policy. */
int64_t tk_backoff_delay(const tk_backoff_policy *p, int32_t n, int64_t prev_delay_ms,
                         int64_t hint_ms, tk_rand *rng, tk_backoff_result *out);

/* ---- previews (`tasker backoff`, GET /api/v1/backoff) ------------------ */

/* One row of a preview: the delay after failure `attempt`. raw_ms and
 * capped_ms are the policy's steps 1 and 2 (jitter aside); min, median
 * and max are over the preview's samples. */
typedef struct tk_backoff_preview_row {
  int32_t attempt;
  int64_t raw_ms, capped_ms;
  int64_t min_ms, median_ms, max_ms;
} tk_backoff_preview_row;

/* The delays a valid policy gives after failures 1..attempts, each over
 * `samples` independent draws (decorrelated jitter draws whole sequences,
 * since each delay depends on the one before), from a generator seeded
 * with `seed`: the same arguments give the same rows. rows has `attempts`
 * slots. 0, or TK_ENOMEM. */
int tk_backoff_preview(const tk_backoff_policy *p, int32_t attempts, int64_t samples,
                       uint64_t seed, tk_backoff_preview_row *rows, tk_err *err);

/* The preview as JSON text (malloc'd):
 *   {"profile": NAME, "policy": {"schedule_ms": [...], "base_ms",
 *    "multiplier", "max_delay_ms", "min_delay_ms", "jitter",
 *    "jitter_fraction", "max_server_delay_ms"}, "seed", "samples",
 *    "delays": [{"attempt", "raw_ms", "capped_ms", "min_ms", "median_ms",
 *    "max_ms"}]}
 * (docs/api.md). profile may be NULL (JSON null). */
int tk_backoff_preview_json(const char *profile, const tk_backoff_policy *p, int32_t attempts,
                            int64_t samples, uint64_t seed, char **json, tk_err *err);

/* Set p's schedule from "1s,2s,4s" (an empty text: no schedule). TK_EINVAL
 * naming the value and what was expected; p is unchanged then. */
int tk_backoff_schedule_parse(const char *text, tk_backoff_policy *p, tk_err *err);

/* "none", "proportional", ... and back. parse returns 0 or TK_EINVAL. */
const char *tk_jitter_name(tk_jitter j);
int tk_jitter_parse(const char *name, tk_jitter *out);

/* "computed", "server", "in_call", "budget". */
const char *tk_delay_source_name(tk_delay_source s);

/* Parse an HTTP Retry-After value (RFC 9110 §10.2.3) relative to now_ms:
 * delay-seconds, or an HTTP-date in IMF-fixdate, RFC 850 or asctime form.
 * Surrounding spaces and tabs are ignored. A date in the past gives 0; a
 * delay too long to count in int64 milliseconds gives INT64_MAX (the
 * longest wait: the caller caps it, as it caps any hint).
 * Returns 0 and sets *delay_ms, or TK_ENOHINT with a message saying why the
 * value is unusable (empty, negative, fractional, malformed);
 * *delay_ms is untouched on error. `text` need not be NUL-terminated. */
int tk_retry_after_parse(const char *text, size_t len, int64_t now_ms, int64_t *delay_ms,
                         tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
