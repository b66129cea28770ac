#!/bin/sh
# tests/lib/serve_reaps.sh on a SQLite store.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
. "$(dirname "$0")/../lib/serve_reaps.sh"
sr_run
tap_done
