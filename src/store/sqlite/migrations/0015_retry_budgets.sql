-- Retry budgets kept in the store (DESIGN §14, docs/retry.md): one row per
-- budget (and, with per_host, per budget and host) that a step's retry
-- named, holding the budget's whole state (src/retry/budget.c:
-- tk_retry_budget_save, and who holds its reservations: 2,016 bytes), so every
-- orchestrator sharing the store applies its first attempts and retries to
-- the same state, one transaction at a time (budget_update). The rows of
-- budgets no longer configured stay: they are small, one per name and
-- host, and a budget configured again picks its state up.
CREATE TABLE retry_budgets (
  key TEXT PRIMARY KEY,
  state BLOB NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
