#!/bin/sh
# Deadlines on SQLite through the real binary (tests/lib/deadlines.sh says
# what is checked; deadlines_pg.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/deadlines.sh"
dl_run
tap_done
