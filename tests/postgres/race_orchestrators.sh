#!/bin/sh
# Racing orchestrators on PostgreSQL (issue 11): 8 `tasker run` processes
# share 5,000 diamond tasks (a command step, a flaky step, a sleeping step,
# a noop) while a random one is killed with SIGKILL and restarted about
# every half second for 30 s (a ninth is first frozen with SIGSTOP until
# the others have reaped its leases, then let go); then they run until
# idle.
# Every orchestrator ends as the test ends it: a killed one by our SIGKILL
# (exit status 137, never one that had died on its own), the others exit 0
# (under ASan: no report). Recovery happened: the killed ones' leases
# expired (their attempts lease_expired), and the frozen one's late
# outcomes were refused (its log, its own fenced count, the store's
# fenced_writes). Nothing may be lost or done
# twice: every task complete, no step with two successes, no attempt row
# left open, each step's attempts equal to its attempt rows.
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database race

TASKS=${RACE_TASKS:-5000}
CHAOS_S=${RACE_SECONDS:-30}
ORCHS=8
chaos_config 50ms 1s 2s 500ms 4
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

# A live orchestrator whose leases are reaped: "frozen", frozen (SIGSTOP)
# while it holds steps until the others have expired them all, then let
# go (SIGCONT): the outcomes it then writes are late and must be refused.
# It is never killed, and exits 0 at the end with its own counts.
PGAPPNAME=frozen orch_start frozen run --id frozen
orchs_start orch "$ORCHS"
# more_work: 500 more tasks when fewer than 500 are unfinished, so that
# the freeze and the chaos always meet work (at load 14 the others drained
# all of it while tries to freeze failed, and the kills found nothing).
more_work() {
  [ "$(pg_sql "SELECT count(*) FROM tasks WHERE state IN ('pending', 'in_progress')")" -ge 500 ] ||
    t submit race --count 500 >/dev/null 2>>"$W/submit.err"
}
# Frozen inside a transaction it would hold locks the others wait for:
# only a session with nothing in flight (state idle) will do.
idle() {
  [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
               AND application_name = 'frozen' AND state <> 'idle'")" = 0 ]
}
settled() {
  [ "$(pg_sql "SELECT count(*) FROM attempts WHERE id IN ($held) AND outcome IS NULL")" = 0 ]
}
reaped=0
tries=0 empty=0 busy=0
# Tries for up to 180 s: each stops frozen first and then reads what it
# holds, at leisure (a look while it runs, a psql under load, came so
# seldom that frozen took and finished its share between looks: three 30 s
# polls saw nothing while it ran 230 attempts each); one that finds it
# holding nothing, or inside a transaction, lets it go on for a moment.
freeze_end=$(($(date +%s) + 180))
while [ "$reaped" = 0 ] && [ "$(date +%s)" -lt "$freeze_end" ]; do
  tries=$((tries + 1))
  more_work
  kill -STOP "$(bg_pid frozen)"
  held=$(pg_sql "SELECT string_agg(id::text, ',') FROM attempts
                 WHERE owner = 'frozen' AND outcome IS NULL")
  if [ -z "$held" ]; then empty=$((empty + 1))
  elif ! idle; then busy=$((busy + 1))
  else
    wait_for "the others reaped the frozen orchestrator's leases (attempts $held)" 120 settled ||
      break
    reaped=$(pg_sql "SELECT count(*) FROM attempts WHERE id IN ($held) AND outcome = 'lease_expired'")
  fi
  kill -CONT "$(bg_pid frozen)"
  [ "$reaped" = 0 ] && sleep 0.3
done
[ "$reaped" -gt 0 ] || echo "# $tries tries: frozen held nothing at $empty, was in a transaction at $busy;" \
  "$(pg_sql "SELECT count(*) FROM tasks WHERE state IN ('pending', 'in_progress')") tasks unfinished," \
  "$(pg_sql "SELECT count(*) FROM attempts WHERE owner = 'frozen'") attempts by frozen;" \
  "its log ends: $(tail -n 3 "$W/frozen.log" | tr '\n' ' ')"
kill -CONT "$(bg_pid frozen)"
if [ "$reaped" -gt 0 ]; then tap_ok "the others reaped the frozen orchestrator's leases ($reaped; frozen idle at try $tries)"
else tap_fail "the others reaped the frozen orchestrator's leases" \
  "none of its attempts ended lease_expired in $tries tries"; fi
# Its own outcomes refused (a reaper's refusal names the lease's owner).
late_refused() { grep -c "by frozen refused: the lease was lost" "$W/frozen.log"; }
refused() { [ "$(late_refused)" -gt 0 ]; }
wait_for "the frozen orchestrator's late outcomes were refused (its log says so)" 120 refused

# Chaos: each kill must be what ends its victim; one that had died on its
# own is a failure (orch_kill says so), never counted.
# The ready table is looked at after each kill, mid-run: in any snapshot
# it is what the steps say (0017_ready_table.sql).
kills=0 looks=0 off=0
end=$(($(date +%s) + CHAOS_S))
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 0.5
  more_work
  victim=$(( $(od -An -N2 -tu2 /dev/urandom) % ORCHS + 1 ))
  orch_kill "orch-$victim" && kills=$((kills + 1))
  orch_start "orch-$victim" run --id "orch-$victim"
  looks=$((looks + 1)) off=$((off + $(ready_mismatches)))
done
if [ "$kills" -gt 0 ]; then tap_ok "orchestrators were killed ($kills)"
else tap_fail "orchestrators were killed" "no kill happened"; fi
expect_eq "the ready table as the steps say while they ran ($looks looks)" "$off" 0

# Stop the long-running ones (each must exit 0) and finish with
# orchestrators that exit once no work is left (steps of killed processes
# come back when their leases expire).
orchs_each orch "$ORCHS" orch_stop
orch_stop frozen
orchs_start final "$ORCHS" --until-idle
orchs_each final "$ORCHS" orch_idle_exit

# Every task submitted: the first TASKS and those more_work added.
TASKS=$(pg_sql "SELECT count(*) FROM tasks")
expect_all_complete "$TASKS"
expect_all_steps_complete $((4 * TASKS))
expect_attempts_consistent

# Recovery, as counted by the store and by the engine.
fenced=$(pg_sql "SELECT COALESCE((SELECT value FROM counters WHERE name = 'fenced_writes'), 0)")
expired=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'")
of_killed=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'lease_expired' AND owner LIKE 'orch-%'")
# A refused write is either a live owner's outcome after its lease was
# reaped (its attempt row says fenced_out unless the reaper finished it)
# or a reaper that found a lease another reaper had just expired.
owners=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'fenced_out'")
# The frozen one's own count (its refused outcomes and its reaper's), from
# its "run finished:" line.
frozen_fenced=$(sed -n 's/^run finished: .*, \([0-9]*\) fenced, .*/\1/p' "$W/frozen.log")
late=$(late_refused)
echo "# $ORCHS orchestrators, $TASKS diamond tasks, ${CHAOS_S}s of chaos: $kills kills," \
     "$fenced fenced writes ($owners attempt rows fenced_out; the frozen one: ${frozen_fenced:-?}," \
     "$late late outcomes), $expired expired leases ($of_killed of killed orchestrators)"
if [ "$of_killed" -gt 0 ]; then tap_ok "the killed orchestrators' leases expired and were reaped ($of_killed)"
else tap_fail "the killed orchestrators' leases expired and were reaped" \
  "no attempt of orch-* ended lease_expired ($expired in all)"; fi
if [ "$late" -gt 0 ] && [ "${frozen_fenced:-0}" -ge "$late" ]; then
  tap_ok "the frozen orchestrator counted its $late refused late outcomes ($frozen_fenced fenced)"
else tap_fail "the frozen orchestrator counted its refused late outcomes" \
  "$late refused in its log; its run finished line: $(grep '^run finished' "$W/frozen.log")"; fi
if [ "$fenced" -ge "${frozen_fenced:-1}" ] && [ "$fenced" -gt 0 ]; then
  tap_ok "the store counted them ($fenced fenced writes)"
else tap_fail "the store counted them" "fenced_writes $fenced, fewer than ${frozen_fenced:-1}"; fi
# The chaos was real only if the orchestrators killed were at work.
chaos_steps=$(pg_sql "SELECT count(*) FROM attempts WHERE owner LIKE 'orch-%'")
if [ "$chaos_steps" -gt 0 ]; then tap_ok "the orchestrators under chaos ran steps ($chaos_steps)"
else tap_fail "the orchestrators under chaos ran steps" "no attempt by orch-*; logs:" \
  "$(tail -n 5 "$W/orch-1.log")"; fi
tap_done
