#!/bin/sh
# Decisions and map in show, why, tasks, the API and /metrics on
# PostgreSQL: tests/lib/flow_views.sh, as flow_views.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database views
tasker_config $QUICK_RETRIES
. "$(dirname "$0")/../lib/flow_views.sh"
flow_views_run
tap_done
