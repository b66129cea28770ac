# Child tasks (issue 24 part 3, DESIGN §18; docs/children.md) through the
# real binary, on the store $W/tasker.toml names:
# - the example (examples/templates/parent_children*.toml: a parent with
#   two task steps, each starting a child workflow) runs to completion
#   with `tasker run --until-idle`: exactly two children, each complete,
#   and each task step's results are its child's leaf steps' results by
#   name (the second child got the first one's label through its context);
# - show lists each step's children, a child shows its parent; the JSON
#   (show --json and GET /api/v1/tasks/ID) has parent and children;
# - a child that fails fails the attempt, and the retry starts a second
#   child;
# - with an orchestrator running, a task step waits while its child waits
#   for a signal: show says so, why says waiting_for_child with since (no
#   until: no timeout); the child's signal completes it and the parent;
# - a task step whose template is unknown fails for good, saying so;
# - cancelling a parent cancels its child still running;
# - a bad task handler is refused at template add with FILE:LINE:COLUMN.
# Sourced after tap.sh and config.sh (and pg.sh for PostgreSQL) by
# tests/cli/children.sh and children_pg.sh; needs `t`, W and jq. ch_run
# runs it all.
. "$(dirname "$0")/../lib/serve.sh"

ch_templates() {
  cat >"$W/flaky.toml" <<'TOML'
name = "flaky_parent"
version = "1"
[[steps]]
name = "try"
handler = { kind = "task", template = "flaky_child", context = { marker = "{{context.marker}}" } }
retry = { max_attempts = 2 }
TOML
  # Fails while the marker file (its context's, read from its input on
  # stdin) exists: the first child removes it and fails; the next succeeds.
  cat >"$W/flaky_child.toml" <<'TOML'
name = "flaky_child"
version = "1"
[retry]
max_attempts = 1
[[steps]]
name = "work"
handler = { kind = "command", argv = ["sh", "-c", "m=$(jq -r .context.marker); if [ -e \"$m\" ]; then rm -f \"$m\"; echo boom >&2; exit 3; fi; echo '{\"done\": true}'"] }
TOML
  cat >"$W/hold.toml" <<'TOML'
name = "hold_parent"
version = "1"
[[steps]]
name = "hold"
handler = { kind = "task", template = "hold_child" }
TOML
  cat >"$W/hold_child.toml" <<'TOML'
name = "hold_child"
version = "1"
[[steps]]
name = "ok"
handler = { kind = "wait", timeout = "1h" }
TOML
  cat >"$W/orphan.toml" <<'TOML'
name = "orphan"
version = "1"
[[steps]]
name = "start"
handler = { kind = "task", template = "no_such_template" }
TOML
  printf 'name = "bad"\nversion = "1"\n[[steps]]\nname = "s"\nhandler = { kind = "task", tempate = "x" }\n' \
    >"$W/bad.toml"
}

# ch_field ID JQ: jq's compact answer about task ID's show --json.
ch_field() { t show "$1" --json | jq -c "$2"; }

ch_run() {
  tasker_config $QUICK_RETRIES
  ch_templates
  run t init
  expect_rc "init" 0
  run t template add "${TK_TOP:-.}"/examples/templates/parent_children.toml \
    "${TK_TOP:-.}"/examples/templates/parent_children_pack.toml \
    "${TK_TOP:-.}"/examples/templates/parent_children_ship.toml \
    "$W/flaky.toml" "$W/flaky_child.toml" "$W/hold.toml" "$W/hold_child.toml" "$W/orphan.toml"
  expect_rc "template add: the example and the test's templates" 0

  run t template add "$W/bad.toml"
  expect_rc "a bad task handler: exit 78" 78
  expect_match "it names the file, line and column, and the key" "$ERR" "bad.toml:5:"
  expect_match "... the nearest known key" "$ERR" "tempate"

  # The example, to completion.
  p=$(t submit fulfil --context '{"order": "A-17"}')
  run t run --until-idle
  expect_rc "run --until-idle" 0
  expect_eq "the parent completes" "$(ch_field "$p" .state)" '"complete"'
  expect_eq "two children, both complete, one per task step" \
    "$(ch_field "$p" '[.children[] | [.step, .state, .attempt]]')" \
    '[["pack","complete",1],["ship","complete",1]]'
  pack=$(ch_field "$p" '.children[0].id')
  ship=$(ch_field "$p" '.children[1].id')
  expect_eq "pack's results are its child's leaf steps' by name" \
    "$(ch_field "$p" '.steps[0].results')" '{"label":{"label":"PARCEL-1"}}'
  expect_eq "ship's child got the label through its context" \
    "$(ch_field "$ship" '.context' | jq -cS .)" '{"label":"PARCEL-1","order":"A-17"}'
  expect_eq "ship's results" "$(ch_field "$p" '.steps[1].results')" \
    '{"book":{"carrier":"post","tracking":"T-1"}}'
  expect_eq "a child's JSON names its parent" "$(ch_field "$pack" '.parent | [.task, .step, .attempt]')" \
    "[$p,\"pack\",1]"
  expect_eq "a step's JSON lists its children" "$(ch_field "$p" '.steps[1].children | map(.id)')" \
    "[$ship]"
  run t show "$p"
  expect_match "show lists each step's children" "$OUT" "children of pack: task $pack (complete, attempt 1)"
  run t show "$ship"
  expect_match "a child shows its parent" "$OUT" "parent: task $p step ship attempt 1"

  # A child that fails, then a retry with a second child; while it waits,
  # show and why say what for.
  : >"$W/marker"
  f=$(t submit flaky_parent --context "{\"marker\": \"$W/marker\"}")
  run t run --until-idle
  expect_rc "run --until-idle (flaky)" 0
  expect_eq "the flaky parent completes on its second attempt" \
    "$(ch_field "$f" '[.state, .steps[0].attempts]')" '["complete",2]'
  expect_eq "two children: the first in error, the second complete" \
    "$(ch_field "$f" '[.children[] | [.state, .attempt]]')" '[["error",1],["complete",2]]'
  first=$(ch_field "$f" '.children[0].id')
  expect_match "the first attempt failed naming its child" \
    "$(ch_field "$f" '.steps[0].history[0].error')" "child task $first ended in error: step work"
  # An operator's retry of that ended child: it ends again, now complete,
  # which is the outcome of no attempt (its first end was its claim's
  # signal), and the parent stays as it was. A second signal for the claim
  # was refused, and the child's outcome could never be recorded.
  run t retry "$first" work
  expect_rc "retry the child that ended in error" 0
  run timeout 60 "$TASKER" --config "$W/tasker.toml" run --until-idle
  expect_rc "run --until-idle (the retried child)" 0
  expect_eq "the retried child completes" "$(ch_field "$first" '[.state, .steps[0].attempts]')" \
    '["complete",1]'
  expect_eq "the parent is as it was: complete on its second attempt, by its second child" \
    "$(ch_field "$f" '[.state, .steps[0].attempts, .steps[0].results]')" \
    '["complete",2,{"work":{"done":true}}]'

  # Waiting, with an orchestrator running: the child waits for a signal;
  # show and why say the parent's step waits for it; the signal completes
  # the child, and the parent's step goes on.
  h=$(t submit hold_parent)
  bg_start orch "$TASKER" --config "$W/tasker.toml" run >>"$W/orch.log" 2>&1
  ch_kid_waits() { [ "$(ch_field "$h" '.children[0].id')" != null ] && \
    [ "$(ch_field "$(ch_field "$h" '.children[0].id')" '.steps[0].state')" = '"waiting"' ]; }
  wait_for "task $h's child waits for its signal" 60 ch_kid_waits
  hk=$(ch_field "$h" '.children[0].id')
  run t show "$h"
  expect_match "show: the step waits for its child" "$OUT" "waiting for child task $hk"
  run t why "$h" hold
  expect_match "why: waiting_for_child" "$OUT" "waiting_for_child"
  expect_match "why: which child" "$OUT" "child task $hk"
  expect_match "why: since when" "$OUT" " since "
  expect_eq "why --json: no until without a timeout" \
    "$(t why "$h" hold --json | jq -c '[.reason, .child, .until, (.since > 0)]')" \
    "[\"waiting_for_child\",$hk,null,true]"
  run t signal "$hk" ok --data '{"by": "ann"}'
  expect_rc "the child's signal" 0
  ch_done() { [ "$(ch_field "$h" .state)" = '"complete"' ]; }
  wait_for "the child's end completes task $h" 60 ch_done
  expect_eq "its results are the child's" "$(ch_field "$h" '.steps[0].results')" '{"ok":{"by":"ann"}}'
  kill -TERM "$(bg_pid orch)"
  bg_wait orch 60
  expect_eq "the orchestrator exits 0 on SIGTERM" "$BG_RC" 0

  # An unknown child template: a permanent failure that says so.
  o=$(t submit orphan)
  run t run --until-idle
  expect_eq "an unknown child template fails the step for good" \
    "$(ch_field "$o" '[.state, .steps[0].state, .steps[0].attempts]')" '["error","error",1]'
  expect_match "... saying which template" "$(ch_field "$o" '.steps[0].last_error')" \
    'cannot start a child task of \"no_such_template\"'

  # Cancelling a parent cancels its child that still runs.
  c=$(t submit hold_parent)
  run t run --until-idle
  ck=$(ch_field "$c" '.children[0].id')
  expect_eq "the child waits" "$(ch_field "$ck" '.steps[0].state')" '"waiting"'
  run t cancel "$c"
  expect_rc "cancel the parent" 0
  expect_eq "the child is cancelled with it" \
    "$(ch_field "$ck" '[.state, .steps[0].state, .end_reason]')" \
    '["cancelled","cancelled","parent task ended"]'

  # The API has the same links.
  serve_start
  expect_eq "API: the parent's children" \
    "$(curl -s "$BASE/api/v1/tasks/$p" | jq -c '[.children[].id]')" "[$pack,$ship]"
  expect_eq "API: a child's parent" \
    "$(curl -s "$BASE/api/v1/tasks/$pack" | jq -c '.parent.task')" "$p"
  serve_stop
}
