#!/bin/sh
# Child tasks on PostgreSQL: tests/lib/children.sh, as children.sh runs it
# on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database children
. "$(dirname "$0")/../lib/children.sh"
ch_run
tap_done
