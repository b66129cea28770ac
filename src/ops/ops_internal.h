/* The operator layer's own header (src/ops/: what operators ask and do,
 * shared by the CLI and the server, above workflow/ and engine/; DESIGN
 * §12): what its lists, reports and bulk actions share. It reads the store
 * through store.h and makes JSON; nothing here reaches into the engine. */
#ifndef TASKER_OPS_INTERNAL_H
#define TASKER_OPS_INTERNAL_H

#include <jansson.h>

#include <tasker/query.h>

#include "store/store.h"

/* Longest template name a filter takes ("namespace/name"). */
#define TK__TEMPLATE_NAME_MAX 256

/* A filter as the store reads it, with the template name split. */
typedef struct tk__query {
  tk__task_query q;
  char ns[TK__TEMPLATE_NAME_MAX], name[TK__TEMPLATE_NAME_MAX];
} tk__query;

/* Check f (NULL: every task; tk_task_filter_check) and fill *out from it. */
int tk__query_of(const tk_task_filter *f, tk__query *out, tk_err *err);

/* Add task_id's family to its JSON task (family.c): "parent" (null or
 * {task, step, step_id, attempt}), "children" (every child, oldest
 * first), and on each step that started children its "children" ({id,
 * state, attempt}) and, while it waits for one, "waits_for_child". */
int tk__family_json(tk_store *s, int64_t task_id, json_t *task, tk_err *err);

#endif
