#!/bin/sh
# The database restarted mid-run (issue 11): two orchestrators work through
# tasks with sleeping steps while the server is stopped (fast shutdown,
# then immediate: a crash with recovery) and started again. Each
# orchestrator says it lost the store and reconnected, keeps its running
# handlers (each holds a step whose handler runs until the test releases
# it, after both restarts: that attempt ends success under its original
# claim, and no lease is reaped), records their outcomes once connected,
# and finishes (exit 0): every task complete, nothing done twice, no
# attempt row open. Then a server that stays down until the orchestrator
# has ended: `tasker run` gives up after engine.reconnect_give_up with exit
# status 1, and an unreachable address is one line naming it.
# Restarts the harness's cluster (its directory is the URL's host).
# run-tests: alone
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database restart
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PGDIR=$(printf '%s' "$TK_TEST_PG_URL" | sed -n 's/.*[?&]host=\([^&]*\).*/\1/p')
tasker_config backoff.profiles.reconnect.base=100ms backoff.profiles.reconnect.multiplier=2 \
  backoff.profiles.reconnect.max_delay=1s backoff.profiles.reconnect.jitter=none \
  engine.lease=20s engine.heartbeat=2s engine.workers=4 engine.reconnect_backoff=reconnect \
  engine.reconnect_give_up=60s
# Every handler records its attempt ("TASK STEP ATTEMPT") in $W/ran as it
# starts: a lease lost with the connection is reaped only if its claim's
# reply was lost too, and then its handler never ran.
cat >"$W/step.sh" <<SCRIPT
#!/bin/sh
echo "\$TASKER_TASK_ID \$TASKER_STEP \$TASKER_ATTEMPT" >>"$W/ran"
sleep "\$1"
echo '{"ok": true}'
SCRIPT
chmod +x "$W/step.sh"
cat >"$W/work.toml" <<TOML
name = "work"
version = "1"
[[steps]]
name = "a"
handler = { kind = "command", argv = ["$W/step.sh", "0.15"] }
[[steps]]
name = "b"
depends_on = ["a"]
handler = { kind = "command", argv = ["$W/step.sh", "0.1"] }
TOML
# The first hold step each orchestrator runs ($HOLDER: its name) waits for
# $W/release; until then any other fails, to be retried, maybe by the other
# orchestrator, so that each comes to hold one.
cat >"$W/hold.sh" <<SCRIPT
#!/bin/sh
echo "\$TASKER_TASK_ID \$TASKER_STEP \$TASKER_ATTEMPT" >>"$W/ran"
if mkdir "$W/holding.\$HOLDER" 2>/dev/null; then
  while [ ! -e "$W/release" ]; do sleep 0.1; done
elif [ ! -e "$W/release" ]; then
  exit 1
fi
echo '{"held": true}'
SCRIPT
chmod +x "$W/hold.sh"
cat >"$W/hold.toml" <<TOML
name = "hold"
version = "1"
[[steps]]
name = "hold"
handler = { kind = "command", argv = ["$W/hold.sh"], timeout = "600s" }
retry = { max_attempts = 1000, backoff = "reconnect" }
TOML
tasker_setup "$W/work.toml" "$W/hold.toml"
t submit hold --count 2 >/dev/null
t submit work --count 400 >/dev/null

HOLDER=one orch_start one run --until-idle --id one
HOLDER=two orch_start two run --until-idle --id two
# Both at work before the server goes: each has claimed work steps, and
# runs the handler of its hold step.
both_claimed() {
  [ "$(pg_sql "SELECT count(DISTINCT owner) FROM attempts WHERE owner IN ('one', 'two')")" = 2 ]
}
wait_for "both orchestrators claimed steps before the restart" 30 both_claimed
both_hold() { [ -d "$W/holding.one" ] && [ -d "$W/holding.two" ]; }
wait_for "each orchestrator runs a hold step's handler" 120 both_hold
# The attempts running those handlers: the only hold attempts open now.
held=$(pg_sql "SELECT string_agg(a.id || ':' || a.owner, ',' ORDER BY a.owner) FROM attempts a
               JOIN steps s ON s.id = a.step_id WHERE s.name = 'hold' AND a.outcome IS NULL")
expect_eq "one hold attempt open per orchestrator ($held)" \
  "$(printf '%s' "$held" | sed 's/[0-9]*://g')" "one,two"
held_ids=$(printf '%s' "$held" | sed 's/:[a-z]*//g')
"$TOP/scripts/pg-cluster" restart "$PGDIR" fast >"$W/restart1.log" 2>&1
expect_eq "the server restarted (fast shutdown)" "$?" 0
# Both back at work before the crash.
both_reconnected() {
  grep -q "reconnected to the store after" "$W/one.log" &&
    grep -q "reconnected to the store after" "$W/two.log"
}
wait_for "both orchestrators reconnected after the fast restart" 30 both_reconnected
"$TOP/scripts/pg-cluster" restart "$PGDIR" immediate >"$W/restart2.log" 2>&1
expect_eq "the server restarted (immediate shutdown: crash recovery)" "$?" 0
touch "$W/release"
orch_expect one 0 "orchestrator one finished (exit 0)"
orch_expect two 0 "orchestrator two finished (exit 0)"
logs=$(cat "$W/one.log" "$W/two.log")
expect_match "an orchestrator said it lost the store" "$logs" "lost the store"
expect_match "an orchestrator said it reconnected" "$logs" "reconnected to the store after"
expect_all_complete 402
expect_attempts_consistent
echo "# attempts by outcome: $(pg_sql "SELECT string_agg(outcome || ' ' || n, ', ')
      FROM (SELECT outcome, count(*) n FROM attempts GROUP BY 1 ORDER BY 1) x")"
expect_eq "the handlers running across both restarts ended success under their claims" \
  "$(pg_sql "SELECT string_agg(owner || ':' || outcome, ',' ORDER BY owner) FROM attempts
             WHERE id IN ($held_ids)")" "one:success,two:success"
expect_eq "their steps complete with no later attempt" \
  "$(pg_sql "SELECT count(*) FROM attempts a JOIN attempts h ON h.step_id = a.step_id
             WHERE h.id IN ($held_ids) AND a.id > h.id")" 0
# A claim committed as the server crashed, its reply lost, is held by
# nobody until its lease expires: reaped, it never ran. A running handler's
# attempt is never reaped nor its outcome refused.
lost=$(pg_sql "SELECT s.task_id || ' ' || s.name || ' ' || a.attempt FROM attempts a
               JOIN steps s ON s.id = a.step_id WHERE a.outcome IN ('lease_expired', 'fenced_out')")
expect_eq "no attempt whose handler ran was reaped or refused ($(printf '%s' "$lost" | grep -c .) claims lost with their reply)" \
  "$(printf '%s\n' "$lost" | grep -Fx -f "$W/ran")" ""

# A server that is gone for good: give up after reconnect_give_up. The
# server stays down until the orchestrator has ended (or 60 s have
# passed): the restart's wait is cut short then, and the server started.
t submit work --count 50 >/dev/null
orch_start three --set engine.reconnect_give_up=2s run --id three
three_claimed() { [ "$(pg_sql "SELECT count(*) FROM attempts WHERE owner = 'three'")" -gt 0 ]; }
wait_for "orchestrator three claimed a step" 30 three_claimed
"$TOP/scripts/pg-cluster" restart "$PGDIR" fast 600 >"$W/restart3.log" 2>&1 &
RESTART=$!
# pg-cluster stopped the server and sleeps.
stopped() { [ "$(ps -o comm= --ppid "$RESTART")" = sleep ]; }
wait_for "the server stopped" 60 stopped
orch_expect three 1 "with the server gone, tasker run gives up with exit 1" 60
kill "$(ps -o pid= --ppid "$RESTART")"
wait "$RESTART"
"$TOP/scripts/pg-cluster" restart "$PGDIR" fast >>"$W/restart3.log" 2>&1
expect_eq "the server started again" "$?" 0
expect_match "and says it gave up" "$(cat "$W/three.log")" "gave up reconnecting to the store after 2s"

# An address nothing listens on: one line, naming it.
run "$TASKER" --db "postgresql:///tasker?host=/nonexistent-dir&port=5999" status
expect_rc "status against an unreachable server exits 1" 1
expect_eq "in one line" "$(printf '%s\n' "$ERR" | wc -l | tr -d ' ')" 1
expect_match "naming the address tried" "$ERR" "/nonexistent-dir"
run "$TASKER" --db "postgresql:///tasker?host=/nonexistent-dir&port=5999" run
expect_rc "run against an unreachable server exits 1" 1
expect_match "tasker run names the address" "$ERR" "cannot connect to PostgreSQL at /nonexistent-dir"
tap_done
