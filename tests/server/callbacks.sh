#!/bin/sh
# Callbacks of http steps on SQLite through the real binaries and a real
# local http service (tests/lib/callbacks.sh says what is checked;
# callbacks_pg.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/callbacks.sh"
cb_run
tap_done
