# Deadlines (issue 24 part 4, DESIGN §3, docs/deadlines.md) through the
# real binary, on the store $W/tasker.toml names:
# - a submit's --deadline overrides its template's `deadline`, and each is
#   stored from the submit's time (show --json: deadline_at);
# - `tasker run --until-idle` on a task whose step sleeps past a 2 s
#   deadline: at the deadline the task ends in error with the reason
#   "deadline", its unfinished steps (the sleeping one, the one after it,
#   a waiting wait step) cancelled; the sleeping attempt's late outcome is
#   refused (fenced_out); show says the deadline passed, why says so for
#   each cancelled step, the JSON has end_reason and execution_status;
# - tasks whose only step waits for a signal: a later run after their
#   deadline ends them the same way, more than a batch of them (claims of
#   2 here);
# - a task that finishes before its deadline is untouched by it;
# - a step's timeout bounds a wait step's attempt with the wait's own: the
#   shorter of the two ends it;
# - bad deadlines: a template's (not a duration, 0) is refused naming the
#   file, line, column and key (exit 78, as any bad template), the flag's
#   naming the value (exit 2); nothing is stored.
# Sourced after tap.sh and config.sh (and pg.sh for PostgreSQL) by
# tests/cli/deadlines.sh and deadlines_pg.sh; needs `t`, W and jq. dl_run
# runs it all.

dl_templates() {
  cat >"$W/slow.toml" <<'TOML'
name = "slow"
version = "1"
deadline = "1h"
[[steps]]
name = "nap"
handler = { kind = "command", argv = ["sleep", "4"] }
[[steps]]
name = "after"
depends_on = ["nap"]
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "approve"
handler = { kind = "wait", timeout = "72h" }
TOML
  cat >"$W/gate.toml" <<'TOML'
name = "gate"
version = "1"
[[steps]]
name = "approve"
handler = { kind = "wait", timeout = "72h" }
TOML
  cat >"$W/bounded.toml" <<'TOML'
name = "bounded"
version = "1"
[[steps]]
name = "short"
handler = { kind = "wait", timeout = "72h" }
timeout = "4s"
retry = { max_attempts = 1 }
[[steps]]
name = "long"
handler = { kind = "wait", timeout = "4s" }
timeout = "100h"
retry = { max_attempts = 1 }
TOML
  cat >"$W/quick.toml" <<'TOML'
name = "quick"
version = "1"
deadline = "2s"
[[steps]]
name = "s"
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/bad.toml" <<'TOML'
name = "bad"
version = "1"
deadline = "soon"
[[steps]]
name = "s"
handler = { kind = "builtin", name = "noop" }
TOML
  sed 's/"soon"/"0s"/' "$W/bad.toml" >"$W/zero.toml"
}

# dl_json ID: the task as show --json says it.
dl_json() { t show "$1" --json; }
# dl_field ID JQ: one value of the task's JSON.
dl_field() { dl_json "$1" | jq -r "$2"; }
# dl_tasks: how many tasks the store has.
dl_tasks() { t status --json | jq '[.tasks[]] | add // 0'; }

dl_run() {
  # Claims and deadline looks of 2: a run applies more than a batch.
  tasker_config engine.heartbeat=1s engine.claim_batch=2
  dl_templates
  run t init
  expect_rc "init" 0
  run t template add "$W/slow.toml" "$W/gate.toml" "$W/quick.toml" "$W/bounded.toml"
  expect_rc "template add" 0

  # Bad deadlines first: nothing is stored.
  run t template add "$W/bad.toml"
  expect_rc "a template's deadline that is not a duration: exit 78 (a bad template)" 78
  expect_match "names the file, line and column" "$ERR" "bad.toml:3:"
  expect_match "names the key" "$ERR" "deadline"
  run t template add "$W/zero.toml"
  expect_rc "a template's deadline of 0: exit 78" 78
  expect_match "says what is allowed" "$ERR" "a duration > 0"
  run t template list --json
  expect_eq "neither template was stored" \
    "$(printf '%s' "$OUT" | jq '[.[] | select(.name == "bad")] | length')" 0
  for bad in 0s soon -5s 200000d; do
    run t submit slow --deadline "$bad"
    expect_rc "--deadline $bad: exit 2" 2
    expect_match "--deadline $bad: the message names the flag and the value" "$ERR" "--deadline"
    expect_match "--deadline $bad: ... and the value" "$ERR" "$bad"
  done
  expect_eq "no task was submitted" "$(dl_tasks)" 0

  b=$(t submit slow)
  c=$(t submit quick --deadline 1h)
  expect_eq "the template's deadline: 1 h after the submit" \
    "$(dl_field "$b" '.deadline_at - .created_at')" 3600000
  expect_eq "--deadline overrides the template's" \
    "$(dl_field "$c" '.deadline_at - .created_at')" 3600000

  # Its nap (4 s) is claimed at once and still sleeps at the deadline.
  a=$(t submit slow --deadline 3s)
  run t run --until-idle --workers 4
  expect_rc "run --until-idle" 0
  expect_eq "the submit's deadline: 3 s after it" \
    "$(dl_field "$a" '.deadline_at - .created_at')" 3000
  expect_match "the log says the deadline passed" "$ERR" "task $a failed: its deadline passed"
  expect_eq "task $a is in error" "$(dl_field "$a" .state)" error
  expect_eq "its end reason is deadline" "$(dl_field "$a" .end_reason)" deadline
  expect_eq "its execution status says so" "$(dl_field "$a" .execution_status)" deadline_passed
  expect_eq "every unfinished step was cancelled" \
    "$(dl_field "$a" '[.steps[].state] | join(",")')" cancelled,cancelled,cancelled
  expect_eq "the sleeping attempt's late outcome was refused" \
    "$(t show "$a" --json --history | jq -r '.steps[0].history[0].outcome')" fenced_out
  run t show "$a"
  expect_match "show: the task is in error" "$OUT" "error (deadline_passed)"
  expect_match "show: the deadline passed" "$OUT" \
    "(passed: the task ended in error, reason deadline"
  run t why "$a" approve
  expect_rc "why" 0
  expect_match "why: the waiting step was cancelled by the deadline" "$OUT" \
    "approve: deadline (the task's deadline passed"
  run t show "$a" --history
  expect_match "the history has the task's move" "$OUT" "deadline"
  expect_eq "task $c finished before its deadline, untouched" "$(dl_field "$c" .state)" complete
  expect_eq "... and no end reason of a deadline" "$(dl_field "$c" .end_reason)" \
    "all steps complete"
  expect_eq "task $b runs on (its deadline is an hour away)" "$(dl_field "$b" .state)" in_progress

  # A task whose step waits for a signal: run --until-idle does not wait
  # for it, and a run after its deadline ends it. The deadline and the
  # waits' timeouts leave room for the checks between: under ASan on a
  # loaded machine the submits and the run took longer than 2 s.
  g=$(t submit gate --deadline 8s)
  printf '{}\n{}\n' | t submit gate --deadline 8s --contexts - >"$W/more"
  t0=$(date +%s) # every deadline is at most 8 s after this (each from its submit)
  # And a step's timeout bounds a wait: the shorter of it and the wait's.
  k=$(t submit bounded)
  run t run --until-idle
  t1=$(date +%s)
  expect_eq "the wait step waits" "$(dl_field "$g" '.steps[0].state')" waiting
  expect_eq "both bounded waits wait" "$(dl_field "$k" '[.steps[].state] | join(",")')" \
    waiting,waiting
  # Past the deadlines (8 s after their submits, which ended before t0)
  # and the waits' timeouts (4 s after their claims, made before t1).
  until=$((t0 + 9 > t1 + 5 ? t0 + 9 : t1 + 5))
  left=$((until - $(date +%s)))
  [ "$left" -le 0 ] || sleep "$left"
  run t run --until-idle
  expect_eq "a wait ends at a step timeout shorter than its own, and at its own shorter one" \
    "$(t show "$k" --json --history |
      jq -r '[.steps[] | .state, .history[0].outcome] | join(",")')" error,timeout,error,timeout
  expect_rc "a later run" 0
  expect_eq "the waiting task is in error" "$(dl_field "$g" .state)" error
  expect_eq "... reason deadline" "$(dl_field "$g" .end_reason)" deadline
  expect_eq "... its waiting step cancelled" "$(dl_field "$g" '.steps[0].state')" cancelled
  for m in $(cat "$W/more"); do
    expect_eq "task $m, past the first batch, too" "$(dl_field "$m" .end_reason)" deadline
  done
  expect_eq "task $b still runs" "$(dl_field "$b" .state)" in_progress
}
