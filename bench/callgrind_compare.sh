#!/bin/sh
# The hot path's cost in instructions, this tree against an older revision
# (issue 21: a template without decisions or maps must cost what it did,
# within +2%). Builds bench_engine at BASE_REV (a git worktree of its own)
# and here, runs `bench_engine throughput` under callgrind in each (0
# workers: handlers inline, so the count is the same from run to run; a
# tenth of the sizes: 10,000 noop steps per shape) and counts only what
# runs inside tk_engine_run (claims, handlers, outcomes, SQLite), not the
# set-up (template, submit) nor bench_engine's CPU yardstick. Prints, per
# shape, the instructions at BASE_REV and here, per step, and the change.
# Usage: sh bench/callgrind_compare.sh BASE_REV [SHAPE...]
#   SHAPE: independent, chain (default both).
#   BASE_DIR=DIR: the worktree for BASE_REV (made there unless it exists;
#   default a temporary one, removed at the end).
#   RUNS=N: each count the median of N runs (default 1). The count varies by
#   about 0.3% from run to run (the claims' batches follow the handlers'
#   timing, so the number of transactions differs), so a change near the
#   limit wants RUNS=3 or more.
#   KEEP_DIR=DIR: keep the callgrind files there (base-SHAPE.cg, here-SHAPE.cg)
#   for callgrind_annotate, to see which functions the difference is in.
set -eu
[ $# -ge 1 ] || { echo "usage: sh bench/callgrind_compare.sh BASE_REV [SHAPE...]" >&2; exit 2; }
BASE_REV=$1
shift
SHAPES=${*:-independent chain}
TOP=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null 2>&1 ||
  { echo "callgrind_compare.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
W=$(mktemp -d /tmp/tasker-callgrind.XXXXXX)
made_base=0
BASE=${BASE_DIR:-$W/base}
cleanup() {
  [ "$made_base" = 1 ] && git -C "$TOP" worktree remove --force "$BASE" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT INT TERM
if [ ! -d "$BASE" ]; then
  git -C "$TOP" worktree add --detach "$BASE" "$BASE_REV" >/dev/null 2>&1 ||
    { echo "callgrind_compare.sh: no worktree for $BASE_REV at $BASE" >&2; exit 1; }
  made_base=1
fi
for tree in "$BASE" "$TOP"; do
  make -C "$tree" --no-print-directory build/bench/bench_engine >&2 ||
    { echo "callgrind_compare.sh: building bench_engine in $tree failed" >&2; exit 1; }
done
base_at=$(git -C "$BASE" rev-parse --short HEAD)
here_at=$(git -C "$TOP" rev-parse --short HEAD)
git -C "$TOP" diff --quiet HEAD -- src include || here_at="$here_at+changes"

# instructions TREE SHAPE LABEL: Ir inside tk_engine_run for one shape,
# the median of $RUNS runs.
instructions() {
  i=1
  while [ "$i" -le "${RUNS:-1}" ]; do one_run "$@"; i=$((i + 1)); done | sort -n |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
one_run() {
  out=$W/$3-$2.cg
  (cd "$W" && BENCH_QUICK=1 BENCH_WORKERS=0 BENCH_SHAPE=$2 TMPDIR=$W \
    valgrind --tool=callgrind --toggle-collect=tk_engine_run --callgrind-out-file="$out" \
    "$1/build/bench/bench_engine" throughput >"$out.log" 2>&1) ||
    { echo "callgrind_compare.sh: bench_engine in $1 failed:" >&2; tail -n 5 "$out.log" >&2; exit 1; }
  [ -z "${KEEP_DIR:-}" ] || { mkdir -p "$KEEP_DIR" && cp "$out" "$KEEP_DIR/"; }
  sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out" | head -n 1
}

printf '%-12s %7s %16s %16s %10s %10s %8s\n' "callgrind" steps "Ir $base_at" "Ir $here_at" \
  "Ir/step b" "Ir/step n" change
for shape in $SHAPES; do
  b=$(instructions "$BASE" "$shape" base)
  n=$(instructions "$TOP" "$shape" here)
  [ -n "$b" ] && [ -n "$n" ] || exit 1
  echo "$shape $b $n" | awk '{ s = 10000
    printf "%-12s %7d %16d %16d %10.0f %10.0f %+7.2f%%\n", $1, s, $2, $3, $2 / s, $3 / s,
      ($3 - $2) * 100 / $2 }'
done
