#!/bin/sh
# Bulk submit through the binary and the API on SQLite (tests/lib/
# submit_many.sh says what is checked; submit_many_pg.sh runs the same on
# PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
tasker_config $QUICK_RETRIES
. "$(dirname "$0")/../lib/submit_many.sh"
sm_run
tap_done
