#!/bin/sh
# Queues and priority through the binary and the API on SQLite
# (tests/lib/queues.sh says what is checked; queues_pg.sh runs the same on
# PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/queues.sh"
q_run
tap_done
