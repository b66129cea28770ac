# Decisions and map as an operator sees them (issue 21 item 5), through
# the real binary on the store $W/tasker.toml names: `show` (text and
# --json), `show --instances` page by page, `why` on skipped, mapped,
# convergence and failed decision and map steps, `tasks`, and `tasker
# serve`'s API (the task's JSON, GET .../instances with its refusals, an
# instance resolved by its name) and /metrics. Sourced after tap.sh (and
# pg.sh for PostgreSQL) by tests/cli/flow_views.sh and flow_views_pg.sh;
# needs `t` (tasker with the test's configuration), W, curl and jq.
# flow_views_run runs it all.
. "$(dirname "$0")/../lib/serve.sh"

# fv_templates: the templates, written to $W.
#   order: score -> triage (its command chooses review) -> approve -> ship_now,
#          triage -> review (fails for good) ; notify converges on
#          ship_now and review.
#   files: list (25 files) -> process (a map, max_failures 0; f12 fails
#          for good) -> sum.
#   bad:   triage's command names a branch it may not choose.
fv_templates() {
  cat >"$W/order.toml" <<'TOML'
name = "order"
version = "1"
[[steps]]
name = "score"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"risk\": \"high\"}'"] }
[[steps]]
name = "triage"
depends_on = ["score"]
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"branches\": [\"review\"]}'"] }
decides = ["approve", "review"]
[[steps]]
name = "approve"
depends_on = ["triage"]
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "ship_now"
depends_on = ["approve"]
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "review"
depends_on = ["triage"]
handler = { kind = "builtin", name = "fail", times = 100, permanent = true }
[[steps]]
name = "notify"
depends_on = ["ship_now", "review"]
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/files.toml" <<'TOML'
name = "files"
version = "1"
[[steps]]
name = "list"
handler = { kind = "command", argv = ["sh", "-c", "printf '{\"files\": ['; i=0; while [ $i -lt 25 ]; do [ $i -gt 0 ] && printf ', '; printf '\"f%02d.csv\"' $i; i=$((i + 1)); done; echo ']}'"] }
[[steps]]
name = "process"
depends_on = ["list"]
map = { over = "{{parents.list.files}}", max = 100 }
handler = { kind = "command", argv = ["sh", "-c", "if grep -q '\"item\": *\"f12.csv\"'; then echo 'bad file' >&2; exit 3; fi; echo '{\"ok\": true}'"], permanent_exit_codes = [3] }
[[steps]]
name = "sum"
depends_on = ["process"]
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/bad.toml" <<'TOML'
name = "bad"
version = "1"
[[steps]]
name = "triage"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"branches\": [\"ship\"]}'"] }
decides = ["approve", "review"]
[[steps]]
name = "approve"
depends_on = ["triage"]
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "review"
depends_on = ["triage"]
handler = { kind = "builtin", name = "noop" }
TOML
}

# fv_json NAME TASK JQ WANT: `show TASK --json` through JQ (compact).
fv_json() {
  run t show "$2" --json
  expect_eq "$1" "$(printf '%s' "$OUT" | jq -c "$3")" "$4"
}

fv_decision() {
  run t submit order
  ORDER=$OUT
  run t submit bad
  BAD=$OUT
  run t run --until-idle --workers 0
  expect_rc "run the order and the bad decision" 0
  fv_json "order: the states" "$ORDER" '[.steps[] | [.name, .state]]' \
    '[["score","complete"],["triage","complete"],["approve","skipped"],["ship_now","skipped"],["review","error"],["notify","pending"]]'
  fv_json "order: the decision's branches and choice" "$ORDER" \
    '.steps[1] | [.decides, .chosen]' '[["approve","review"],["review"]]'
  fv_json "order: skipped steps say why" "$ORDER" \
    '[.steps[] | select(.state == "skipped") | [.name, .skipped_reason, .why.reason, .why.detail]]' \
    '[["approve","not chosen by triage","skipped","not chosen by triage"],["ship_now","all parents skipped","skipped","all parents skipped"]]'
  fv_json "order: notify waits for review only (ship_now is skipped)" "$ORDER" \
    '.steps[5].why | [.reason, .blocking]' \
    '["waiting_for_dependencies",[{"step":"review","state":"error"}]]'
  fv_json "order: only a decision has decides, only a skipped step a reason" "$ORDER" \
    '[.steps[] | has("decides"), has("skipped_reason")] | map(tostring) | join("")' \
    '"falsefalsetruefalsefalsetruefalsetruefalsefalsefalsefalse"'

  run t show "$ORDER"
  expect_rc "show the order" 0
  expect_match "show: a skipped branch's reason" "$OUT" "skipped: not chosen by triage"
  expect_match "show: skipped because its parents were" "$OUT" "skipped: all parents skipped"
  expect_match "show: what the decision chose" "$OUT" "chose review"
  run t why "$ORDER" approve
  expect_eq "why on a branch not chosen" "$OUT" "approve: skipped (not chosen by triage)"
  run t why "$ORDER" notify
  expect_eq "why on a convergence step names the parent it waits for" "$OUT" \
    "notify: waiting_for_dependencies (waiting for 1 of its 2 parents (a parent counts once complete, resolved or skipped))
  waiting for review (error)"

  fv_json "bad: the decision failed for good" "$BAD" '[.steps[] | [.name, .state]]' \
    '[["triage","error"],["approve","pending"],["review","pending"]]'
  run t why "$BAD" triage
  expect_match "why on a failed decision: its message" "$OUT" \
    'triage: error (the decision failed for good: decision: "ship" is not one of the branches of triage (approve, review)'
}

fv_map() {
  run t submit files
  FILES=$OUT
  run t run --until-idle --workers 0
  expect_rc "run the map" 0
  fv_json "files: the map failed (one instance, max_failures 0)" "$FILES" \
    '[.steps[] | [.name, .state]], (.steps[1].instances | [.total, .done, .failed, .waiting])' \
    '[["list","complete"],["process","error"],["sum","pending"]]
[25,24,1,0]'
  # The task's history holds its template steps' moves; instances are paged.
  fv_json "files: the task's own transitions, none of an instance" \
    "$FILES" '[.transitions[] | select(.step == null) | .to], ([.transitions[] | select(.step != null and (.step | contains("["))) | .to])' \
    '["pending","in_progress","error"]
[]'
  run t why "$FILES" process
  expect_eq "why on a map in error: retry its failed instances" "$OUT" \
    "process: error (the map failed for good: 1 of 25 instances failed; max_failures is 0; \`tasker retry\` its failed instances, or \`tasker resolve\` it)"
  # An operator retry of the instance puts the map back to mapped.
  run t retry "$FILES" 'process[12]'
  expect_rc "retry the failed instance" 0
  fv_json "files: mapped again, waiting for one" "$FILES" \
    '.steps[1] | [.state, .why.detail, .instances.waiting, .instances.failed]' \
    '["mapped","waiting for 1 of 25 instances (0 failed)",1,0]'
  fv_json "files: the first 10 instances, in element order" "$FILES" \
    '.steps[1].instances | [[.first[] | .item_index], .first[3].name, .first[3].item, .next_after]' \
    '[[0,1,2,3,4,5,6,7,8,9],"process[3]","f03.csv",9]'
  run t why "$FILES" process
  expect_eq "why on a mapped step" "$OUT" "process: mapped (waiting for 1 of 25 instances (0 failed))"
  run t why "$FILES" sum
  expect_match "why on the map's child" "$OUT" "waiting for process (mapped)"
  run t why "$FILES" 'process[3]'
  expect_eq "why on an instance that finished" "$OUT" "process[3]: done (the step has finished)"
  run t why "$FILES" 'process[12]'
  expect_eq "why on the retried instance" "$OUT" \
    "process[12]: ready (ready now: the next claim by any orchestrator takes it)"
  run t why "$FILES" 'process[25]'
  expect_rc "why on an instance past the end: exit 2" 2
  expect_eq "... naming it" "$ERR" "tasker why: task $FILES has no step \"process[25]\""
  run t show "$FILES"
  expect_match "show: the map's counts" "$OUT" "25 instances: 24 done, 0 failed, 1 waiting"
  expect_match "show: the first instances" "$OUT" "process[3]"
  expect_match "show: the next page's command" "$OUT" "more: tasker show $FILES --instances process --after 9"

  # Page by page: every instance once, in order. The retried instance
  # waits for its run with fresh attempts and its last error kept.
  got=""
  after=""
  pages=0
  while [ "$pages" -lt 10 ]; do
    run t show "$FILES" --instances process --limit 10 ${after:+--after "$after"} --json
    [ "$RC" -eq 0 ] || break
    pages=$((pages + 1))
    got="$got$(printf '%s' "$OUT" | jq -r '[.instances[].item_index] | map(tostring) | join(",")'),"
    after=$(printf '%s' "$OUT" | jq -r '.next_after // empty')
    [ -n "$after" ] || break
  done
  expect_eq "show --instances: three pages, every instance once" "$pages:$got" \
    "3:0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,"
  run t show "$FILES" --instances process --after 10 --limit 2
  expect_eq "show --instances as text" "$OUT" \
    "task $FILES  step process: 2 of 25 instances, after index 10
INDEX  NAME                 STATE               ATTEMPTS  LAST ERROR OR ITEM
11     process[11]          complete                 1/5  item \"f11.csv\"
12     process[12]          waiting_for_retry        0/5  exit status 3 (permanent_exit_codes): bad file
more: tasker show $FILES --instances process --after 12"
  run t show "$FILES" --instances list
  expect_rc "show --instances of a step that is no map: exit 2" 2
  expect_eq "... naming it" "$ERR" \
    "tasker show: step \"list\" of task $FILES is not a map step: only a map step has instances"
  run t show "$FILES" --instances process --limit 0
  expect_rc "show --instances --limit 0: exit 2" 2
  run t show "$FILES" --after 3
  expect_rc "--after without --instances: exit 2" 2
  expect_eq "... saying so" "$ERR" \
    "tasker show: --after 3: only with --instances STEP (it pages a map step's instances)"
}

fv_api() {
  serve_start || return
  get() { curl -s "$BASE$1"; }
  expect_eq "API: the task's map" \
    "$(get "/api/v1/tasks/$FILES" | jq -c '.steps[1] | [.state, .map.parent, .instances.total, (.instances.first | length)]')" \
    '["mapped","list",25,10]'
  expect_eq "API: the decision" \
    "$(get "/api/v1/tasks/$ORDER" | jq -c '[.steps[1].chosen, .steps[2].skipped_reason]')" \
    '[["review"],"not chosen by triage"]'
  expect_eq "API: a page of instances" \
    "$(get "/api/v1/tasks/$FILES/steps/process/instances?after=19&limit=3" | jq -c '[.total, [.instances[].name], .next_after]')" \
    '[25,["process[20]","process[21]","process[22]"],22]'
  expect_eq "API: the last page" \
    "$(get "/api/v1/tasks/$FILES/steps/process/instances?after=22" | jq -c '[[.instances[].item_index], .next_after]')" \
    '[[23,24],null]'
  expect_eq "API: limit out of range" \
    "$(get "/api/v1/tasks/$FILES/steps/process/instances?limit=1001" | jq -c '[.error.status, .error.code, .error.param, .error.message]')" \
    '[400,"bad_request","limit","limit=\"1001\": expected an integer from 1 to 1000"]'
  expect_eq "API: after not a number" \
    "$(get "/api/v1/tasks/$FILES/steps/process/instances?after=x" | jq -c '[.error.status, .error.param]')" \
    '[400,"after"]'
  expect_eq "API: an unknown parameter" \
    "$(get "/api/v1/tasks/$FILES/steps/process/instances?cursor=3" | jq -c '[.error.status, .error.param]')" \
    '[400,"cursor"]'
  expect_eq "API: a step that is no map" \
    "$(get "/api/v1/tasks/$FILES/steps/sum/instances" | jq -c '[.error.status, .error.param, .error.message]')" \
    "[400,\"step\",\"step \\\"sum\\\" of task $FILES is not a map step: only a map step has instances\"]"
  expect_eq "API: no such step" \
    "$(get "/api/v1/tasks/$FILES/steps/nope/instances" | jq -c '[.error.status, .error.param]')" \
    '[404,"step"]'
  expect_eq "API: no such task" \
    "$(get "/api/v1/tasks/999999/steps/process/instances" | jq -c '[.error.status, .error.param]')" \
    '[404,"id"]'
  metrics=$(get /metrics)
  expect_match "metrics: two steps skipped" "$metrics" 'tasker_store_steps{state="skipped"} 2'
  expect_match "metrics: one step mapped" "$metrics" 'tasker_store_steps{state="mapped"} 1'
  # An instance is acted on by its name, %-encoded in the path.
  expect_eq "API: resolve an instance" \
    "$(curl -s -X POST -H 'X-Tasker-Request: 1' "$BASE/api/v1/tasks/$FILES/steps/process%5B12%5D/resolve" | jq -c '[.step, .action]')" \
    '["process[12]","resolve"]'
  serve_stop
}

fv_settle() {
  # Resolving the instance (fv_api did) settled the map: complete, and
  # its child runs.
  run t run --until-idle --workers 0
  fv_json "files: the map complete, its child ran" "$FILES" \
    '[.steps[] | .state], (.steps[1].instances | [.done, .failed, .waiting]), .execution_status' \
    '["complete","complete","complete"]
[25,0,0]
"all_complete"'
  run t tasks --template files
  expect_match "tasks: the map counts once" "$OUT" " 3/3 "
  run t tasks --template order
  expect_match "tasks: skipped steps count as done" "$OUT" " 4/6 "
}

flow_views_run() {
  fv_templates
  run t init
  expect_rc "init" 0
  run t template add "$W/order.toml" "$W/files.toml" "$W/bad.toml"
  expect_rc "template add (decides, map)" 0
  [ "$RC" -eq 0 ] || return
  fv_decision
  fv_map
  fv_api
  fv_settle
}
