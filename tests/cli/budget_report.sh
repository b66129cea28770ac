#!/bin/sh
# The retry budgets' states in tasker budgets, the API and the metrics on
# SQLite (tests/lib/budget_report.sh says what is checked;
# tests/postgres/budget_report.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/budget_report.sh"
br_run
tap_done
