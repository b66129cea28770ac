#!/bin/sh
# tasker run --until-idle beside worker steps on SQLite (tests/lib/until_idle.sh
# says what is checked; until_idle_pg.sh runs the same on PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/until_idle.sh"
ui_run
tap_done
