/* Batch steps at submit (DESIGN §9, docs/batch.md): resolving a step's
 * batch settings and reading its items from the task's context. */
#ifndef TASKER_WORKFLOW_BATCH_ITEMS_H
#define TASKER_WORKFLOW_BATCH_ITEMS_H

#include <jansson.h>

#include <tasker/config.h>

#include "store/store.h"

/* If template step `step` (its definition JSON) is a batch step, fill the
 * batch fields of *ns: the settings from its batch table, else from the
 * configuration's [batch] table, and the items from the array at context
 * key items_from of `context`. Each element is a non-empty string key or
 * an object with one; keys are unique within the step. A step without a
 * batch table is left alone. Returns 0, or TK_EINVAL naming the context
 * path, the value and what was expected (nothing is allocated then), or
 * TK_ENOMEM. The keys borrow from `context`, which must outlive *ns. */
int tk__batch_step_resolve(json_t *step, json_t *context, const tk_config *cfg,
                           tk__new_step *ns, tk_err *err);

/* Free what tk__batch_step_resolve allocated in *ns; safe on any step. */
void tk__batch_step_free(tk__new_step *ns);

#endif
