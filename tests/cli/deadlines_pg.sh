#!/bin/sh
# Deadlines on PostgreSQL: tests/lib/deadlines.sh, as deadlines.sh runs it
# on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database deadlines
. "$(dirname "$0")/../lib/deadlines.sh"
dl_run
tap_done
