# A `tasker serve` with no orchestrator reaps its workers' expired leases
# when they run out, not only when a claim comes (src/server/loop.c), and
# from its start: a serve started after another stopped reaps the leases
# that one's workers held, with no claim through it yet:
# source after tap.sh and config.sh (or pg.sh) with TK_DB set, then
# sr_run. serve_reaps.sh runs it on SQLite, serve_reaps_pg.sh on
# PostgreSQL (where a worker's claim wakes no orchestrator either).
. "$(dirname "$0")/../lib/workers.sh"

sr_run() {
  tasker_config $QUICK_RETRIES engine.lease=2s engine.heartbeat=1s
  wk_solo_template
  run t init
  [ "$RC" -eq 0 ] || wk_fatal "init" "$ERR"
  run t template add "$W/solo.toml"
  [ "$RC" -eq 0 ] || wk_fatal "template add" "$ERR"
  wk_serve
  run t submit solo
  [ "$RC" -eq 0 ] || wk_fatal "submit" "$ERR"
  wk_post /api/v1/queues/other/claim '{"worker": "dies", "wait": 30}'
  wk_expect "a worker claims the step (a 2 s lease)" 200 '[.claims[] | [.task_id, .step]]' \
    '[[1,"only"]]'
  # The worker sends nothing more, and nobody else claims: only the
  # server's own timer can reap it.
  sr_what="with no orchestrator and no claim, serve reaps it once its lease ran out"
  wait_for "$sr_what" 30 wk_step_is 1 only waiting_for_retry && tap_ok "$sr_what"
  expect_eq "its attempt ended lease_expired" "$(wk_step 1 only '.history[0].outcome')" \
    '"lease_expired"'
  wk_post /api/v1/queues/other/claim '{"worker": "next", "wait": 30}'
  wk_expect "the next worker's claim gets its retry" 200 '[.claims[] | [.step, .attempt]]' \
    '[["only",2]]'
  # That worker dies too, and so does its serve; another serve starts,
  # which nobody claims through.
  serve_stop
  wk_serve
  sr_what="a serve started since, with no claim through it, reaps that lease once it ran out"
  wait_for "$sr_what" 30 wk_step_is 1 only waiting_for_retry && tap_ok "$sr_what"
  expect_eq "its attempt 2 ended lease_expired" "$(wk_step 1 only '.history[1].outcome')" \
    '"lease_expired"'
}
