# Retry budgets hold across the fleet (DESIGN §14, issue 23 item 4): two
# `tasker run` orchestrators on one store ($TK_DB: SQLite's file, or
# pg.sh's database) run ten tasks whose step always fails and names the
# budget "api": ratio 0 (first attempts add nothing), a 2 s window and
# min_per_second 2, so any 2 s window of slots may hold at most 4 retries,
# whichever orchestrator asked. Each retry counts where the budget put
# it: at the end of the failed attempt when allowed at once, at its
# run_at when the budget deferred it (delay source budget; one brought
# earlier is at the time it was brought to). With a budget per
# orchestrator, as before it was kept in the store, each would allow 4 in
# a window and together about 8.
# Sourced after tap.sh and config.sh (and pg.sh for PostgreSQL) by
# tests/cli/budget_fleet.sh and tests/postgres/budget_fleet.sh; bf_run
# runs it all.
. "$(dirname "$0")/../lib/bg.sh"

# bf_sql SQL: one value from the test's store.
bf_sql() {
  case $TK_DB in
    sqlite:*) sqlite3 "${TK_DB#sqlite:}" "$1" ;;
    *) psql -qAtX -d "$TK_DB" -c "$1" ;;
  esac
}

# Each retry at the time the budget counted it (ms).
BF_RETRIES="SELECT CASE WHEN delay_source = 'budget' THEN next_run_at ELSE finished_at END AS t
  FROM attempts WHERE next_run_at IS NOT NULL"

# How long the store's attempts span (ms), and whether it is 6 s (three windows).
bf_span() { bf_sql "SELECT COALESCE(max(finished_at) - min(started_at), 0) FROM attempts"; }
bf_long_enough() { [ "$(bf_span)" -ge 6000 ]; }

# bf_stop NAME: SIGTERM once NAME catches it (tasker run sets its handler
# first thing; until then the default would kill it), then a check that it
# exits 0.
bf_catches_term() {
  bf_mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
  [ -z "$bf_mask" ] || [ $((0x$bf_mask & 0x4000)) -ne 0 ]
}
bf_stop() {
  wait_for "$1 catches SIGTERM" 60 bf_catches_term "$(bg_pid "$1")"
  kill -TERM "$(bg_pid "$1")"
  if ! bg_wait "$1" 120; then tap_fail "$1 exits 0 on SIGTERM" "it did not end in 120 s"
  elif [ "$BG_RC" = 0 ]; then tap_ok "$1 exits 0 on SIGTERM"
  else tap_fail "$1 exits 0 on SIGTERM" "exit $BG_RC" "$(tail -n 5 "$W/$1.log")"; fi
}

bf_run() {
  tasker_config engine.max_attempts=100000 backoff.base=10ms backoff.multiplier=1 \
    backoff.jitter=none engine.claim_batch=2 budgets.api.ratio=0 budgets.api.window=2s \
    budgets.api.min_per_second=2
  flaky_api_template "$W/flaky_api.toml"
  run t init
  expect_rc "init" 0
  run t template add "$W/flaky_api.toml"
  expect_rc "template add" 0
  run t submit flaky_api --count 10
  expect_rc "submit 10 tasks" 0
  for bf_o in one two; do
    bg_start "$bf_o" "$TASKER" --config "$W/tasker.toml" run --id "$bf_o" >>"$W/$bf_o.log" 2>&1
  done
  wait_for "the attempts span three windows (6 s)" 180 bf_long_enough
  bf_stop one
  bf_stop two

  # Both spent retries of the budget, and it deferred some.
  expect_eq "both orchestrators ran retries" \
    "$(bf_sql "SELECT count(DISTINCT owner) FROM attempts WHERE attempt > 1")" 2
  bf_deferred=$(bf_sql "SELECT count(*) FROM attempts WHERE delay_source = 'budget'")
  if [ "$bf_deferred" -gt 0 ]; then tap_ok "the budget deferred retries ($bf_deferred)"
  else tap_fail "the budget deferred retries" "no attempt row says delay source budget"; fi
  # The most retries in any window of 100 slots of 20 ms: the one that
  # ends at each retry's slot.
  bf_most=$(bf_sql "WITH r AS ($BF_RETRIES) SELECT COALESCE(max(n), 0) FROM (SELECT
    (SELECT count(*) FROM r r2 WHERE r2.t >= (r1.t / 20 - 99) * 20 AND r2.t < (r1.t / 20 + 1) * 20)
    AS n FROM r r1) x")
  bf_all=$(bf_sql "SELECT count(*) FROM ($BF_RETRIES) r")
  if [ "$bf_most" -le 4 ] && [ "$bf_most" -ge 1 ]; then
    tap_ok "at most 4 retries in any 2 s window, both orchestrators together ($bf_most; $bf_all retries over $(bf_span) ms)"
  else
    tap_fail "at most 4 retries in any 2 s window, both orchestrators together" \
      "a window holds $bf_most ($bf_all retries over $(bf_span) ms); by orchestrator and time:" \
      "$(bf_sql "SELECT owner, attempt, finished_at, delay_source, next_run_at FROM attempts
                 WHERE next_run_at IS NOT NULL ORDER BY 5 LIMIT 40")"
  fi
}
