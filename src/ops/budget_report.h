/* The retry budgets' report as records (src/ops/budgets.c): what
 * tk_budgets_json writes as JSON and the store-wide metrics
 * (engine/metrics_store.c) as tasker_store_budget_* series, read once. */
#ifndef TASKER_OPS_BUDGET_REPORT_H
#define TASKER_OPS_BUDGET_REPORT_H

#include <tasker/budget.h>
#include <tasker/config.h>

#include "store/store.h"

/* One stored state (the members of tk_budgets_json's objects). */
typedef struct tk__budget_report {
  char name[TK__BUDGET_KEY_MAX + 1], host[TK__BUDGET_KEY_MAX + 1];
  int has_host;   /* 0: the budget's shared state */
  int configured; /* 1 or 0: whether the configuration has it; -1: no configuration given */
  int per_host;   /* 1, 0, or -1: not known */
  int known;      /* 0: neither configured nor readable: the figures below are 0 */
  tk_retry_budget_config cfg;
  int64_t available;                /* retries allowed at now */
  int64_t next_retry_at;            /* with none available, when one is; else -1 */
  int64_t reserved, reserved_until; /* live reservations; the latest's time after now, or -1 */
  uint64_t first_attempts, retries, deferred, brought_earlier;
  int64_t updated_at;
} tk__budget_report;

/* Every state the store keeps, by key, at now, read under cfg (NULL: each
 * under the figures it was written with): a malloc'd array (free()). A
 * store without budget_list has none. */
int tk__budget_report_read(tk_store *s, const tk_config *cfg, int64_t now,
                           tk__budget_report **out, int *n, tk_err *err);

#endif
