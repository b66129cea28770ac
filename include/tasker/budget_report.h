/* tasker: the retry budgets' states as operators see them (DESIGN §14,
 * docs/retry.md, docs/cli.md: tasker budgets).
 *
 * The store keeps one state per budget, and with per_host one per budget
 * and host (src/engine/budgets.c), shared by every orchestrator. This
 * reads them all, as `tasker budgets`, GET /api/v1/budgets, the dashboard
 * and the tasker_store_budget_* metrics show them. */
#ifndef TASKER_BUDGET_REPORT_H
#define TASKER_BUDGET_REPORT_H

#include <stdint.h>

#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* JSON text (malloc'd) of every budget state the store keeps, by name then
 * host: an array of {name, host (null: the budget's shared state),
 * configured (whether cfg has [budgets.NAME]; cfg NULL: null), per_host,
 * ratio, window_ms, min_per_second (cfg's when it configures the budget,
 * which the next update applies; else those the state was last written
 * under; null when neither is known), available (retries the budget
 * allows at now, asked one after another), next_retry_at (with none
 * available: when one would be; else null), reserved (deferred retries
 * holding a reservation not yet settled), reserved_until (the latest such
 * reservation's time when after now, else null), first_attempts, retries,
 * deferred, brought_earlier (counted in the state since it began) and
 * updated_at}. Reads the store once and changes nothing. */
int tk_budgets_json(tk_store *s, const tk_config *cfg, int64_t now, char **json, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
