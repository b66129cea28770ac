/* The worker handler (DESIGN §19, issue 23): { kind = "worker", queue =
 * "images" } names a queue that outside workers pull from through
 * `tasker serve` (engine/remote.h). The queue is copied into the step's
 * row at submit (steps.worker_queue), which keeps the step out of every
 * orchestrator's claim: no orchestrator ever runs it. */
#include "handlers/handler.h"

#include <stdio.h>
#include <string.h>

/* The longest queue name. */

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "queue", .kind = TK__K_OTHER,
     .missing = "a worker handler needs the queue its workers claim from, such as "
                "queue = \"images\""},
};

static const tk__schema schema = {"worker", keys, sizeof keys / sizeof keys[0]};


static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  int rc = tk__spec_read(&site->where, &schema, table, spec);
  if (rc) return rc;
  size_t len;
  const char *name;
  if ((rc = tk__spec_queue_name(&site->where, "queue", tk_toml_get(table, "queue"), &name,
                                &len)))
    return rc;
  if (json_object_set_new(spec, "queue", json_stringn(name, len)) != 0)
    return tk_err_set(site->where.err, TK_ENOMEM, "out of memory reading %s", site->where.file);
  return 0;
}

/* Never called by an orchestrator's claim (the store keeps worker steps
 * out of it); should a stored step ever come here, its attempt fails for
 * good rather than pretending to run. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  (void)call;
  const char *queue = json_string_value(json_object_get(step->spec, "queue"));
  tk__handler_fail(out, TK_HANDLER_PERMANENT,
                   "a worker step (queue \"%s\") was handed to an orchestrator: it is run only "
                   "by outside workers through `tasker serve`",
                   queue ? queue : "");
}

const tk__handler_kind tk__worker_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "worker",
    .takes_input = 1,
    .validate = validate,
    .run = run,
};
