#!/bin/sh
# Lost connections on PostgreSQL (issue 22, must not regress): 8 `tasker
# run` processes drain diamond tasks (a noop, a step failing its first
# attempt and retrying, a noop, a command step converging both)
# while another connection ends their server backends at random moments
# with pg_terminate_backend, many times, each time preferring
# a backend in the middle of something (active, or idle in a
# transaction: a group being recorded, a claim), each orchestrator's at
# least once, until at least 30 were ended so. Then a second batch of
# tasks, with no more terminations, shows every orchestrator working
# again on its new connection.
# Checked: every orchestrator still runs, said it reconnected (its log)
# as often as its backend was ended at least once, claimed second-batch
# work, and exits 0 on SIGTERM; every task complete, every step complete
# with exactly one successful attempt, no attempt left open, each step's
# attempts equal to its attempt rows; no attempt of the command step ran
# twice (its own log of runs: task, step, attempt), and each successful
# attempt of one ran. A terminated claim or outcome whose COMMIT the
# client never heard of is what this guards: a step lost (claimed and
# never run nor reaped) or done twice.
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
pg_database term

TASKS=${TERM_TASKS:-600}
TOPUP=${TERM_TOPUP:-200}
AFTER_TASKS=${TERM_AFTER_TASKS:-200}
MIN_TERMS=${TERM_MIN:-30}
ORCHS=8
chaos_config 20ms 500ms 2s 400ms 2
# Each run of the command step appends "TASK STEP ATTEMPT" to runs.log (one
# short write: whole even with many at once).
cat >"$W/term.toml" <<TOML
name = "term"
version = "1"
[[steps]]
name = "fetch"
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "flaky"
depends_on = ["fetch"]
handler = { kind = "builtin", name = "fail", times = 1, retry_after = "20ms" }
[[steps]]
name = "score"
depends_on = ["fetch"]
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "publish"
depends_on = ["flaky", "score"]
handler = { kind = "command", argv = ["sh", "-c", "echo \"\$TASKER_TASK_ID publish \$TASKER_ATTEMPT\" >>$W/runs.log"], timeout = "20s" }
TOML
tasker_setup "$W/term.toml"
: >"$W/runs.log"
: >"$W/ended"
t submit term --count "$TASKS" >/dev/null 2>"$W/submit.err"
expect_eq "submit $TASKS tasks" "$(pg_sql "SELECT count(*) FROM tasks")" "$TASKS"

# end_backend PATTERN: end one backend of an orchestrator of this test's
# database (other tests on the cluster have theirs) whose
# application_name is LIKE PATTERN, waiting up to about 0.5 s for one in
# the middle of something (active, or idle in a transaction), else any of
# them. Prints the ended backend's application_name and state, or nothing
# when none was ended. pg_stat_clear_snapshot: each look sees the
# backends as they are now.
pg_sql "CREATE FUNCTION end_backend(pattern text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE p int; app text; st text;
BEGIN
  FOR i IN 1..400 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT pid, application_name, state INTO p, app, st FROM pg_stat_activity
      WHERE datname = current_database() AND application_name LIKE pattern
        AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()
      ORDER BY random() LIMIT 1;
    EXIT WHEN p IS NOT NULL;
    PERFORM pg_sleep(0.001);
  END LOOP;
  IF p IS NULL THEN
    SELECT pid, application_name, state INTO p, app, st FROM pg_stat_activity
      WHERE datname = current_database() AND application_name LIKE pattern
        AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1;
  END IF;
  IF p IS NOT NULL AND pg_terminate_backend(p) THEN RETURN app || ' ' || COALESCE(st, '?'); END IF;
  RETURN NULL;
END \$\$" >/dev/null
end_backend() { pg_sql "SELECT end_backend('$1')"; }

orchs_start orch "$ORCHS"

first_done() {
  [ "$(pg_sql "SELECT count(*) FROM tasks WHERE state <> 'complete'")" = 0 ]
}
# The feeder, in the background while terminations go on: TOPUP more
# tasks whenever fewer than TOPUP / 2 are left, so that the orchestrators
# never run out of work while the terminations look for them busy, and
# the terminations never wait for a submit.
feeder() {
  while [ ! -e "$W/feeder.stop" ]; do
    if [ "$(pg_sql "SELECT count(*) FROM tasks WHERE state <> 'complete'")" -lt $((TOPUP / 2)) ]; then
      t submit term --count "$TOPUP" >/dev/null 2>>"$W/submit.err"
    fi
    sleep 0.2
  done
}
# Terminations at random moments (0-100 ms apart) while there is work:
# first one of each orchestrator's backends in turn, then of whichever is
# in the middle of something, until MIN_TERMS of them ended a backend so.
# The feeder keeps work there (the orchestrators may drain faster than
# that on another machine).
terms=0
mid=0
round=0
feeder &
FEEDER=$!
# Up to 180 s: under ASan on a loaded 2-core machine, 90 s saw 24
# terminations (orchestrators between a termination and their reconnect
# have no backend to end); a quicker machine stops at MIN_TERMS.
deadline=$(($(date +%s) + 180))
while [ "$mid" -lt "$MIN_TERMS" ] && [ "$(date +%s)" -lt "$deadline" ]; do
  round=$((round + 1))
  i=1
  while [ "$i" -le "$ORCHS" ]; do
    sleep "0.$(printf '%03d' $(( $(od -An -N2 -tu2 /dev/urandom) % 100 )))"
    if [ "$round" = 1 ]; then ended=$(end_backend "orch-$i"); else ended=$(end_backend "orch-%"); fi
    if [ -n "$ended" ]; then
      terms=$((terms + 1))
      echo "${ended%% *}" >>"$W/ended"
      case "${ended#* }" in active | "idle in transaction") mid=$((mid + 1)) ;; esac
    fi
    i=$((i + 1))
  done
done
: >"$W/feeder.stop"
wait "$FEEDER"
total=$(pg_sql "SELECT count(*) FROM tasks")
echo "# $terms backends ended ($mid of them active or idle in a transaction), $total tasks"
if [ "$mid" -ge "$MIN_TERMS" ]; then
  tap_ok "backends ended in the middle of a statement or transaction while the orchestrators drained ($mid of $terms)"
else tap_fail "backends ended in the middle of a statement or transaction" \
  "only $mid of $MIN_TERMS ($terms in all) in 180 s"; fi
wait_for "the first $total tasks complete" 120 first_done

# Every orchestrator at work again on a new connection: a second batch,
# no terminations, each claims some of it.
first_last=$(pg_sql "SELECT max(id) FROM tasks")
t submit term --count "$AFTER_TASKS" >/dev/null 2>>"$W/submit.err"
wait_for "the second $AFTER_TASKS tasks complete" 120 first_done
i=1
while [ "$i" -le "$ORCHS" ]; do
  o="orch-$i"
  ended=$(grep -cx "$o" "$W/ended")
  reconnected=$(grep -c "reconnected to the store" "$W/$o.log")
  after=$(pg_sql "SELECT count(*) FROM attempts a JOIN steps s ON s.id = a.step_id
                  WHERE a.owner = '$o' AND s.task_id > $first_last")
  if bg_exited "$o"; then
    tap_fail "$o still runs" "it exited $(cat "$W/$o.rc")" "$(orch_log_tail "$o")"
  elif [ "$ended" -gt 0 ] && [ "$reconnected" -gt 0 ] && [ "$after" -gt 0 ]; then
    tap_ok "$o reconnected ($ended backends ended, $reconnected reconnections) and ran $after attempts after"
  else
    tap_fail "$o reconnected and worked after" \
      "$ended backends ended, $reconnected reconnections in its log, $after attempts of the second batch" \
      "$(orch_log_tail "$o")"
  fi
  i=$((i + 1))
done
orchs_each orch "$ORCHS" orch_stop

ALL=$((total + AFTER_TASKS))
expect_all_complete "$ALL"
expect_all_steps_complete $((4 * ALL))
expect_eq "every step has exactly one successful attempt" \
  "$(pg_sql "SELECT count(*) FROM steps s WHERE (SELECT count(*) FROM attempts a
             WHERE a.step_id = s.id AND a.outcome = 'success') <> 1")" 0
expect_attempts_consistent
expect_eq "every flaky step failed once, then succeeded" \
  "$(pg_sql "SELECT count(*) FROM steps WHERE name = 'flaky' AND attempts < 2")" 0
expect_eq "no attempt of the command step ran twice" \
  "$(sort "$W/runs.log" | uniq -d | head -n 3)" ""
# Each successful attempt of the command step is a run in its log.
pg_sql "SELECT s.task_id || ' ' || s.name || ' ' || a.attempt FROM attempts a
        JOIN steps s ON s.id = a.step_id
        WHERE a.outcome = 'success' AND s.name = 'publish'" | sort >"$W/succeeded"
sort -u "$W/runs.log" >"$W/ran"
expect_eq "each successful attempt of the command step ran (its line in runs.log)" \
  "$(comm -23 "$W/succeeded" "$W/ran" | head -n 3)" ""
expect_eq "the command step's successes" "$(wc -l <"$W/succeeded")" "$ALL"
echo "# attempts: $(pg_sql "SELECT string_agg(outcome || ' ' || n, ', ') FROM
       (SELECT outcome, count(*) n FROM attempts GROUP BY outcome ORDER BY outcome) x")"
tap_done
