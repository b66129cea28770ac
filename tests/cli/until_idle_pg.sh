#!/bin/sh
# tasker run --until-idle beside worker steps on PostgreSQL:
# tests/lib/until_idle.sh, as until_idle.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database until_idle
. "$(dirname "$0")/../lib/until_idle.sh"
ui_run
tap_done
