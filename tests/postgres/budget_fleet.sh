#!/bin/sh
# Retry budgets across two orchestrators on one PostgreSQL database (what
# is checked: tests/lib/budget_fleet.sh; tests/cli/budget_fleet.sh runs the
# same on SQLite). Needs TK_TEST_PG_URL (scripts/run-tests starts a
# private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database budget_fleet
. "$(dirname "$0")/../lib/budget_fleet.sh"
bf_run
tap_done
