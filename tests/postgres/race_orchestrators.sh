#!/bin/sh
# Racing orchestrators on PostgreSQL (issue 11): 8 `tasker run` processes
# share 5,000 diamond tasks (a command step, a flaky step, a sleeping step,
# a noop) while a random one is killed with SIGKILL and restarted about
# every half second for 30 s; then they run until idle. Nothing may be lost
# or done twice: every task complete, no step with two successes, no
# attempt row left open, each step's attempts equal to its attempt rows.
# Prints the kills, fenced writes and expired leases.
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database race

TASKS=${RACE_TASKS:-5000}
CHAOS_S=${RACE_SECONDS:-30}
ORCHS=8
W=$TMPDIR_TEST
cat >"$W/tasker.toml" <<TOML
[backoff]
base = "50ms"
multiplier = 2
max_delay = "1s"
jitter = "full"

[engine]
max_attempts = 25
lease = "2s"
heartbeat = "500ms"
claim_batch = 16
workers = 4
db = "$PG_DB_URL"
TOML
cat >"$W/race.toml" <<TOML
name = "race"
version = "1"
[[steps]]
name = "fetch"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"rows\": 3}'"], timeout = "10s" }
[[steps]]
name = "enrich"
depends_on = ["fetch"]
handler = { kind = "builtin", name = "flaky", probability = 0.3, seed = 7 }
[[steps]]
name = "score"
depends_on = ["fetch"]
handler = { kind = "builtin", name = "sleep", duration = "${RACE_SLEEP:-200ms}" }
[[steps]]
name = "publish"
depends_on = ["enrich", "score"]
handler = { kind = "builtin", name = "noop" }
TOML
t() { "$TASKER" --config "$W/tasker.toml" "$@"; }

run t init
expect_rc "init" 0
run t template add "$W/race.toml"
expect_rc "template add" 0
t submit race --count "$TASKS" >/dev/null 2>"$W/submit.err"
expect_eq "submit $TASKS tasks" "$(pg_sql "SELECT count(*) FROM tasks")" "$TASKS"

# start_orch I: orchestrator I in the background, its pid in $W/pid.I (the
# tasker process itself, not a subshell: SIGKILL must reach it).
start_orch() {
  "$TASKER" --config "$W/tasker.toml" run --id "orch-$1" >>"$W/orch-$1.log" 2>&1 &
  echo $! >"$W/pid.$1"
}
i=1
while [ "$i" -le "$ORCHS" ]; do start_orch "$i"; i=$((i + 1)); done

kills=0
end=$(($(date +%s) + CHAOS_S))
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 0.5
  victim=$(( $(od -An -N2 -tu2 /dev/urandom) % ORCHS + 1 ))
  kill -KILL "$(cat "$W/pid.$victim")" 2>/dev/null && kills=$((kills + 1))
  wait "$(cat "$W/pid.$victim")" 2>/dev/null
  start_orch "$victim"
done
# Stop the long-running ones and finish with orchestrators that exit once
# no work is left (steps of killed processes come back when their leases
# expire).
i=1
while [ "$i" -le "$ORCHS" ]; do kill -TERM "$(cat "$W/pid.$i")" 2>/dev/null; i=$((i + 1)); done
wait
i=1
while [ "$i" -le "$ORCHS" ]; do t run --until-idle --id "final-$i" >>"$W/final.log" 2>&1 & i=$((i + 1)); done
wait

expect_eq "every task complete" \
  "$(pg_sql "SELECT count(*) FROM tasks WHERE state = 'complete'")" "$TASKS"
expect_eq "every step complete" \
  "$(pg_sql "SELECT count(*) FROM steps WHERE state <> 'complete'")" "0"
expect_eq "no step succeeded twice" \
  "$(pg_sql "SELECT count(*) FROM (SELECT step_id FROM attempts WHERE outcome = 'success'
             GROUP BY step_id HAVING count(*) > 1) twice")" "0"
expect_eq "no attempt row left open" \
  "$(pg_sql "SELECT count(*) FROM attempts WHERE outcome IS NULL OR finished_at IS NULL")" "0"
expect_eq "each step's attempts equal its attempt rows" \
  "$(pg_sql "SELECT count(*) FROM steps s WHERE s.attempts <>
             (SELECT count(*) FROM attempts a WHERE a.step_id = s.id)")" "0"
fenced=$(pg_sql "SELECT COALESCE((SELECT value FROM counters WHERE name = 'fenced_writes'), 0)")
expired=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'")
# A refused write is either a live owner's outcome after its lease was
# reaped (its attempt row says fenced_out) or a reaper that found a lease
# another reaper had just expired (no row of its own).
owners=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'fenced_out'")
echo "# $ORCHS orchestrators, $TASKS diamond tasks, ${CHAOS_S}s of chaos: $kills kills," \
     "$fenced fenced writes ($owners by owners, $((fenced - owners)) by reapers beaten to it)," \
     "$expired expired leases ($(( kills > 0 ? expired / kills : 0 )) per kill)"
if [ "$kills" -gt 0 ]; then tap_ok "orchestrators were killed ($kills)"
else tap_fail "orchestrators were killed" "no kill happened"; fi
tap_done
