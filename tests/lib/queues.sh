# Queues and priority above the store (issue 23 items 4 and 5) through the
# real binary and a real `tasker serve`, on the store $W/tasker.toml names:
# - a step's queue = "NAME" in a template (a bad name, and a worker step
#   naming another queue than its handler's, refused with FILE:LINE:COLUMN;
#   nothing stored), shown on the step by show --json;
# - a task's priority from submit --priority, submit --contexts lines and
#   POST /api/v1/tasks (one and many), shown by show, show --json, the
#   API's task and both lists; out of range or not an integer: refused,
#   nothing stored;
# - [queues.NAME] given to the store by `tasker run` at start (and a
#   changed configuration's whole set replacing it), then `tasker queues`
#   (table and --json), GET /api/v1/queues (the same report) and the
#   tasker_store_queue_* series of /metrics over steps ready, scheduled (a
#   delayed start) and in progress (a worker's claim).
# Sourced after tap.sh (and pg.sh for PostgreSQL) by tests/cli/queues.sh and
# queues_pg.sh; needs `t`, W, curl and jq. q_run runs it all.
. "$(dirname "$0")/../lib/serve.sh"

q_config() {
  tasker_config $QUICK_RETRIES queues.payments.concurrency=2 queues.payments.rate=90/m \
    queues.pix.concurrency=1 "$@"
}

q_templates() {
  cat >"$W/pay.toml" <<'TOML'
name = "pay"
version = "1"
[[steps]]
name = "charge"
queue = "payments"
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "mail"
depends_on = ["charge"]
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/pix.toml" <<'TOML'
name = "pix"
version = "1"
[[steps]]
name = "resize"
queue = "pix"
handler = { kind = "worker", queue = "pix" }
TOML
  sed 's/queue = "payments"/queue = "Pay!"/' "$W/pay.toml" >"$W/badname.toml"
  sed 's/^queue = "pix"/queue = "images"/' "$W/pix.toml" >"$W/mismatch.toml"
}

# q_snapshot: what the store holds, through the binary.
q_snapshot() {
  t tasks --json --limit 1000 | jq -c '[.tasks[] | [.id, .state, .priority]]'
  t template list --json | jq -c '[.[] | .name]'
}

# q_refused NAME WANT_RC WANT_ERR CMD...: CMD exits WANT_RC with stderr
# WANT_ERR, and the store is as it was.
q_refused() {
  qr_name=$1 qr_rc=$2 qr_err=$3
  shift 3
  qr_before=$(q_snapshot)
  run "$@"
  expect_rc "$qr_name: exit $qr_rc" "$qr_rc"
  expect_eq "$qr_name: what was wrong" "$ERR" "$qr_err"
  expect_eq "$qr_name: nothing stored" "$(q_snapshot)" "$qr_before"
}

q_templates_check() {
  q_refused "a step's queue not a queue name" 78 \
    "tasker template add: $W/badname.toml:5:9: steps[1].queue = \"Pay!\": expected a queue name: 1 to 64 lowercase letters, digits, '_', '.' or '-'" \
    t template add "$W/badname.toml"
  q_refused "a worker step naming another queue than its handler's" 78 \
    "tasker template add: $W/mismatch.toml:5:9: steps[1].queue = \"images\": a worker step's queue is its handler's (\"pix\"), the one its workers claim from: leave queue out or make it \"pix\"" \
    t template add "$W/mismatch.toml"
  run t template add "$W/pay.toml" "$W/pix.toml"
  expect_rc "template add pay, pix" 0
}

q_priority() {
  run t submit pay --priority 5
  expect_rc "submit --priority 5" 0
  expect_eq "its id" "$OUT" 1
  run t show 1 --json
  expect_eq "show --json: the priority and each step's queue" \
    "$(printf '%s' "$OUT" | jq -c '[.priority, [.steps[] | [.name, .queue]]]')" \
    '[5,[["charge","payments"],["mail",null]]]'
  run t show 1
  expect_match "show: the priority" "$OUT" "priority: 5"
  run t submit pay
  expect_rc "submit without --priority" 0
  expect_eq "the default priority is 0" "$(t show 2 --json | jq -c .priority)" 0
  expect_eq "show leaves the default unsaid" "$(t show 2 | grep -c '^priority:')" 0
  q_refused "--priority out of range" 2 \
    'tasker submit: --priority: invalid value "1001": expected an integer from -1000 to 1000' \
    t submit pay --priority 1001
  q_refused "--priority not an integer" 2 \
    'tasker submit: --priority: invalid value "high": expected an integer from -1000 to 1000' \
    t submit pay --priority high
  printf '%s\n' '{"priority": 7}' '{"priority": -3, "context": {"n": 1}}' '{}' >"$W/lines.jsonl"
  run t submit pay --contexts "$W/lines.jsonl" --priority 2
  expect_rc "--contexts with priorities" 0
  expect_eq "ids 3 to 5" "$(echo $OUT)" "3 4 5"
  printf '%s\n' '{}' '{"priority": 5000}' >"$W/bad.jsonl"
  q_refused "a --contexts line's priority out of range" 2 \
    "tasker submit: $W/bad.jsonl:2: priority 5000: must be an integer from -1000 to 1000 (higher is claimed first; 0 is the default); nothing submitted" \
    t submit pay --contexts "$W/bad.jsonl"
  printf '%s\n' '{"priority": "high"}' >"$W/bad.jsonl"
  q_refused "a --contexts line's priority not an integer" 2 \
    "tasker submit: $W/bad.jsonl:1: priority: expected an integer from -1000 to 1000; nothing submitted" \
    t submit pay --contexts "$W/bad.jsonl"
  expect_eq "tasks --json: each task's priority (a line's own, else --priority's)" \
    "$(t tasks --json | jq -c '[.tasks[] | [.id, .priority]] | sort')" \
    '[[1,5],[2,0],[3,7],[4,-3],[5,2]]'
}

# q_api_priority: POST /api/v1/tasks with priorities, one and many; the
# task and the list show them; bad ones are 400 naming priority, and
# change nothing. Tasks 6 to 8.
q_api_priority() {
  api=$BASE/api/v1
  post() {
    curl -s -o "$W/body" -w '%{http_code}' -H 'Content-Type: application/json' \
      -H 'X-Tasker-Request: 1' -d "$1" "$api/tasks"
  }
  expect_eq "POST one with priority 9: 201" "$(post '{"template": "pay", "priority": 9}')" 201
  expect_eq "its id" "$(jq -c .id "$W/body")" 6
  expect_eq "GET the task: priority 9" "$(curl -s "$api/tasks/6" | jq -c .priority)" 9
  expect_eq "POST many with priorities: 201" \
    "$(post '[{"template": "pay", "priority": -1000}, {"template": "pay", "priority": 1000}]')" 201
  expect_eq "the list shows them" \
    "$(curl -s "$api/tasks?template=pay&limit=3" | jq -c '[.tasks[] | [.id, .priority]]')" \
    '[[8,1000],[7,-1000],[6,9]]'
  before=$(q_snapshot)
  expect_eq "POST one with priority 1001: 400" "$(post '{"template": "pay", "priority": 1001}')" 400
  expect_eq "... naming priority and the range" "$(jq -c '.error | [.code, .param, .message]' "$W/body")" \
    '["bad_request","priority","priority 1001: must be an integer from -1000 to 1000 (higher is claimed first; 0 is the default)"]'
  expect_eq "POST many with one out of range: 400" \
    "$(post '[{"template": "pay"}, {"template": "pay", "priority": -1001}]')" 400
  expect_eq "... naming the element" "$(jq -c '.error | [.param, .message]' "$W/body")" \
    '["priority","body[1]: priority -1001: must be an integer from -1000 to 1000 (higher is claimed first; 0 is the default)"]'
  expect_eq "POST a priority that is not an integer: 400" \
    "$(post '{"template": "pay", "priority": 1.5}')" 400
  expect_eq "... naming priority" "$(jq -c '.error | [.param, .message]' "$W/body")" \
    '["priority","priority: a number: expected an integer (higher is claimed first)"]'
  expect_eq "nothing stored by the refused posts" "$(q_snapshot)" "$before"
}

# q_queues_want: the report's counts and limits (what does not move with
# the clock), as jq prints them.
q_counts() { jq -c '[.[] | [.name, .ready, .scheduled, .in_progress, .concurrency, .rate, .burst, .worker, (.oldest_ready_at != null), (.oldest_ready_age_ms >= 0)]]'; }

q_seen() {
  # Tasks 1 to 8 of pay: run them (tasker run syncs the queues first).
  run t run --until-idle
  expect_rc "run until idle (syncs the configured queues)" 0
  # Now: 3 tasks of pay ready (charge in payments), 1 delayed (its charge
  # scheduled), 2 of pix (one to be claimed by a worker).
  for i in 1 2 3; do t submit pay >/dev/null; done
  t submit pay --in 1h >/dev/null
  pix1=$(t submit pix)
  pix2=$(t submit pix)
  run t why "$pix2" resize --json
  expect_eq "why: a ready step of pix with room in it is ready" \
    "$(printf '%s' "$OUT" | jq -r .reason)" ready
  run curl -s -H 'Content-Type: application/json' -d '{"worker": "w1", "max": 1, "wait": 0}' \
    "$BASE/api/v1/queues/pix/claim"
  expect_eq "a worker claims one step of pix" \
    "$(printf '%s' "$OUT" | jq -c '[.claims[] | [.step, .task_id]]')" "[[\"resize\",$pix1]]"
  # pix (concurrency 1) is full: why says the other waits for room in it,
  # in the CLI and the API (one report).
  run t why "$pix2" resize
  expect_eq "why: the other step of pix waits for room in its queue" "$OUT" \
    'resize: waiting_for_queue (ready, waiting for room in queue "pix": 1 of its concurrency 1 in progress)'
  expect_eq "the API's why says the same" \
    "$(curl -s "$BASE/api/v1/tasks/$pix2" | jq -c '.steps[0].why | [.reason, .queue]')" \
    '["waiting_for_queue","pix"]'
  want='[["payments",3,1,0,2,"90/m",2,false,true,true],["pix",1,0,1,1,null,null,true,true,true]]'
  run t queues --json
  expect_rc "tasker queues --json" 0
  expect_eq "tasker queues --json: ready, scheduled, in progress, limits" \
    "$(printf '%s' "$OUT" | q_counts)" "$want"
  expect_eq "tokens: within the bucket of 2" \
    "$(printf '%s' "$OUT" | jq -c '[.[] | .tokens | if . == null then null else (. >= 0 and . <= 2) end]')" \
    '[true,null]'
  expect_eq "rate_per_second" "$(printf '%s' "$OUT" | jq -c '[.[] | .rate_per_second]')" '[1.5,null]'
  run curl -s "$BASE/api/v1/queues"
  expect_eq "GET /api/v1/queues: the same report" "$(printf '%s' "$OUT" | q_counts)" "$want"
  run t queues
  expect_rc "tasker queues" 0
  expect_eq "tasker queues: its header" "$(printf '%s\n' "$OUT" | head -n 1 | tr -s ' ')" \
    "QUEUE READY IN PROGRESS LIMIT RATE TOKENS OLDEST WORKERS"
  expect_match "tasker queues: payments' line (ready 3, none in progress, limit 2, 90/m)" \
    "$(printf '%s\n' "$OUT" | grep '^payments ' | tr -s ' ')" "payments 3 0 2 90/m "
  expect_match "tasker queues: pix's line (1 ready, 1 in progress, limit 1, no rate)" \
    "$(printf '%s\n' "$OUT" | grep '^pix ' | tr -s ' ')" "pix 1 1 1 - - "
  # The store's figures are counted every few seconds: until they show
  # the claim.
  metrics_show() {
    curl -s "$BASE/metrics" >"$W/metrics"
    grep -qx 'tasker_store_queue_in_progress{queue="pix"} 1' "$W/metrics"
  }
  wait_for "/metrics counts the worker's claim" 120 metrics_show
  for line in 'tasker_store_queue_ready{queue="payments"} 3' \
    'tasker_store_queue_scheduled{queue="payments"} 1' \
    'tasker_store_queue_ready{queue="pix"} 1' \
    'tasker_store_queue_concurrency_limit{queue="payments"} 2' \
    'tasker_store_queue_concurrency_limit{queue="pix"} 1' \
    'tasker_store_queue_rate_limit{queue="payments"} 1.5'; do
    if grep -qxF "$line" "$W/metrics"; then tap_ok "/metrics: $line"
    else tap_fail "/metrics: $line" "$(grep tasker_store_queue "$W/metrics")"; fi
  done
  expect_eq "/metrics: no rate series for pix (no rate)" \
    "$(grep -c 'tasker_store_queue_rate_limit{queue="pix"}' "$W/metrics")" 0
  # A changed configuration: its whole set replaces the store's.
  tasker_config $QUICK_RETRIES queues.payments.concurrency=5 queues.payments.rate=90/m
  # An orchestrator started with it (not --until-idle: pix's steps are
  # work left for a worker) syncs it at start.
  q_limits() { t queues --json | jq -c '[.[] | [.name, .concurrency, .rate]]'; }
  q_limits_new() { [ "$(q_limits)" = '[["payments",5,"90/m"],["pix",null,null]]' ]; }
  bg_start orch "$TASKER" --config "$W/tasker.toml" run >"$W/orch.log" 2>&1
  if wait_for "an orchestrator started with a changed configuration syncs its queues" 120 q_limits_new; then
    tap_ok "the store's limits are the new configuration's whole set: $(q_limits)"
  fi
  kill -TERM "$(bg_pid orch)" 2>/dev/null
  if bg_wait orch 60; then
    RC=$BG_RC OUT="" ERR=$(tail -n 5 "$W/orch.log")
    expect_rc "the orchestrator exits 0 on SIGTERM" 0
  else
    tap_fail "the orchestrator exits 0 on SIGTERM" "it did not end within 60s"
  fi
}

q_run() {
  q_config
  q_templates
  run t init
  expect_rc "init" 0
  q_templates_check
  q_priority
  serve_start || { tap_done; exit 1; }
  q_api_priority
  q_seen
  serve_stop
}
