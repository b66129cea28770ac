# PostgreSQL helpers for integration tests; source after tap.sh.
# scripts/run-tests starts a private cluster and exports TK_TEST_PG_URL.
# Without it the test is skipped (exit 77), unless TK_REQUIRE_PG=1 (CI),
# which makes a missing server a failure.
if [ -z "${TK_TEST_PG_URL:-}" ]; then
  if [ "${TK_REQUIRE_PG:-0}" = 1 ]; then
    tap_fail "PostgreSQL available" "TK_TEST_PG_URL is unset and TK_REQUIRE_PG=1"
    tap_done
    exit 1
  fi
  echo "# SKIP no PostgreSQL server (TK_TEST_PG_URL unset; scripts/run-tests starts one)"
  exit 77
fi

# pg_database NAME: a fresh database NAME_<pid> on the test cluster, dropped
# on exit; its URL in PG_DB_URL.
pg_database() {
  PG_DB_NAME="$1_$$"
  psql -qAtX -d "$TK_TEST_PG_URL" -c "CREATE DATABASE $PG_DB_NAME" >/dev/null || {
    tap_fail "create database $PG_DB_NAME"; tap_done; exit 1; }
  PG_DB_URL=$(printf '%s' "$TK_TEST_PG_URL" | sed "s|:///[^?]*|:///$PG_DB_NAME|")
  trap 'psql -qAtX -d "$TK_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $PG_DB_NAME WITH (FORCE)" >/dev/null 2>&1; rm -rf "$TMPDIR_TEST"' EXIT
}

# pg_sql SQL: the query's result on the test database, unaligned.
pg_sql() { psql -qAtX -d "$PG_DB_URL" -c "$1"; }
