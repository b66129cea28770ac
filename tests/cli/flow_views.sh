#!/bin/sh
# Decisions and map in show, why, tasks, the API and /metrics on SQLite
# (tests/lib/flow_views.sh says what is checked; flow_views_pg.sh runs the
# same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
tasker_config $QUICK_RETRIES
. "$(dirname "$0")/../lib/flow_views.sh"
flow_views_run
tap_done
