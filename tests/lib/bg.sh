# Processes in the background for integration tests; source after tap.sh
# (pg.sh and serve.sh source it). A test starts each of its background
# processes (`tasker run`, `tasker serve`) through bg_start and ends each
# with a check of how it ended (pg.sh's orch_expect, orch_stop, orch_kill;
# serve.sh's serve_stop): a sanitizer's report at exit, a crash or a hang is
# a failure, never lost in a `wait` nobody reads. bg_kill_all, in the
# test's EXIT trap, ends those a test that stops early leaves running.

# poll SECONDS CMD...: poll until CMD succeeds (0); 1 once SECONDS have
# passed without.
poll() {
  pl_deadline=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -ge "$pl_deadline" ] && return 1
    sleep 0.1
  done
}

# wait_for DESCRIPTION SECONDS CMD...: poll until CMD succeeds; after
# SECONDS a failure naming DESCRIPTION (and 1).
wait_for() {
  wf_what=$1
  wf_secs=$2
  shift 2
  poll "$wf_secs" "$@" && return
  tap_fail "$wf_what" "still not so after ${wf_secs}s"
  return 1
}

# Sourced by pg.sh and serve.sh, maybe both: the names started so far stay.
BG_NAMES=${BG_NAMES:-}

# bg_start NAME CMD...: CMD in the background under NAME (letters, digits,
# - and _), with the caller's redirections; its pid in BG_PID and
# $W/NAME.pid. The pid is CMD's own, not a shell's, so that a signal sent
# to it (SIGKILL, SIGSTOP) reaches it; a watcher shell, its parent, writes
# its exit status to $W/NAME.rc when it ends, so that the test can tell
# without blocking whether it still runs and how it ended. NAME may be
# started again once it has ended.
bg_start() {
  bg_name=$1
  shift
  rm -f "$W/$bg_name.pid" "$W/$bg_name.rc"
  (
    "$@" &
    echo $! >"$W/$bg_name.pid.new" && mv "$W/$bg_name.pid.new" "$W/$bg_name.pid"
    wait $!
    echo $? >"$W/$bg_name.rc.new" && mv "$W/$bg_name.rc.new" "$W/$bg_name.rc"
  ) &
  echo $! >"$W/$bg_name.watcher"
  bg_tries=0
  until [ -e "$W/$bg_name.pid" ]; do
    bg_tries=$((bg_tries + 1))
    if [ "$bg_tries" -gt 3000 ]; then
      tap_fail "start $bg_name in the background" "no pid in $W/$bg_name.pid after 30s"
      tap_done
      exit 1
    fi
    sleep 0.01
  done
  BG_PID=$(cat "$W/$bg_name.pid")
  case " $BG_NAMES " in *" $bg_name "*) ;; *) BG_NAMES="$BG_NAMES $bg_name" ;; esac
}

# bg_pid NAME: the pid of NAME's process.
bg_pid() { cat "$W/$1.pid"; }

# bg_exited NAME: true once NAME's process has ended.
bg_exited() { [ -e "$W/$1.rc" ]; }

# bg_wait NAME SECONDS: wait until NAME's process ends, its exit status in
# BG_RC (128 + N: killed by signal N). One that still runs after SECONDS
# is killed, BG_RC is "none" and this returns 1 (the caller's check fails).
bg_wait() {
  if ! poll "$2" bg_exited "$1"; then
    kill -KILL "$(bg_pid "$1")" 2>/dev/null
    wait "$(cat "$W/$1.watcher")"
    BG_RC=none
    return 1
  fi
  wait "$(cat "$W/$1.watcher")"
  BG_RC=$(cat "$W/$1.rc")
}

# bg_kill_all: SIGKILL to every process bg_start started that still runs
# (stopped ones included): the EXIT trap's, for a test that ends early.
bg_kill_all() {
  for bg_name in $BG_NAMES; do
    bg_exited "$bg_name" || kill -KILL "$(bg_pid "$bg_name")" 2>/dev/null
  done
}
