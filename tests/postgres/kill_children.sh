#!/bin/sh
# Orchestrators killed while tasks wait for the world (issue 24, DESIGN
# §18): 1,000 tasks on PostgreSQL each start one child task, whose http
# step starts an export at a real local service
# (examples/callback-export/export_service.py) and waits for its callback;
# the service calls back each request twice (the second must be refused).
# Four `tasker run` share the work with `tasker serve` taking the
# callbacks, while a random orchestrator is SIGKILLed and restarted about
# every half second for 20 s. Then:
# - every parent task complete, once; exactly one child per parent, all
#   complete (a crash or a claim taken again never started a second);
# - no step succeeded twice, no attempt row open, each step's attempts
#   equal to its attempt rows;
# - no callback applied twice: every repeated callback answered 409 and
#   each http step completed by one attempt; a callback of an attempt
#   that the reaper ended (its orchestrator killed) never completed a step;
# - the kills were real (exit 137) and their leases reaped; every
#   orchestrator still running at the end exits 0.
# Needs TK_TEST_PG_URL (scripts/run-tests starts a private cluster).
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/pg.sh"
. "$(dirname "$0")/../lib/config.sh"
# cb_service_start, cb_template (and serve.sh's serve_start)
. "$(dirname "$0")/../lib/callbacks.sh"
pg_database kill_children

TASKS=${KILL_CHILDREN_TASKS:-1000}
CHAOS_S=${KILL_CHILDREN_SECONDS:-20}
ORCHS=4

cb_service_start 0.2 || { tap_done; exit 1; }
# The child: its http step waits for the service's callback (sent twice:
# mode twice), up to 10 attempts (the kills expire many leases); the
# parent: a task step that starts the child and waits for it, then a noop.
cb_template "$W/ship.toml" ship 10m twice 10
cat >"$W/order.toml" <<'TOML'
name = "order"
version = "1"
[[steps]]
name = "ship"
handler = { kind = "task", template = "ship", context = { order = "{{task.id}}" } }
retry = { max_attempts = 10 }
[[steps]]
name = "done"
depends_on = ["ship"]
handler = { kind = "builtin", name = "noop" }
TOML
chaos_config 50ms 1s 2s 500ms 4
tasker_setup "$W/ship.toml" "$W/order.toml"
serve_start || { tap_done; exit 1; }
chaos_config 50ms 1s 2s 500ms 4 server.public_url="$BASE"
t submit order --count "$TASKS" >/dev/null 2>"$W/submit.err"
expect_eq "submit $TASKS tasks" "$(pg_sql "SELECT count(*) FROM tasks")" "$TASKS"
orchs_start orch "$ORCHS"

kills=0
end=$(($(date +%s) + CHAOS_S))
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 0.5
  victim=$(( $(od -An -N2 -tu2 /dev/urandom) % ORCHS + 1 ))
  orch_kill "orch-$victim" && kills=$((kills + 1))
  orch_start "orch-$victim" run --id "orch-$victim"
done
if [ "$kills" -gt 0 ]; then tap_ok "orchestrators were killed ($kills)"
else tap_fail "orchestrators were killed" "no kill happened"; fi

parents_done() {
  [ "$(pg_sql "SELECT count(*) FROM tasks WHERE parent_task_id IS NULL AND state = 'complete'")" = "$TASKS" ]
}
if ! wait_for "every parent task completes" "${KILL_CHILDREN_WAIT:-600}" parents_done; then
  echo "# steps unfinished: $(pg_sql "SELECT string_agg(format('task %s step %s %s attempts %s run_at %s lease %s',
    task_id, name, state, attempts, run_at, lease_expires_at), '; ') FROM steps WHERE state <> 'complete'")"
  echo "# their open attempts: $(pg_sql "SELECT string_agg(format('attempt %s step %s owner %s started %s',
    a.id, a.step_id, a.owner, a.started_at), '; ') FROM attempts a WHERE a.outcome IS NULL")"
  echo "# their callbacks and signals: $(pg_sql "SELECT string_agg(format('callback claim %s step %s limit %s; signal %s claim %s delivered %s',
    c.claim_id, c.step_id, c.limit_at, g.id, g.claim_id, g.delivered_at), '; ')
    FROM callbacks c LEFT JOIN signals g ON g.for_claim = c.claim_id
    WHERE c.claim_id IN (SELECT id FROM attempts WHERE outcome IS NULL)")"
  for o in $(seq 1 "$ORCHS"); do echo "# orch-$o: $(grep -c . "$W/orch-$o.log") lines"; done
fi
orchs_each orch "$ORCHS" orch_stop

expect_eq "every parent complete" \
  "$(pg_sql "SELECT count(*) FILTER (WHERE state = 'complete') || '/' || count(*)
             FROM tasks WHERE parent_task_id IS NULL")" "$TASKS/$TASKS"
expect_eq "exactly one child per parent, all complete" \
  "$(pg_sql "SELECT count(*) || ' ' || count(DISTINCT parent_task_id) || ' ' ||
                    count(*) FILTER (WHERE state = 'complete')
             FROM tasks WHERE parent_task_id IS NOT NULL")" "$TASKS $TASKS $TASKS"
expect_eq "every task step's attempt started one child at most" \
  "$(pg_sql "SELECT count(*) FROM (SELECT parent_step_id, parent_claim_id FROM tasks
             WHERE parent_task_id IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1) twice")" 0
expect_all_steps_complete $((4 * TASKS))
expect_attempts_consistent

# The callbacks, as the service saw them and as the store kept them.
answers() { jq -r "select(.$1 != null) | .$1" "$W/service.log" | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' '; }
expect_eq "every first callback taken (200) or refused as late (409)" \
  "$(jq -r 'select(.callback != null and .callback != 200 and .callback != 409)' "$W/service.log" | wc -l)" 0
taken=$(jq -r 'select(.callback == 200)' "$W/service.log" | grep -c '^{')
if [ "$taken" -ge "$TASKS" ]; then tap_ok "a callback taken for every child at least ($taken)"
else tap_fail "a callback taken for every child at least" "$taken taken for $TASKS children"; fi
expect_eq "every repeated callback refused (409)" \
  "$(jq -r 'select(.again != null) | .again' "$W/service.log" | sort -u | tr '\n' ' ')" "409 "
expect_eq "each http step completed by one attempt, with a callback's results" \
  "$(pg_sql "SELECT count(*) FROM steps s WHERE s.name = 'export' AND s.state = 'complete'
             AND s.results::jsonb ->> 'rows' = '42'
             AND (SELECT count(*) FROM attempts a WHERE a.step_id = s.id AND a.outcome = 'success') = 1")" \
  "$TASKS"
expect_eq "one signal per attempt at most, each delivered once" \
  "$(pg_sql "SELECT count(*) FROM (SELECT for_claim FROM signals WHERE for_claim IS NOT NULL
             GROUP BY 1 HAVING count(*) > 1) twice")" 0
expect_eq "no reaped attempt's callback completed its step" \
  "$(pg_sql "SELECT count(*) FROM signals g JOIN attempts a ON a.id = g.for_claim
             WHERE a.outcome = 'lease_expired' AND g.delivered_at IS NOT NULL")" 0
of_killed=$(pg_sql "SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'")
if [ "$of_killed" -gt 0 ]; then tap_ok "the killed orchestrators' leases expired and were reaped ($of_killed)"
else tap_fail "the killed orchestrators' leases expired and were reaped" "no attempt ended lease_expired"; fi
echo "# $TASKS parents, $ORCHS orchestrators, ${CHAOS_S}s of chaos: $kills kills, $of_killed expired" \
     "leases; callbacks: $(answers callback)"
serve_stop
tap_done
