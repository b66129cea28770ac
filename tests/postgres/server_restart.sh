#!/bin/sh
# The database restarted mid-run (issue 11): two orchestrators work through
# tasks with sleeping steps while the server is stopped (fast shutdown,
# then immediate: a crash with recovery) and started again. Each
# orchestrator says it lost the store and reconnected, keeps its running
# handlers, records their outcomes once connected, and finishes: every
# task complete, nothing done twice, no attempt row open. Then a server
# that stays down: `tasker run` gives up after engine.reconnect_give_up
# with exit status 1, and an unreachable address is one line naming it.
# Restarts the harness's cluster (its directory is the URL's host).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database restart
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PGDIR=$(printf '%s' "$TK_TEST_PG_URL" | sed -n 's/.*[?&]host=\([^&]*\).*/\1/p')
cat >"$W/tasker.toml" <<TOML
[backoff.profiles.reconnect]
base = "100ms"
multiplier = 2
max_delay = "1s"
jitter = "none"
[engine]
lease = "20s"
heartbeat = "2s"
workers = 4
db = "$PG_DB_URL"
reconnect_backoff = "reconnect"
reconnect_give_up = "60s"
TOML
cat >"$W/work.toml" <<'TOML'
name = "work"
version = "1"
[[steps]]
name = "a"
handler = { kind = "builtin", name = "sleep", duration = "150ms" }
[[steps]]
name = "b"
depends_on = ["a"]
handler = { kind = "command", argv = ["sh", "-c", "sleep 0.1; echo '{\"ok\": true}'"] }
TOML
tasker_setup "$W/work.toml"
t submit work --count 400 >/dev/null

t run --until-idle --id one >"$W/one.log" 2>&1 &
one=$!
t run --until-idle --id two >"$W/two.log" 2>&1 &
two=$!
# Both at work before the server goes: each has claimed a step.
both_claimed() {
  [ "$(pg_sql "SELECT count(DISTINCT owner) FROM attempts WHERE owner IN ('one', 'two')")" = 2 ]
}
wait_for "both orchestrators claimed steps before the restart" 30 both_claimed
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
wait $one; rc_one=$?
wait $two; rc_two=$?
expect_eq "orchestrator one finished (exit 0)" "$rc_one" 0
expect_eq "orchestrator two finished (exit 0)" "$rc_two" 0
logs=$(cat "$W/one.log" "$W/two.log")
expect_match "an orchestrator said it lost the store" "$logs" "lost the store"
expect_match "an orchestrator said it reconnected" "$logs" "reconnected to the store after"
expect_all_complete 400
expect_attempts_consistent
echo "# attempts by outcome: $(pg_sql "SELECT string_agg(outcome || ' ' || n, ', ')
      FROM (SELECT outcome, count(*) n FROM attempts GROUP BY 1 ORDER BY 1) x")"

# A server that is gone for good: give up after reconnect_give_up.
t submit work --count 50 >/dev/null
t --set engine.reconnect_give_up=2s run --id three >"$W/three.log" 2>&1 &
three=$!
three_claimed() { [ "$(pg_sql "SELECT count(*) FROM attempts WHERE owner = 'three'")" -gt 0 ]; }
wait_for "orchestrator three claimed a step" 30 three_claimed
# Stop the cluster under the orchestrator for 4 s, longer than it waits.
"$TOP/scripts/pg-cluster" restart "$PGDIR" fast 4 >"$W/restart3.log" 2>&1
expect_eq "the server came back after 4 s down" "$?" 0
wait $three; rc_three=$?
expect_eq "with the server gone, tasker run gives up with exit 1" "$rc_three" 1
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
