# A client library (clients/*) run by real worker processes against a real
# `tasker serve` and `tasker run` (its reaper) on a SQLite store: source
# it (it sources tap.sh, config.sh and workers.sh: wk_serve, wk_orch_start), define
# cl_worker_exec NAME URL QUEUE LOG THREADS (exec's the worker program
# tests/clients/worker.* with those arguments), cl_example_exec URL (exec's
# the example worker, examples/workers/worker.*) and CL_BOOM_ERROR (the
# text a thrown "kaput" becomes), then cl_run.
# Each test worker registers the same functions, each appending
# "start|done STEP TASK ATTEMPT WORKER" lines to $W/calls.log:
#   double: {"n": context.n * 2, "by": WORKER, "lease_ms": the lease's expiry
#   is integer ms since the epoch, ahead}; plus: {"sum": parents.double.n + 1};
#   flaky: Retry(after=1.5) on attempt 1, {"attempt": N} after;
#   doom: Permanent("bad input: no such image"); boom: throws "kaput";
#   list: {"items": context.items}; each (a map over them): {"tenfold":
#   item * 10, "index": item_index}; total: the sum of the tenfolds;
#   slow: sleeps context.secs, then {"slept": secs, "by": WORKER}.
# Checked: a wrong token stops the worker (non-zero, the 401's words);
# tasks of worker steps complete with the functions' results
# (parents' results and a map's items as input); Retry(after=) delays the
# retry by the hint (the attempt's delay, from the server); Permanent ends
# the step in error at attempt 1, another exception retries; a step no
# function is registered for fails for good; a worker SIGKILLed mid-step
# loses only its lease (another finishes the step after the lease expired
# and was reaped, at attempt 2, heartbeating through a run longer than the
# lease); a worker stopped (SIGSTOP) past its lease has its late outcome
# refused and dropped, the step finished by another; serve stopped and
# started again (a claim and an outcome tried again until it is back, the
# claim token kept out of the log); SIGTERM lets the
# running step finish and report, claims nothing more, and the worker
# exits 0. Nothing is
# completed twice. The example (examples/workers) runs as its template's
# comment says.

. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
. "$(dirname "$0")/../lib/workers.sh"
sqlite_store
tasker_config $QUICK_RETRIES engine.lease=5s engine.heartbeat=1s
HERE=$(cd "$(dirname "$0")" && pwd)
CL_WORKERS=""
TK_WTOKEN=$WK_WTOKEN
export TK_WTOKEN

# cl_start NAME [THREADS]: a worker process named NAME (its log in
# $W/NAME.err); its pid in PID.
cl_start() {
  cl_worker_exec "$1" "$URL" cl "$W/calls.log" "${2:-4}" 2>"$W/$1.err" >/dev/null &
  PID=$!
  CL_WORKERS="$CL_WORKERS $PID"
}

# cl_wait PID: waits for worker PID to exit, its status in RC (137 when it
# was still running after 30 s and killed).
cl_wait() {
  (sleep 30; kill -9 "$1") >/dev/null 2>&1 &
  cl_dog=$!
  wait "$1"
  RC=$?
  kill "$cl_dog" 2>/dev/null
}

# cl_stop_all: every worker still running, killed (a trap calls it too).
cl_stop_all() {
  for cl_p in $CL_WORKERS; do kill -9 "$cl_p" 2>/dev/null; wait "$cl_p" 2>/dev/null; done
  CL_WORKERS=""
}

# cl_fatal NAME WHY...: a failure the rest cannot run without.
cl_fatal() {
  tap_fail "$@"
  cl_stop_all
  bg_kill_all
  tap_done
  exit 1
}

# cl_submit TEMPLATE CONTEXT: the new task's id in TASK.
cl_submit() {
  run t submit "$1" --context "$2"
  [ "$RC" -eq 0 ] || cl_fatal "submit $1" "$ERR"
  TASK=$OUT
}

# cl_show TASK JQ: jq's JQ of tasker show TASK --json.
cl_show() { t show "$1" --json | jq -c "$2"; }
cl_finished() { case $(cl_show "$1" .state) in '"complete"' | '"error"') true ;; *) false ;; esac; }
cl_all_finished() { for cl_t in "$@"; do cl_finished "$cl_t" || return 1; done; }
# cl_all_finished_by PID TASK...: every TASK finished, or worker PID gone.
cl_all_finished_by() {
  cl_pid=$1
  shift
  cl_all_finished "$@" || ! kill -0 "$cl_pid" 2>/dev/null
}
cl_logged() { grep -qx "$1" "$W/calls.log" 2>/dev/null; }
cl_count() { grep -c "$1" "$W/calls.log" 2>/dev/null; }

# cl_templates: the tests' templates, each of worker steps of queue "cl".
cl_templates() {
  cl_step() { printf '[[steps]]\nname = "%s"\nhandler = { kind = "worker", queue = "cl" }\n' "$1"; }
  for cl_n in pipe flaky doom boom stray fan slow; do
    {
      printf 'name = "%s"\nversion = "1"\n' "$cl_n"
      case $cl_n in
        pipe) cl_step double; cl_step plus; echo 'depends_on = ["double"]' ;;
        flaky | doom | stray | slow) cl_step "$cl_n"; echo 'retry = { max_attempts = 3 }' ;;
        boom) cl_step boom; echo 'retry = { max_attempts = 2 }' ;;
        fan)
          cl_step list; cl_step each
          echo 'depends_on = ["list"]'
          echo 'map = { over = "{{parents.list.items}}" }'
          cl_step total; echo 'depends_on = ["each"]' ;;
      esac
    } >"$W/$cl_n.toml"
  done
}

cl_run() {
  trap 'cl_stop_all; bg_kill_all; rm -rf "$TMPDIR_TEST"' EXIT
  cl_templates
  run t init
  [ "$RC" -eq 0 ] || cl_fatal "init" "$ERR"
  run t template add "$W/pipe.toml" "$W/flaky.toml" "$W/doom.toml" "$W/boom.toml" \
    "$W/stray.toml" "$W/fan.toml" "$W/slow.toml" "$TK_TOP/examples/workers/images.toml"
  [ "$RC" -eq 0 ] || cl_fatal "template add" "$ERR"
  wk_serve
  wk_orch_start
  # A wrong token: the worker stops at once, non-zero, saying what to fix.
  (
    TK_WTOKEN=not-the-token
    cl_worker_exec w0 "$URL" cl "$W/calls.log" 1 2>"$W/w0.err" >/dev/null
  ) &
  cl_wait $!
  expect_eq "a worker with a wrong token exits 1" "$RC" 1
  expect_match "saying so" "$(cat "$W/w0.err")" \
    "the server refused its claims on queue cl: HTTP 401 unauthorized"
  cl_start w1
  W1=$PID

  # Results, parents' results, a map's items, and the outcomes' kinds.
  PIPES=""
  for n in 1 2 3 4 5 6; do
    cl_submit pipe "{\"n\": $n}"
    PIPES="$PIPES $TASK"
  done
  cl_submit flaky '{}'; FLAKY=$TASK
  cl_submit doom '{}'; DOOM=$TASK
  cl_submit boom '{}'; BOOM=$TASK
  cl_submit stray '{}'; STRAY=$TASK
  cl_submit fan '{"items": [1, 2, 3, 4]}'; FAN=$TASK
  # shellcheck disable=SC2086
  wait_for "every task of the first round finishes" 40 cl_all_finished_by "$W1" $PIPES $FLAKY \
    $DOOM $BOOM $STRAY $FAN || cl_fatal "the first round" "w1's log: $(tail -n 20 "$W/w1.err")"
  kill -0 "$W1" 2>/dev/null || cl_fatal "w1 runs" "w1's log: $(tail -n 20 "$W/w1.err")"
  n=0
  for task in $PIPES; do
    n=$((n + 1))
    expect_eq "pipe $n: complete with its functions' results" \
      "$(cl_show "$task" '[.state, (.steps[] | .results | del(.by?))]')" \
      "[\"complete\",{\"n\":$((2 * n)),\"lease_ms\":true},{\"sum\":$((2 * n + 1))}]"
  done
  expect_eq "the worker's name reaches the function" \
    "$(cl_show "$task" '.steps[0].results.by')" '"w1"'
  expect_eq "Retry(after=1.5): the retry waited the hint, from the server" \
    "$(cl_show "$FLAKY" '[.state, (.steps[0] | .attempts, .results, (.history[0] |
      .outcome, .error, .delay_ms, .delay_source))]')" \
    '["complete",2,{"attempt":2},"failure","busy, come back later",1500,"server"]'
  expect_eq "Permanent: error at attempt 1 of 3, its message" \
    "$(cl_show "$DOOM" '[.state, (.steps[0] | .state, .attempts, .last_error)]')" \
    '["error","error",1,"bad input: no such image"]'
  expect_eq "another exception: retried, its text the error" \
    "$(cl_show "$BOOM" '[.state, (.steps[0] | .attempts, .last_error)]')" \
    "[\"error\",2,\"$CL_BOOM_ERROR\"]"
  expect_eq "a step without a function: error at attempt 1" \
    "$(cl_show "$STRAY" '[.state, .steps[0].attempts]')" '["error",1]'
  expect_match "which says so" "$(cl_show "$STRAY" .steps[0].last_error)" \
    "has no function for step"
  expect_eq "a map's instances run by the function of its name, with their items" \
    "$(cl_show "$FAN" '[.state, .steps[2].results]')" '["complete",{"sum":100}]'
  expect_eq "each instance got its item and index" \
    "$(t show "$FAN" --instances each --json | jq -c '[.instances[].results]')" \
    '[{"tenfold":10,"index":0},{"tenfold":20,"index":1},{"tenfold":30,"index":2},{"tenfold":40,"index":3}]'

  # serve goes away while w1 runs a step and waits in a claim: both the
  # outcome and the claim are tried again until serve is back (in less
  # than the lease), and both tasks complete.
  cl_submit slow '{"secs": 1}'; AWAY=$TASK
  wait_for "w1 starts a slow step" 20 cl_logged "start slow $AWAY 1 w1" ||
    cl_fatal "slow step started" "$(tail -n 20 "$W/w1.err")"
  # w1 held still while serve stops, so its outcome comes after: on a
  # loaded machine the 1 s step ended before serve was gone, and no
  # outcome needed trying again.
  kill -STOP "$W1"
  serve_stop
  kill -CONT "$W1"
  cl_submit pipe '{"n": 7}'; LATER=$TASK
  wait_for "w1 tries its outcome again" 20 grep -q "complete of .*slow.*trying again" "$W/w1.err"
  expect_match "saying why" "$(grep "complete of .*slow.*trying again" "$W/w1.err")" "POST /api/v1/"
  expect_eq "without a claim's token (32 characters of URL-safe base64)" \
    "$(grep -cE '[A-Za-z0-9_-]{32}' "$W/w1.err")" 0
  expect_match "its claims too" "$(cat "$W/w1.err")" "claim: POST /api/v1/queues/cl/claim"
  bg_start serve2 "$TASKER" --config "$W/tasker.toml" serve --listen "${URL#http://}" \
    --token-file "$W/operator.token" --worker-token-file "$W/worker.token" 2>"$W/serve2.err" \
    >/dev/null
  wait_for "serve listens again" 20 grep -q "listening on $URL/" "$W/serve2.err" ||
    cl_fatal "serve restarts" "$(cat "$W/serve2.err")"
  wait_for "both tasks finish" 20 cl_all_finished "$AWAY" "$LATER"
  expect_eq "the step that ended while serve was away: complete at attempt 1" \
    "$(cl_show "$AWAY" '[.state, (.steps[0] | .attempts, .results)]')" \
    '["complete",1,{"slept":1,"by":"w1"}]'
  expect_eq "the task submitted while serve was away: complete" \
    "$(cl_show "$LATER" '[.state, .steps[1].results]')" '["complete",{"sum":15}]'

  # SIGKILL mid-step: only the lease is lost; w2 finishes the step after
  # the lease expired, heartbeating through a run longer than the lease.
  cl_submit slow '{"secs": 4}'; KILLED=$TASK
  wait_for "w1 starts the slow step" 20 cl_logged "start slow $KILLED 1 w1" ||
    cl_fatal "slow step started" "$(tail -n 20 "$W/w1.err")"
  kill -9 "$W1"
  # One thread: while w2 runs a step it has no claim waiting, which the
  # server would fill while w2 is stopped below (a stopped process's
  # connection stays open).
  cl_start w2 1
  W2=$PID
  wait_for "the killed worker's step finishes" 40 cl_finished "$KILLED" ||
    cl_fatal "the killed worker's step" "$(tail -n 20 "$W/w2.err")"
  expect_eq "the killed worker's step: complete at attempt 2, by w2 after the lease expired" \
    "$(cl_show "$KILLED" '[.state, (.steps[0] | .attempts, .results, [.history[] |
      [.attempt, .owner, .outcome]])]')" \
    '["complete",2,{"slept":4,"by":"w2"},[[1,"w1","lease_expired"],[2,"w2","success"]]]'
  expect_eq "run twice, finished once" \
    "$(grep " slow $KILLED " "$W/calls.log")" \
    "start slow $KILLED 1 w1
start slow $KILLED 2 w2
done slow $KILLED 2 w2"

  # SIGSTOP past the lease: w2 (stopped) loses the step to w3; resumed,
  # its outcome is refused (409) and dropped, with a word in its log.
  cl_submit slow '{"secs": 2}'; STOPPED=$TASK
  wait_for "w2 starts the next slow step" 20 cl_logged "start slow $STOPPED 1 w2" ||
    cl_fatal "slow step started by w2" "$(tail -n 20 "$W/w2.err")"
  kill -STOP "$W2"
  cl_start w3
  W3=$PID
  wait_for "w3 finishes the stopped worker's step" 40 cl_finished "$STOPPED" ||
    cl_fatal "the stopped worker's step" "$(tail -n 20 "$W/w3.err")"
  kill -CONT "$W2"
  wait_for "w2's late outcome is dropped" 20 grep -q "dropped" "$W/w2.err"
  expect_eq "the stopped worker's step: w3's outcome, w2's dropped" \
    "$(cl_show "$STOPPED" '[.state, (.steps[0] | .attempts, .results, [.history[] |
      [.attempt, .owner, .outcome]])]')" \
    '["complete",2,{"slept":2,"by":"w3"},[[1,"w2","lease_expired"],[2,"w3","success"]]]'
  kill -TERM "$W2"
  cl_wait "$W2"
  expect_eq "w2 exits 0 on SIGTERM" "$RC" 0

  # SIGTERM mid-step: the step finishes and is reported, the worker exits 0.
  cl_submit slow '{"secs": 2}'; TERMED=$TASK
  wait_for "w3 starts a slow step" 20 cl_logged "start slow $TERMED 1 w3" ||
    cl_fatal "slow step started by w3" "$(grep " slow $TERMED " "$W/calls.log")"
  kill -TERM "$W3"
  # Once it says it is stopping (its claims over), a new step stays
  # unclaimed.
  wait_for "w3 says it is stopping" 20 grep -q "stopping" "$W/w3.err"
  cl_submit slow '{"secs": 1}'; AFTER=$TASK
  cl_wait "$W3"
  expect_eq "w3 exits 0 on SIGTERM" "$RC" 0
  expect_eq "its running step finished and was reported" \
    "$(cl_show "$TERMED" '[.state, (.steps[0] | .attempts, .results)]')" \
    '["complete",1,{"slept":2,"by":"w3"}]'
  expect_eq "a step made ready while it stopped: not claimed" \
    "$(cl_show "$AFTER" '[.state, .steps[0].attempts]')" '["pending",0]'

  # (The stopped worker's function did finish: its outcome was dropped.)
  expect_eq "no other function ran to its end twice" \
    "$(grep '^done ' "$W/calls.log" | grep -v " slow $STOPPED " | cut -d' ' -f2,3 | sort |
      uniq -d)" ""

  # The example: its template, its worker, the results its comment says.
  cl_submit images '{"url": "https://example.com/cat.png", "width": 640}'; IMAGES=$TASK
  TASKER_WORKER_TOKEN=$WK_WTOKEN cl_example_exec "$URL" 2>"$W/example.err" >/dev/null &
  EXAMPLE=$!
  CL_WORKERS="$CL_WORKERS $EXAMPLE"
  wait_for "the example's task finishes" 20 cl_finished "$IMAGES"
  expect_eq "the example's results" "$(cl_show "$IMAGES" '[.state, .steps[].results]')" \
    '["complete",{"bytes":27000},{"width":640,"bytes":6750}]'
  kill -TERM "$EXAMPLE"
  cl_wait "$EXAMPLE"
  expect_eq "the example worker exits 0 on SIGTERM" "$RC" 0
  cl_stop_all
  serve_stop serve2
  wk_orch_stop
}
