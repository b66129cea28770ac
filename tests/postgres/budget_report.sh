#!/bin/sh
# The retry budgets' states in tasker budgets, the API and the metrics on
# PostgreSQL (what is checked: tests/lib/budget_report.sh;
# tests/cli/budget_report.sh runs the same on SQLite). Needs
# TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database budget_report
. "$(dirname "$0")/../lib/budget_report.sh"
br_run
tap_done
