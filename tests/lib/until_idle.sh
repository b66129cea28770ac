# tasker run --until-idle beside worker steps (issue 23), through the real
# binary on the store $W/tasker.toml names: steps of a worker queue
# (handler kind "worker", run by outside workers through tasker serve) are
# work no orchestrator can do, so run --until-idle does not wait for them.
# - a template of a command step and then a worker step: run --until-idle
#   runs the command step, exits 0 and notes on stderr how many steps wait
#   for workers and on which queue; the worker step stays pending (show);
# - a template whose worker step comes first: it exits 0 at once, the
#   worker step and the command step after it both pending;
# - with no worker step left, no such note;
# - a worker holding a step (claimed through tasker serve) does not hold it
#   either, but another orchestrator's step in progress does: it exits
#   once that step is done.
# Each run is under `timeout`: the old behaviour, waiting for the worker
# steps forever, fails the test (exit 124) instead of hanging it.
# Sourced after tap.sh (and pg.sh for PostgreSQL) by tests/cli/until_idle.sh
# and until_idle_pg.sh; needs `t`, W, curl and jq. ui_run runs it all.
. "$(dirname "$0")/../lib/serve.sh"

# How long a run --until-idle may take before it counts as waiting forever
# (it takes well under a second; generous for a loaded machine).
UI_LIMIT=${UI_LIMIT:-60}

ui_templates() {
  cat >"$W/thumbs.toml" <<'TOML'
name = "thumbs"
version = "1"
[[steps]]
name = "fetch"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"url\": \"a.png\"}'"] }
[[steps]]
name = "resize"
depends_on = ["fetch"]
handler = { kind = "worker", queue = "images" }
TOML
  cat >"$W/first.toml" <<'TOML'
name = "first"
version = "1"
[[steps]]
name = "scan"
handler = { kind = "worker", queue = "scans" }
[[steps]]
name = "store"
depends_on = ["scan"]
handler = { kind = "command", argv = ["sh", "-c", "echo '{}'"] }
TOML
  cat >"$W/slow.toml" <<'TOML'
name = "slow"
version = "1"
[[steps]]
name = "nap"
handler = { kind = "command", argv = ["sh", "-c", "sleep 3; echo '{}'"] }
TOML
  cat >"$W/plain.toml" <<'TOML'
name = "plain"
version = "1"
[[steps]]
name = "only"
handler = { kind = "command", argv = ["sh", "-c", "echo '{}'"] }
TOML
}

# ui_steps ID: task ID's steps as [name, state] pairs, from show --json.
ui_steps() { t show "$1" --json | jq -c '[.steps[] | [.name, .state]]'; }

# ui_running ID: task ID's only step is in progress.
ui_running() { [ "$(t show "$1" --json | jq -r '.steps[0].state')" = in_progress ]; }

# ui_idle WHAT: run --until-idle under the time limit, exit 0 checked.
ui_idle() {
  run timeout "$UI_LIMIT" "$TASKER" --config "$W/tasker.toml" run --until-idle --workers 2
  expect_rc "run --until-idle exits 0 ($1; 124: still waiting after ${UI_LIMIT}s)" 0
}

ui_run() {
  tasker_config engine.heartbeat=1s
  ui_templates
  run t init
  expect_rc "init" 0
  run t template add "$W/thumbs.toml" "$W/first.toml" "$W/plain.toml" "$W/slow.toml"
  expect_rc "template add" 0

  run t submit plain
  expect_eq "a task of plain" "$OUT" 1
  ui_idle "no worker step"
  expect_eq "plain: its step ran" "$(ui_steps 1)" '[["only","complete"]]'
  expect_eq "no note of steps for workers when none is left" \
    "$(printf '%s\n' "$ERR" | grep -c 'wait.* for workers')" 0

  # A worker step first: nothing an orchestrator runs is ready.
  run t submit first
  expect_eq "a task of first" "$OUT" 2
  ui_idle "a worker step first"
  expect_match "the note: one step for workers, queue scans" "$ERR" \
    "tasker run: idle; 1 step waits for workers (queue scans: 1)"
  expect_eq "first: both steps pending" "$(ui_steps 2)" '[["scan","pending"],["store","pending"]]'

  # Command steps, then worker steps: the command steps run.
  for n in 3 4 5; do
    run t submit thumbs
    expect_eq "a task of thumbs" "$OUT" "$n"
  done
  ui_idle "command steps, then worker steps"
  expect_match "the note: four steps for workers, by queue" "$ERR" \
    "tasker run: idle; 4 steps wait for workers (queue images: 3, queue scans: 1)"
  for n in 3 4 5; do
    expect_eq "thumbs task $n: fetch ran, resize pending" "$(ui_steps "$n")" \
      '[["fetch","complete"],["resize","pending"]]'
  done
  expect_eq "the tasks wait, in progress (thumbs) or pending (first)" \
    "$(t tasks --json --limit 10 | jq -c '[.tasks[] | [.id, .state]]')" \
    '[[5,"in_progress"],[4,"in_progress"],[3,"in_progress"],[2,"pending"],[1,"complete"]]'

  ui_held
}

# A worker holds a step of images and another orchestrator runs a slow
# command step (task 6): run --until-idle waits for the other's step (an
# orchestrator's, which it would retry if that one died), not for the
# worker's.
ui_held() {
  serve_start || return
  run curl -s -H 'Content-Type: application/json' -d '{"worker": "w1", "max": 1, "wait": 0}' \
    "$BASE/api/v1/queues/images/claim"
  expect_eq "a worker claims one step of images" \
    "$(printf '%s' "$OUT" | jq -c '[.claims[] | .step]')" '["resize"]'
  run t submit slow
  expect_eq "a task of slow" "$OUT" 6
  bg_start other "$TASKER" --config "$W/tasker.toml" run --until-idle --id other \
    2>"$W/other.err"
  wait_for "the other orchestrator runs the slow step" 60 ui_running 6
  ui_idle "a worker's step and another orchestrator's in progress"
  expect_eq "it exits once the other orchestrator's step is done" "$(ui_steps 6)" \
    '[["nap","complete"]]'
  expect_match "the note counts the worker's step in progress" "$ERR" \
    "tasker run: idle; 4 steps wait for workers (queue images: 3, queue scans: 1)"
  bg_wait other 60
  expect_eq "the other orchestrator exits 0 too" "$BG_RC" 0
  serve_stop
}
