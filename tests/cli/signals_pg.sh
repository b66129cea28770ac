#!/bin/sh
# Wait steps and signals on PostgreSQL: tests/lib/signals.sh, as signals.sh
# runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database signals
. "$(dirname "$0")/../lib/signals.sh"
sg_run
tap_done
