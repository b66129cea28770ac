/* The wait handler (DESIGN §18, issue 24): { kind = "wait", timeout =
 * "72h" } waits for a signal (`tasker signal`, POST .../signal) holding no
 * worker and no lease. The engine never runs it: a claim of a wait step
 * parks it in the store (engine/waits.c, store op step_wait), and the
 * signal's data become its results, or its error a failed attempt; at
 * its timeout it fails as a `timeout` attempt under the retry policy. The
 * timeout is required: every wait ends. */
#include "handlers/handler.h"

static const tk__key keys[] = {
    {.name = "kind", .kind = TK__K_STRING, .allowed = "a handler kind"},
    {.name = "timeout", .kind = TK__K_DURATION, .json = "timeout_ms", .min = 1,
     .max = INT64_MAX / 4, .allowed = "a duration > 0, such as \"72h\"",
     .missing = "a wait handler needs its timeout, such as timeout = \"72h\": how long the "
                "step waits for its signal before the attempt fails as a timeout"},
};

static const tk__schema schema = {"wait", keys, sizeof keys / sizeof keys[0]};

static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  return tk__spec_read(&site->where, &schema, table, spec);
}

/* Never called by an engine (it parks wait steps instead); a stored step
 * that came here anyway fails for good rather than pretend to wait. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  (void)step;
  (void)call;
  tk__handler_fail(out, TK_HANDLER_PERMANENT,
                   "a wait step was handed to a handler: it waits for a signal "
                   "(tasker signal) and is never run");
}

const tk__handler_kind tk__wait_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "wait",
    .takes_input = 0,
    .validate = validate,
    .run = run,
};
