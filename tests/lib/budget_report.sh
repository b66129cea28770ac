# The retry budgets' states as operators see them (issue 23 item 4): the
# states the store keeps, shared by every orchestrator, in `tasker
# budgets` (text and --json), GET /api/v1/budgets and the
# tasker_store_budget_* series of /metrics, one report on either backend
# ($TK_DB). Budget "api" (ratio 0, a 10 minute window, 0.005/s: 3 retries
# a window) is named by five tasks whose step always fails, with two
# attempts each: the budget lets 3 retries go at once and defers 2 to
# about a minute later. Budget "edge" is per host: an http step to a
# closed port of 127.0.0.1 keeps its state under that host. An
# orchestrator runs until both show in the store, then stops, leaving the
# deferred retries waiting. Sourced after tap.sh and config.sh (and pg.sh
# for PostgreSQL) by tests/cli/budget_report.sh and
# tests/postgres/budget_report.sh; br_run runs it all. Needs curl and jq.
. "$(dirname "$0")/../lib/serve.sh"

# Only the fields a clock does not move, as jq prints them.
br_fields() {
  jq -c '[.[] | [.name, .host, .configured, .per_host, .ratio, .window_ms, .min_per_second,
    .first_attempts, .retries, .deferred, .reserved]]'
}

# br_like NAME TEXT ERE: TEXT matches the extended regular expression ERE.
br_like() {
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then tap_ok "$1"
  else tap_fail "$1" "text: $2" "does not match: $3"; fi
}

br_config() {
  tasker_config engine.max_attempts=2 backoff.base=10ms backoff.jitter=none \
    budgets.api.ratio=0 budgets.api.window=10m budgets.api.min_per_second=0.005 \
    budgets.edge.ratio=0 budgets.edge.window=10m budgets.edge.min_per_second=0.005 \
    budgets.edge.per_host=true
}

br_templates() {
  flaky_api_template "$W/flaky_api.toml"
  cat >"$W/edge.toml" <<'TOML'
name = "edge"
version = "1"
[[steps]]
name = "call"
handler = { kind = "http", url = "http://127.0.0.1:9/", method = "GET" }
retry = { budget = "edge" }
TOML
}

# Both states stored, with api's 2 deferrals and edge's first attempt.
br_stored() {
  [ "$(t budgets --json 2>/dev/null | jq -c '[.[] | [.name, .deferred, .first_attempts]]')" = \
    '[["api",2,5],["edge",0,1]]' ]
}

br_cli() {
  now=$(($(date +%s) * 1000))
  run t budgets --json
  expect_rc "tasker budgets --json" 0
  expect_eq "tasker budgets --json: each state, its figures and counts" \
    "$(printf '%s' "$OUT" | br_fields)" \
    '[["api",null,true,false,0,600000,0.005,5,5,2,2],["edge","127.0.0.1:9",true,true,0,600000,0.005,1,1,0,0]]'
  expect_eq "api: no retry left now (2 wait for their reserved time)" \
    "$(printf '%s' "$OUT" | jq -c '.[0].available')" 0
  expect_eq "api: reserved until about a window after its retries, the next retry then or later" \
    "$(printf '%s' "$OUT" | jq -c --argjson now "$now" '.[0] | [.reserved_until > .updated_at,
      .reserved_until <= .updated_at + 601000, .next_retry_at >= .reserved_until,
      .updated_at <= $now + 1000]')" '[true,true,true,true]'
  expect_eq "edge: its host's state has 2 retries left of its 3, none reserved" \
    "$(printf '%s' "$OUT" | jq -c '.[1] | [.available, .next_retry_at, .reserved_until]')" \
    '[2,null,null]'
  BR_JSON=$OUT
  run t budgets
  expect_rc "tasker budgets" 0
  expect_eq "tasker budgets: its header" "$(printf '%s\n' "$OUT" | head -n 1 | tr -s ' ')" \
    "BUDGET HOST RATIO FLOOR WINDOW LEFT NEXT RESERVED UNTIL DEFERRED EARLIER UPDATED"
  br_like "tasker budgets: api's line (ratio 0, 0.005/s, 10m, none left, next in about 10m, 2 reserved, 2 deferred)" \
    "$(printf '%s\n' "$OUT" | grep '^api ' | tr -s ' ')" \
    '^api - 0 0.005 10m 0 in [0-9]+[sm] 2 in [0-9]+[sm] 2 0 (now|[0-9]+s ago)$'
  br_like "tasker budgets: edge's host line (2 retries left, nothing deferred)" \
    "$(printf '%s\n' "$OUT" | grep '^edge ' | tr -s ' ')" \
    '^edge 127\.0\.0\.1:9 0 0.005 10m 2 - 0 - 0 0 (now|[0-9]+s ago)$'
  # Bad input: a clear error, exit 2.
  run t budgets api
  expect_rc "tasker budgets NAME: no arguments taken" 2
  run t budgets --limit 3
  expect_rc "tasker budgets --limit: no such flag" 2
  expect_match "... named" "$ERR" "limit"
  # A configuration without the budgets: each state under the figures an
  # orchestrator last applied, marked as not configured.
  cp "$W/tasker.toml" "$W/with_budgets.toml"
  tasker_config engine.max_attempts=2
  run t budgets --json
  expect_eq "not configured: the stored figures, configured false" \
    "$(printf '%s' "$OUT" | br_fields)" \
    '[["api",null,false,null,0,600000,0.005,5,5,2,2],["edge","127.0.0.1:9",false,true,0,600000,0.005,1,1,0,0]]'
  run t budgets
  expect_match "tasker budgets: an unconfigured budget is marked" \
    "$(printf '%s\n' "$OUT" | grep '^api\* ' | tr -s ' ')" "api* - 0 0.005 10m 0 "
  expect_match "... and said why" "$OUT" "not in this configuration"
  cp "$W/with_budgets.toml" "$W/tasker.toml"
}

br_api() {
  serve_start || return 1
  run curl -s -w '\n%{http_code}' "$BASE/api/v1/budgets"
  expect_eq "GET /api/v1/budgets: 200" "$(printf '%s\n' "$OUT" | tail -n 1)" 200
  expect_eq "GET /api/v1/budgets: the report tasker budgets prints" \
    "$(printf '%s\n' "$OUT" | sed '$d' | br_fields)" "$(printf '%s' "$BR_JSON" | br_fields)"
  expect_eq "GET /api/v1/budgets?x=1: 400 (no parameters)" \
    "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/v1/budgets?x=1")" 400
  br_metrics() {
    curl -s "$BASE/metrics" >"$W/metrics"
    grep -qx 'tasker_store_budget_deferred_total{budget="api",host=""} 2' "$W/metrics"
  }
  wait_for "/metrics shows the budgets' states" 120 br_metrics
  for line in 'tasker_store_budget_available{budget="api",host=""} 0' \
    'tasker_store_budget_reserved{budget="api",host=""} 2' \
    'tasker_store_budget_retries_total{budget="api",host=""} 5' \
    'tasker_store_budget_first_attempts_total{budget="api",host=""} 5' \
    'tasker_store_budget_window_seconds{budget="api",host=""} 600' \
    'tasker_store_budget_min_per_second{budget="api",host=""} 0.005' \
    'tasker_store_budget_available{budget="edge",host="127.0.0.1:9"} 2' \
    'tasker_store_budget_deferred_total{budget="edge",host="127.0.0.1:9"} 0'; do
    if grep -qxF "$line" "$W/metrics"; then tap_ok "/metrics: $line"
    else tap_fail "/metrics: $line" "$(grep tasker_store_budget "$W/metrics")"; fi
  done
  expect_eq "/metrics: updated_at of each state" \
    "$(grep -c '^tasker_store_budget_updated_timestamp_seconds{' "$W/metrics")" 2
  serve_stop
}

br_run() {
  br_config
  br_templates
  run t init
  expect_rc "init" 0
  run t budgets
  expect_rc "tasker budgets on a store without states" 0
  expect_match "... says there are none" "$OUT" "no retry budget states"
  run t template add "$W/flaky_api.toml" "$W/edge.toml"
  expect_rc "template add" 0
  run t submit flaky_api --count 5
  expect_rc "submit 5 tasks naming api" 0
  run t submit edge
  expect_rc "submit a task naming edge" 0
  bg_start orch "$TASKER" --config "$W/tasker.toml" run --id one >>"$W/orch.log" 2>&1
  wait_for "the states are stored (api deferred 2 retries)" 120 br_stored
  kill -TERM "$(bg_pid orch)"
  bg_wait orch 120
  expect_eq "the orchestrator exits 0 on SIGTERM" "$BG_RC" 0
  br_cli
  br_api
}
