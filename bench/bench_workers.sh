#!/bin/sh
# Worker throughput (issue 23, goal >= 3,000 steps/s each on SQLite),
# printed as a table: N single-step tasks of one noop worker step
# (queue "bench") are submitted first, then one real `tasker serve` and ONE
# worker process drain them: the Python client (clients/python, 8 threads)
# and the Node client (clients/node, concurrency 8). The time is the
# worker's own, from its first step's start until it stopped after the N-th
# step, every outcome reported (bench/workers/noop.{py,mjs}). SQLite in a
# temporary directory; PostgreSQL too with BENCH_WORKERS_PG=1: a private
# cluster (scripts/pg-cluster, as bench/bench_pg.sh), a fresh database per
# run. A client whose interpreter is missing (python3 >= 3.11, node >= 18)
# is reported as such. Durability is tasker's default (full: a sync per
# commit), or BENCH_WORKERS_DURABILITY=fast. Each client runs once per
# prefetch of BENCH_WORKERS_PREFETCH (default "0 16": the clients' default,
# claiming for free threads only, and 16 steps held beyond the 8 threads,
# which keeps them busy while the next claim is on its way).
# Then claim-to-start latency p50/p99: build/bench/bench_workers (its own
# header says what it measures; BENCH_WORKERS_ROUNDS, default 200).
# Usage: sh bench/bench_workers.sh   (BENCH_WORKERS_N steps, default 20000;
# BENCH_QUICK=1: 3000). Builds what it runs first (make).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) TASKER=$BUILD/bin/tasker ;; *) TASKER=$TOP/$BUILD/bin/tasker ;; esac
# Built as bench_pg.sh builds its tools (a fresh clone has none yet).
make -C "$TOP" --no-print-directory BUILD="$BUILD" "$BUILD/bin/tasker" \
  "$BUILD/bench/bench_workers" >&2 ||
  { echo "bench_workers.sh: building tasker failed (try: make)" >&2; exit 1; }
N=${BENCH_WORKERS_N:-20000}
[ "${BENCH_QUICK:-0}" = 1 ] && N=${BENCH_WORKERS_N:-3000}
DURABILITY=${BENCH_WORKERS_DURABILITY:-full}
W=$(mktemp -d /tmp/bench_workers.XXXXXX)
chmod 755 "$W"
SERVE=
PG_BASE=
cleanup() {
  [ -z "$SERVE" ] || kill "$SERVE" 2>/dev/null || true
  [ -z "$PG_BASE" ] || "$TOP/scripts/pg-cluster" stop "$W/pg" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT INT TERM
if [ "${BENCH_WORKERS_PG:-0}" = 1 ]; then
  PG_BASE=$("$TOP/scripts/pg-cluster" start "$W/pg")
fi
# fresh_pg NAME: the URL of a new database NAME on the private cluster.
fresh_pg() {
  psql -qAtX -d "$PG_BASE" -c "CREATE DATABASE $1" >/dev/null
  printf '%s' "$PG_BASE" | sed "s|:///[^?]*|:///$1|"
}

cat >"$W/one.toml" <<'TOML'
name = "bench_workers"
version = "1"
[[steps]]
name = "s"
handler = { kind = "worker", queue = "bench" }
TOML
printf 'bench-worker-token\n' >"$W/worker.token"
export TASKER_WORKER_TOKEN=bench-worker-token

# run_one STORE_LABEL DB CLIENT_LABEL CMD...: one row.
run_one() {
  store=$1 db=$2 who=$3
  shift 3
  "$TASKER" --db "$db" init >/dev/null 2>&1
  "$TASKER" --db "$db" template add "$W/one.toml" >/dev/null 2>&1
  "$TASKER" --db "$db" submit bench_workers --count "$N" >/dev/null
  rm -f "$W/serve.err"
  "$TASKER" --db "$db" --set "engine.durability=$DURABILITY" serve --listen 127.0.0.1:0 \
    --worker-token-file "$W/worker.token" \
    2>"$W/serve.err" &
  SERVE=$!
  i=0
  until grep -q '^tasker serve: listening on' "$W/serve.err" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 3000 ] || { echo "serve did not start: $(cat "$W/serve.err")" >&2; exit 1; }
    sleep 0.1
  done
  url=$(sed -n 's|^tasker serve: listening on \(http://[^/]*\)/$|\1|p' "$W/serve.err")
  secs=$("$@" "$url" count "$N" 8 2>"$W/worker.err") || {
    echo "$who worker failed: $(tail -n 5 "$W/worker.err")" >&2
    exit 1
  }
  kill "$SERVE"
  wait "$SERVE" || true
  SERVE=
  left=$("$TASKER" --db "$db" status --json | jq '[.tasks | to_entries[] | select(.key != "complete") | .value] | add // 0')
  printf '%-12s %-32s %7d %8s %9s %6s\n' "$store" "$who" "$N" "$secs" \
    "$(awk -v n="$N" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')" "$left"
}

echo "noop worker steps drained by one worker process through tasker serve (durability $DURABILITY)"
printf '%-12s %-32s %7s %8s %9s %6s\n' store client steps seconds "steps/s" "left"
for kind in python node; do
  case $kind in
    python)
      python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
        { printf '%-12s %-32s (python3 >= 3.11 not installed)\n' sqlite "python (8 threads)"; continue; }
      label="python (8 threads"
      set -- python3 "$TOP/bench/workers/noop.py" ;;
    node)
      node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null ||
        { printf '%-12s %-32s (node >= 18 not installed)\n' sqlite "node (concurrency 8)"; continue; }
      label="node (concurrency 8"
      set -- node "$TOP/bench/workers/noop.mjs" ;;
  esac
  for prefetch in ${BENCH_WORKERS_PREFETCH:-0 16}; do
    export BENCH_PREFETCH=$prefetch
    who="$label)"
    [ "$prefetch" = 0 ] || who="$label, prefetch $prefetch)"
    rm -f "$W/$kind.db"*
    run_one sqlite "sqlite:$W/$kind.db" "$who" "$@"
    [ -z "$PG_BASE" ] || run_one postgresql "$(fresh_pg "bench_${kind}_$prefetch")" "$who" "$@"
  done
done
unset BENCH_PREFETCH
echo "(left: tasks not complete afterwards, 0 expected; the goal is >= 3,000 steps/s each on SQLite)"
echo
[ -z "$PG_BASE" ] || BENCH_PG_URL=$(fresh_pg bench_latency) && export BENCH_PG_URL
(cd "$TOP" && "${TASKER%/bin/tasker}/bench/bench_workers")
