#!/bin/sh
# The worker protocol through a real `tasker serve` and `tasker run` on a
# SQLite store (tests/lib/workers.sh says what is checked; workers_pg.sh
# runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
tasker_config $QUICK_RETRIES engine.lease=30s engine.heartbeat=1s
. "$(dirname "$0")/../lib/workers.sh"
wk_run
tap_done
