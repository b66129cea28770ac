#!/bin/sh
# WAL per single-step task on PostgreSQL, by relation (issue 22 item 2): on
# a private cluster (default durability, so full-page images count as in
# production after a checkpoint), `tasker init`, a 1-step noop template,
# N tasks submitted (--count), VACUUM ANALYZE, CHECKPOINT; then 4 `tasker
# run --until-idle` drain them. Printed: the drain's WAL records and bytes
# per task (pg_waldump --stats), a table of records and bytes per task by
# relation and record kind (the 30 largest), and the share of HOT updates
# of tasks, steps and attempts with their pages after the run.
# Usage: sh bench/pg_wal_rows.sh [N [SQL]]   (N 20,000; SQL, if given, runs
# after init and before the submit: a schema variant to compare, such as
# "ALTER TABLE tasks SET (fillfactor = 50)"). $BUILD's tasker (make first), or
# TASKER=PATH's (another build's: a baseline).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
TASKER=${TASKER:-$TOP/${BUILD:-build}/bin/tasker}
N=${1:-20000}
EXTRA=${2:-}
[ -x "$TASKER" ] || { echo "pg_wal_rows.sh: no $TASKER (run make)" >&2; exit 1; }
D=$(mktemp -d /tmp/tasker-walrows.XXXXXX)
chmod 755 "$D"
URL=$("$TOP/scripts/pg-cluster" start "$D/c")
trap '"$TOP/scripts/pg-cluster" stop "$D/c" >/dev/null 2>&1; rm -rf "$D"' EXIT
BIN=$(dirname "$(find /usr/lib/postgresql -name pg_waldump | sort | tail -n 1)")
P() { psql -qAtX -d "$URL" -c "$1"; }
printf '[engine]\nworkers = 4\ndb = "%s"\n' "$URL" >"$D/t.toml"
printf 'name = "one"\nversion = "1"\n[[steps]]\nname = "s"\nhandler = { kind = "builtin", name = "noop" }\n' \
  >"$D/one.toml"
"$TASKER" --config "$D/t.toml" init >/dev/null 2>&1
[ -n "$EXTRA" ] && P "$EXTRA" >/dev/null
"$TASKER" --config "$D/t.toml" template add "$D/one.toml" >/dev/null
"$TASKER" --config "$D/t.toml" submit one --count "$N" >/dev/null
P "VACUUM ANALYZE" >/dev/null
P "CHECKPOINT" >/dev/null
P "SELECT pg_stat_reset()" >/dev/null
L0=$(P "SELECT pg_current_wal_lsn()")
for i in 1 2 3 4; do
  "$TASKER" --config "$D/t.toml" run --until-idle --id "b$i" 2>>"$D/run.log" &
done
wait
L1=$(P "SELECT pg_current_wal_lsn()")
echo "$N single-step tasks drained: $(P "SELECT count(*) FILTER (WHERE state = 'complete')
  || ' of ' || count(*) || ' complete' FROM tasks")"
"$BIN/pg_waldump" -p "$D/c/data/pg_wal" -s "$L0" -e "$L1" --stats=record 2>/dev/null |
  awk -v n="$N" '/^Total/ { printf "WAL per task: %.1f records, %.0f bytes\n", $2 / n, $(NF - 1) / n }'
P "SELECT relfilenode || ' ' || relname FROM pg_class WHERE relfilenode <> 0" >"$D/rels"
"$BIN/pg_waldump" -p "$D/c/data/pg_wal" -s "$L0" -e "$L1" 2>/dev/null >"$D/dump" || true
printf '%-28s %-10s %-14s %7s %8s\n' relation rmgr record "rec/task" "B/task"
awk -v n="$N" 'NR == FNR { name[$1] = $2; next }
  { match($0, /len \(rec\/tot\): *[0-9]+\/ *[0-9]+/); l = substr($0, RSTART, RLENGTH)
    sub(/.*\/ */, "", l); d = $0; sub(/.*desc: /, "", d); split(d, w, " ")
    r = "-"
    if (match($0, /rel [0-9]+\/[0-9]+\/[0-9]+/)) {
      x = substr($0, RSTART, RLENGTH); sub(/.*\//, "", x); r = (x in name) ? name[x] : x }
    k = sprintf("%-28s %-10s %-14s", r, $2, w[1]); c[k]++; b[k] += l }
  END { for (k in c) printf "%s %7.2f %8.1f\n", k, c[k] / n, b[k] / n }' \
  "$D/rels" FS='[ ,]+' "$D/dump" | sort -k5 -nr | head -n 30
printf '\n%-12s %8s %8s %5s %6s\n' table updates HOT share pages
P "SELECT relname, n_tup_upd, n_tup_hot_upd, round(100.0 * n_tup_hot_upd / greatest(n_tup_upd, 1))
   || '%', pg_relation_size(relid) / 8192 FROM pg_stat_user_tables
   WHERE relname IN ('tasks', 'steps', 'attempts', 'transitions', 'ready') ORDER BY 1" |
  awk -F'|' '{ printf "%-12s %8s %8s %5s %6s\n", $1, $2, $3, $4, $5 }'
