#!/bin/sh
# Decisions and map in show, why, tasks, the API and /metrics on
# PostgreSQL: tests/lib/flow_views.sh, as flow_views.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database views
cat >"$W/tasker.toml" <<TOML
[backoff]
base = "10ms"
jitter = "none"
[engine]
db = "$PG_DB_URL"
TOML
. "$(dirname "$0")/../lib/flow_views.sh"
flow_views_run
tap_done
