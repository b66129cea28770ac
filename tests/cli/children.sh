#!/bin/sh
# Child tasks on SQLite through the real binary (tests/lib/children.sh says
# what is checked; children_pg.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/children.sh"
ch_run
tap_done
