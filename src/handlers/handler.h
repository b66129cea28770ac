/* Handlers (DESIGN §8): what runs a step's attempt. Each run function
 * fills a zeroed tk_handler_result and never touches the store. */
#ifndef TASKER_HANDLERS_HANDLER_H
#define TASKER_HANDLERS_HANDLER_H

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/engine.h>

/* builtin: noop, sleep, fail, flaky. */
void tk__builtin_run(const tk_handler_call *call, json_t *spec, const tk_clock *clock,
                     tk_handler_result *out);

/* builtin "batch" (docs/batch.md): acks or rejects each offered item by
 * the rule in `spec` (reject_every, reject_times, poison, retry_after);
 * deterministic, for tests and benchmarks. */
void tk__builtin_batch_run(const tk_batch_call *call, json_t *spec, tk_item_report *reports,
                           tk_handler_result *out);

/* command: argv without a shell (unless shell = true), the input on stdin,
 * a JSON object on stdout as results, exit codes mapped to outcomes, the
 * timeout enforced by killing the whole process group. */
void tk__command_run(const tk_handler_call *call, json_t *spec, const tk_clock *clock,
                     tk_handler_result *out);

/* A handler's retry_after value (a duration string or a number of seconds)
 * in ms; TK_EINVAL when it is neither. */
int tk__hint_from_json(json_t *v, int64_t *ms);

/* Set out to a failure with a printf-style message. */
void tk__handler_fail(tk_handler_result *out, tk_handler_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
