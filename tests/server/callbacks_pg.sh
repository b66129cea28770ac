#!/bin/sh
# Callbacks of http steps on PostgreSQL: tests/lib/callbacks.sh, as
# callbacks.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database callbacks
. "$(dirname "$0")/../lib/callbacks.sh"
cb_run
tap_done
