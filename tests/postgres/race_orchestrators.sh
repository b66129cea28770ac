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
tasker_setup "$W/race.toml"
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
finals=""
i=1
while [ "$i" -le "$ORCHS" ]; do
  t run --until-idle --id "final-$i" >>"$W/final.log" 2>&1 &
  finals="$finals $!"
  i=$((i + 1))
done
bad=0
for p in $finals; do wait "$p" || bad=$((bad + 1)); done
if [ "$bad" -eq 0 ]; then tap_ok "the final orchestrators exit 0"
else tap_fail "the final orchestrators exit 0" "$bad exited non-zero; their log ends:" \
  "$(tail -n 5 "$W/final.log")"; fi

expect_all_complete "$TASKS"
expect_eq "every step complete" \
  "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*) FROM steps")" \
  "$((4 * TASKS))/$((4 * TASKS))"
expect_attempts_consistent
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
# The chaos was real only if the orchestrators killed were at work (a
# process that had exited is still a zombie that kill reaches).
chaos_steps=$(pg_sql "SELECT count(*) FROM attempts WHERE owner LIKE 'orch-%'")
if [ "$chaos_steps" -gt 0 ]; then tap_ok "the orchestrators under chaos ran steps ($chaos_steps)"
else tap_fail "the orchestrators under chaos ran steps" "no attempt by orch-*; logs:" \
  "$(tail -n 5 "$W/orch-1.log")"; fi
tap_done
