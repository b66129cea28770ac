/* Signals to wait steps (DESIGN §18) for a sender that has the data
 * parsed already: the API reads the body once (server/body_parse.c) and
 * hands its data here, where tk_step_signal would parse their text again. */
#ifndef TASKER_OPS_SIGNAL_H
#define TASKER_OPS_SIGNAL_H

#include <jansson.h>

#include <tasker/workflow.h>

/* tk_step_signal with the data as parsed JSON (NULL for an error signal):
 * r->data_json is not read. The same rules (store/rules.c:
 * tk__signal_check, tk__signal_plan), the same answer; *place (may
 * be NULL) names the body member a refusal of the body is about ("data",
 * "error" or "key"; NULL for any other refusal). */
int tk__step_signal_parsed(tk_store *s, const tk_signal_request *r, const json_t *data,
                           int64_t now, tk_signal_result *out, const char **place, tk_err *err);

#endif
