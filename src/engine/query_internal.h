/* What the operator's lists and bulk actions share (query.c, bulk.c): a
 * filter as the store reads it. */
#ifndef TASKER_ENGINE_QUERY_INTERNAL_H
#define TASKER_ENGINE_QUERY_INTERNAL_H

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

#endif
