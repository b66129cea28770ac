# Callbacks of http steps (issue 24 part 2, DESIGN §18, docs/callbacks.md)
# through the real binaries: `tasker serve` (the callback routes), `tasker
# run` in the background, and examples/callback-export/export_service.py, a
# real local http service (Python standard library) that answers 202 and
# calls back:
# - a template whose http step has callback = { ... } is added; a request
#   answered 2xx leaves the step waiting (show: waiting, why: waiting for
#   a callback, since and until; no lease), and the service's callback
#   completes it with its results, its child then runs;
# - a failure callback (retryable, retry_after "1s") fails attempt 1; the
#   retry carries a new token, and its success completes the step;
# - a heartbeat extends the wait (200, its until), then the success;
# - a wait whose callback never comes times out (a timeout attempt) and is
#   retried with a new token; the earlier attempt's token is then refused
#   (409) and changes nothing, an unknown token is 404, a bad body 400
#   naming the member; the new token completes the step, and the same
#   callback again is 409 (it came already);
# - no token appears in the orchestrator's or the server's log, the
#   events, `show --history`, or the API's task JSON;
# - without server.public_url the attempt fails for good, saying so.
# Sourced after tap.sh and config.sh (and pg.sh for PostgreSQL) by
# tests/server/callbacks.sh and callbacks_pg.sh; needs `t`, W, jq, curl and
# python3. cb_run runs it all.
. "$(dirname "$0")/../lib/bg.sh"
. "$(dirname "$0")/../lib/serve.sh"
# sg_state, sg_is, sg_task_is, sg_snapshot: a step's state, a task's, and
# show --history without the time it was read.
. "$(dirname "$0")/../lib/signals.sh"

CB_SERVICE=$(cd "$(dirname "$0")/../../examples/callback-export" && pwd)/export_service.py

# cb_service_start DELAY: the export service in the background (bg_start
# service), calling back DELAY seconds after each request; its port in
# CB_PORT, each request and callback a JSON line in $W/service.log. 1 (a
# failure said) when it does not listen within 60 s.
cb_service_start() {
  rm -f "$W/service.port"
  bg_start service python3 "$CB_SERVICE" --port 0 --port-file "$W/service.port" \
    --log "$W/service.log" --delay "$1" 2>"$W/service.err"
  wait_for "the export service listens" 60 test -s "$W/service.port" || return 1
  CB_PORT=$(cat "$W/service.port")
}

# cb_template FILE NAME TIMEOUT MODE [ATTEMPTS]: a template NAME whose step
# "export" POSTs to the service with its callback URL and token (mode
# MODE), waits up to TIMEOUT for the callback, and whose step "publish"
# follows it; export has ATTEMPTS (default 3).
cb_template() {
  cat >"$1" <<TOML
name = "$2"
version = "1"
[[steps]]
name = "export"
retry = { max_attempts = ${5:-3} }
[steps.handler]
kind = "http"
method = "POST"
url = "http://127.0.0.1:$CB_PORT/export"
headers = { X-Callback-Token = "{{task.callback_token}}" }
body = { callback = "{{task.callback_url}}", mode = "$4", task = "{{task.id}}", rows = 42 }
callback = { timeout = "$3" }
[[steps]]
name = "publish"
depends_on = ["export"]
handler = { kind = "builtin", name = "noop" }
TOML
}

# cb_tokens TASK: the tokens the service received for TASK, one a line.
cb_tokens() { jq -r --arg t "$1" 'select((.task | tostring) == $t and .token != null) | .token' "$W/service.log"; }
# cb_token_count TASK N: the service received N requests of TASK.
cb_token_count() { [ "$(cb_tokens "$1" | wc -l)" -ge "$2" ]; }
# cb_beat TASK: the service's heartbeat for TASK was answered 200 with an until.
cb_beat() {
  [ "$(jq -r --arg t "$1" 'select((.task | tostring) == $t and .heartbeat) | [.heartbeat,
    (.answer | fromjson | .until != null)] | @tsv' "$W/service.log")" = "200	true" ]
}
# cb_post PATH BODY: POST BODY (JSON) to the server; status in CODE, body in BODY.
cb_post() {
  BODY=$(curl -s -o - -w '\n%{http_code}' -H 'Content-Type: application/json' \
    -d "$2" "$BASE$1")
  CODE=$(printf '%s' "$BODY" | tail -n 1)
  BODY=$(printf '%s' "$BODY" | sed '$d')
}
# cb_answer WHAT STATUS JQ WANT: the last cb_post answered STATUS and JQ of its body is WANT.
cb_answer() {
  expect_eq "$1: status" "$CODE" "$2"
  expect_eq "$1" "$(printf '%s' "$BODY" | jq -c "$3")" "$4"
}

cb_run() {
  cb_service_start 0.3 || { tap_done; exit 1; }
  tasker_config $QUICK_RETRIES engine.heartbeat=1s
  run t init
  expect_rc "init" 0
  cb_template "$W/export.toml" export 1h success
  cb_template "$W/flaky.toml" flaky 1h fail_once
  cb_template "$W/beat.toml" beat 1h heartbeat
  cb_template "$W/silent.toml" silent 2s silent
  run t template add "$W/export.toml" "$W/flaky.toml" "$W/beat.toml" "$W/silent.toml"
  expect_rc "templates with callback = { timeout = ... } are added" 0

  # Without server.public_url: the attempt fails for good, saying so.
  z=$(t submit export)
  run t run --until-idle
  expect_rc "run --until-idle without server.public_url" 0
  expect_eq "the step is in error" "$(sg_state "$z" export)" error
  expect_match "saying server.public_url is needed" \
    "$(t show "$z" --json | jq -r '.steps[0].last_error')" "server.public_url"

  serve_start || { tap_done; exit 1; }
  tasker_config $QUICK_RETRIES engine.heartbeat=1s server.public_url="$BASE"
  bg_start orch "$TASKER" --config "$W/tasker.toml" run --workers 2 --events "$W/events.jsonl" \
    >>"$W/orch.log" 2>&1

  a=$(t submit export)
  wait_for "the callback completes task $a" 60 sg_task_is "$a" complete
  expect_eq "the callback's results are the step's" \
    "$(t show "$a" --json | jq -c '.steps[] | select(.name == "export") | .results')" \
    "{\"rows\":42,\"file\":\"export-$a.csv\"}"
  expect_eq "the service had the token in a header and in the URL" \
    "$(jq -r --arg t "$a" --arg base "$BASE" 'select((.task | tostring) == $t and .token != null)
       | .callback_url == ($base + "/api/v1/callbacks/" + .token)' "$W/service.log")" true
  expect_eq "it waited for the callback" \
    "$(t show "$a" --json --history | jq -c '[.transitions[] | select(.step == "export") |
       [.from, .to, .reason]]')" \
    '[["pending","in_progress","claimed"],["in_progress","waiting","waiting for a callback"],["waiting","in_progress","callback"],["in_progress","complete","success"]]'

  b=$(t submit flaky)
  wait_for "a failure, then a retry's success, completes task $b" 60 sg_task_is "$b" complete
  run t show "$b" --json
  expect_eq "attempt 1 failed with the callback's error, attempt 2 succeeded" \
    "$(printf '%s' "$OUT" | jq -c '[.steps[0].history[] | select(.attempt) | [.attempt, .outcome, .error]]')" \
    '[[1,"failure","the export service is busy"],[2,"success",null]]'
  expect_eq "each attempt had its own token" "$(cb_tokens "$b" | sort -u | wc -l | tr -d ' ')" 2

  c=$(t submit beat)
  wait_for "a heartbeat, then the callback, completes task $c" 60 sg_task_is "$c" complete
  expect_eq "the heartbeat was answered 200 with its until" \
    "$(jq -r --arg t "$c" 'select((.task | tostring) == $t and .heartbeat) | [.heartbeat, (.answer |
       fromjson | .until > 0)] | @tsv' "$W/service.log")" "200	true"

  d=$(t submit silent)
  wait_for "the wait times out and the retry sends a new token" 60 cb_token_count "$d" 2
  # The service's heartbeat extends the retry's wait to an hour.
  wait_for "the service's heartbeat extends the retry's wait" 60 cb_beat "$d"
  run t why "$d" export
  expect_match "why: it waits for a callback" "$OUT" "waiting_for_callback"
  expect_match "why: since when" "$OUT" " since "
  expect_match "why: until when" "$OUT" " until "
  run t show "$d"
  expect_match "show: waiting for a callback" "$OUT" "waiting for a callback"
  run t show "$d" --json
  expect_eq "no lease while it waits" \
    "$(printf '%s' "$OUT" | jq -r '.steps[0].lease_expires_at')" null
  old=$(cb_tokens "$d" | head -n 1)
  new=$(cb_tokens "$d" | sed -n 2p)
  expect_eq "attempt 1 timed out" \
    "$(t show "$d" --json | jq -r '.steps[0].history[] | select(.attempt == 1) | .outcome')" \
    timeout
  before=$(sg_snapshot "$d")
  cb_post "/api/v1/callbacks/$old" '{"status": "success", "results": {"late": true}}'
  cb_answer "the earlier attempt's token: 409" 409 '.error.message' \
    "\"attempt 1 of step \\\"export\\\" of task $d is over (the step is waiting now): its callback token changes nothing\""
  cb_post "/api/v1/callbacks/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" '{"status": "success"}'
  cb_answer "an unknown token: 404" 404 '.error.param' '"token"'
  cb_post "/api/v1/callbacks/$new" '{"status": "done"}'
  cb_answer "a bad status: 400 naming it" 400 '.error.param' '"status"'
  cb_post "/api/v1/callbacks/$new" '{"status": "failure", "retryable": false, "retry_after": 3}'
  cb_answer "a failure without its error: 400 naming it" 400 '.error.param' '"error"'
  cb_post "/api/v1/callbacks/$new" '{"status": "success", "eror": 1}'
  cb_answer "an unknown member: 400 naming it" 400 '.error.param' '"eror"'
  expect_eq "none of them changed the store" "$(sg_snapshot "$d")" "$before"
  cb_post "/api/v1/callbacks/$new/heartbeat" '{"timeout": "2h"}'
  cb_answer "the retry's heartbeat" 200 '[.task, .attempt, .step_state]' "[$d,2,\"waiting\"]"
  expect_eq "it moved the timeout to its until" \
    "$(t show "$d" --json | jq -r '.steps[0].run_at')" "$(printf '%s' "$BODY" | jq -r .until)"
  cb_post "/api/v1/callbacks/$new" '{"status": "success", "results": {"by": "hand"}}'
  cb_answer "the retry's token completes it" 200 '[.task, .step, .attempt, .status]' \
    "[$d,\"export\",2,\"success\"]"
  wait_for "task $d completes" 60 sg_task_is "$d" complete
  cb_post "/api/v1/callbacks/$new" '{"status": "success", "results": {"by": "hand"}}'
  cb_answer "the same callback again: 409, it came already" 409 \
    '.error.message | test("a callback for attempt 2 .* came already")' true

  # No token anywhere: logs, events, histories, the API.
  curl -s "$BASE/api/v1/tasks/$a" >"$W/api.json"
  for task in "$a" "$b" "$c" "$d"; do
    t show "$task" --json --history >>"$W/shown.json"
    curl -s "$BASE/api/v1/tasks/$task" >>"$W/api.json"
  done
  leaks=""
  for tok in $(jq -r 'select(.token != null) | .token' "$W/service.log"); do
    for f in orch.log serve.err events.jsonl shown.json api.json; do
      grep -q -- "$tok" "$W/$f" && leaks="$leaks $f"
    done
  done
  expect_eq "no token in the logs, events, show --history or the API" "$leaks" ""
  expect_eq "the service received tokens" "$(jq -r 'select(.token != null) | .token' \
    "$W/service.log" | wc -l | tr -d ' ' | awk '{print ($1 >= 6)}')" 1

  kill -TERM "$(bg_pid orch)"
  if bg_wait orch 60 && [ "$BG_RC" = 0 ]; then tap_ok "the orchestrator exits 0 on SIGTERM"
  else tap_fail "the orchestrator exits 0 on SIGTERM" "exit ${BG_RC:-?}" "$(tail -n 5 "$W/orch.log")"; fi
  serve_stop
  kill -TERM "$(bg_pid service)"
  bg_wait service 30
}
