#!/bin/sh
# Clock skew (issue 11): two orchestrators whose machine clocks disagree
# with the database server's, one 30 s ahead and one 30 s behind (libfaketime
# shifts every clock the process reads). Time belongs to the store, so:
#  - no retry starts before its run_at by the SERVER's clock: the failing
#    step is a command that records clock_timestamp() on the server when it
#    starts, compared with the run_at its first failure stored;
#  - no live lease is reaped: steps that sleep longer than the lease (kept
#    by heartbeats) finish without one lease_expired attempt.
# Needs TK_TEST_PG_URL and libfaketime (Debian's faketime package).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1)
if [ -z "$FAKETIME_LIB" ]; then
  tap_fail "libfaketime installed" "no libfaketimeMT.so.1; run: sudo apt-get install -y faketime"
  tap_done
  exit 1
fi
pg_database skew
# Under AddressSanitizer the preloaded libfaketime comes before ASan's
# runtime, which ASan refuses by default; the order is harmless here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
W=$TMPDIR_TEST
cat >"$W/tasker.toml" <<TOML
[backoff.profiles.half]
base = "500ms"
multiplier = 1
jitter = "none"
[engine]
lease = "2s"
heartbeat = "500ms"
workers = 4
db = "$PG_DB_URL"
TOML
# The retry step records the server's time when its handler starts, then
# fails its first attempt.
cat >"$W/starts.sh" <<SCRIPT
#!/bin/sh
psql -qAtX -d "$PG_DB_URL" -c "INSERT INTO starts VALUES (\$TASKER_TASK_ID, \$TASKER_ATTEMPT,
  (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" >/dev/null || exit 3
[ "\$TASKER_ATTEMPT" -ge 2 ]
SCRIPT
chmod +x "$W/starts.sh"
cat >"$W/retry.toml" <<TOML
name = "retry_once"
version = "1"
[[steps]]
name = "flaky"
handler = { kind = "command", argv = ["$W/starts.sh"], timeout = "10s" }
retry = { max_attempts = 3, backoff = "half" }
TOML
cat >"$W/long.toml" <<'TOML'
name = "long"
version = "1"
[[steps]]
name = "sleep"
handler = { kind = "builtin", name = "sleep", duration = "2500ms" }
TOML
t() { "$TASKER" --config "$W/tasker.toml" "$@"; }
run t init
expect_rc "init" 0
pg_sql "CREATE TABLE starts (task bigint, attempt int, at bigint)" >/dev/null
run t template add "$W/retry.toml" "$W/long.toml"
expect_rc "template add" 0
# Submitted from a machine whose clock is behind too: without the server's
# clock the tasks would be due 30 s early for some and late for others.
FAKETIME="-30s" LD_PRELOAD=$FAKETIME_LIB "$TASKER" --config "$W/tasker.toml" \
  submit retry_once --count 120 >/dev/null
FAKETIME="-30s" LD_PRELOAD=$FAKETIME_LIB "$TASKER" --config "$W/tasker.toml" \
  submit long --count 24 >/dev/null

# Each orchestrator's every clock is shifted; both run until idle.
FAKETIME="+30s" LD_PRELOAD=$FAKETIME_LIB "$TASKER" --config "$W/tasker.toml" run --until-idle \
  --id ahead >"$W/ahead.log" 2>&1 &
ahead=$!
FAKETIME="-30s" LD_PRELOAD=$FAKETIME_LIB "$TASKER" --config "$W/tasker.toml" run --until-idle \
  --id behind >"$W/behind.log" 2>&1 &
behind=$!
wait $ahead; rc_ahead=$?
wait $behind; rc_behind=$?
expect_eq "the orchestrator 30 s ahead exits 0" "$rc_ahead" 0
expect_eq "the orchestrator 30 s behind exits 0" "$rc_behind" 0
skewed=$(FAKETIME="+30s" LD_PRELOAD=$FAKETIME_LIB date +%s)
real=$(date +%s)
if [ $((skewed - real)) -ge 29 ]; then tap_ok "libfaketime shifts the clock ($((skewed - real)) s)"
else tap_fail "libfaketime shifts the clock" "date under FAKETIME=+30s: $skewed, real: $real"; fi

expect_eq "all 144 tasks complete" \
  "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*) FROM tasks")" \
  "144/144"
expect_eq "both orchestrators ran retries" \
  "$(pg_sql "SELECT count(DISTINCT owner) FROM attempts a JOIN steps s ON s.id = a.step_id
             WHERE s.name = 'flaky' AND a.attempt = 2")" 2
expect_eq "both orchestrators held long steps" \
  "$(pg_sql "SELECT count(DISTINCT owner) FROM attempts a JOIN steps s ON s.id = a.step_id
             WHERE s.name = 'sleep'")" 2
expect_eq "every retry was recorded starting" \
  "$(pg_sql "SELECT count(*) FROM starts WHERE attempt = 2")" 120
early=$(pg_sql "SELECT count(*) FROM starts st JOIN steps s ON s.task_id = st.task
                JOIN attempts a1 ON a1.step_id = s.id AND a1.attempt = 1
                WHERE st.attempt = 2 AND st.at < a1.next_run_at")
worst=$(pg_sql "SELECT COALESCE(min(st.at - a1.next_run_at), 0) FROM starts st
                JOIN steps s ON s.task_id = st.task
                JOIN attempts a1 ON a1.step_id = s.id AND a1.attempt = 1 WHERE st.attempt = 2")
expect_eq "no retry started before its run_at by the server's clock (earliest: $worst ms)" \
  "$early" 0
expect_eq "no live lease was reaped" \
  "$(pg_sql "SELECT count(*) FROM attempts WHERE outcome IN ('lease_expired', 'fenced_out')")" 0
expect_eq "no write was fenced" \
  "$(pg_sql "SELECT COALESCE((SELECT value FROM counters WHERE name = 'fenced_writes'), 0)")" 0
tap_done
