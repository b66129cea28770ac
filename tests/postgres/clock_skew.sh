#!/bin/sh
# Clock skew (issue 11): two orchestrators whose machine clocks disagree
# with the database server's, one 30 s ahead and one 30 s behind (libfaketime
# shifts every clock the process reads). Time belongs to the store, so:
#  - no retry starts before its run_at by the SERVER's clock: the failing
#    step is a command that records clock_timestamp() on the server when it
#    starts, compared with the run_at its first failure stored;
#  - no live lease is reaped: leases of 10 s, a third of the skew, while
#    the steps hold them 2.5 s and renew them by heartbeats every 0.5 s, end
#    without one lease_expired attempt. An orchestrator that read its own
#    clock would expire every lease at once (30 s ahead, its reaper sees
#    them all past their end; 30 s behind, its claims and heartbeats set
#    ends already past); on time, only an orchestrator stalled 10 s with
#    no heartbeat loses one, far past what a busy machine's scheduling does.
# Needs TK_TEST_PG_URL and libfaketime (Debian's faketime package).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n 1)
if [ -z "$FAKETIME_LIB" ]; then
  tap_fail "libfaketime installed" "no libfaketimeMT.so.1; run: sudo apt-get install -y faketime"
  tap_done
  exit 1
fi
# Under AddressSanitizer the preloaded libfaketime comes before ASan's
# runtime, which ASan refuses by default; the order is harmless here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# skewed OFFSET CMD...: CMD with every clock it reads shifted by OFFSET.
skewed() { sk_offset=$1; shift; FAKETIME="$sk_offset" LD_PRELOAD=$FAKETIME_LIB "$@"; }
# The premise: without a shifted clock the test shows nothing.
skewed_s=$(skewed +30s date +%s)
real_s=$(date +%s)
if [ $((skewed_s - real_s)) -ge 29 ]; then tap_ok "libfaketime shifts the clock ($((skewed_s - real_s)) s)"
else tap_fail "libfaketime shifts the clock" "date under FAKETIME=+30s: $skewed_s, real: $real_s"; fi
pg_database skew
tasker_config backoff.profiles.half.base=500ms backoff.profiles.half.multiplier=1 \
  backoff.profiles.half.jitter=none engine.lease=10s engine.heartbeat=500ms engine.workers=4
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
tasker_setup "$W/retry.toml" "$W/long.toml"
pg_sql "CREATE TABLE starts (task bigint, attempt int, at bigint)" >/dev/null
# Submitted from a machine whose clock is behind too: without the server's
# clock the tasks would be due 30 s early for some and late for others.
skewed -30s t submit retry_once --count 120 >/dev/null
skewed -30s t submit long --count 24 >/dev/null

# Each orchestrator's every clock is shifted; both run until idle.
FAKETIME=+30s LD_PRELOAD=$FAKETIME_LIB orch_start ahead run --until-idle --id ahead
FAKETIME=-30s LD_PRELOAD=$FAKETIME_LIB orch_start behind run --until-idle --id behind
orch_expect ahead 0 "the orchestrator 30 s ahead exits 0"
orch_expect behind 0 "the orchestrator 30 s behind exits 0"

expect_all_complete 144
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
