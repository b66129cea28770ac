#!/bin/sh
# Retry budgets across two orchestrators on one SQLite file (what is
# checked: tests/lib/budget_fleet.sh; tests/postgres/budget_fleet.sh runs
# the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/budget_fleet.sh"
trap 'bg_kill_all; rm -rf "$TMPDIR_TEST"' EXIT
bf_run
tap_done
