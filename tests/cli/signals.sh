#!/bin/sh
# Wait steps and signals on SQLite through the real binary (tests/lib/signals.sh
# says what is checked; signals_pg.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/signals.sh"
sg_run
tap_done
