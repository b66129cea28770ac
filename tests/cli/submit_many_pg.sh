#!/bin/sh
# Bulk submit through the binary and the API on PostgreSQL:
# tests/lib/submit_many.sh, as submit_many.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database bulk
tasker_config $QUICK_RETRIES
. "$(dirname "$0")/../lib/submit_many.sh"
sm_run
tap_done
