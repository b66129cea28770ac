#!/bin/sh
# Decisions and map in show, why, tasks, the API and /metrics on SQLite
# (tests/lib/flow_views.sh says what is checked; flow_views_pg.sh runs the
# same on PostgreSQL).
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
. "$(dirname "$0")/../lib/flow_views.sh"
flow_views_run
tap_done
