#!/bin/sh
# The worker protocol through a real `tasker serve` and `tasker run` on
# PostgreSQL (the private cluster of scripts/run-tests): tests/lib/
# workers.sh, as workers.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database workers
tasker_config $QUICK_RETRIES engine.lease=30s engine.heartbeat=1s
. "$(dirname "$0")/../lib/workers.sh"
wk_run
tap_done
