#!/bin/sh
# A 1,000-wide map under killed orchestrators on PostgreSQL (issue 21):
# one task list -> process (a map over list's 1,000 files, a command per
# instance) -> sum (the convergence step, a command that checks what it
# received), run by 4 `tasker run` processes with short leases.
# The map is created in the transaction that completes list, so list is
# where a lost or doubled map would come from:
# - list's attempt 1 finishes its handler while its orchestrator is frozen
#   (SIGSTOP, with no transaction open); the others reap its lease; it is
#   let go (SIGCONT) while attempt 2 holds list: its late success must be
#   refused (fenced by the claim), never complete list or make a map;
# - attempt 2's orchestrator is SIGKILLed while the handler runs;
# - attempt 3's orchestrator is SIGKILLed in the middle of creating the
#   map: an uncommitted steps row of the test's, at the last instance's
#   (task, idx), blocks its INSERT of the instances until it is killed; the
#   transaction must leave nothing, and attempt 4 make the map.
# While the instances run, orch-4 is frozen once it holds some (they all
# wait at a gate until then, so that it is idle), until the others have
# reaped them and claimed them again (their reruns wait), then let go: its
# late outcomes must be refused. Then a random orchestrator is
# SIGKILLed and restarted about every 0.4 s (claims come back through the
# reaper), and orchestrators that exit once idle finish the rest.
# Checked through SQL, `tasker show --json` and the handlers' own logs:
# exactly 1,000 instance rows, one per element, each complete with exactly
# one successful attempt (which a run of the handler for that element and
# attempt wrote); the frozen ones' reaped attempts still lease_expired;
# the map complete with the 1,000 results in element order; sum complete
# with exactly one successful attempt, every run of it having seen all
# 1,000 in order; the task complete; no attempt but success, lease_expired
# or fenced_out, none open; instances of killed orchestrators reaped.
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
# Runs alone: its freeze needs an orchestrator that holds instances and
# has no statement in flight, and beside three other tests on this
# 2-core machine's cluster none came in 120 s (CI, twice); nor does its
# hold phase then leave the instances' progress to the machine's load.
# run-tests: alone
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database kill_map

WIDTH=${KILL_MAP_WIDTH:-1000}
CHAOS_S=${KILL_MAP_SECONDS:-40}
ORCHS=4
chaos_config 50ms 500ms 1500ms 300ms 4

# list: the files f0..f(WIDTH-1). Attempts 1 to 3 wait for the test's
# go-ahead ($W/list.go.N), so that the test can freeze or kill their
# orchestrator while they run or as they finish.
cat >"$W/list.sh" <<SH
#!/bin/sh
a=\$TASKER_ATTEMPT
: >"$W/list.started.\$a"
if [ "\$a" -le 3 ]; then
  n=0
  until [ -e "$W/list.go.\$a" ]; do
    n=\$((n + 1)); [ "\$n" -gt 1200 ] && { echo "no go-ahead" >&2; exit 75; }
    sleep 0.05
  done
fi
awk -v n=$WIDTH 'BEGIN { printf "{\"files\": ["
  for (i = 0; i < n; i++) printf "%s\"f%d\"", (i ? ", " : ""), i
  print "]}" }'
SH
# process (each instance): its element and element index from stdin (the
# input, one line of JSON), "INDEX ATTEMPT ITEM" appended to ran.log,
# results {"i": INDEX, "file": ITEM}, after 0.1 s (so that the instances
# last long enough to be killed). Only sh, one sed and sleep: 1,000 of
# them run (the shell's own pattern matching is quadratic on an 8 kB input).
# Every instance waits while $W/gate exists, so that the orchestrators,
# their workers full of waiting handlers, do little but heartbeat when the
# test freezes orch-4 (busy ones were seldom idle: under ASan on a 2-core
# machine none was in 120 s of tries, CI).
# A second or later attempt of an instance whose index $W/hold lists
# waits while it does (so that the test
# can have the others hold reaped instances when a late outcome comes), and
# the last TAIL instances wait while $W/tail exists (so that the map is
# still running when the kills begin, however fast the rest went; fewer
# than one orchestrator's workers, they never starve the others), each up
# to 60 s of sleeps: far less than its timeout, which a loaded machine's
# slower sleeps must not reach (a `timeout` attempt fails a check below).
TAIL=4
cat >"$W/process.sh" <<SH
#!/bin/sh
set -- \$(sed -n 'h; s/.*"item_index": *\([0-9][0-9]*\).*/\1/p; g; s/.*"item": *"\([^"]*\)".*/\1/p')
[ \$# = 2 ] || { echo "no item or item_index in the input" >&2; exit 3; }
n=0
while [ -e "$W/gate" ] && [ "\$n" -lt 1200 ]; do n=\$((n + 1)); sleep 0.05; done
while [ "\$TASKER_ATTEMPT" -ge 2 ] && grep -qx "\$1" "$W/hold" 2>/dev/null &&
  [ "\$n" -lt 1200 ]; do
  n=\$((n + 1)); sleep 0.05
done
while [ "\$1" -ge $((WIDTH - TAIL)) ] && [ -e "$W/tail" ] && [ "\$n" -lt 1200 ]; do
  n=\$((n + 1)); sleep 0.05
done
sleep 0.1
echo "\$1 \$TASKER_ATTEMPT \$2" >>"$W/ran.log"
printf '{"i": %s, "file": "%s"}\n' "\$1" "\$2"
SH
# sum (the convergence): what it received, checked: how many results,
# whether result k is element k's, the sum of the indexes. Each run
# appends "ATTEMPT RESULTS" to sum.log.
cat >"$W/sum.sh" <<SH
#!/bin/sh
out=\$(jq -c '.parents.process as \$r | (\$r | length) as \$n
  | {n: \$n, in_order: ([\$r[] | [.i, .file]] == [range(\$n) | [., "f\(.)"]]),
     total: ([\$r[].i] | add)}') || exit 75
echo "\$TASKER_ATTEMPT \$out" >>"$W/sum.log"
echo "\$out"
SH
chmod +x "$W/list.sh" "$W/process.sh" "$W/sum.sh"
: >"$W/tail"
: >"$W/gate"
cat >"$W/fanout.toml" <<TOML
name = "fanout"
version = "1"
[[steps]]
name = "list"
handler = { kind = "command", argv = ["$W/list.sh"], timeout = "120s" }
[[steps]]
name = "process"
depends_on = ["list"]
handler = { kind = "command", argv = ["$W/process.sh"], timeout = "300s" }
map = { over = "{{parents.list.files}}", max = $WIDTH }
[[steps]]
name = "sum"
depends_on = ["process"]
handler = { kind = "command", argv = ["$W/sum.sh"], timeout = "60s" }
TOML
tasker_setup "$W/fanout.toml"
run t submit fanout
expect_rc "submit the task" 0
TASK=$OUT
: >"$W/ran.log"
: >"$W/sum.log"

# orch NAME: start (or restart) orchestrator NAME; its PostgreSQL sessions
# are named after it.
orch() { PGAPPNAME=$1 orch_start "$1" run --id "$1"; }
orchs_start orch "$ORCHS"

# list_attempt N FIELD: FIELD of list's attempt N (nothing while none).
list_attempt() {
  pg_sql "SELECT a.$2 FROM attempts a JOIN steps s ON s.id = a.step_id
          WHERE s.task_id = $TASK AND s.name = 'list' AND a.attempt = $1"
}
started() { [ -e "$W/list.started.$1" ] && [ -n "$(list_attempt "$1" owner)" ]; }
finished() { [ -n "$(list_attempt "$1" outcome)" ]; }
# A frozen orchestrator inside a transaction would hold locks the others
# wait for: only one whose sessions are all idle is left frozen. Sessions
# of this test's database only: other tests on the cluster name their
# orchestrators orch-N too (CI saw a busy one of theirs fail every freeze).
idle() {
  [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
               AND application_name = '$1' AND state <> 'idle'")" = 0 ]
}
# freeze NAME CMD...: SIGSTOP to orchestrator NAME at a moment when its
# sessions are idle and CMD holds; 1 (NAME running) after trying for 120 s
# (a loaded machine's orchestrators are seldom idle: a few hundred tries).
freeze() {
  fz_name=$1
  shift
  fz_end=$(($(date +%s) + 120))
  while [ "$(date +%s)" -lt "$fz_end" ]; do
    if "$@"; then
      kill -STOP "$(bg_pid "$fz_name")"
      # Looked at once, at once: waiting here would let its leases run out
      # and the others reap what it holds.
      idle "$fz_name" && "$@" && return 0
      kill -CONT "$(bg_pid "$fz_name")"
    fi
    sleep 0.05
  done
  return 1
}
# refused_by NAME [LINE]: the steps whose outcomes by NAME were refused as
# late, from its log (from line LINE on), as a list "id,id,...".
refused_by() {
  tail -n "+${2:-1}" "$W/$1.log" |
    sed -n "s/.*outcome of step \([0-9]*\) attempt [0-9]* by $1 refused: the lease was lost.*/\1/p" |
    sort -u | paste -sd, -
}
list_step=$(pg_sql "SELECT id FROM steps WHERE task_id = $TASK AND name = 'list'")
# give_up: the rest depends on what just failed; stop here.
give_up() { echo "# giving up: the rest depends on this"; tap_done; exit 1; }

# Attempt 1: its orchestrator frozen while the handler runs, which then
# finishes; the others reap the lease.
wait_for "list's attempt 1 runs" 60 started 1 || give_up
frozen=$(list_attempt 1 owner)
freeze "$frozen" true ||
  tap_fail "$frozen, running list's attempt 1, frozen with no transaction open" "not in 120 s"
touch "$W/list.go.1"
wait_for "the others reaped list's attempt 1 of the frozen $frozen" 60 finished 1 &&
  expect_eq "list's attempt 1 (frozen $frozen) ended with its lease expired" \
    "$(list_attempt 1 outcome)" lease_expired

# Attempt 2 holds list when the frozen one is let go: its late success is
# refused; then attempt 2's orchestrator is killed while the handler runs.
wait_for "list's attempt 2 runs" 60 started 2 || give_up
second=$(list_attempt 2 owner)
kill -CONT "$(bg_pid "$frozen")"
late() { [ "$(refused_by "$frozen")" = "$list_step" ]; }
if wait_for "the frozen $frozen's late success of list was refused (its log says so)" 60 late
then tap_ok "the frozen $frozen's late success of list, while attempt 2 held it, was refused"
else give_up; fi
expect_eq "list still held by attempt 2 ($second)" \
  "$(pg_sql "SELECT state || ' ' || lease_owner FROM steps WHERE id = $list_step")" \
  "in_progress $second"
orch_kill "$second" && tap_ok "$second, running list's attempt 2, was killed"
touch "$W/list.go.2"
orch "$second"

# Attempt 3: its orchestrator killed in the middle of creating the map. A
# row of ours, uncommitted, takes the last instance's (task_id, idx) (the
# instances get MAX(idx) + 1..: migration 0007), so its INSERT of the
# instances waits for our transaction; the kill comes while it waits.
wait_for "list's attempt 3 runs" 60 started 3 || give_up
third=$(list_attempt 3 owner)
top=$(pg_sql "SELECT max(idx) FROM steps WHERE task_id = $TASK")
PGAPPNAME=kill_map_blocker bg_start blocker psql -qAtX -d "$PG_DB_URL" -c "BEGIN;
  INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,
                     parents_remaining, run_at)
  VALUES ($TASK, $((top + WIDTH)), 'blocker', 'complete', 1, false, 'default', 0, 0);
  SELECT pg_sleep(300);" >"$W/blocker.log" 2>&1
blocker() {
  pg_sql "SELECT pid FROM pg_stat_activity WHERE datname = current_database()
          AND application_name = 'kill_map_blocker'
          AND wait_event = 'PgSleep'"
}
blocking() { [ -n "$(blocker)" ]; }
wait_for "our row blocks the last instance's place" 60 blocking || give_up
bpid=$(blocker)
touch "$W/list.go.3"
creating() {
  [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
               AND application_name = '$third'
               AND $bpid = ANY (pg_blocking_pids(pid))")" -gt 0 ]
}
if wait_for "$third, recording list's attempt 3, is creating the map (waits for our row)" 60 creating
then tap_ok "$third, recording list's attempt 3, is creating the map (waits for our row)"
else give_up; fi
orch_kill "$third" && tap_ok "$third was killed while creating the map"
pg_sql "SELECT pg_terminate_backend($bpid)" >/dev/null
bg_wait blocker 60
orch "$third"
list_done() { [ "$(pg_sql "SELECT state FROM steps WHERE id = $list_step")" = complete ]; }
wait_for "list complete (the map created)" 120 list_done || give_up
expect_eq "the killed creation left nothing: attempt 3 lease_expired, attempt 4 made the map" \
  "$(pg_sql "SELECT string_agg(attempt || ' ' || outcome, ', ' ORDER BY attempt) FROM attempts
             WHERE step_id = $list_step AND attempt >= 3")" "3 lease_expired, 4 success"

# The instances: orch-4 frozen once it holds some (idle); the others reap
# them and claim them again, their reruns waiting while $W/hold exists;
# then orch-4 is let go: its late outcomes are refused.
IFROZEN=orch-$ORCHS
# holds: whether IFROZEN holds instances; their attempt ids then in held, and
# their indexes in $W/hold at once (before the stop: a lease that ran out
# while the test wrote it let a rerun pass the hold before it existed).
holds() {
  pg_sql "SELECT a.id || ' ' || s.item_index FROM attempts a JOIN steps s ON s.id = a.step_id
          WHERE s.task_id = $TASK AND s.map_idx IS NOT NULL AND a.owner = '$IFROZEN'
          AND a.outcome IS NULL" >"$W/held.now" || return 1
  held=$(cut -d' ' -f1 "$W/held.now" | paste -sd, -)
  cut -d' ' -f2 "$W/held.now" >"$W/hold.new" && mv "$W/hold.new" "$W/hold"
  [ -n "$held" ]
}
ireaped=0
held=""
if freeze "$IFROZEN" holds; then
  rm -f "$W/gate"
  reaped() { [ "$(pg_sql "SELECT count(*) FROM attempts WHERE id IN ($held) AND outcome IS NULL")" = 0 ]; }
  wait_for "the others reaped the instances frozen $IFROZEN held" 60 reaped
  ireaped=$(pg_sql "SELECT count(*) FROM attempts WHERE id IN ($held) AND outcome = 'lease_expired'")
  # Claimed again by another: in progress there, or already done (a rerun
  # that began before the hold file listed it does not wait).
  reclaimed() {
    [ "$(pg_sql "SELECT count(*) FROM attempts a JOIN attempts h ON h.step_id = a.step_id
                 WHERE h.id IN ($held) AND a.attempt > h.attempt
                 AND a.owner <> '$IFROZEN'")" -gt 0 ]
  }
  wait_for "the others claimed again what frozen $IFROZEN held" 60 reclaimed ||
    pg_sql "SELECT 'now ' || (extract(epoch FROM clock_timestamp()) * 1000)::bigint
            UNION ALL SELECT 'step ' || s.id || ' ' || s.state || ' run_at ' || s.run_at
            || ' owner ' || COALESCE(s.lease_owner, '-') || ' attempts ' || s.attempts
            || ' ready ' || COALESCE((SELECT string_agg(r.kind || '@' || r.run_at, ' ')
                                      FROM ready r WHERE r.step_id = s.id), 'none')
            FROM steps s WHERE s.id IN (SELECT step_id FROM attempts WHERE id IN ($held))" |
      sed 's/^/# /'
  for o in orch-1 orch-2 orch-3; do tail -n 5 "$W/$o.log" | sed "s/^/# $o: /"; done
  from=$(($(wc -l <"$W/$IFROZEN.log") + 1))
  kill -CONT "$(bg_pid "$IFROZEN")"
  ilate() { [ -n "$(refused_by "$IFROZEN" "$from")" ]; }
  wait_for "the frozen $IFROZEN's late outcomes were refused (its log says so)" 60 ilate
else
  rm -f "$W/gate"
  tap_fail "$IFROZEN frozen while it holds instances, with no transaction open" "not in 120 s"
  pg_sql "SELECT application_name || ' ' || state || ' ' || left(query, 60)
          FROM pg_stat_activity WHERE datname = current_database()
          AND application_name LIKE 'orch-%'" | sed 's/^/# /'
fi
rm -f "$W/hold"
# Its late outcomes come in the passes after it is let go, in no set order:
# wait for one of an instance it held when frozen (the handler of each went
# on while it was stopped), not only for the first refusal of any.
held_refused() {
  hr_late=$(refused_by "$IFROZEN" "${from:-1}")
  [ -n "$hr_late" ] && [ "$(pg_sql "SELECT count(*) > 0 FROM attempts
    WHERE id IN (${held:-0}) AND step_id IN ($hr_late)")" = t ]
}
poll 60 held_refused || :
expect_eq "the frozen $IFROZEN's held instance attempts were reaped (lease_expired)" \
  "$ireaped" "$(printf '%s' "${held:-}" | tr ',' '\n' | grep -c .)"
# Refused since it was let go: the instances it held, and any it claimed
# after and held past its lease while the reruns wait (a loaded machine).
late_steps=$(refused_by "$IFROZEN" "${from:-1}")
instances=$(pg_sql "SELECT count(*) FROM steps WHERE id IN (${late_steps:-0}) AND map_idx IS NOT NULL")
expect_eq "its late outcomes were refused, each of an instance" \
  "$instances of ${late_steps:-none}" \
  "$(printf '%s' "${late_steps:-0}" | tr ',' '\n' | grep -c .) of ${late_steps:-none}"
expect_eq "among them an instance it held when frozen" \
  "$(pg_sql "SELECT count(*) > 0 FROM steps WHERE id IN (${late_steps:-0})
             AND id IN (SELECT step_id FROM attempts WHERE id IN (${held:-0}))")" t

# Kills while the instances run, until the task is finished (or time is
# up): about every 0.4 s, an orchestrator that holds instances (any, when
# none does) is SIGKILLed and restarted. The last instances are let go
# after 5 kills (they held the task open until then).
task_finished() {
  [ "$(pg_sql "SELECT state FROM tasks WHERE id = $TASK")" != in_progress ]
}
kills=0
end=$(($(date +%s) + CHAOS_S))
while [ "$(date +%s)" -lt "$end" ] && ! task_finished; do
  sleep 0.4
  victim=$(pg_sql "SELECT a.owner FROM attempts a JOIN steps s ON s.id = a.step_id
                   WHERE s.task_id = $TASK AND s.map_idx IS NOT NULL AND a.outcome IS NULL
                   AND a.owner LIKE 'orch-%' ORDER BY random() LIMIT 1")
  [ -n "$victim" ] || victim=orch-$(($(od -An -N2 -tu2 /dev/urandom) % ORCHS + 1))
  orch_kill "$victim" && kills=$((kills + 1))
  orch "$victim"
  [ "$kills" -lt 5 ] || rm -f "$W/tail"
done
rm -f "$W/tail"
if [ "$kills" -gt 0 ]; then tap_ok "orchestrators were killed while the instances ran ($kills)"
else tap_fail "orchestrators were killed while the instances ran" "no kill happened"; fi

orchs_each orch "$ORCHS" orch_stop
orchs_start final 2 --until-idle
orchs_each final 2 orch_idle_exit

# The instances: one per element, each complete, succeeded exactly once.
INST="FROM steps WHERE task_id = $TASK AND map_idx IS NOT NULL"
expect_eq "exactly $WIDTH instances, one per element" \
  "$(pg_sql "SELECT count(*) || ' ' || count(DISTINCT item_index) || ' ' || min(item_index) || ' '
             || max(item_index) $INST")" "$WIDTH $WIDTH 0 $((WIDTH - 1))"
expect_eq "each instance holds its element and is named after it" \
  "$(pg_sql "SELECT count(*) $INST AND item::jsonb = to_jsonb('f' || item_index)
             AND name = 'process[' || item_index || ']'
             AND map_idx = (SELECT idx FROM steps WHERE task_id = $TASK AND name = 'process')")" \
  "$WIDTH"
expect_eq "every instance complete" \
  "$(pg_sql "SELECT count(*) $INST AND state = 'complete'")" "$WIDTH"
expect_eq "every instance succeeded exactly once" \
  "$(pg_sql "SELECT count(*) $INST AND (SELECT count(*) FROM attempts a
             WHERE a.step_id = steps.id AND a.outcome = 'success') = 1")" "$WIDTH"
# Each recorded success is one the handler ran: its element, its attempt.
pg_sql "SELECT s.item_index || ' ' || a.attempt || ' f' || s.item_index
        FROM steps s JOIN attempts a ON a.step_id = s.id
        WHERE s.task_id = $TASK AND s.map_idx IS NOT NULL AND a.outcome = 'success'" |
  sort >"$W/successes"
sort -u "$W/ran.log" >"$W/ran.sorted"
expect_eq "each instance's success is a run of the handler on its element" \
  "$(comm -23 "$W/successes" "$W/ran.sorted" | head -n 3)" ""
expect_eq "list and sum succeeded exactly once each; the map step itself never ran" \
  "$(pg_sql "SELECT string_agg(name || ' ' || (SELECT count(*) FROM attempts a
             WHERE a.step_id = steps.id AND a.outcome = 'success'), ', ' ORDER BY idx)
             FROM steps WHERE task_id = $TASK AND map_idx IS NULL")" "list 1, process 0, sum 1"
expect_eq "the frozen ones' reaped attempts stayed lease_expired" \
  "$(pg_sql "SELECT count(*) FROM attempts WHERE outcome <> 'lease_expired'
             AND (id IN (${held:-0}) OR (step_id = $list_step AND attempt = 1))")" 0

# The map, the convergence and the task, as the operator sees them.
run t show "$TASK" --json
expect_rc "show the task" 0
printf '%s\n' "$OUT" >"$W/show.json"
expect_eq "the task complete, its 3 steps done" \
  "$(jq -c '[.state, .steps_done, .steps_error]' "$W/show.json")" '["complete",3,0]'
expect_eq "the map step complete with its $WIDTH results in element order" \
  "$(jq -c --argjson n "$WIDTH" '.steps[] | select(.name == "process")
     | [.state, (.results | length), ([.results[] | [.i, .file]] == [range($n) | [., "f\(.)"]])]' \
     "$W/show.json")" "[\"complete\",$WIDTH,true]"
want_sum="{\"n\":$WIDTH,\"in_order\":true,\"total\":$((WIDTH * (WIDTH - 1) / 2))}"
expect_eq "sum complete, with what it received: all $WIDTH results, in order" \
  "$(jq -c '.steps[] | select(.name == "sum") | [.state, .results]' "$W/show.json")" \
  "[\"complete\",$want_sum]"
expect_eq "sum succeeded exactly once" \
  "$(jq '[.steps[] | select(.name == "sum") | .history[] | select(.outcome == "success")] | length' \
     "$W/show.json")" 1
# Every run of sum (a killed one may have run it before) saw the whole map.
expect_eq "each run of sum saw all $WIDTH results in order ($(wc -l <"$W/sum.log") runs)" \
  "$(awk -v w="$want_sum" '$2 != w' "$W/sum.log")" ""
expect_eq "no attempt but success, lease_expired or fenced_out" \
  "$(pg_sql "SELECT string_agg(DISTINCT outcome, ',') FROM attempts
             WHERE outcome NOT IN ('success', 'lease_expired', 'fenced_out')")" ""
expect_attempts_consistent
# A lease lost is said once: the orchestrator stops renewing it.
expect_eq "no lost lease's heartbeat was refused twice" \
  "$(cat "$W"/orch-*.log | grep -o 'heartbeat: the lease of step [0-9]* .* by claim [0-9]*' |
     sort | uniq -d | head -n 3)" ""

# The killing was real: killed orchestrators' instance claims came back
# through the reaper.
expired=$(pg_sql "SELECT count(*) FROM attempts a JOIN steps s ON s.id = a.step_id
                  WHERE s.map_idx IS NOT NULL AND a.outcome = 'lease_expired'
                  AND a.owner <> '$IFROZEN'")
echo "# $ORCHS orchestrators, a $WIDTH-wide map: $kills kills while it ran, $expired instance" \
  "attempts of killed ones lease_expired, $ireaped of the frozen one's," \
  "$(($(wc -l <"$W/ran.log") - WIDTH)) extra runs of the instance handler," \
  "$(wc -l <"$W/sum.log") run(s) of sum"
if [ "$expired" -gt 0 ]; then tap_ok "killed orchestrators' instance claims were reaped ($expired)"
else tap_fail "killed orchestrators' instance claims were reaped" \
  "no instance attempt of a killed orchestrator ended lease_expired"; fi
tap_done
