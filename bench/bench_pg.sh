#!/bin/sh
# PostgreSQL benchmarks (issue 11), printed as tables, on a private cluster
# with PostgreSQL's default durability (synchronous_commit = on):
#   throughput  100,000 noop steps as 1,000 x 100 independent and as
#               10,000 x a chain of 10, with 1, 2 and 4 orchestrator
#               processes (4 workers each); and 50,000 single-step tasks
#               (what a job queue does). Tasks are submitted first; the
#               time is from the orchestrators' start until the last exits
#               (tasker run --until-idle).
#               Each row also gives the cluster's CPU (srv_us) and WAL
#               bytes (wal_B) per step while the drain ran.
#   chain4      tasker's 10,000 chains of 4 noop steps at 1, 2 and 4
#               orchestrators (the rows peers takes its best of)
#   peers       ONE table: tasker beside graphile-worker and pg-boss (each
#               mode: bench/peers/run-peers.sh) and DBOS Transact
#               (bench/peers/dbos/run-dbos.sh) on the same cluster in the
#               same run: single-step tasks/s, 4-step chains' steps/s, their
#               latency p50/p99, retry lateness p99, server CPU and WAL per
#               single-step task (the drain only), and tasker/peer ratios.
#               tasker's figures are those of jobs, latency and precision
#               (run first when not asked for) and 10,000 chains of 4 at 1,
#               2 and 4 orchestrators. The peers install from the npm
#               registry into /tmp (PEERS_WORK, DBOS_WORK) on first use.
#   latency     a linear 4-step noop task, submit to complete, p50/p99 (200
#               tasks submitted 20 ms apart from one connection, as an
#               embedding application does, to one running orchestrator)
#   precision   10,000 steps failing once with a 50 ms delay (jitter none):
#               how late each retry started after its run_at, by the
#               server's clock
#   split       8 orchestrators (4 workers each) on 1,600 steps that sleep
#               100 ms: the time against the ideal, and the fewest and most
#               claims any orchestrator made (an even split is 200 each)
#   scale       claiming 100 ready steps with 10^4 / 10^5 / 10^6 stored,
#               90% of them waiting for a retry an hour ahead
#   where       where the time of a single-step task goes, over its whole
#               life (submit, claim, outcome), beside each peer mode's job:
#               the server's CPU and the clients' CPU per job, transactions,
#               row writes and WAL per job; then the server's busiest
#               functions while tasker drains (perf, when it can record)
#   durability  the job queue's rows (1 and 4 processes) at durability full
#               and fast (synchronous_commit off; docs/durability.md)
#   delayed     a claim of 100 ready steps beside 100,000 tasks delayed to
#               tomorrow (bench_lifecycle delayed, on the cluster)
#   search      error-text search and activity over 24 h with 10^6 tasks
#               and attempts stored (bench_search, on the cluster)
#   map         a map's instances (issue 21; bench_map, on the cluster):
#               the transaction that creates 10,000 of them (goal <= 300
#               ms), 100 tasks x a 1,000-wide map beside 100 x 1,000
#               independent steps (goal: within 10%), and claims of 100
#               with 10^6 steps stored, half of them instances, beside
#               today's shape (goal: within 2x); BENCH_MAP="create claims"
#               (bench_map's section names) runs only those
#   submit      bulk submit (issue 22; bench_submit, on the cluster): tasks/s
#               of tk_task_submit_many (100,000 single-step tasks in one
#               call, in calls of 1,000, with identities; 25,000 4-step
#               chains) beside tk_task_submit, on SQLite and on the cluster
#               (goals: >= 50,000/s on SQLite, >= 20,000/s on PostgreSQL)
# Usage: sh bench/bench_pg.sh [throughput|jobs|chain4|latency|precision|peers|split|scale|where|
#                              durability|delayed|search|map|submit]...
# (default all but where and chain4). BENCH_QUICK=1 runs a tenth of the sizes; TASKER=PATH
# measures another build's tasker (a baseline, run alternately with this one), CLAIM_TIMER=PATH
# its claim_timer (scale). Every
# tool a section runs is built first (make, in $BUILD).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
# TASKER: another build's tasker to measure (a baseline: A/B on one machine).
TASKER=${TASKER:-$TOP/$BUILD/bin/tasker}
CLAIM_TIMER=${CLAIM_TIMER:-$TOP/$BUILD/bench/claim_timer}
SUBMIT_PACED=$TOP/$BUILD/bench/submit_paced
LIFECYCLE=$TOP/$BUILD/bench/bench_lifecycle
SEARCH=$TOP/$BUILD/bench/bench_search
MAP=$TOP/$BUILD/bench/bench_map
SUBMIT=$TOP/$BUILD/bench/bench_submit
# Build what the sections run (make does nothing when it is up to date), so
# that a fresh clone needs no make target first; build-asan is MODE=asan's.
MODE=release
[ "$BUILD" = build-asan ] && MODE=asan
make -C "$TOP" --no-print-directory MODE=$MODE BUILD="$BUILD" \
  "$BUILD/bin/tasker" "$BUILD/bench/claim_timer" "$BUILD/bench/submit_paced" \
  "$BUILD/bench/bench_lifecycle" "$BUILD/bench/bench_search" "$BUILD/bench/bench_map" \
  "$BUILD/bench/bench_submit" >&2 ||
  { echo "bench_pg.sh: building the benchmark tools failed (try: make bench)" >&2; exit 1; }
Q=${BENCH_QUICK:-0}
div() { if [ "$Q" = 1 ]; then echo $(($1 / 10)); else echo "$1"; fi; }
W=$(mktemp -d /tmp/tasker-bench-pg.XXXXXX)
chmod 755 "$W"
cleanup() { "$TOP/scripts/pg-cluster" stop "$W/pg" >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT INT TERM
BASE_URL=$("$TOP/scripts/pg-cluster" start "$W/pg")
sql() { psql -qAtX -d "$1" -c "$2"; }
# fresh_db: a new database on the cluster; its URL on stdout. Called in
# $(...), a subshell: the number comes from the cluster, not a variable.
fresh_db() {
  n=$(sql "$BASE_URL" "SELECT count(*) + 1 FROM pg_database WHERE datname LIKE 'bench\_%'")
  sql "$BASE_URL" "CREATE DATABASE bench_$n" >/dev/null
  printf '%s' "$BASE_URL" | sed "s|:///[^?]*|:///bench_$n|"
}
now_ms() { date +%s%3N; }

cat >"$W/tasker.toml" <<'TOML'
[backoff.profiles.fixed50]
base = "50ms"
multiplier = 1
jitter = "none"
[engine]
workers = 4
TOML
# template NAME NSTEPS CHAIN(0|1) HANDLER [RETRY]: a template file.
template() {
  f="$W/$1.toml"
  { echo "name = \"$1\""; echo 'version = "1"'
    i=1
    while [ "$i" -le "$2" ]; do
      echo '[[steps]]'; echo "name = \"s$i\""
      [ "$3" = 1 ] && [ "$i" -gt 1 ] && echo "depends_on = [\"s$((i - 1))\"]"
      echo "handler = $4"
      [ -n "${5:-}" ] && echo "retry = $5"
      i=$((i + 1))
    done; } >"$f"
  echo "$f"
}
NOOP='{ kind = "builtin", name = "noop" }'

# settle URL: wait (5 s at most) until no other session is on URL's
# database, so that the CPU of the server processes that served it is in the
# postmaster's reaped-children total when server_ticks reads it (read while
# one is exiting, it could be missed).
settle() {
  settle_tries=0 # (a name of its own: sh functions share their callers' variables)
  while [ "$settle_tries" -lt 50 ] && [ "$(sql "$1" "SELECT count(*) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid()")" != 0 ]; do
    sleep 0.1; settle_tries=$((settle_tries + 1))
  done
  sleep 0.1
}
# prepare URL TEMPLATE_FILE TASKS: init, add, submit.
prepare() {
  "$TASKER" --config "$W/tasker.toml" --db "$1" init >/dev/null 2>&1
  "$TASKER" --config "$W/tasker.toml" --db "$1" template add "$2" >/dev/null 2>&1
  "$TASKER" --config "$W/tasker.toml" --db "$1" submit "$(basename "$2" .toml)" --count "$3" >/dev/null
  settle "$1"
}
# drain URL PROCS: seconds (3 decimals) for PROCS orchestrators to finish,
# at engine.durability $DURABILITY (docs/durability.md).
DURABILITY=full
drain() {
  t0=$(now_ms)
  i=1 pids=
  while [ "$i" -le "$2" ]; do
    "$TASKER" --config "$W/tasker.toml" --db "$1" --set "engine.durability=$DURABILITY" \
      run --until-idle --id "bench-$i" 2>>"$W/run.log" &
    pids="$pids $!"
    i=$((i + 1))
  done
  for pid in $pids; do wait "$pid" || true; done
  t1=$(now_ms)
  settle "$1"
  echo "$t0 $t1" | awk '{ printf "%.3f", ($2 - $1) / 1000 }'
}

# server_ticks: the cluster's CPU ticks so far: the postmaster with the
# children it has reaped, and its live children.
server_ticks() {
  pm=$(head -n 1 "$W/pg/data/postmaster.pid")
  for pid in $pm $(ps -o pid= --ppid "$pm"); do
    cat "/proc/$pid/stat" 2>/dev/null | sed 's/.*) //'
  done | awk '{ t += $12 + $13 } NR == 1 { t += $14 + $15 } END { print t }'
}
# meter: server CPU ticks and the WAL position in bytes, for meter_cost.
meter() { echo "$(server_ticks) $(sql "$BASE_URL" "SELECT pg_current_wal_lsn() - '0/0'")"; }
# meter_cost BEFORE AFTER STEPS: "server_us wal_bytes" per step.
meter_cost() {
  echo "$1 $2" | awk -v n="$3" -v hz="$(getconf CLK_TCK)" \
    '{ printf "%.0f %.0f", ($3 - $1) * 1e6 / hz / n, ($4 - $2) / n }'
}

# throughput_row: one row; sets LAST_RATE (steps/s), LAST_COST (meter_cost
# of the drain).
throughput_row() { # LABEL TEMPLATE_FILE TASKS STEPS_PER_TASK PROCS
  url=$(fresh_db)
  prepare "$url" "$2" "$3"
  m0=$(meter)
  secs=$(drain "$url" "$5")
  LAST_COST=$(meter_cost "$m0" "$(meter)" $(($3 * $4)))
  left=$(sql "$url" "SELECT count(*) FROM steps WHERE state <> 'complete'")
  steps=$(($3 * $4))
  printf '%-12s %8d %8d %6d %10s %10.0f %8s %8s %s\n' "$1" "$3" "$steps" "$5" "$secs" \
    "$(echo "$steps $secs" | awk '{ print $1 / $2 }')" $LAST_COST \
    "$([ "$left" = 0 ] || echo "($left steps left!)")"
  LAST_RATE=$(echo "$steps $secs" | awk '{ printf "%.0f", $1 / $2 }')
}

throughput() {
  ind=$(template independent 100 0 "$NOOP")
  chain=$(template chain 10 1 "$NOOP")
  printf '%-12s %8s %8s %6s %10s %10s %8s %8s\n' throughput tasks steps procs seconds steps/s \
    srv_us wal_B
  for p in 1 2 4; do throughput_row independent "$ind" "$(div 1000)" 100 "$p"; done
  for p in 1 2 4; do throughput_row chain "$chain" "$(div 10000)" 10 "$p"; done
}

BEST_JOBS=0 BEST_JOBS_COST=
jobs() {
  one=$(template single 1 0 "$NOOP")
  printf '\n%-12s %8s %8s %6s %10s %10s %8s %8s\n' "job queue" tasks steps procs seconds steps/s \
    srv_us wal_B
  for p in 1 2 4; do
    throughput_row single "$one" "$(div 50000)" 1 "$p"
    if [ "$LAST_RATE" -gt "$BEST_JOBS" ]; then BEST_JOBS=$LAST_RATE BEST_JOBS_COST=$LAST_COST; fi
  done
}

# chain4: tasker's 4-step chains as peers measures them, with the table.
chain4() {
  c4=$(template chain4 4 1 "$NOOP")
  printf '\n%-12s %8s %8s %6s %10s %10s %8s %8s\n' "chain4" tasks steps procs seconds steps/s \
    srv_us wal_B
  for p in 1 2 4; do throughput_row chain4 "$c4" "$(div 10000)" 4 "$p"; done
}

# jfield LINE KEY: the value of KEY in a JSON line (a number or a string).
jfield() { printf '%s' "$1" | sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p"; }
# kv KEY=VALUE LINE: VALUE from a DBOS result line.
kv() { printf '%s' "$2" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# peers: ONE table of tasker and each peer mode, measured on this cluster in
# this run; rows are collected as "row<TAB>column<TAB>value" in $W/peers.tab.
peers() {
  dir=$TOP/bench/peers
  [ "$BEST_JOBS" -gt 0 ] || jobs >/dev/null
  [ -n "$LATENCY" ] || latency >/dev/null
  [ -n "$RETRY_P99" ] || precision >/dev/null
  chain4=$(template chain4 4 1 "$NOOP")
  best_chain=0
  for p in 1 2 4; do
    throughput_row chain4 "$chain4" "$(div 10000)" 4 "$p" >/dev/null
    if [ "$LAST_RATE" -gt "$best_chain" ]; then best_chain=$LAST_RATE; fi
  done
  t="$W/peers.tab"
  set -- $LATENCY $BEST_JOBS_COST
  printf 'tasker\t%s\t%s\n' single "$BEST_JOBS" chain "$best_chain" p50 "$1" p99 "$2" \
    retry "$RETRY_P99" srv "$3" wal "$4" >"$t"
  # graphile-worker and pg-boss, each mode single then chain4.
  sql "$BASE_URL" "CREATE DATABASE peers" >/dev/null
  purl=$(printf '%s' "$BASE_URL" | sed "s|:///[^?]*|:///peers|")
  { PEERS_PG=$purl PGDATA_DIR=$W/pg/data bash "$dir/run-peers.sh" single "$(div 50000)"
    PEERS_PG=$purl PGDATA_DIR=$W/pg/data LAT_N=$(div 200) bash "$dir/run-peers.sh" chain4 "$(div 10000)"
  } >"$W/peers.out" 2>"$W/peers.err" || true
  while IFS= read -r line; do
    row="$(jfield "$line" peer) $(jfield "$line" mode)"
    case $(jfield "$line" shape) in
    single) printf "$row\t%s\t%s\n" single "$(jfield "$line" jobs_per_s)" \
      srv "$(jfield "$line" server_us_per_step)" wal "$(jfield "$line" wal_bytes_per_step)" ;;
    chain4) printf "$row\t%s\t%s\n" chain "$(jfield "$line" steps_per_s)" \
      p50 "$(jfield "$line" p50_ms)" p99 "$(jfield "$line" p99_ms)" ;;
    esac
  done <"$W/peers.out" >>"$t"
  # DBOS Transact: single, chain4 (then chains one at a time), retries with
  # 100 in flight; its server CPU and WAL are those of the single run.
  PGHOST=$W/pg PGPORT=$(cat "$W/pg/port") PGDATA_DIR=$W/pg/data LAT_N=$(div 200) \
    bash "$dir/dbos/run-dbos.sh" "$(div 20000)" "$(div 5000)" "$(div 1000)" 0 \
    >"$W/dbos.out" 2>>"$W/peers.err" || true
  while IFS= read -r line; do
    case $line in
    "single "*) printf 'DBOS Transact\tsingle\t%s\n' "$(kv workflows_per_s "$line")" ;;
    "# single "*) printf 'DBOS Transact\t%s\t%s\n' \
      srv "$(kv pg_cpu_ms_per_wf "$line" | awk '{ print $1 * 1000 }')" \
      wal "$(kv wal_bytes_per_wf "$line")" ;;
    "chain4 "*) printf 'DBOS Transact\t%s\t%s\n' chain "$(kv steps_per_s "$line")" \
      p50 "$(kv p50_ms "$line")" p99 "$(kv p99_ms "$line")" ;;
    "retry "*) printf 'DBOS Transact\tretry\t%s\n' "$(kv lateness_p99_ms "$line")" ;;
    esac
  done <"$W/dbos.out" >>"$t"
  printf '\n%-24s %8s %8s %13s %7s %7s %7s %13s\n' "peers: one cluster," single chain4 \
    "chain4 ms" "retry" server WAL "tasker/peer"
  printf '%-24s %8s %8s %6s %6s %7s %7s %7s %6s %6s\n' "one run" tasks/s steps/s p50 p99 \
    "p99 ms" us/step B/step single chain4
  awk -F'\t' '
    $3 != "" { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; v[$1, $2] = $3 }
    function f(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
    function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2fx", a / b) }
    END {
      for (i = 1; i <= n; i++) {
        r = order[i]
        printf "%-24s %8s %8s %6s %6s %7s %7s %7s", r, f(v[r, "single"], "%.0f"),
          f(v[r, "chain"], "%.0f"), f(v[r, "p50"], "%.1f"), f(v[r, "p99"], "%.1f"),
          f(v[r, "retry"], "%.1f"), f(v[r, "srv"], "%.0f"), f(v[r, "wal"], "%.0f")
        if (r != "tasker")
          printf " %6s %6s", ratio(v["tasker", "single"], v[r, "single"]), ratio(v["tasker", "chain"], v[r, "chain"])
        printf "\n"
      }
    }' "$t"
  if ! grep -q . "$W/peers.out" || ! grep -q '^single ' "$W/dbos.out"; then
    echo "  (a peer printed no figures; its stderr:)"; tail -n 5 "$W/peers.err" | sed 's/^/    /'
  fi
  printf '%s\n' \
    "single: $(div 50000) noop one-step tasks (jobs) stored first, then drained; tasker best of 1/2/4" \
    "  orchestrators; DBOS $(div 20000) one-step workflows, 100 in flight. chain4: $(div 10000) chains of 4 noop" \
    "  steps (each peer handler adds the next job; DBOS $(div 5000) 4-step workflows). chain4 ms: $(div 200) chains" \
    "  submitted 20 ms apart, submit to done (graphile-worker, pg-boss: the 4th handler's return;" \
    "  DBOS: one at a time). retry: how late a retry at 50 ms started (tasker $(div 10000) at once; DBOS" \
    "  $(div 1000), 100 in flight; graphile-worker and pg-boss retry after whole seconds only)." \
    "  server/WAL: the cluster's CPU and WAL per single-step job while the drain ran (DBOS: its run)."
}

latency() {
  url=$(fresh_db)
  f=$(template linear4 4 1 "$NOOP")
  "$TASKER" --config "$W/tasker.toml" --db "$url" init >/dev/null 2>&1
  "$TASKER" --config "$W/tasker.toml" --db "$url" template add "$f" >/dev/null 2>&1
  "$TASKER" --config "$W/tasker.toml" --db "$url" run --id lat 2>>"$W/run.log" &
  pid=$!
  sleep 1
  "$SUBMIT_PACED" "$url" linear4 "$(div 200)" 20
  while [ "$(sql "$url" "SELECT count(*) FROM tasks WHERE state <> 'complete'")" != 0 ]; do
    sleep 0.2
  done
  kill -INT "$pid"; wait "$pid" || true
  printf '\n%-12s %8s %10s %10s %10s\n' latency tasks "p50 ms" "p99 ms" "max ms"
  r=$(sql "$url" "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY finished_at - created_at),
              percentile_cont(0.99) WITHIN GROUP (ORDER BY finished_at - created_at),
              max(finished_at - created_at) FROM tasks")
  echo "$r" | awk -F'|' '{ printf "%-12s %8d %10.1f %10.1f %10d\n", "linear 4", $1, $2, $3, $4 }'
  LATENCY=$(echo "$r" | awk -F'|' '{ print $2, $3 }')
}
LATENCY= RETRY_P99=

precision() {
  url=$(fresh_db)
  f=$(template failonce 1 0 '{ kind = "builtin", name = "fail", times = 1 }' \
    '{ max_attempts = 3, backoff = "fixed50" }')
  prepare "$url" "$f" "$(div 10000)"
  # How late each retry's handler started after its run_at: the outcome
  # events' late_ms (the attempt row is stamped when the retry is claimed,
  # which may be before its run_at: it is then held until its time).
  "$TASKER" --config "$W/tasker.toml" --db "$url" run --until-idle --id prec \
    --events "$W/prec.jsonl" 2>>"$W/run.log"
  printf '\n%-12s %8s %10s %10s %10s\n' precision retries "p50 ms" "p99 ms" "max ms"
  r=$(grep '"type":"step.completed"' "$W/prec.jsonl" | grep '"attempt":2' |
    sed -n 's/.*"late_ms":\(-\{0,1\}[0-9]*\).*/\1/p' | sort -n |
    awk '{ a[NR] = $1 } END { p99 = int(NR * 0.99) + 1; if (p99 > NR) p99 = NR
      printf "%-12s %8d %10d %10d %10d\n", "50 ms once", NR, a[int(NR * 0.5) + 1], a[p99], a[NR] }')
  echo "$r"
  RETRY_P99=$(echo "$r" | awk '{ print $6 }')
}

split() {
  url=$(fresh_db)
  f=$(template slow 1 0 '{ kind = "builtin", name = "sleep", duration = "100ms" }')
  n=$(div 1600)
  prepare "$url" "$f" "$n"
  secs=$(drain "$url" 8)
  printf '\n%-12s %8s %6s %10s %10s %14s\n' split tasks procs seconds ideal "claims min/max"
  sql "$url" "SELECT min(c) || '/' || max(c) FROM (SELECT owner, count(*) c FROM attempts
              GROUP BY owner) x" |
    awk -v n="$n" -v s="$secs" '{ printf "%-12s %8d %6d %10s %10.3f %14s\n", "100 ms steps", n, 8, s,
      n * 0.1 / 32, $1 }'
}

scale() {
  printf '\n%-12s %10s %10s %22s\n' scale stored ready "claim 100: best / p50 ms"
  wide=$(template wide 100 0 "$NOOP")
  for exp in 4 5 6; do
    [ "$Q" = 1 ] && [ "$exp" = 6 ] && continue
    stored=1; i=0; while [ "$i" -lt "$exp" ]; do stored=$((stored * 10)); i=$((i + 1)); done
    url=$(fresh_db)
    prepare "$url" "$wide" $((stored / 100))
    sql "$url" "UPDATE steps SET state = 'waiting_for_retry',
                run_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 3600000
                WHERE id % 10 <> 0" >/dev/null
    sql "$url" "VACUUM ANALYZE steps" >/dev/null
    r=$("$CLAIM_TIMER" "$url" 9)
    printf '%-12s %10d %10d %22s\n' "10^$exp" "$stored" $((stored / 10)) \
      "$(echo "$r" | awk '{ printf "%.3f / %.3f", $1, $2 }')"
  done
}

# snapshot: one line of cumulative counters for the whole machine and
# cluster: server CPU ticks (the postmaster, its live children, and the
# children it has reaped), all CPU ticks busy, then the cluster's
# transactions, rows inserted, updated, deleted, WAL records, WAL bytes.
snapshot() {
  srv=$(server_ticks)
  busy=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat)
  db=$(sql "$BASE_URL" "SELECT sum(xact_commit + xact_rollback), sum(tup_inserted),
         sum(tup_updated), sum(tup_deleted), (SELECT wal_records FROM pg_stat_wal),
         (SELECT wal_bytes FROM pg_stat_wal) FROM pg_stat_database" | tr '|' ' ')
  echo "$srv $busy $db"
}
# where_row LABEL JOBS SECONDS BEFORE AFTER: one column set per job.
where_row() {
  echo "$4 $5" | awk -v l="$1" -v n="$2" -v s="$3" -v hz="$(getconf CLK_TCK)" '{
    us = 1e6 / hz / n
    srv = ($9 - $1) * us; cli = (($10 - $2) - ($9 - $1)) * us
    printf "%-30s %7.0f %9.0f %9.0f %6.2f %5.1f %5.1f %5.1f %7.1f %7.0f\n", l, n / s, srv, cli,
      ($11 - $3) / n, ($12 - $4) / n, ($13 - $5) / n, ($14 - $6) / n, ($15 - $7) / n, ($16 - $8) / n }'
}

where() {
  n=$(div 50000)
  one=$(template single 1 0 "$NOOP")
  printf '\n%s\n' "where the time goes: one job's whole life (insert, claim, complete), per job"
  printf '%-30s %7s %9s %9s %6s %5s %5s %5s %7s %7s\n' "" "jobs/s" "server us" \
    "client us" "xacts" ins upd del "WAL rec" "WAL B"
  url=$(fresh_db)
  a=$(snapshot)
  prepare "$url" "$one" "$n"
  drain "$url" 4 >"$W/secs"
  b=$(snapshot)
  where_row "tasker, 4 procs (submit+run)" "$n" "$(cat "$W/secs")" "$a" "$b"
  # The run alone, with a profile of the server while it drains.
  url=$(fresh_db)
  prepare "$url" "$one" "$n"
  a=$(snapshot)
  perf_ok=0
  if command -v perf >/dev/null 2>&1 &&
    perf record -q -e cpu-clock -g -o "$W/perf.data" -- true >/dev/null 2>&1; then
    perf_ok=1
    perf record -q -e cpu-clock -a -g -o "$W/perf.data" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  drain "$url" 4 >"$W/secs"
  [ "$perf_ok" = 1 ] && kill -INT "$perf_pid" && wait "$perf_pid" || true
  b=$(snapshot)
  where_row "tasker, 4 procs (run only)" "$n" "$(cat "$W/secs")" "$a" "$b"
  # Each peer mode, between the lines it prints (its insert, drain and
  # clean-up: the same whole life).
  script=$TOP/bench/peers/run-peers.sh
  if [ -f "$script" ]; then
    sql "$BASE_URL" "CREATE DATABASE peers_where" >/dev/null 2>&1 || true
    purl=$(printf '%s' "$BASE_URL" | sed "s|:///[^?]*|:///peers_where|")
    a=$(snapshot)
    PEERS_PG=$purl bash "$script" single "$n" 2>"$W/peers.err" | while IFS= read -r line; do
      b=$(snapshot)
      peer=$(printf '%s' "$line" | sed -n 's/.*"peer":"\([^"]*\)".*/\1/p')
      mode=$(printf '%s' "$line" | sed -n 's/.*"mode":"\([^"]*\)".*/\1/p')
      batch=$(printf '%s' "$line" | sed -n 's/.*"batchSize":\([0-9]*\).*/\1/p')
      secs=$(printf '%s' "$line" | sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p')
      [ -n "$secs" ] && where_row "$peer ${mode:-batch $batch}" "$n" "$secs" "$a" "$b"
      a=$b
    done
  fi
  [ "$perf_ok" = 1 ] || { echo "(perf cannot record here: no server profile)"; return; }
  printf '\n%s\n' "where the server's CPU goes while tasker drains (% of all samples)"
  perf report -i "$W/perf.data" --comm postgres --no-children --sort dso --stdio -g none \
    2>/dev/null | grep -E '^ +[0-9]' | head -n 6
  printf '%s\n' "its busiest functions (self)"
  perf report -i "$W/perf.data" --comm postgres --no-children --sort sym --stdio -g none \
    2>/dev/null | grep -E '^ +[0-9]' | head -n 20
}

# The job queue's rows at each durability: fast is synchronous_commit = off
# for tasker's sessions.
durability() {
  one=$(template single 1 0 "$NOOP")
  printf '\n%-12s %8s %8s %6s %10s %10s\n' durability tasks steps procs seconds steps/s
  for d in full fast; do
    DURABILITY=$d
    for p in 1 4; do throughput_row "$d" "$one" "$(div 50000)" 1 "$p"; done
  done
  DURABILITY=full
}

# Claims beside a backlog of tasks delayed to tomorrow (bench_lifecycle).
delayed() {
  BENCH_PG_URL=$(fresh_db) BENCH_QUICK=$Q "$LIFECYCLE" delayed
}

# Search and activity at 10^6 rows (bench_search).
search() {
  BENCH_PG_URL=$(fresh_db) BENCH_QUICK=$Q "$SEARCH"
}

# A map's instances: creation, throughput, claims (bench_map).
map() {
  # shellcheck disable=SC2086 # BENCH_MAP is a list of section names
  BENCH_PG_URL=$(fresh_db) BENCH_QUICK=$Q "$MAP" ${BENCH_MAP:-}
}

# Bulk submit (bench_submit): its table, SQLite's rows and the cluster's.
submit() {
  BENCH_PG_URL=$(fresh_db) BENCH_QUICK=$Q "$SUBMIT"
}

what=${*:-throughput jobs latency precision peers split scale durability delayed search map submit}
for w in $what; do "$w"; done
