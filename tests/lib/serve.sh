# `tasker serve` for integration tests, started and stopped one way; source
# after tap.sh, with W the test's scratch directory and $W/tasker.toml its
# configuration. The server runs under bg.sh's bg_start, so tap.sh's (or
# pg.sh's) EXIT trap ends it when a test stops early.
. "$(dirname "$0")/../lib/bg.sh"

# serve_start [NAME [ARGS...]]: `tasker serve` with the test's
# configuration and ARGS (--db URL, --token-file FILE...) on a free
# loopback port, in the background under NAME (default serve; its stderr in
# $W/NAME.err); waits until it prints where it listens, then its address is
# in BASE (http://127.0.0.1:PORT) and its pid in SERVE. 1, with a failure
# and the server ended, when it exits first or says nothing within 300 s
# (a bound that only turns a hung server into a clear failure: the
# machine may be busy).
serve_start() {
  ss_name=${1:-serve}
  [ $# -eq 0 ] || shift
  bg_start "$ss_name" "$TASKER" --config "$W/tasker.toml" serve --listen 127.0.0.1:0 "$@" \
    2>"$W/$ss_name.err"
  SERVE=$BG_PID
  if poll 300 serve_said_or_ended "$ss_name" && ! bg_exited "$ss_name"; then
    BASE=$(sed -n 's|^tasker serve: listening on \(http://[^/]*\)/$|\1|p' "$W/$ss_name.err")
    return 0
  fi
  if bg_exited "$ss_name"; then
    ss_why="it exited with status $(cat "$W/$ss_name.rc") first"
  else
    ss_why="no such line after 300s"
    kill -KILL "$SERVE" 2>/dev/null
  fi
  bg_wait "$ss_name" 30
  tap_fail "serve ($ss_name) says where it listens" "$ss_why" "stderr: $(cat "$W/$ss_name.err")"
  return 1
}

# serve_said_or_ended NAME: NAME's server printed where it listens, or ended.
serve_said_or_ended() {
  grep -q '^tasker serve: listening on http://' "$W/$1.err" || bg_exited "$1"
}

# serve_stop [NAME]: SIGTERM to serve_start's server NAME (default serve);
# it must exit 0 within 60 s (a sanitizer's report at exit, a leak or a
# crash on shutdown, is a non-zero status: a failure).
serve_stop() {
  ss_name=${1:-serve}
  ss_what="serve exits 0 on SIGTERM"
  [ "$ss_name" = serve ] || ss_what="serve ($ss_name) exits 0 on SIGTERM"
  kill -TERM "$(bg_pid "$ss_name")"
  if bg_wait "$ss_name" 60; then
    RC=$BG_RC
    OUT=""
    ERR=$(tail -n 20 "$W/$ss_name.err")
    expect_rc "$ss_what" 0
  else
    tap_fail "$ss_what" "it did not end within 60s; killed" "$(tail -n 5 "$W/$ss_name.err")"
  fi
}
