#!/bin/sh
# `tasker tasks` and the bulk operator forms on PostgreSQL (the SQLite side
# is tests/cli/test_cli_tasks.c): each filter, paging with --cursor to the
# end with every task seen once, a bad cursor refused, bulk retry counted
# without --yes (exit 3, nothing changed) and done with it (the failed
# steps run again and succeed), bulk cancel, the no-filter and --max
# refusals, a task in error cancelled by id and by filter alike, every
# refusal reported, a task in progress with a failed step retried.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database cli_tasks
tasker_config $QUICK_RETRIES
noop_template "$W/ok.toml" ok
# Fails until $W/open exists.
cat >"$W/gate.toml" <<TOML
name = "gate"
namespace = "ops"
version = "2"
[[steps]]
name = "open"
handler = { kind = "command", argv = ["sh", "-c", "test -e $W/open || { echo 'the gate is closed' >&2; exit 3; }"] }
retry = { max_attempts = 1 }
[[steps]]
name = "after"
depends_on = ["open"]
handler = { kind = "builtin", name = "noop" }
TOML
cat >"$W/boom.toml" <<'TOML'
name = "boom"
version = "1"
[[steps]]
name = "s"
handler = { kind = "builtin", name = "fail" }
retry = { max_attempts = 2 }
TOML
tasker_setup "$W/ok.toml" "$W/gate.toml" "$W/boom.toml"
# 1-3 ok complete, 4-7 gate error, 8-9 boom error, 10 ok pending.
t submit ok --count 3 >/dev/null
t submit gate --count 4 >/dev/null
t submit boom --count 2 >/dev/null
run t run --until-idle --workers 1
expect_rc "the orchestrator ran every task" 0
t submit ok >/dev/null

# The ids of one page of `tasks --json ARGS`, joined by ','; its
# next_cursor in $CURSOR ("" when null).
page() {
  run t tasks --json "$@"
  [ "$RC" -eq 0 ] || tap_fail "tasks --json $*" "exit $RC: $ERR"
  CURSOR=$(printf '%s\n' "$OUT" | sed -n 's/^  "next_cursor": "\(.*\)"$/\1/p')
  IDS=$(printf '%s\n' "$OUT" | sed -n 's/^      "id": \([0-9]*\),$/\1/p' | paste -sd, -)
}
ids() { # NAME WANT ARGS...
  ids_name=$1 ids_want=$2
  shift 2
  page "$@"
  expect_eq "$ids_name" "$IDS$CURSOR" "$ids_want"
}
ids "every task, newest first" "10,9,8,7,6,5,4,3,2,1" --limit 1000
ids "--state error" "9,8,7,6,5,4" --state error
ids "--state pending" "10" --state pending
ids "--template gate (any namespace)" "7,6,5,4" --template gate
ids "--template ops/gate" "7,6,5,4" --template ops/gate
ids "--template nosuch matches nothing" "" --template nosuch
ids "--since 1h" "10,9,8,7,6,5,4,3,2,1" --since 1h
ids "--since a time to come" "" --since 2999-01-01T00:00:00Z
ids "--error gate is closed" "7,6,5,4" --error "gate is closed"
ids "--state error --template boom" "9,8" --state error --template boom

# Paging to the end: every task once.
all=""
page --limit 3
all=$IDS
pages=1
while [ -n "$CURSOR" ] && [ "$pages" -lt 10 ]; do
  page --limit 3 --cursor "$CURSOR"
  all="$all,$IDS"
  pages=$((pages + 1))
done
expect_eq "paging with --limit 3 and --cursor sees every task once" "$all/$pages" \
  "10,9,8,7,6,5,4,3,2,1/4"

run t tasks --cursor abc
expect_rc "a bad cursor is refused" 2
expect_match "the message names --cursor and the value" "$ERR" 'tasker tasks: --cursor: cursor "abc"'

states() { pg_sql "SELECT string_agg(id || ':' || state, ',' ORDER BY id) FROM tasks"; }
before=$(states)
run t retry --state error --template gate
expect_rc "bulk retry without --yes exits 3" 3
expect_eq "it says how many match" "$ERR" \
  "4 tasks match; retry would give fresh attempts to their 4 failed steps. Run again with --yes to do it."
expect_eq "and changes nothing" "$(states)" "$before"
run t retry --state error --max 5
expect_rc "more than --max is refused" 2
expect_eq "saying so" "$ERR" "tasker retry: 6 tasks match, more than --max 5: nothing done"
run t cancel --yes
expect_rc "no filter is refused" 2
expect_eq "nothing changed by the refusals" "$(states)" "$before"

touch "$W/open"
run t retry --state error --template gate --yes
expect_rc "bulk retry with --yes" 0
expect_eq "it says what it did" "$ERR" "4 tasks matched; 4 failed steps will be retried now"
run t cancel --state pending --yes --json
expect_eq "bulk cancel --json" "$OUT" \
  '{"action": "cancel", "confirmed": true, "matched": 1, "done": 1, "failed": 0, "refused": {"state": 0, "not_found": 0, "no_failed_step": 0}, "errors": []}'
run t run --until-idle --workers 1
expect_rc "the orchestrator ran the retried steps" 0
ids "the gate's tasks are complete" "7,6,5,4,3,2,1" --state complete
ids "the others stay in error" "9,8" --state error
ids "the pending one was cancelled" "10" --state cancelled
expect_eq "the open steps ran twice" \
  "$(pg_sql "SELECT count(*) FROM attempts a JOIN steps s ON s.id = a.step_id WHERE s.name = 'open'")" 8

# A task in error is cancelled however it is asked: by id, and by filter.
run t cancel 9
expect_rc "cancel of one task in error" 0
run t cancel --state error --yes
expect_rc "bulk cancel of the tasks in error" 0
expect_eq "it cancels the one left" "$ERR" "1 task matched; 1 task cancelled"
ids "both are cancelled" "10,9,8" --state cancelled
run t cancel 1
expect_rc "a complete task is not cancelled" 2
expect_eq "saying so" "$ERR" "tasker cancel: task 1 is already complete"
# Every refusal is reported with its reason, task and step: a trigger
# moves task 11's step out of error while task 12's is retried, as another
# operator would (issue 19).
t submit boom --count 2 >/dev/null
run t run --until-idle --workers 1
expect_rc "two more boom tasks fail" 0
pg_sql "CREATE FUNCTION meanwhile() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
  UPDATE steps SET state = 'complete' WHERE task_id = 11; RETURN NULL; END \$\$;
CREATE TRIGGER meanwhile AFTER UPDATE OF state ON steps FOR EACH ROW
  WHEN (NEW.task_id = 12 AND NEW.state = 'waiting_for_retry') EXECUTE FUNCTION meanwhile();" >/dev/null
run t retry --template boom --yes --json
expect_rc "a refusal makes the exit status 1" 1
expect_eq "the cancelled tasks are passed over; the refusal is reported" "$OUT" \
  '{"action": "retry", "confirmed": true, "matched": 2, "done": 1, "failed": 1, "refused": {"state": 1, "not_found": 0, "no_failed_step": 0}, "errors": [{"task": 11, "step": "s", "reason": "state", "message": "step \"s\" of task 11 is complete: only a step in error can be retried"}]}'

# A task still in progress with a step in error (another step waits an
# hour for its retry) is taken by a filter that names no task state, as
# the dashboard's "retry all matching" sends it.
cat >>"$W/tasker.toml" <<'TOML'
[backoff.profiles.slow]
base = "1h"
max_delay = "2h"
TOML
cat >"$W/par.toml" <<'TOML'
name = "par"
version = "1"
[[steps]]
name = "bad"
handler = { kind = "builtin", name = "fail", permanent = true }
retry = { max_attempts = 1 }
[[steps]]
name = "slow"
handler = { kind = "builtin", name = "fail", times = 100 }
retry = { max_attempts = 5, backoff = "slow" }
TOML
run t template add "$W/par.toml"
expect_rc "template add par" 0
run t submit par
PAR=$OUT
orch_start runner run --workers 2
par_settled() {
  [ "$(pg_sql "SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM steps WHERE task_id = $PAR")" = \
    "bad:error,slow:waiting_for_retry" ]
}
wait_for "par: bad failed, slow waits for its retry" 30 par_settled
orch_stop runner
expect_eq "the task is still in progress" "$(pg_sql "SELECT state FROM tasks WHERE id = $PAR")" in_progress
run t retry --state error --template par
expect_eq "not in state error: --state error does not take it" "$ERR" "no tasks match; nothing to do"
run t retry --template par --yes
expect_rc "bulk retry by template" 0
expect_eq "it takes the task in progress" "$ERR" "1 task matched; 1 failed step will be retried now"
expect_eq "its failed step waits for its run" \
  "$(pg_sql "SELECT state FROM steps WHERE task_id = $PAR AND name = 'bad'")" waiting_for_retry
tap_done
