# PostgreSQL helpers for integration tests; source after tap.sh.
# scripts/run-tests starts a private cluster and exports TK_TEST_PG_URL
# (or, when it could not, the reason in TK_TEST_PG_UNAVAILABLE).
# Without it the test is skipped as requiring pg (a failure when
# TK_REQUIRE_PG=1, as in CI: scripts/run-tests decides).
if [ -z "${TK_TEST_PG_URL:-}" ]; then
  why=${TK_TEST_PG_UNAVAILABLE:-"TK_TEST_PG_URL unset; scripts/run-tests starts one"}
  tap_skip_all pg "no PostgreSQL server ($why)"
fi

. "$(dirname "$0")/../lib/config.sh"
. "$(dirname "$0")/../lib/bg.sh"
. "$(dirname "$0")/../lib/serve.sh"
# A test that stops early leaves no process of its own running.
trap 'bg_kill_all; rm -rf "$TMPDIR_TEST"' EXIT

# pg_database NAME: a fresh database NAME_<pid> on the test cluster, dropped
# on exit, and the test's store (TK_DB); its URL in PG_DB_URL.
pg_database() {
  PG_DB_NAME="$1_$$"
  # TK_TEST_PG_URL is a URL, postgresql://[HOST]/DB[?...]: swap DB.
  PG_DB_URL=$(printf '%s' "$TK_TEST_PG_URL" |
    sed -n "s|^\(postgres[a-z]*://[^/?]*\)/[^?]*|\1/$PG_DB_NAME|p")
  if [ -z "$PG_DB_URL" ]; then
    tap_fail "a database URL for $PG_DB_NAME" \
      "TK_TEST_PG_URL=$TK_TEST_PG_URL is not a postgresql://[HOST]/DB[?PARAMS] URL"
    tap_done; exit 1
  fi
  if ! psql -qAtX -d "$TK_TEST_PG_URL" -c "CREATE DATABASE $PG_DB_NAME" >"$W/createdb.err" 2>&1
  then
    tap_fail "create database $PG_DB_NAME on $TK_TEST_PG_URL" "psql: $(cat "$W/createdb.err")"
    tap_done; exit 1
  fi
  trap 'bg_kill_all; psql -qAtX -d "$TK_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $PG_DB_NAME WITH (FORCE)" >/dev/null 2>&1; rm -rf "$TMPDIR_TEST"' EXIT
  TK_DB=$PG_DB_URL
}

# pg_sql SQL: the query's result on the test database, unaligned.
pg_sql() { psql -qAtX -d "$PG_DB_URL" -c "$1"; }

# noop_template FILE NAME: a template NAME (version 1) of one step "s"
# that succeeds at once, written to FILE.
noop_template() {
  printf 'name = "%s"\nversion = "1"\n[[steps]]\nname = "s"\nhandler = { kind = "builtin", name = "noop" }\n' \
    "$2" >"$1"
}

# tasker_setup TEMPLATE_FILE...: init the store of $W/tasker.toml and add
# the templates, each checked.
tasker_setup() {
  run t init
  expect_rc "init" 0
  run t template add "$@"
  expect_rc "template add" 0
}

# expect_all_complete N: the store holds N tasks, all complete.
expect_all_complete() {
  expect_eq "all $1 tasks complete" \
    "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*) FROM tasks")" \
    "$1/$1"
}

# expect_all_steps_complete N: the store holds N steps, all complete.
expect_all_steps_complete() {
  expect_eq "every step complete" \
    "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*) FROM steps")" \
    "$1/$1"
}

# ready_mismatches: the steps whose row in `ready` (0017_ready_table.sql)
# is missing, left over, or says other than the step's row: read in one
# snapshot, so 0 at any moment, mid-run too (each write of steps and its
# ready row commit together).
ready_mismatches() {
  pg_sql "SELECT count(*) FROM (SELECT id, task_id, tasker_ready_kind(state, parents_remaining) AS kind,
            worker_queue IS NOT NULL AS worker, queue, priority, run_at, attempts, lease_expires_at
          FROM steps WHERE tasker_ready_kind(state, parents_remaining) IS NOT NULL) s
          FULL JOIN ready r ON r.step_id = s.id
          WHERE s.id IS NULL OR r.step_id IS NULL
          OR (s.task_id, s.kind, s.worker, s.queue, s.priority, s.run_at, s.attempts, s.lease_expires_at)
          IS DISTINCT FROM (r.task_id, r.kind, r.worker, r.queue, r.priority, r.run_at, r.attempts,
                            r.lease_expires_at)"
}

# expect_attempts_consistent: nothing done twice, no attempt row left open,
# each step's attempts counter equal to its attempt rows, the ready table
# as the steps say.
expect_attempts_consistent() {
  expect_eq "the ready table as the steps say" "$(ready_mismatches)" 0
  expect_eq "no step succeeded twice" \
    "$(pg_sql "SELECT count(*) FROM (SELECT step_id FROM attempts WHERE outcome = 'success'
               GROUP BY step_id HAVING count(*) > 1) twice")" 0
  expect_eq "no attempt row left open" \
    "$(pg_sql "SELECT count(*) FROM attempts WHERE outcome IS NULL OR finished_at IS NULL")" 0
  expect_eq "each step's attempts equal its attempt rows" \
    "$(pg_sql "SELECT count(*) FROM steps s WHERE s.attempts <>
               (SELECT count(*) FROM attempts a WHERE a.step_id = s.id)")" 0
}

# ---- Processes in the background (bg.sh), orchestrators ----
# A test starts `tasker run` in the background through orch_start (and
# `tasker serve` through serve.sh's serve_start), and ends each with
# orch_expect, orch_stop, orch_kill or serve_stop, which check how it
# ended: a sanitizer's report at exit, a crash or a hang is a failure,
# never lost in a `wait` nobody reads.

# orch_start NAME ARGS...: `tasker ARGS...` (an orchestrator: ARGS hold
# `run`) with the test's configuration in the background under NAME
# (bg_start), its stdout and stderr appended to $W/NAME.log. Variables
# assigned before the call are in its environment.
orch_start() {
  os_name=$1
  shift
  bg_start "$os_name" "$TASKER" --config "$W/tasker.toml" "$@" >>"$W/$os_name.log" 2>&1
}

# orchs_start PREFIX N [ARGS...]: N orchestrators PREFIX-1 .. PREFIX-N
# (orch_start), each `tasker run --id PREFIX-i ARGS...` whose connections
# name it (application_name).
orchs_start() {
  oa_prefix=$1 oa_n=$2 oa_i=1
  shift 2
  while [ "$oa_i" -le "$oa_n" ]; do
    PGAPPNAME="$oa_prefix-$oa_i" orch_start "$oa_prefix-$oa_i" run --id "$oa_prefix-$oa_i" "$@"
    oa_i=$((oa_i + 1))
  done
}

# orchs_each PREFIX N CMD [ARGS...]: `CMD PREFIX-i ARGS...` for each of
# orchs_start's orchestrators in turn (orch_stop, orch_idle_exit).
orchs_each() {
  oe_prefix=$1 oe_n=$2 oe_cmd=$3 oe_i=1
  shift 3
  while [ "$oe_i" -le "$oe_n" ]; do
    "$oe_cmd" "$oe_prefix-$oe_i" "$@"
    oe_i=$((oe_i + 1))
  done
}

# orch_idle_exit NAME: a check that the orchestrator NAME (`run
# --until-idle`) exits 0 once idle.
orch_idle_exit() { orch_expect "$1" 0 "$1 exits 0 once idle"; }

# orch_log_tail NAME: the last lines of NAME's log, for a failure.
orch_log_tail() { echo "its log ends:"; tail -n 5 "$W/$1.log"; }

# orch_expect NAME WANT DESCRIPTION [SECONDS]: a check that the
# orchestrator NAME ends within SECONDS (600) with exit status WANT.
orch_expect() {
  if ! bg_wait "$1" "${4:-600}"; then
    tap_fail "$3" "$1 did not end within ${4:-600}s; killed" "$(orch_log_tail "$1")"
  elif [ "$BG_RC" = "$2" ]; then
    tap_ok "$3"
  else
    tap_fail "$3" "$1 exited $BG_RC, want $2" "$(orch_log_tail "$1")"
  fi
}

# catches_term PID: the process catches SIGTERM (its handler is set, as
# tasker run does first thing), or is gone. /proc's SigCgt mask, bit 15.
catches_term() {
  [ -r "/proc/$1/status" ] || return 0
  ct_mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status")
  [ -n "$ct_mask" ] && [ $((0x$ct_mask & 0x4000)) -ne 0 ]
}

# orch_stop NAME: SIGTERM to the orchestrator NAME once it catches it (one
# restarted a moment ago may still be loading: the signal's default would
# kill it, which says nothing of tasker), and a check that it finishes its
# running handlers and exits 0.
orch_stop() {
  os_pid=$(bg_pid "$1")
  wait_for "$1 catches SIGTERM" 60 catches_term "$os_pid"
  kill -TERM "$os_pid"
  orch_expect "$1" 0 "$1 exits 0 on SIGTERM"
}

# orch_kill NAME: SIGKILL to the orchestrator NAME; 0 when that is what
# ended it. One that had ended on its own (its exit status says how) is a
# failure, and 1.
orch_kill() {
  if ! bg_exited "$1"; then
    kill -KILL "$(bg_pid "$1")" 2>/dev/null
    bg_wait "$1" 60 || return 1
    [ "$BG_RC" = 137 ] && return 0
  else
    bg_wait "$1" 0
  fi
  tap_fail "$1 was running when killed" "it had ended on its own: exit $BG_RC" \
    "$(orch_log_tail "$1")"
  return 1
}

