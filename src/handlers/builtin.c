/* The builtin handlers, for examples, tests and benchmarks. */
#include "handlers/handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <tasker/duration.h>
#include <tasker/rand.h>

void tk__handler_fail(tk_handler_result *out, tk_handler_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->error, sizeof out->error, fmt, ap);
  va_end(ap);
  out->status = status;
}

int tk__hint_from_json(json_t *v, int64_t *ms) {
  if (json_is_string(v)) return tk_duration_parse(json_string_value(v), ms, NULL) ? TK_EINVAL : 0;
  if (json_is_number(v)) return tk_duration_from_seconds(json_number_value(v), ms, NULL) ? TK_EINVAL : 0;
  return TK_EINVAL;
}

static json_int_t spec_int(json_t *spec, const char *key, json_int_t dflt) {
  json_t *v = json_object_get(spec, key);
  return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* sleep: honours the step's deadline, failing as a timeout past it. */
static void run_sleep(const tk_handler_call *call, json_t *spec, const tk_clock *clock,
                      tk_handler_result *out) {
  int64_t ms = spec_int(spec, "duration_ms", 0);
  int64_t now = tk_clock_now(clock);
  if (call->deadline_ms > 0 && now + ms > call->deadline_ms) {
    tk_clock_sleep(clock, call->deadline_ms - now);
    char d[32];
    tk_duration_format(call->deadline_ms - now, d, sizeof d);
    tk__handler_fail(out, TK_HANDLER_RETRY, "timed out after %s", d);
    out->timed_out = 1;
    return;
  }
  tk_clock_sleep(clock, ms);
}

/* fail: the first `times` attempts fail (all of them without `times`). */
static void run_fail(const tk_handler_call *call, json_t *spec, tk_handler_result *out) {
  json_int_t times = spec_int(spec, "times", -1);
  if (times >= 0 && call->attempt > times) return;
  int permanent = json_is_true(json_object_get(spec, "permanent"));
  if (times >= 0)
    tk__handler_fail(out, permanent ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY,
                     "builtin fail: failing attempt %d of the first %lld on purpose", call->attempt,
                     (long long)times);
  else
    tk__handler_fail(out, permanent ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY,
                     "builtin fail: failing every attempt on purpose (attempt %d)", call->attempt);
  out->retry_after_ms = spec_int(spec, "retry_after_ms", -1);
}

/* flaky: fails with the given probability, drawn from a generator seeded
 * by (seed, task, step, attempt) so a run can be reproduced. */
static void run_flaky(const tk_handler_call *call, json_t *spec, tk_handler_result *out) {
  json_t *pv = json_object_get(spec, "probability");
  double p = json_is_number(pv) ? json_number_value(pv) : 0.5;
  uint64_t seed = (uint64_t)spec_int(spec, "seed", 0);
  seed ^= (uint64_t)call->task_id * 0x9e3779b97f4a7c15ULL;
  for (const char *s = call->step; *s; s++) seed = (seed ^ (unsigned char)*s) * 1099511628211ULL;
  seed ^= (uint64_t)call->attempt << 32;
  tk_rand r;
  tk_rand_seed(&r, seed);
  if (tk_rand_unit(&r) < p)
    tk__handler_fail(out, TK_HANDLER_RETRY, "builtin flaky: failed (probability %g)", p);
}

void tk__builtin_run(const tk_handler_call *call, json_t *spec, const tk_clock *clock,
                     tk_handler_result *out) {
  const char *name = json_string_value(json_object_get(spec, "name"));
  if (name == NULL) name = "";
  if (strcmp(name, "noop") == 0) return;
  if (strcmp(name, "sleep") == 0) run_sleep(call, spec, clock, out);
  else if (strcmp(name, "fail") == 0) run_fail(call, spec, out);
  else if (strcmp(name, "flaky") == 0) run_flaky(call, spec, out);
  else if (strcmp(name, "batch") == 0)
    tk__handler_fail(out, TK_HANDLER_PERMANENT,
                     "builtin batch runs only in a batch step (batch = { items_from = ... })");
  else tk__handler_fail(out, TK_HANDLER_PERMANENT, "unknown builtin handler \"%s\"", name);
}
