#!/bin/bash
# A plain-SQL model of tasker's PostgreSQL hot path (issue 22): the ceiling of each row plan,
# on one private cluster, in one run (bench/pgproto/README.md). Plans (PLANS="..." to choose):
#   c_now      tasker's rows as of ops version 12: the step updated at the claim and at the
#              outcome (readiness, lease and state in its indexes), the attempt row written
#              once at the outcome, the task written at its start and its finish
#   d_ready    readiness, lease, queue and priority in a table of their own (`ready`): the claim
#              updates the ready row, the outcome deletes it and updates the step (HOT)
#   d_nostart  d_ready without the task's write at its start
#   e_today    the real store's rows today (migrations 0017-0021): the ready row updated at the
#              claim and deleted at the outcome, the steps row (HOT) and the attempt row written
#              at both, the task written at its start (HOT) and its finish (not HOT:
#              finished_at is in tasks_finished)
#   e_once     e_today with the attempt row written once, at the outcome
#   g_jobs     a graphile-worker-like jobs table: lock 100, delete them
# PLAN+hot runs PLAN without the tasks_finished index, so that a task's finish is HOT.
# Each pgbench transaction handles 100 jobs (a claim transaction and an outcome transaction).
# Usage (as root; needs Debian's postgresql and pg_trgm): run.sh [JOBS] [SECONDS] [CLIENTS]
# PGB_OPTS=-r adds pgbench's per-statement latencies.
set -u
N=${1:-400000}; T=${2:-15}; C=${3:-2}
BIN=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
d=$(mktemp -d /tmp/pgproto.XXXX); chown postgres "$d"; port=$((20000 + RANDOM % 20000))
cleanup() { runuser -u postgres -- "$BIN/pg_ctl" -D "$d/pg" stop -m fast >/dev/null 2>&1; rm -rf "$d"; }
trap cleanup EXIT
runuser -u postgres -- "$BIN/initdb" -D "$d/pg" -A trust -U postgres >/dev/null
runuser -u postgres -- "$BIN/pg_ctl" -D "$d/pg" -o "-k $d -p $port -c listen_addresses=''" -l "$d/log" -w start >/dev/null
P() { runuser -u postgres -- "$BIN/psql" -h "$d" -p "$port" -U postgres -qAtX "$@" postgres; }
here=$(cd "$(dirname "$0")" && pwd)
cp "$here"/*.sql "$d/"
# d_nostart is d_ready with the task's write at its start taken out.
sed -e '/^started AS/d' -e 's/^\(lk AS .*\),$/\1/' "$here/d_ready.sql" >"$d/d_nostart.sql"
chmod 644 "$d"/*.sql
for plan in ${PLANS:-c_now d_ready d_nostart e_today e_once e_today+hot e_once+hot g_jobs}; do
  P -f "$d/schema.sql" >/dev/null 2>&1
  P -v n="$N" -f "$d/fill.sql" >/dev/null
  script=${plan%+hot}
  [ "$script" != "$plan" ] && P -c "DROP INDEX tasks_finished" >/dev/null
  P -c "CHECKPOINT" >/dev/null
  P -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
  w0=$(P -c "SELECT wal_records || ' ' || wal_bytes FROM pg_stat_wal")
  out=$(PGOPTIONS="-c enable_seqscan=off" runuser -p -u postgres -- "$BIN/pgbench" -h "$d" -p "$port" -U postgres -n -M prepared -c "$C" -j "$C" -T "$T" ${PGB_OPTS:-} -f "$d/$script.sql" postgres 2>&1)
  [ -n "${PGB_OPTS:-}" ] && echo "$out" | grep -E "^ +[0-9.]+ +[0-9]+ " | sort -rn | head -4
  tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  xacts=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
  w1=$(P -c "SELECT wal_records || ' ' || wal_bytes FROM pg_stat_wal")
  jobs=$((xacts * 100))
  read r1 b1 <<<"$w1"
  printf '%-12s jobs/s %8.0f   WAL rec/job %5.1f   WAL B/job %6.0f\n' "$plan" "$(echo "$tps*100" | bc)" \
    "$(echo "scale=2; $r1/$jobs" | bc)" "$(echo "scale=2; $b1/$jobs" | bc)"
done
