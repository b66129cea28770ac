#!/bin/sh
# `tasker serve` across a PostgreSQL restart (docs/api.md, issue 19): while
# the server is down, a request that reads the store answers 503 with the
# JSON error `unavailable`; once the server is back the next requests
# answer 200 from the same serve process, which never restarted; and serve
# still exits 0 on SIGTERM at the end (under ASan a leak or a bad access on
# the reconnect path makes that exit status non-zero, and the test fail).
# Restarts the harness's cluster (its directory is the URL's host).
# run-tests: alone
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database serve_restart
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PGDIR=$(printf '%s' "$TK_TEST_PG_URL" | sed -n 's/.*[?&]host=\([^&]*\).*/\1/p')
PGPORT=$(printf '%s' "$TK_TEST_PG_URL" | sed -n 's/.*[?&]port=\([0-9]*\).*/\1/p')
tasker_config
noop_template "$W/quick.toml" quick
tasker_setup "$W/quick.toml"
run t submit quick --count 3
expect_rc "submit 3 tasks" 0

serve_start || { tap_done; exit 1; }
# code PATH: the HTTP status of GET PATH, its body in $W/body.
code() { curl -s -o "$W/body" -w '%{http_code}' "$BASE$1"; }

expect_eq "before the restart: the task list answers 200" "$(code /api/v1/tasks)" 200
expect_eq "with the three tasks" "$(jq -c '[.tasks[].id]' "$W/body")" '[3,2,1]'

# Down for 6 s (fast shutdown: the server ends every connection, serve's
# included), then started again on the same port.
"$TOP/scripts/pg-cluster" restart "$PGDIR" fast 6 >"$W/restart.log" 2>&1 &
RESTART=$!
down() { [ ! -S "$PGDIR/.s.PGSQL.$PGPORT" ]; }
wait_for "the PostgreSQL server went down" 30 down
for path in /api/v1/tasks /api/v1/tasks/1; do
  expect_eq "during the outage: GET $path answers 503" "$(code "$path")" 503
  expect_eq "with the JSON error unavailable" \
    "$(jq -c '[.error.status, .error.code]' "$W/body")" '[503,"unavailable"]'
  expect_match "which says the store cannot be reached" "$(jq -r .error.message "$W/body")" \
    "the store cannot be reached"
done
expect_eq "serve is still running during the outage" "$(kill -0 "$SERVE" 2>&1 && echo yes)" yes
wait $RESTART
expect_eq "the server came back after 6 s down" "$?" 0

# Back: every request answers 200, the first one included.
expect_eq "after the restart: GET /api/v1/tasks answers 200" "$(code /api/v1/tasks)" 200
expect_eq "with the three tasks" "$(jq -c '[.tasks[].id]' "$W/body")" '[3,2,1]'
expect_eq "GET /api/v1/tasks/2 answers 200" "$(code /api/v1/tasks/2)" 200
expect_eq "naming task 2" "$(jq -c .id "$W/body")" 2
expect_eq "a submit through the API answers 201" \
  "$(curl -s -o "$W/body" -w '%{http_code}' -X POST -H 'X-Tasker-Request: 1' \
     -H 'Content-Type: application/json' -d '{"template": "quick"}' "$BASE/api/v1/tasks")" 201
expect_eq "and the task is in the store" "$(pg_sql "SELECT count(*) FROM tasks")" 4
expect_eq "serve is the same process" "$(kill -0 "$SERVE" 2>&1 && echo yes)" yes
expect_match "serve logged the lost connection" "$(cat "$W/serve.err")" "store connection lost"

serve_stop
tap_done
