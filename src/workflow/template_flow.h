/* A template's decisions and maps (DESIGN §17, docs/templates.md): the
 * step keys decides, allow_none, branches_key and map, and the choose
 * builtin's cases, checked when the template is added and written into
 * the normalized definition that store/flow.c reads. */
#ifndef TASKER_WORKFLOW_TEMPLATE_FLOW_H
#define TASKER_WORKFLOW_TEMPLATE_FLOW_H

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/toml.h>

#include "config/spec.h"

/* The step keys, in step_keys' form, that template.c's step schema lists. */
#define TK__FLOW_STEP_KEYS                                                                 \
  {.name = "decides", .kind = TK__K_STRINGS, .min = 1,                                     \
   .allowed = "a non-empty array of step names"},                                          \
  {.name = "allow_none", .kind = TK__K_BOOL},                                              \
  {.name = "branches_key", .kind = TK__K_STRING, .allowed = "a non-empty string"},        \
  {.name = "map", .kind = TK__K_OTHER}

/* Step `s` (TOML, key path `where`, "steps[N]"), already read into `step`
 * by the step schema: what the step alone shows. The keys that belong to
 * a decision need decides; decides goes with neither map nor batch; a
 * decision gets allow_none (false) and branches_key ("branches") written.
 * map is read against the ceiling [limits] map_max of cfg into
 *   {"parent", "path": [segments], ["range": true, "chunk",] "max", "max_failures"}
 * with the parent one of the step's depends_on. 0, or TK_ECONFIG
 * (TK_ENOMEM) with "FILE:L:C: ..." in at->err. */
int tk__template_flow_step(const tk__spec_where *at, const tk_config *cfg, const tk_toml_value *s,
                           const char *where, json_t *step);

/* With every step known (steps_v the TOML array, steps the JSON read from
 * it, names unique and dependencies resolved): each branch a step that
 * depends on its decider, named once; the choose builtin only on a
 * decision step, its value one placeholder (not env), its cases and
 * default arrays of the step's branches, empty only with allow_none. */
int tk__template_flow_check(const tk__spec_where *at, const tk_toml_value *steps_v,
                            json_t *steps);

#endif
