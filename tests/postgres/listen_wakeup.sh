#!/bin/sh
# LISTEN/NOTIFY wakes an idle orchestrator (DESIGN §4, docs/postgres.md):
# a `tasker run` is started on an empty store and goes to sleep; only then
# is a task submitted, and the orchestrator runs it at once.
#
# It is the notification that wakes it: with nothing ready, running,
# retrying, scheduled or to prune (no schedules, retention off, the
# default), an orchestrator's sleep lasts until the longest wait it takes
# (an hour); so the task is picked up within the bound below only if the
# submit's NOTIFY reached the LISTEN of the sleeping orchestrator.
#
# When it sleeps: the engine sends LISTEN on its store connection before
# its first pass (so that no change between that pass and its sleep is
# missed), and with nothing to do a pass takes milliseconds; so its session
# (found by its application_name) idle for a second is asleep.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database listen_wakeup
tasker_config engine.workers=2
noop_template "$W/one.toml" one
tasker_setup "$W/one.toml"

# The orchestrator's connection names itself, so its session can be found.
case "$PG_DB_URL" in
*\?*) ORCH_URL="$PG_DB_URL&application_name=sleeper" ;;
*) ORCH_URL="$PG_DB_URL?application_name=sleeper" ;;
esac
# The binary itself, not the t function (a subshell): $! is then its pid.
"$TASKER" --config "$W/tasker.toml" --db "$ORCH_URL" run --id sleeper \
  --events "$W/events.jsonl" >"$W/run.out" 2>"$W/run.err" &
orch=$!

asleep() {
  [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
               AND application_name = 'sleeper'
               AND state = 'idle' AND state_change < now() - interval '1 second'")" = 1 ]
}
if wait_for "the orchestrator goes to sleep (its session idle for a second)" 60 asleep; then
  tap_ok "the orchestrator goes to sleep (its session idle for a second)"
fi
expect_eq "nothing was claimed before the submit" \
  "$(pg_sql "SELECT count(*) FROM attempts")" 0

run t submit one
expect_rc "a task is submitted while the orchestrator sleeps" 0
ran() { [ "$(pg_sql "SELECT count(*) FROM tasks WHERE state = 'complete'")" = 1 ]; }
# The bound is generous for a busy machine and far below the hour the
# orchestrator would otherwise sleep.
if wait_for "the sleeping orchestrator is woken and runs the task (within 60 s)" 60 ran; then
  tap_ok "the sleeping orchestrator is woken and runs the task (within 60 s)"
fi
expect_eq "the sleeping orchestrator ran it" \
  "$(pg_sql "SELECT string_agg(DISTINCT owner, ',') FROM attempts")" sleeper
echo "# from submit to claim: $(pg_sql "SELECT min(a.started_at - t.created_at) FROM attempts a
  JOIN steps s ON s.id = a.step_id JOIN tasks t ON t.id = s.task_id") ms"

kill -TERM "$orch"
wait "$orch"
rc=$?
expect_eq "the orchestrator exits 0 on SIGTERM" "$rc" 0
[ "$rc" -eq 0 ] || sed 's/^/# run: /' "$W/run.err"
tap_done
