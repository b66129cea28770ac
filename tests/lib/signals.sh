# Wait steps and signals (issue 24, DESIGN §18) through the real binary,
# with an orchestrator (`tasker run`) running in the background on the
# store $W/tasker.toml names:
# - a signal sent before any orchestrator runs is kept: once one runs, the
#   step takes it at its claim and the task completes with its data as
#   the step's results;
# - a step waits (show: waiting, why: waiting_for_signal since/until; the
#   task's execution status waiting_for_the_world); `tasker signal` then
#   completes it within seconds and its child runs;
# - the same --key again is answered as the first (exit 0, "already
#   sent"), a new signal to the finished step is refused saying it
#   finished and when (exit 2), and the store does not change;
# - --fail fails the attempt and the retry waits again; a signal then
#   completes it (attempt 2);
# - a wait whose timeout passes fails as a timeout attempt and, with no
#   attempt left, the step is in error;
# - unknown task or step, a step that is not a wait step, bad JSON, both
#   --data and --fail: exit 2, a message, nothing changed;
# - the API (`tasker serve`): a bad signal body is a 400 whose error names
#   the place (the member in "param", or the line and column of JSON that
#   stops), the rule's refusals (an empty error, an empty key, neither data
#   nor error) too, and the store does not change;
# - a task with 1,000 map instances (pending for a queue no worker polls)
#   beside its wait step: a signal, by the CLI and by the API, is answered
#   as for any task and completes the step.
# Sourced after tap.sh and config.sh (and pg.sh for PostgreSQL) by
# tests/cli/signals.sh and signals_pg.sh; needs `t`, W and jq. sg_run runs
# it all.
. "$(dirname "$0")/../lib/bg.sh"
. "$(dirname "$0")/../lib/serve.sh"

sg_templates() {
  cat >"$W/order.toml" <<'TOML'
name = "order"
version = "1"
[[steps]]
name = "approve"
handler = { kind = "wait", timeout = "72h" }
retry = { max_attempts = 3 }
[[steps]]
name = "ship"
depends_on = ["approve"]
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/brief.toml" <<'TOML'
name = "brief"
version = "1"
[[steps]]
name = "ack"
handler = { kind = "wait", timeout = "1s" }
retry = { max_attempts = 1 }
TOML
  cat >"$W/wide.toml" <<'TOML'
name = "wide"
version = "1"
[[steps]]
name = "count"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"rows\": 1000}'"] }
[[steps]]
name = "each"
depends_on = ["count"]
map = { range = "{{parents.count.rows}}" }
handler = { kind = "worker", queue = "nobody" }
[[steps]]
name = "approve"
depends_on = ["count"]
handler = { kind = "wait", timeout = "72h" }
TOML
}

# sg_state ID STEP: the step's state, from show --json.
sg_state() { t show "$1" --json | jq -r --arg s "$2" '.steps[] | select(.name == $s) | .state'; }
# sg_is ID STEP STATE: the step is in STATE.
sg_is() { [ "$(sg_state "$1" "$2")" = "$3" ]; }
# sg_snapshot ID: the task as show --history says it, but the time it was read.
sg_snapshot() { t show "$1" --json --history | jq -c 'del(.now)'; }
# sg_task_is ID STATE: the task is in STATE.
sg_task_is() { [ "$(t show "$1" --json | jq -r .state)" = "$2" ]; }

sg_run() {
  tasker_config $QUICK_RETRIES engine.heartbeat=1s
  sg_templates
  run t init
  expect_rc "init" 0
  run t template add "$W/order.toml" "$W/brief.toml" "$W/wide.toml"
  expect_rc "template add" 0

  # Before any orchestrator: the signal is kept.
  a=$(t submit order)
  run t signal "$a" approve --data '{"by": "early"}'
  expect_rc "a signal before the step waits is accepted" 0
  expect_match "it says it is kept" "$ERR" "kept until the step waits"

  bg_start orch "$TASKER" --config "$W/tasker.toml" run --workers 2 >>"$W/orch.log" 2>&1
  wait_for "the early signal completes task $a" 30 sg_task_is "$a" complete
  expect_eq "its data are the step's results" \
    "$(t show "$a" --json | jq -c '.steps[0].results')" '{"by":"early"}'

  b=$(t submit order)
  wait_for "task $b's step waits" 30 sg_is "$b" approve waiting
  run t show "$b" --json
  expect_eq "the task waits on the world" "$(printf '%s' "$OUT" | jq -r .execution_status)" \
    waiting_for_the_world
  expect_eq "no lease while it waits" "$(printf '%s' "$OUT" | jq -r '.steps[0].lease_expires_at')" null
  run t why "$b" approve
  expect_match "why: what it waits for" "$OUT" "waiting_for_signal"
  expect_match "why: since when" "$OUT" " since "
  expect_match "why: until when" "$OUT" " until "
  run t signal "$b" approve --data '{"by": "ann"}' --key order-b
  expect_rc "tasker signal exits 0" 0
  wait_for "the signal completes task $b" 30 sg_task_is "$b" complete
  expect_eq "the data are the step's results" \
    "$(t show "$b" --json | jq -c '.steps[0].results')" '{"by":"ann"}'
  before=$(sg_snapshot "$b")
  run t signal "$b" approve --data '{"by": "bob"}' --key order-b
  expect_rc "the same key again: exit 0" 0
  expect_match "answered as the first" "$ERR" "already sent"
  run t signal "$b" approve --data '{}'
  expect_rc "a signal to a finished step: exit 2" 2
  expect_match "it says it finished, and when" "$ERR" "already finished: complete since"
  expect_eq "the store did not change" "$(sg_snapshot "$b")" "$before"

  c=$(t submit order)
  wait_for "task $c's step waits" 30 sg_is "$c" approve waiting
  run t signal "$c" approve --fail "not yet"
  expect_rc "--fail exits 0" 0
  wait_for "the retry waits again" 30 sg_attempt_waits "$c" 2
  run t signal "$c" approve --data '{"second": true}'
  wait_for "the second signal completes task $c" 30 sg_task_is "$c" complete
  run t show "$c" --json
  expect_eq "attempt 1 failed with the message, attempt 2 succeeded" \
    "$(printf '%s' "$OUT" | jq -c '[.steps[0].history[] | [.attempt, .outcome, .error]]')" \
    '[[1,"failure","not yet"],[2,"success",null]]'

  d=$(t submit brief)
  wait_for "task $d's wait times out and fails" 30 sg_task_is "$d" error
  run t show "$d" --json
  expect_eq "a timeout attempt" "$(printf '%s' "$OUT" | jq -r '.steps[0].history[0].outcome')" \
    timeout

  e=$(t submit order)
  wait_for "task $e's step waits" 30 sg_is "$e" approve waiting
  before=$(sg_snapshot "$e")
  run t signal 9999 approve --data '{}'
  expect_rc "an unknown task: exit 2" 2
  expect_match "says so" "$ERR" "no task 9999"
  run t signal "$e" nosuch --data '{}'
  expect_rc "an unknown step: exit 2" 2
  run t signal "$e" ship --data '{}'
  expect_rc "a step that is not a wait step: exit 2" 2
  expect_match "says so" "$ERR" "not a wait step"
  run t signal "$e" approve --data '{oops'
  expect_rc "bad JSON: exit 2" 2
  expect_match "says so" "$ERR" "not JSON"
  run t signal "$e" approve --data '{}' --fail no
  expect_rc "--data and --fail: exit 2" 2
  expect_eq "none of them changed the store" "$(sg_snapshot "$e")" "$before"

  serve_start || { tap_done; exit 1; }
  sg_post "$e" approve "$(printf '{"data": {"a": [1,\n  2,}, "key": "k"}')"
  sg_answer "API: JSON that stops: the line and column" 400 '.error.message' \
    'test("not valid JSON: .* at line 2, column [0-9]+$")'
  sg_post "$e" approve '{"data": 1, "eror": "x"}'
  sg_answer "API: an unknown member: named" 400 '.error.param' '"eror"'
  sg_post "$e" approve '{"error": 42}'
  sg_answer "API: an error that is not a string: named" 400 '[.error.param, .error.message]' \
    '["error","error: an integer: expected a string"]'
  sg_post "$e" approve '{"error": ""}'
  sg_answer "API: the library's rule, an empty error: named" 400 '.error.param' '"error"'
  sg_post "$e" approve '{"data": null, "key": ""}'
  sg_answer "API: the library's rule, an empty key: named" 400 '.error.param' '"key"'
  sg_post "$e" approve '{"key": "k"}'
  sg_answer "API: the library's rule, neither data nor error: named" 400 \
    '[.error.param, .error.message]' \
    '["data","a signal carries either data (JSON) or an error, exactly one of them, not neither"]'
  expect_eq "no refused body changed the store" "$(sg_snapshot "$e")" "$before"

  f=$(t submit wide)
  wait_for "task $f has its 1,000 instances and its step waits" 60 sg_wide_ready "$f"
  run t signal "$f" approve --data '{"by": "cli"}' --key wide --json
  expect_rc "a signal to a task of 1,000 instances: exit 0" 0
  expect_eq "answered as for any task" \
    "$(printf '%s' "$OUT" | jq -c '[.task, .step, .duplicate, .step_state]')" \
    "[$f,\"approve\",false,\"waiting\"]"
  wait_for "the signal completes its wait step" 30 sg_is "$f" approve complete
  sg_post "$f" approve '{"data": {"by": "api"}, "key": "wide"}'
  sg_answer "API: the same key again, answered as the first" 200 '[.duplicate, .delivered]' \
    '[true,true]'
  sg_post "$f" approve '{"data": {"by": "api"}}'
  sg_answer "API: a new signal to the finished step: 409" 409 '.error.message' \
    'test("already finished: complete since")'
  expect_eq "its results are the CLI's signal's data" \
    "$(t show "$f" --json | jq -c '.steps[] | select(.name == "approve") | .results')" \
    '{"by":"cli"}'
  kill -TERM "$SERVE"
  bg_wait serve 30

  kill -TERM "$(bg_pid orch)"
  if bg_wait orch 60 && [ "$BG_RC" = 0 ]; then tap_ok "the orchestrator exits 0 on SIGTERM"
  else tap_fail "the orchestrator exits 0 on SIGTERM" "exit ${BG_RC:-?}" "$(tail -n 5 "$W/orch.log")"; fi
}

# sg_attempt_waits ID N: the task's wait step waits in its attempt N.
sg_attempt_waits() {
  [ "$(t show "$1" --json | jq -r '.steps[0] | "\(.state) \(.attempts)"')" = "waiting $2" ]
}

# sg_wide_ready ID: wide task ID's map has its 1,000 instances and its
# wait step waits.
sg_wide_ready() {
  [ "$(t show "$1" --json | jq -c '[.steps[] | .instances.total // .state]')" = \
    '["complete",1000,"waiting"]' ]
}

# sg_post ID STEP BODY: POST BODY as the signal to STEP of task ID on the
# test's server (BASE): the status in CODE, the answer in BODY.
sg_post() {
  CODE=$(curl -s -o "$W/body" -w '%{http_code}' -X POST -H 'X-Tasker-Request: 1' \
    -H 'Content-Type: application/json' --data-binary "$3" "$BASE/api/v1/tasks/$1/steps/$2/signal")
  BODY=$(cat "$W/body")
}

# sg_answer NAME CODE JQ WANT: the last sg_post answered CODE and jq's JQ
# of its body is WANT (WANT: a test(...) filter's true, when it is one).
sg_answer() {
  case $4 in
  test\(*) sg_got=$(printf '%s' "$BODY" | jq -c "$3 | $4") sg_want=true ;;
  *) sg_got=$(printf '%s' "$BODY" | jq -c "$3") sg_want=$4 ;;
  esac
  if [ "$CODE" != "$2" ]; then tap_fail "$1" "status $CODE, want $2" "body: $BODY"
  else expect_eq "$1" "$sg_got" "$sg_want"; fi
}
