#!/bin/sh
# The API's lists on PostgreSQL (docs/api.md): `tasker serve` over a
# PostgreSQL store holding tasks in error (a step exhausted after its
# retries) and complete answers the lists as on SQLite: filters, pages
# followed by their cursors, the failed steps, the status, a bad cursor,
# a bulk retry by filter, an empty filter refused. Needs TK_TEST_PG_URL.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database api
tasker_config $QUICK_RETRIES
etl_template "$W/etl.toml"
noop_template "$W/quick.toml" quick
tasker_setup "$W/etl.toml" "$W/quick.toml"
for name in etl quick etl quick; do
  run t submit "$name"
  expect_rc "submit $name" 0
done
run t run --until-idle --workers 0
expect_rc "run until idle" 0

serve_start || { tap_done; exit 1; }
get() { curl -s "$BASE$1"; }

expect_eq "status: backend and tasks in error" \
  "$(get /api/v1/status | jq -c '[.backend, .tasks.error, .tasks.complete]')" '["postgresql",2,2]'
expect_eq "tasks newest first" "$(get /api/v1/tasks | jq -c '[.tasks[].id], .next_cursor')" \
  '[4,3,2,1]
null'
expect_eq "state=error" "$(get '/api/v1/tasks?state=error' | jq -c '[.tasks[].id]')" '[3,1]'
expect_eq "template=etl" "$(get '/api/v1/tasks?template=etl' | jq -c '[.tasks[].id]')" '[3,1]'
expect_eq "q: text of the last error" \
  "$(get '/api/v1/tasks?q=failing%20every' | jq -c '[.tasks[] | [.id, .steps_error, .last_error != null]]')" \
  '[[3,1,true],[1,1,true]]'
expect_eq "since=1h" "$(get '/api/v1/tasks?since=1h' | jq '.tasks | length')" 4
expect_eq "since a future time" \
  "$(get '/api/v1/tasks?since=2100-01-01T00:00:00Z' | jq '.tasks | length')" 0

# Pages of one, each cursor followed: every task once, in order.
ids=""
cursor=""
for i in 1 2 3 4 5 6; do
  page=$(get "/api/v1/tasks?limit=1${cursor:+&cursor=$cursor}")
  ids="$ids $(echo "$page" | jq -r '.tasks[].id')"
  cursor=$(echo "$page" | jq -r '.next_cursor // empty')
  [ -n "$cursor" ] || break
done
expect_eq "pages of one" "$ids" " 4 3 2 1"

expect_eq "failed steps" \
  "$(get /api/v1/steps | jq -c '[.steps[] | [.task, .step, .attempts, .exhausted]], .next_cursor')" \
  '[[3,"load",2,true],[1,"load",2,true]]
null'
expect_eq "a bad cursor" "$(get '/api/v1/tasks?cursor=x1' | jq -c '[.error.status, .error.code, .error.param]')" \
  '[400,"bad_cursor","cursor"]'
post() { curl -s -X POST -H 'X-Tasker-Request: 1' -d "$2" "$BASE/api/v1/actions/$1"; }
# No condition would reach every task: refused unless "all" is true.
expect_eq "bulk cancel with an empty filter is refused" \
  "$(post cancel '{"filter": {}}' | jq -c '[.error.status, .error.code, .error.param]')" \
  '[400,"bad_filter","filter"]'
expect_eq "nothing was cancelled" "$(pg_sql "SELECT count(*) FROM tasks WHERE state = 'cancelled'")" 0
expect_eq "bulk retry by filter" \
  "$(curl -s -X POST -H 'X-Tasker-Request: 1' -d '{"filter": {"state": "error"}}' "$BASE/api/v1/actions/retry" |
     jq -c '[.matched, .done, .failed]')" '[2,2,0]'
expect_eq "the retried steps wait for their run" \
  "$(pg_sql "SELECT count(*) FROM steps WHERE name = 'load' AND state = 'waiting_for_retry'")" 2

# Run the retried steps into error again: a task in error may be cancelled
# by id and by filter alike, and its JSON says so.
run t run --until-idle --workers 0
expect_rc "run the retries" 0
expect_eq "task 1 in error may be cancelled" "$(get /api/v1/tasks/1 | jq -c '[.state, .cancellable]')" \
  '["error",true]'
expect_eq "cancel task 1 by id" \
  "$(curl -s -X POST -H 'X-Tasker-Request: 1' "$BASE/api/v1/tasks/1/cancel" | jq -r .task_state)" cancelled
expect_eq "cancel the tasks in error by filter" \
  "$(post cancel '{"filter": {"state": "error"}}' | jq -c '[.matched, .done, .failed]')" '[1,1,0]'
expect_eq "both are cancelled, and say they may not be again" \
  "$(get /api/v1/tasks/3 | jq -c '[.state, .cancellable]')/$(pg_sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM tasks WHERE state = 'cancelled'")" \
  '["cancelled",false]/1,3'

serve_stop
tap_done
