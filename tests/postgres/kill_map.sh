#!/bin/sh
# A 1,000-wide map under killed orchestrators on PostgreSQL (issue 21):
# one task list -> process (a map over list's 1,000 files, a command per
# instance) -> sum (the convergence step, a command that checks what it
# received), run by 4 `tasker run` processes with short leases.
# The map is created in the transaction that completes list, so list is
# where a lost or doubled map would come from:
# - list's attempt 1 finishes its handler while its orchestrator is frozen
#   (SIGSTOP, with no transaction open); the others reap its lease, and it
#   is let go (SIGCONT) only once a later attempt has created the map: its
#   late success must be refused (fenced), never a second map;
# - attempt 2's orchestrator is SIGKILLed while the handler runs;
# - attempt 3's orchestrator is SIGKILLed the moment its handler is done,
#   while it records the outcome and creates the map (the kill lands before,
#   in or after that transaction: each must leave one map).
# Then a random orchestrator is SIGKILLed and restarted about every 0.4 s
# while the instances run (their claims come back through the reaper), and
# orchestrators that exit once idle finish the rest.
# Checked through SQL, `tasker show --json` and the handlers' own logs:
# exactly 1,000 instance rows, one per element, each complete with exactly
# one successful attempt (which a run of the handler for that element and
# attempt wrote); the map complete with the 1,000 results in element order;
# sum complete with exactly one successful attempt, whose run saw all 1,000
# in order; the task complete; no attempt but success, lease_expired or
# fenced_out, none open; the killing was real (leases of killed ones
# expired, instances among them).
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database kill_map

WIDTH=${KILL_MAP_WIDTH:-1000}
CHAOS_S=${KILL_MAP_SECONDS:-40}
ORCHS=4
cat >"$W/tasker.toml" <<TOML
[backoff]
base = "50ms"
multiplier = 2
max_delay = "500ms"
jitter = "full"

[engine]
max_attempts = 25
lease = "1500ms"
heartbeat = "300ms"
claim_batch = 16
workers = 4
db = "$PG_DB_URL"
TOML

# list: the files f0..f(WIDTH-1). Attempts 1 and 2 wait for the test's
# go-ahead ($W/list.go.N), so that the test can freeze or kill their
# orchestrator while they run.
cat >"$W/list.sh" <<SH
#!/bin/sh
a=\$TASKER_ATTEMPT
: >"$W/list.started.\$a"
if [ "\$a" -le 2 ]; then
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
# results {"i": INDEX, "file": ITEM}. Only sh and one sed: 1,000 of them
# run (the shell's own pattern matching is quadratic on an 8 kB input).
cat >"$W/process.sh" <<SH
#!/bin/sh
set -- \$(sed -n 'h; s/.*"item_index": *\([0-9][0-9]*\).*/\1/p; g; s/.*"item": *"\([^"]*\)".*/\1/p')
[ \$# = 2 ] || { echo "no item or item_index in the input" >&2; exit 3; }
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
cat >"$W/fanout.toml" <<TOML
name = "fanout"
version = "1"
[[steps]]
name = "list"
handler = { kind = "command", argv = ["$W/list.sh"], timeout = "120s" }
[[steps]]
name = "process"
depends_on = ["list"]
handler = { kind = "command", argv = ["$W/process.sh"], timeout = "60s" }
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
i=1
while [ "$i" -le "$ORCHS" ]; do orch "orch-$i"; i=$((i + 1)); done

# list_attempt N FIELD: FIELD of list's attempt N (nothing while none).
list_attempt() {
  pg_sql "SELECT a.$2 FROM attempts a JOIN steps s ON s.id = a.step_id
          WHERE s.name = 'list' AND a.attempt = $1"
}
started() { [ -e "$W/list.started.$1" ] && [ -n "$(list_attempt "$1" owner)" ]; }
finished() { [ -n "$(list_attempt "$1" outcome)" ]; }
# A frozen orchestrator inside a transaction would hold locks the others
# wait for: only one whose sessions are all idle is left frozen.
idle() {
  [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity
               WHERE application_name = '$1' AND state <> 'idle'")" = 0 ]
}
list_step=$(pg_sql "SELECT id FROM steps WHERE name = 'list'")

# Attempt 1: frozen with the handler running, which then finishes.
wait_for "list's attempt 1 runs" 60 started 1
frozen=$(list_attempt 1 owner)
tries=0
until [ "$tries" -ge 200 ]; do
  tries=$((tries + 1))
  kill -STOP "$(bg_pid "$frozen")"
  idle "$frozen" && break
  kill -CONT "$(bg_pid "$frozen")"
  sleep 0.05
done
idle "$frozen" ||
  tap_fail "$frozen, running list's attempt 1, frozen with no transaction open" "not in $tries tries"
touch "$W/list.go.1"
if wait_for "the others reaped list's attempt 1 of the frozen $frozen (idle at try $tries)" 60 \
  finished 1; then
  expect_eq "list's attempt 1 (frozen $frozen) ended with its lease expired" \
    "$(list_attempt 1 outcome)" lease_expired
fi

# Attempt 2: its orchestrator killed while the handler runs.
wait_for "list's attempt 2 runs" 60 started 2
second=$(list_attempt 2 owner)
orch_kill "$second" && tap_ok "$second, running list's attempt 2, was killed"
touch "$W/list.go.2"
orch "$second"

# Attempt 3: its orchestrator killed as soon as the handler is done, while
# it records list's success and creates the map (or just before or after).
wait_for "list's attempt 3 runs" 60 started 3
third=$(list_attempt 3 owner)
orch_kill "$third" && tap_ok "$third, running list's attempt 3, was killed"
orch "$third"
list_done() { [ "$(pg_sql "SELECT state FROM steps WHERE id = $list_step")" = complete ]; }
wait_for "list complete (the map created)" 120 list_done
map_by=$(pg_sql "SELECT attempt || ' (' || owner || ')' FROM attempts
                 WHERE step_id = $list_step AND outcome = 'success'")
echo "# the map was created by list's attempt $map_by; attempt 3 ended $(list_attempt 3 outcome)"

# The frozen one let go: its late success must be refused.
kill -CONT "$(bg_pid "$frozen")"
late() { grep -q "step $list_step attempt 1 by $frozen refused: the lease was lost" "$W/$frozen.log"; }
wait_for "the frozen $frozen's late success of list was refused (its log says so)" 60 late &&
  tap_ok "the frozen $frozen's late success of list was refused (its log says so)"

# Chaos while the instances run, until the task is finished (or time is up).
task_finished() {
  [ "$(pg_sql "SELECT state FROM tasks WHERE id = $TASK")" != in_progress ]
}
kills=0
end=$(($(date +%s) + CHAOS_S))
while [ "$(date +%s)" -lt "$end" ] && ! task_finished; do
  sleep 0.4
  victim=$(($(od -An -N2 -tu2 /dev/urandom) % ORCHS + 1))
  orch_kill "orch-$victim" && kills=$((kills + 1))
  orch "orch-$victim"
done
if [ "$kills" -gt 0 ]; then tap_ok "orchestrators were killed while the instances ran ($kills)"
else tap_fail "orchestrators were killed while the instances ran" "no kill happened"; fi

i=1
while [ "$i" -le "$ORCHS" ]; do orch_stop "orch-$i"; i=$((i + 1)); done
orch_start final-1 run --until-idle --id final-1
orch_start final-2 run --until-idle --id final-2
orch_expect final-1 0 "final-1 exits 0 once idle"
orch_expect final-2 0 "final-2 exits 0 once idle"

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

# The killing was real: killed orchestrators' instance claims came back
# through the reaper.
expired=$(pg_sql "SELECT count(*) FROM attempts a JOIN steps s ON s.id = a.step_id
                  WHERE s.map_idx IS NOT NULL AND a.outcome = 'lease_expired'")
reruns=$(($(wc -l <"$W/ran.log") - WIDTH))
echo "# $ORCHS orchestrators, a $WIDTH-wide map: $kills kills while it ran, $expired instance" \
  "attempts lease_expired, $reruns extra runs of the instance handler," \
  "$(wc -l <"$W/sum.log") run(s) of sum"
if [ "$expired" -gt 0 ]; then tap_ok "killed orchestrators' instance claims were reaped ($expired)"
else tap_fail "killed orchestrators' instance claims were reaped" \
  "no instance attempt ended lease_expired"; fi
tap_done
