#!/bin/sh
# A PostgreSQL database without tasker's schema (the SQLite side, a file
# that does not exist, is tests/cli/test_cli_store_open.c): every command
# but `tasker init` says the store is not initialized, naming it and
# `tasker init`, exits 1 and creates nothing in the database; init then
# sets it up. Needs TK_TEST_PG_URL.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database cli_uninit
noop_template "$W/ok.toml" ok
tables() { pg_sql "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"; }
expect_eq "a new database holds nothing" "$(tables)" 0
for cmd in "status" "--json status" "show 1" "why 1 s" "tasks" "template list" \
  "template add $W/ok.toml" "schedule list" "submit ok" "run --until-idle" \
  "prune --finished-before 1h --dry-run" "retry 1 s" "cancel 1"; do
  # shellcheck disable=SC2086 # the command's words
  run "$TASKER" --db "$PG_DB_URL" $cmd
  expect_rc "$cmd: refused" 1
  expect_match "$cmd: says so" "$ERR" \
    "store $PG_DB_URL is not initialized: run \`tasker init\` first"
  expect_eq "$cmd: nothing created" "$(tables)" 0
done
run "$TASKER" --db "$PG_DB_URL" init
expect_rc "init" 0
run "$TASKER" --db "$PG_DB_URL" status
expect_rc "status after init" 0
tap_done
