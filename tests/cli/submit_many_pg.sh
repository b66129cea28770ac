#!/bin/sh
# Bulk submit through the binary and the API on PostgreSQL:
# tests/lib/submit_many.sh, as submit_many.sh runs it on SQLite.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database bulk
cat >"$W/tasker.toml" <<TOML
[backoff]
base = "10ms"
jitter = "none"
[engine]
db = "$PG_DB_URL"
TOML
. "$(dirname "$0")/../lib/submit_many.sh"
sm_run
tap_done
