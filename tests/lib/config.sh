# The test's tasker and its configuration, for integration tests on either
# backend; source after tap.sh (pg.sh sources it too). The store is
# TK_DB: sqlite_store sets a SQLite file in the scratch directory, pg.sh's
# pg_database a fresh PostgreSQL database.

# The test's scratch directory: its config, templates and logs.
W=$TMPDIR_TEST

# t ARGS...: tasker with the test's configuration, $W/tasker.toml.
t() { "$TASKER" --config "$W/tasker.toml" "$@"; }

# sqlite_store: the test's store is the SQLite file $W/store.db.
sqlite_store() { TK_DB="sqlite:$W/store.db"; }

# Retries that come quickly and exactly (10 ms, no jitter): tasker_config
# $QUICK_RETRIES.
QUICK_RETRIES="backoff.base=10ms backoff.jitter=none"

# tasker_config [TABLE.KEY=VALUE...]: $W/tasker.toml with these settings
# and engine.db = $TK_DB, each TABLE once in the order first named (TABLE
# may be dotted: backoff.profiles.half.base=500ms). A VALUE that is a
# number, true or false is written as it is; any other as a string.
tasker_config() {
  tc_tables=""
  for tc_kv in "$@" "engine.db=$TK_DB"; do
    tc_key=${tc_kv%%=*}
    case " $tc_tables " in *" ${tc_key%.*} "*) ;; *) tc_tables="$tc_tables ${tc_key%.*}" ;; esac
  done
  for tc_table in $tc_tables; do
    echo "[$tc_table]"
    for tc_kv in "$@" "engine.db=$TK_DB"; do
      tc_key=${tc_kv%%=*}
      [ "${tc_key%.*}" = "$tc_table" ] || continue
      tc_value=${tc_kv#*=}
      case $tc_value in
        true | false) ;;
        "" | *[!0-9.]* | .* | *.) tc_value="\"$tc_value\"" ;;
      esac
      echo "${tc_key##*.} = $tc_value"
    done
  done >"$W/tasker.toml"
}

# chaos_config BACKOFF_BASE MAX_DELAY LEASE HEARTBEAT WORKERS [SETTING...]:
# tasker_config for orchestrators draining under faults (kills, freezes,
# lost connections): retries under full jitter, doubling from BACKOFF_BASE
# up to MAX_DELAY, 25 attempts, claims of 16, short leases.
chaos_config() {
  cc_base=$1 cc_max=$2 cc_lease=$3 cc_beat=$4 cc_workers=$5
  shift 5
  tasker_config backoff.base="$cc_base" backoff.multiplier=2 backoff.max_delay="$cc_max" \
    backoff.jitter=full engine.max_attempts=25 engine.lease="$cc_lease" \
    engine.heartbeat="$cc_beat" engine.claim_batch=16 engine.workers="$cc_workers" "$@"
}

# etl_template FILE: the template "etl", whose step "load" (after "extract")
# fails on each of its 2 attempts: a task of it ends in error.
etl_template() {
  cat >"$1" <<'TOML'
name = "etl"
version = "1"
[[steps]]
name = "extract"
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "load"
depends_on = ["extract"]
handler = { kind = "builtin", name = "fail" }
retry = { max_attempts = 2 }
TOML
}

# flaky_api_template FILE: the template "flaky_api", whose one step "call"
# always fails, its retries under the retry budget "api".
flaky_api_template() {
  cat >"$1" <<'TOML'
name = "flaky_api"
version = "1"
[[steps]]
name = "call"
handler = { kind = "builtin", name = "fail" }
retry = { budget = "api" }
TOML
}
