# PostgreSQL helpers for integration tests; source after tap.sh.
# scripts/run-tests starts a private cluster and exports TK_TEST_PG_URL
# (or, when it could not, the reason in TK_TEST_PG_UNAVAILABLE).
# Without it the test is skipped as requiring pg (a failure when
# TK_REQUIRE_PG=1, as in CI: scripts/run-tests decides).
if [ -z "${TK_TEST_PG_URL:-}" ]; then
  why=${TK_TEST_PG_UNAVAILABLE:-"TK_TEST_PG_URL unset; scripts/run-tests starts one"}
  tap_skip_all pg "no PostgreSQL server ($why)"
fi

# The test's scratch directory: its config, templates and logs.
W=$TMPDIR_TEST

# pg_database NAME: a fresh database NAME_<pid> on the test cluster, dropped
# on exit; its URL in PG_DB_URL.
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
  trap 'psql -qAtX -d "$TK_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $PG_DB_NAME WITH (FORCE)" >/dev/null 2>&1; rm -rf "$TMPDIR_TEST"' EXIT
}

# pg_sql SQL: the query's result on the test database, unaligned.
pg_sql() { psql -qAtX -d "$PG_DB_URL" -c "$1"; }

# t ARGS...: tasker with the test's configuration, $W/tasker.toml.
t() { "$TASKER" --config "$W/tasker.toml" "$@"; }

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

# wait_for DESCRIPTION SECONDS CMD...: poll until CMD succeeds; after
# SECONDS a failure naming DESCRIPTION (and 1).
wait_for() {
  wf_what=$1
  wf_secs=$2
  wf_deadline=$(($(date +%s) + wf_secs))
  shift 2
  until "$@"; do
    if [ "$(date +%s)" -ge "$wf_deadline" ]; then
      tap_fail "$wf_what" "still not so after ${wf_secs}s"
      return 1
    fi
    sleep 0.1
  done
}

# expect_all_complete N: the store holds N tasks, all complete.
expect_all_complete() {
  expect_eq "all $1 tasks complete" \
    "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*) FROM tasks")" \
    "$1/$1"
}

# expect_attempts_consistent: nothing done twice, no attempt row left open,
# each step's attempts counter equal to its attempt rows.
expect_attempts_consistent() {
  expect_eq "no step succeeded twice" \
    "$(pg_sql "SELECT count(*) FROM (SELECT step_id FROM attempts WHERE outcome = 'success'
               GROUP BY step_id HAVING count(*) > 1) twice")" 0
  expect_eq "no attempt row left open" \
    "$(pg_sql "SELECT count(*) FROM attempts WHERE outcome IS NULL OR finished_at IS NULL")" 0
  expect_eq "each step's attempts equal its attempt rows" \
    "$(pg_sql "SELECT count(*) FROM steps s WHERE s.attempts <>
               (SELECT count(*) FROM attempts a WHERE a.step_id = s.id)")" 0
}

# serve_start: `tasker serve` with the test's configuration on a free
# loopback port, in the background (its pid in SERVE, its stderr in
# $W/serve.err); waits until it listens and sets BASE to its address
# (http://127.0.0.1:PORT). 1, with a failure and serve killed, when it
# never listened.
serve_start() {
  "$TASKER" --config "$W/tasker.toml" serve --listen 127.0.0.1:0 2>"$W/serve.err" &
  SERVE=$!
  wait_for "serve prints its address" 30 grep -q "listening on http://" "$W/serve.err" ||
    { kill "$SERVE"; return 1; }
  BASE=$(sed -n 's|^tasker serve: listening on \(http://[^/]*\)/$|\1|p' "$W/serve.err")
}

# serve_stop: SIGTERM to serve_start's server; checks that it exits 0 (a
# sanitizer's report at exit makes it non-zero: a failure).
serve_stop() {
  kill -TERM "$SERVE"
  wait "$SERVE"
  RC=$?
  OUT=""
  ERR=$(cat "$W/serve.err")
  expect_rc "serve exits 0 on SIGTERM" 0
}
