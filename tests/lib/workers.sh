# The worker protocol (docs/api.md "Workers") through a real `tasker serve`
# and a real orchestrator (`tasker run`, which runs the builtin steps and
# reaps expired leases) on the test's store, with curl as the worker:
# source after tap.sh and config.sh (or pg.sh) with TK_DB set, then wk_run.
# tests/server/workers.sh runs it on SQLite, workers_pg.sh on PostgreSQL.
# Checked: the tokens (the workers' and the operator's, each refused where
# the other belongs, never the same), a claim and its input, queues kept apart,
# a map's instances claimed with their items, two waiting claims of one
# queue woken one after the other for two steps made ready at once, heartbeat,
# fail with retry_after (retried under the policy, the retry handed to a
# waiting claim), complete releasing the next step and finishing the task,
# a permanent failure, a stale token (a second outcome, a lease that
# expired and was reaped) answered 409 and changing nothing, bad bodies and
# tokens, a body over the limit, a batch of outcomes (POST
# /api/v1/claims/outcomes: each fenced and answered on its own, one bad
# item refusing the whole body and recording none) and a claim that
# carries outcomes (recorded with the claim, which takes the steps they
# released and answers at once), a long-poll woken by a submit from another
# process (by the store's signal, as /metrics counts it), a waiting worker
# that hangs up (nothing claimed for it), and a stop while a claim waits.

. "$(dirname "$0")/../lib/serve.sh"

WK_WTOKEN=worker-secret-1
WK_OTOKEN=operator-secret-1

# wk_fatal NAME WHY...: a failure the rest cannot run without (tap.sh's EXIT
# trap ends the test's serve and run).
wk_fatal() {
  tap_fail "$@"
  tap_done
  exit 1
}

# wk_serve: `tasker serve` (serve.sh's serve_start) with both tokens; its
# address in URL.
wk_serve() {
  printf '%s\n' "$WK_WTOKEN" >"$W/worker.token"
  printf '%s\n' "$WK_OTOKEN" >"$W/operator.token"
  serve_start serve --token-file "$W/operator.token" --worker-token-file "$W/worker.token" ||
    wk_fatal "serve starts" "see above"
  URL=$BASE
}

# wk_orch_start: the test's orchestrator (`tasker run`, under bg.sh's
# name run), which runs the builtin steps and reaps expired leases.
wk_orch_start() {
  bg_start run "$TASKER" --config "$W/tasker.toml" run >"$W/run.out" 2>"$W/run.err"
}

# wk_orch_stop: SIGTERM to it; it must exit 0 within 60 s.
wk_orch_stop() {
  kill -TERM "$(bg_pid run)"
  if bg_wait run 60; then RC=$BG_RC; else RC=none; fi
  ERR=$(tail -n 5 "$W/run.err")
  expect_rc "tasker run exits 0 on SIGTERM" 0
}

# wk_post PATH BODY [TOKEN]: POST as a worker (the workers' token unless
# TOKEN; "-" for none); BODY as curl's --data-binary takes it (@FILE: the
# file's); the status in CODE, the answer in BODY.
wk_post() {
  wk_tok=${3:-$WK_WTOKEN}
  if [ "$wk_tok" = - ]; then
    CODE=$(curl -s -o "$W/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
      --data-binary "$2" "$URL$1")
  else
    CODE=$(curl -s -o "$W/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
      -H "Authorization: Bearer $wk_tok" --data-binary "$2" "$URL$1")
  fi
  BODY=$(cat "$W/body")
}

# wk_expect NAME WANT_CODE [JQ WANT]: the last wk_post answered WANT_CODE
# and, when given, jq's JQ of its body is WANT.
wk_expect() {
  if [ "$CODE" != "$2" ]; then
    tap_fail "$1" "status $CODE, want $2" "body: $BODY"
  elif [ $# -ge 4 ]; then
    expect_eq "$1" "$(printf '%s' "$BODY" | jq -c "$3")" "$4"
  else
    tap_ok "$1"
  fi
}

# wk_step TASK STEP JQ: jq's JQ of step STEP of task TASK (tasker show).
wk_step() {
  t show "$1" --json | jq -c --arg s "$2" ".steps[] | select(.name == \$s) | $3"
}

# wk_metric SERIES: its value in serve's /metrics (0 when absent).
wk_metric() {
  curl -s -H "Authorization: Bearer $WK_OTOKEN" "$URL/metrics" |
    awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}
# wk_sql SQL: one value from the test's store (SQLite's file, or pg.sh's).
wk_sql() {
  case $TK_DB in
    sqlite:*) sqlite3 "${TK_DB#sqlite:}" "$1" ;;
    *) pg_sql "$1" ;;
  esac
}
wk_answers() { wk_metric "tasker_serve_claim_answers_total{after=\"$1\"}"; }
wk_waiting_is() { [ "$(wk_metric tasker_serve_claims_waiting)" = "$1" ]; }
wk_task_is() { [ "$(t show "$1" --json | jq -r .state)" = "$2" ]; }
wk_step_is() { [ "$(wk_step "$1" "$2" .state)" = "\"$3\"" ]; }

# wk_claim_bg NAME QUEUE WAIT: a claim of one step waiting up to WAIT
# seconds, in the background: its answer in $W/NAME.json, its pid in BG.
wk_claim_bg() {
  curl -s -o "$W/$1.json" -X POST -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $WK_WTOKEN" \
    --data-binary "{\"worker\": \"bg-$1\", \"wait\": $3}" "$URL/api/v1/queues/$2/claim" &
  BG=$!
}

# wk_solo_template: $W/solo.toml, template "solo": one worker step, "only",
# of queue "other".
wk_solo_template() {
  cat >"$W/solo.toml" <<'TOML'
name = "solo"
version = "1"
[[steps]]
name = "only"
handler = { kind = "worker", queue = "other" }
TOML
}

wk_run() {
  cat >"$W/img.toml" <<'TOML'
name = "img"
version = "1"
[[steps]]
name = "fetch"
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "resize"
depends_on = ["fetch"]
handler = { kind = "worker", queue = "images" }
retry = { max_attempts = 3 }
[[steps]]
name = "store"
depends_on = ["resize"]
handler = { kind = "worker", queue = "images" }
TOML
  wk_solo_template
  cat >"$W/batch.toml" <<'TOML'
name = "batch"
version = "1"
[[steps]]
name = "list"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"files\": [\"a.png\", \"b.png\", \"c.png\"]}'"] }
[[steps]]
name = "thumbs"
depends_on = ["list"]
map = { over = "{{parents.list.files}}", max = 10 }
handler = { kind = "worker", queue = "thumbs" }
[[steps]]
name = "done"
depends_on = ["thumbs"]
handler = { kind = "builtin", name = "noop" }
TOML
  sed 's/"solo"/"pair"/; s/"other"/"pair"/' "$W/solo.toml" >"$W/pair.toml"
  cat >"$W/duo.toml" <<'TOML'
name = "duo"
version = "1"
[[steps]]
name = "a"
handler = { kind = "worker", queue = "duo" }
retry = { max_attempts = 3 }
[[steps]]
name = "b"
depends_on = ["a"]
handler = { kind = "worker", queue = "duo" }
TOML
  run t init
  [ "$RC" -eq 0 ] || wk_fatal "init" "$ERR"
  run t template add "$W/img.toml" "$W/solo.toml" "$W/batch.toml" "$W/pair.toml" "$W/duo.toml"
  [ "$RC" -eq 0 ] || wk_fatal "template add" "$ERR"
  printf 'same-token\n' >"$W/same.token"
  run t serve --listen 127.0.0.1:0 --token-file "$W/same.token" --worker-token-file "$W/same.token"
  expect_rc "serve refuses one token for both" 2
  expect_match "saying why" "$ERR" "the workers' token is the operator's"
  wk_serve
  wk_orch_start

  # Tokens: each kind of endpoint takes its own only.
  wk_post /api/v1/queues/images/claim '{"worker": "w1"}' -
  wk_expect "a claim without a token: 401" 401 '.error.code' '"unauthorized"'
  wk_post /api/v1/queues/images/claim '{"worker": "w1"}' "$WK_OTOKEN"
  wk_expect "a claim with the operator's token: 401" 401 '.error.message' \
    '"the token is not this server'"'"'s worker token"'
  expect_eq "the workers' token does not read the operator's API" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $WK_WTOKEN" "$URL/api/v1/status")" 401
  expect_eq "the operator's token reads it" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $WK_OTOKEN" "$URL/api/v1/status")" 200

  # Task 1: fetch (the orchestrator's), then resize and store (a worker's).
  run t submit img --context '{"url": "https://example.com/a.png"}'
  [ "$RC" -eq 0 ] || wk_fatal "submit img" "$ERR"
  wait_for "task 1's fetch is complete (tasker run)" 60 wk_step_is 1 fetch complete
  wk_post /api/v1/queues/other/claim '{"worker": "w1", "max": 5}'
  wk_expect "another queue's claim takes none of it" 200 . '{"claims":[]}'
  expect_eq "why: the ready worker step waits for its queue's workers, not an orchestrator" \
    "$(wk_step 1 resize '[.worker_queue, .why.reason, .why.detail]')" \
    '["images","ready","ready now: the next claim of a worker of queue \"images\" takes it (orchestrators never run it)"]'
  wk_post /api/v1/queues/images/claim '{"worker": "w1", "max": 5, "wait": 30}'
  wk_expect "claim: resize, attempt 1, with its input" 200 \
    '[.claims[] | [.task_id, .step, .attempt, .input, .heartbeat_ms > 0]]' \
    '[[1,"resize",1,{"context":{"url":"https://example.com/a.png"},"parents":{"fetch":null}},true]]'
  # Times as the operators' API gives them: integer ms since the epoch,
  # here the lease (30 s) from the claim's now.
  now_ms=$(($(date +%s) * 1000))
  expect_eq "claim: lease_expires_at is integer ms since the epoch, about 30 s ahead" \
    "$(printf '%s' "$BODY" | jq --argjson now "$now_ms" \
      '.claims[0].lease_expires_at | [type, . > $now - 60000, . < $now + 70000]' -c)" \
    '["number",true,true]'
  TOK1=$(printf '%s' "$BODY" | jq -r '.claims[0].token')
  LEASE1=$(printf '%s' "$BODY" | jq -r '.claims[0].lease_expires_at')
  expect_eq "the step is in progress, owned by the worker" "$(wk_step 1 resize '[.state, .lease_owner]')" \
    '["in_progress","w1"]'
  expect_eq "why: a worker of the queue holds it" "$(wk_step 1 resize '.why.detail')" \
    '"a worker of queue \"images\" holds the step'"'"'s lease"'

  wk_post "/api/v1/claims/$TOK1/heartbeat" ''
  wk_expect "heartbeat (no body): 200, the lease extended (integer ms)" 200 \
    '.lease_expires_at >= '"$LEASE1"' and (.lease_expires_at | floor) == .lease_expires_at' true
  wk_post "/api/v1/claims/$TOK1/heartbeat" '{"x": 1}'
  wk_expect "heartbeat with a member: 400 naming it" 400 .error.param '"x"'

  # Bad bodies change nothing.
  wk_post /api/v1/queues/images/claim '{"worker": "w1", "max": 101}'
  wk_expect "claim max 101: 400 naming max" 400 .error.param '"max"'
  wk_post /api/v1/queues/images/claim '{"max": 1}'
  wk_expect "claim without worker: 400 naming worker" 400 .error.param '"worker"'
  wk_post /api/v1/queues/images/claim '{"worker": "w1", "wait": 61}'
  wk_expect "claim wait 61: 400 naming wait" 400 .error.param '"wait"'
  # The lease (30 s) renewed between the refusals: on a loaded machine
  # (make test, load 14 on 2 cores) they took longer than that.
  wk_post "/api/v1/claims/$TOK1/heartbeat" '{}'
  [ "$CODE" = 200 ] || tap_fail "heartbeat between the refusals" "status $CODE: $BODY"
  wk_post "/api/v1/claims/$TOK1/fail" '{"retryable": true}'
  wk_expect "fail without error: 400 naming error" 400 .error.param '"error"'
  wk_post "/api/v1/claims/$TOK1/complete" '{"results": 1, "extra": 2}'
  wk_expect "complete with an unknown member: 400 naming it" 400 .error.param '"extra"'
  { printf '{"results": "'; head -c 1100000 /dev/zero | tr '\0' x; printf '"}'; } >"$W/big.json"
  wk_post "/api/v1/claims/$TOK1/complete" "@$W/big.json"
  wk_expect "complete over the 1 MiB body limit: 413" 413 .error.code '"too_large"'
  wk_post "/api/v1/claims/$TOK1/heartbeat" '{}'
  [ "$CODE" = 200 ] || tap_fail "heartbeat after the big body" "status $CODE: $BODY"
  wk_post "/api/v1/claims/not-a-token/complete" '{}'
  wk_expect "a malformed token: 404" 404 .error.param '"token"'
  expect_eq "none of them changed the step" "$(wk_step 1 resize '[.state, .attempts]')" '["in_progress",1]'
  wk_post "/api/v1/claims/$TOK1/heartbeat" '{}'
  wk_expect "heartbeat ({}): 200" 200 '.lease_expires_at | type' '"number"'

  # A retryable failure with retry_after: retried under the policy, and
  # the retry handed to a claim that waits for it.
  wk_post "/api/v1/claims/$TOK1/fail" '{"error": "S3 timed out", "retryable": true, "retry_after": 0.3}'
  wk_expect "fail with retry_after: waiting_for_retry" 200 '[.state, (.run_at | type)]' \
    '["waiting_for_retry","number"]'
  expect_eq "its run_at (integer ms) is the step's, as the operators' API gives it" \
    "$(printf '%s' "$BODY" | jq .run_at)" "$(wk_step 1 resize .run_at)"
  expect_eq "the retry's delay came from retry_after (the server's, as a Retry-After)" \
    "$(wk_step 1 resize '[.state, .last_error, .history[0].outcome, .history[0].delay_source, .history[0].delay_ms]')" \
    '["waiting_for_retry","S3 timed out","failure","server",300]'
  wk_post "/api/v1/claims/$TOK1/complete" '{"results": 1}'
  wk_expect "the old claim's complete: 409 conflict" 409 '[.error.code, .error.param]' \
    '["conflict","token"]'
  expect_eq "the 409 changed nothing" "$(wk_step 1 resize '[.state, .attempts, .results]')" \
    '["waiting_for_retry",1,null]'
  wk_post /api/v1/queues/images/claim '{"worker": "w2", "max": 5, "wait": 30}'
  wk_expect "a waiting claim gets the retry: attempt 2" 200 '[.claims[] | [.step, .attempt]]' \
    '[["resize",2]]'
  TOK2=$(printf '%s' "$BODY" | jq -r '.claims[0].token')
  # A worker waits for the next step while another completes this one:
  # the server wakes it for the change it made itself (PostgreSQL does not
  # echo a session's own notice back to it), not at its recheck.
  signal0=$(($(wk_answers store_signal) + $(wk_answers this_server)))
  recheck0=$(wk_answers recheck)
  wk_claim_bg next images 60
  NEXT=$BG
  wait_for "a claim waits for the next step" 30 wk_waiting_is 1
  wk_post "/api/v1/claims/$TOK2/complete" '{"results": {"width": 640}}'
  wk_expect "complete: 200 complete" 200 . '{"state":"complete"}'
  wait "$NEXT"
  expect_eq "complete released store to the waiting claim, with resize's results" \
    "$(jq -c '[.claims[] | [.step, .input.parents]]' "$W/next.json")" '[["store",{"resize":{"width":640}}]]'
  expect_eq "it was woken by the change, not by the recheck" \
    "$(($(wk_answers store_signal) + $(wk_answers this_server))) $(wk_answers recheck)" \
    "$((signal0 + 1)) $recheck0"
  wk_post "/api/v1/claims/$TOK2/complete" '{"results": {"width": 1}}'
  wk_expect "a second complete: 409" 409 .error.code '"conflict"'
  wk_post "/api/v1/claims/$TOK2/heartbeat" '{}'
  wk_expect "a heartbeat after complete: 409" 409 .error.code '"conflict"'
  expect_eq "resize kept the first results" "$(wk_step 1 resize '[.state, .results]')" \
    '["complete",{"width":640}]'
  TOK3=$(jq -r '.claims[0].token' "$W/next.json")
  wk_post "/api/v1/claims/$TOK3/complete" '{}'
  wk_expect "complete without results" 200 .state '"complete"'
  wait_for "task 1 is complete" 30 wk_task_is 1 complete

  # Task 2: a failure that is not retryable ends the step now.
  run t submit img
  wait_for "task 2's fetch is complete" 60 wk_step_is 2 fetch complete
  wk_post /api/v1/queues/images/claim '{"worker": "w1", "wait": 30}'
  TOK4=$(printf '%s' "$BODY" | jq -r '.claims[0].token')
  wk_post "/api/v1/claims/$TOK4/fail" '{"error": "not an image", "retryable": false, "retry_after": 1}'
  wk_expect "retry_after without retryable: 400" 400 .error.param '"retry_after"'
  wk_post "/api/v1/claims/$TOK4/fail" '{"error": "not an image", "retryable": false}'
  wk_expect "fail, not retryable: error" 200 . '{"state":"error"}'
  wait_for "task 2 ends in error" 30 wk_task_is 2 error

  # A long-poll woken by a submit from another process: answered after the
  # store's signal (not its recheck, not its wait running out).
  signal0=$(wk_answers store_signal)
  recheck0=$(wk_answers recheck)
  wk_claim_bg woken other 60
  WOKEN=$BG
  wait_for "the claim waits (tasker_serve_claims_waiting 1)" 30 wk_waiting_is 1
  run t submit solo --context '{"n": 3}'
  wait "$WOKEN"
  expect_eq "the waiting claim got the new task's step" \
    "$(jq -c '[.claims[] | [.task_id, .step, .input.context]]' "$W/woken.json")" '[[3,"only",{"n":3}]]'
  expect_eq "it was answered after the store's signal" \
    "$(wk_answers store_signal) $(wk_answers recheck)" "$((signal0 + 1)) $recheck0"

  # A lease that expires (no heartbeat): reaped by the orchestrator, the
  # worker's late heartbeat and complete are 409, and change nothing.
  TOK5=$(jq -r '.claims[0].token' "$W/woken.json")
  wait_for "task 3's step is reaped after its lease" 90 wk_step_is 3 only waiting_for_retry
  wk_post "/api/v1/claims/$TOK5/heartbeat" '{}'
  wk_expect "a heartbeat after the lease was lost: 409" 409 .error.code '"conflict"'
  wk_post "/api/v1/claims/$TOK5/complete" '{"results": 1}'
  wk_expect "a complete after the lease was lost: 409" 409 .error.code '"conflict"'
  expect_eq "the step still waits for its retry, no results" \
    "$(wk_step 3 only '[.state, .results, .history[0].outcome]')" '["waiting_for_retry",null,"lease_expired"]'

  # Task 4: a map of worker steps: each instance a claim, with its item.
  run t submit batch
  wk_post /api/v1/queues/thumbs/claim '{"worker": "w3", "max": 10, "wait": 30}'
  wk_expect "a map's instances are claimed, each with its item" 200 \
    '[.claims[] | [.task_id, .step, .input.item, .input.item_index]] | sort' \
    '[[4,"thumbs[0]","a.png",0],[4,"thumbs[1]","b.png",1],[4,"thumbs[2]","c.png",2]]'
  run t why 4 'thumbs[1]'
  expect_match "why of an instance of a worker map: a worker of its queue holds it" "$OUT" \
    'thumbs[1]: running (a worker of queue "thumbs" holds the step'"'"'s lease)'
  for tok in $(printf '%s' "$BODY" | jq -r '.claims[].token'); do
    wk_post "/api/v1/claims/$tok/complete" '{"results": {"thumb": true}}'
    [ "$CODE" = 200 ] || tap_fail "complete an instance" "status $CODE: $BODY"
  done
  wait_for "task 4 (the map's) is complete" 60 wk_task_is 4 complete

  # Batches of outcomes. Bodies refused whole, before any claim.
  wk_post /api/v1/claims/outcomes "{\"outcomes\": [{\"token\": \"t1\", \"error\": \"x\", \"retryable\": false, \"retry_after\": 1}]}"
  wk_expect "retry_after without retryable, in a batch: 400 naming it" 400 .error.param \
    '"outcomes[0].retry_after"'
  wk_post /api/v1/claims/outcomes '{"outcomes": "all done"}'
  wk_expect "outcomes not an array: 400" 400 .error.param '"outcomes"'
  wk_post /api/v1/claims/outcomes "{\"outcomes\": [$(seq 101 | sed 's/.*/{"token": "x"}/' | paste -sd, -)]}"
  wk_expect "101 outcomes: 400" 400 .error.message '"outcomes: too many: expected an array of 0 to 100 outcomes"'
  wk_post /api/v1/claims/outcomes '{"outcomes": [{"token": "t1"}]}' "$WK_OTOKEN"
  wk_expect "a batch with the operator's token: 401" 401 .error.code '"unauthorized"'
  # Three tasks of duo, their three a's claimed.
  printf '{"context": {"n": 1}}\n{"context": {"n": 2}}\n{"context": {"n": 3}}\n' |
    t submit duo --contexts - >/dev/null
  wk_post /api/v1/queues/duo/claim '{"worker": "w4", "max": 3}'
  wk_expect "three a's claimed" 200 '[.claims[] | [.step, .input.context.n]] | sort' \
    '[["a",1],["a",2],["a",3]]'
  for n in 1 2 3; do
    eval "DUO$n=\$(printf '%s' \"\$BODY\" | jq -r --argjson n $n '.claims[] | select(.input.context.n == \$n) | .token')"
    eval "DUO_TASK$n=\$(printf '%s' \"\$BODY\" | jq -r --argjson n $n '.claims[] | select(.input.context.n == \$n) | .task_id')"
  done
  # Their leases (30 s) renewed at once too: the claim and the refusals
  # below took longer than that on a loaded machine (make test, twice).
  for tok in "$DUO1" "$DUO2" "$DUO3"; do
    wk_post "/api/v1/claims/$tok/heartbeat" '{}'
    [ "$CODE" = 200 ] || tap_fail "heartbeat a duo claim at once" "status $CODE: $BODY"
  done
  # A batch with one bad item is refused whole: nothing recorded.
  wk_post /api/v1/claims/outcomes "{\"outcomes\": [{\"token\": \"$DUO1\", \"results\": 1}, {\"token\": \"$DUO2\", \"results\": 1, \"error\": \"x\"}]}"
  wk_expect "an outcome with results and error: 400 naming it" 400 .error.param '"outcomes[1].results"'
  wk_post /api/v1/queues/duo/claim "{\"worker\": \"w4\", \"outcomes\": [{\"token\": \"$DUO1\", \"results\": 1}, {\"token\": 7}]}"
  wk_expect "a claim carrying a bad outcome: 400 naming it" 400 .error.param '"outcomes[1].token"'
  expect_eq "neither changed a step" \
    "$(wk_sql "SELECT count(*) FROM steps WHERE name = 'a' AND state = 'in_progress' AND results IS NULL")" 3
  # Their leases (30 s) renewed: the checks above take long under ASan.
  for tok in "$DUO1" "$DUO2" "$DUO3"; do
    wk_post "/api/v1/claims/$tok/heartbeat" '{}'
    [ "$CODE" = 200 ] || tap_fail "heartbeat a duo claim" "status $CODE: $BODY"
  done
  # One batch: a complete, a fail with retry_after, a token that is none
  # and a second outcome of the first claim (stale: fenced, counted).
  fenced0=$(wk_metric tasker_fenced_writes_total)
  groups0=$(wk_metric tasker_serve_outcome_groups_total)
  wk_post /api/v1/claims/outcomes "{\"outcomes\": [{\"token\": \"$DUO1\", \"results\": {\"x\": 1}}, {\"token\": \"$DUO2\", \"error\": \"later\", \"retry_after\": 15}, {\"token\": \"not-a-token\"}, {\"token\": \"$DUO1\", \"results\": {\"x\": 2}}]}"
  wk_expect "a batch: each outcome answered on its own, in order" 200 \
    '[.outcomes[] | [.state // .error.status, (.run_at | type), .error.param]]' \
    '[["complete","null",null],["waiting_for_retry","number",null],[404,"null","token"],[409,"null","token"]]'
  expect_eq "the batch was one request's group, its stale outcome a fenced write" \
    "$(($(wk_metric tasker_serve_outcome_groups_total) - groups0)) $(($(wk_metric tasker_fenced_writes_total) - fenced0))" "1 1"
  wk_post "/api/v1/claims/$DUO3/heartbeat" '{}'
  # A claim that carries an outcome: recorded first, in the claim's
  # transaction, which claims the steps it (and the batch) released; it
  # answers at once, though it may wait.
  wk_post /api/v1/queues/duo/claim "{\"worker\": \"w4\", \"max\": 2, \"wait\": 30, \"outcomes\": [{\"token\": \"$DUO3\", \"results\": {\"y\": 3}}]}"
  wk_expect "a claim carrying a complete: its answer, and the b's released" 200 \
    '[.outcomes, ([.claims[] | [.step, .input.parents.a]] | sort)]' \
    '[[{"state":"complete"}],[["b",{"x":1}],["b",{"y":3}]]]'
  wk_post /api/v1/claims/outcomes "$(printf '%s' "$BODY" | jq -c '{outcomes: [.claims[] | {token}]}')"
  wk_expect "both b's completed in one batch" 200 '[.outcomes[].state]' '["complete","complete"]'
  # Read with the CLI only now: under ASan on a loaded machine its two
  # calls took long enough for a's retry to come due before the claim above.
  expect_eq "the complete and the fail were recorded, the stale one changed nothing" \
    "$(eval "wk_step \$DUO_TASK1 a '[.state, .results]'") $(eval "wk_step \$DUO_TASK2 a '[.state, .last_error, .history[0].delay_source]'")" \
    '["complete",{"x":1}] ["waiting_for_retry","later","server"]'
  wk_post /api/v1/queues/duo/claim '{"worker": "w4", "wait": 30}'
  wk_expect "a's retry is claimed when due (retry_after 15 s)" 200 '[.claims[] | [.step, .attempt]]' \
    '[["a",2]]'
  wk_post /api/v1/claims/outcomes "$(printf '%s' "$BODY" | jq -c '{outcomes: [.claims[] | {token, results: null}]}')"
  wk_expect "its complete" 200 '[.outcomes[].state]' '["complete"]'
  wk_post /api/v1/queues/duo/claim '{"worker": "w4", "wait": 30}'
  wk_post /api/v1/claims/outcomes "{\"outcomes\": [{\"token\": \"$(printf '%s' "$BODY" | jq -r '.claims[0].token')\"}]}"
  wk_expect "the last b completed" 200 '[.outcomes[].state]' '["complete"]'
  for n in 1 2 3; do
    eval "wait_for \"duo task \$n is complete\" 30 wk_task_is \$DUO_TASK$n complete"
  done

  # Two claims wait on one queue and one transaction makes two steps
  # ready: the store's signal wakes the oldest, which gets all it asked
  # for and so wakes the next at once (not at the recheck).
  signal0=$(wk_answers store_signal)
  more0=$(wk_answers more)
  recheck0=$(wk_answers recheck)
  wk_claim_bg first pair 60
  FIRST=$BG
  wait_for "a first claim waits" 30 wk_waiting_is 1
  wk_claim_bg second pair 60
  SECOND=$BG
  wait_for "a second claim waits" 30 wk_waiting_is 2
  printf '{"context": {"n": 4}}\n{"context": {"n": 5}}\n' | t submit pair --contexts - >/dev/null
  wait "$FIRST"
  wait "$SECOND"
  expect_eq "each waiting claim got one of the two steps" \
    "$(jq -sc '[.[].claims[] | .input.context.n] | sort' "$W/first.json" "$W/second.json")" '[4,5]'
  expect_eq "the first after the signal, the second after it (more), none at the recheck" \
    "$(wk_answers store_signal) $(wk_answers more) $(wk_answers recheck)" \
    "$((signal0 + 1)) $((more0 + 1)) $recheck0"
  for f in first second; do
    wk_post "/api/v1/claims/$(jq -r '.claims[0].token' "$W/$f.json")/complete" '{}'
    [ "$CODE" = 200 ] || tap_fail "complete the $f claim's step" "status $CODE: $BODY"
  done

  # Nothing can come due: a waiting claim is not claimed again until its
  # wait runs out (no recheck interval): two store claims, at its start
  # and at its end (tasker_serve_claim_queries_total counts them). The
  # orchestrator is stopped meanwhile: its own writes would wake the claim
  # (as a signal) and hide what is checked here.
  wk_orch_stop
  q0=$(wk_metric tasker_serve_claim_queries_total)
  recheck0=$(wk_answers recheck)
  wk_claim_bg idle pair 3
  wait "$BG"
  # 2: at its start and end; one more when an earlier step's lease
  # expires meanwhile (its due time too: the claim reaps it), as under
  # ASan; a recheck each second would make 4 or more.
  idle_claims=$(($(wk_metric tasker_serve_claim_queries_total) - q0))
  expect_eq "an idle wait of 3 s: claimed at its start, its end and due times only, no recheck" \
    "$([ "$idle_claims" -ge 2 ] && [ "$idle_claims" -le 3 ] && echo fewer) $(wk_answers recheck)" \
    "fewer $recheck0"

  # A step that comes due with time, scheduled by another process (a
  # delayed start; no signal comes at its due time): the waiting claim is
  # woken at its queue's next due time, which the store told the claim
  # the submit's signal woke, and gets it then, not at a recheck up to a
  # second later.
  due0=$(wk_answers retry_due)
  recheck0=$(wk_answers recheck)
  wk_claim_bg later pair 30
  LATER=$BG
  wait_for "a claim waits for a later step" 30 wk_waiting_is 1
  run t submit pair --in 1500ms
  [ "$RC" -eq 0 ] || tap_fail "submit pair --in 1500ms" "$ERR"
  wait "$LATER"
  LATE_TASK=$(jq -r '.claims[0].task_id' "$W/later.json")
  expect_eq "the waiting claim got the delayed step, woken at its due time, not at a recheck" \
    "$(jq -c '[.claims[] | .step]' "$W/later.json") $(wk_answers retry_due) $(wk_answers recheck)" \
    "[\"only\"] $((due0 + 1)) $recheck0"
  late=$(wk_step "$LATE_TASK" only '.history[0].started_at - .history[0].due_at')
  expect_eq "claimed at or after its due time (${late} ms late)" "$([ "$late" -ge 0 ] && echo yes)" yes
  wk_post "/api/v1/claims/$(jq -r '.claims[0].token' "$W/later.json")/complete" '{}'
  wk_expect "complete the delayed step" 200 .state '"complete"'

  # worker_seen: each (queue, worker) recorded by its claims, at most once
  # per 10 s: a second claim at once leaves the time recorded.
  wk_post /api/v1/queues/pair/claim '{"worker": "seen-1"}'
  seen1=$(wk_sql "SELECT last_seen FROM queue_workers WHERE queue = 'pair' AND worker = 'seen-1'")
  sleep 0.05
  wk_post /api/v1/queues/pair/claim '{"worker": "seen-1"}'
  seen2=$(wk_sql "SELECT last_seen FROM queue_workers WHERE queue = 'pair' AND worker = 'seen-1'")
  expect_eq "a worker's claim is recorded as seen" "$([ "${seen1:-0}" -gt 0 ] && echo yes)" yes
  expect_eq "a second claim within 10 s does not write it again" "$seen2" "$seen1"
  expect_eq "each worker of each queue seen" \
    "$(wk_sql "SELECT count(*) FROM queue_workers WHERE (queue, worker) IN (('images', 'w1'), ('images', 'w2'), ('thumbs', 'w3'))")" 3
  wk_orch_start

  # A waiting worker that hangs up: noticed, nothing claimed for it. Its
  # queue has no steps, so nothing that comes due meanwhile (a retry of
  # images) can answer it first.
  hang0=$(wk_answers hang_up)
  wk_claim_bg gone idle 60
  wait_for "the second claim waits" 30 wk_waiting_is 1
  kill "$BG"
  wait "$BG" 2>/dev/null
  wait_for "its hang-up is noticed (tasker_serve_claims_waiting 0)" 30 wk_waiting_is 0
  expect_eq "answered as a hang-up" "$(wk_answers hang_up)" "$((hang0 + 1))"

  # Stopped while a claim waits: the claim gets none, serve exits 0.
  wk_claim_bg stop images 60
  STOPPED=$BG
  wait_for "a claim waits before the stop" 30 wk_waiting_is 1
  serve_stop
  wait "$STOPPED"
  expect_eq "the waiting claim was answered with none" "$(cat "$W/stop.json")" '{"claims":[]}'
  wk_orch_stop
}
