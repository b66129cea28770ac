#!/bin/sh
# Bulk submit through the binary and the API on SQLite (tests/lib/
# submit_many.sh says what is checked; submit_many_pg.sh runs the same on
# PostgreSQL).
. "$(dirname "$0")/../lib/tap.sh"
W=$TMPDIR_TEST
cat >"$W/tasker.toml" <<TOML
[backoff]
base = "10ms"
jitter = "none"
[engine]
db = "sqlite:$W/store.db"
TOML
t() { "$TASKER" --config "$W/tasker.toml" "$@"; }
. "$(dirname "$0")/../lib/submit_many.sh"
sm_run
tap_done
