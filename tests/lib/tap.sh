# TAP helpers for integration tests that run the real tasker binary.
# Source it, call the checks, then `tap_done`. $TASKER is the binary.
: "${TASKER:?TASKER must point at the tasker binary}"
tap_n=0
tap_failed=0
TMPDIR_TEST=$(mktemp -d)
# What bg.sh started and still runs (a server, an orchestrator) ends with
# the test, however it stops.
trap '[ -z "${BG_NAMES:-}" ] || bg_kill_all; rm -rf "$TMPDIR_TEST"' EXIT

tap_ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1"; }
tap_fail() {
  tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1))
  echo "not ok $tap_n - $1"; shift
  for line in "$@"; do printf '# %s\n' "$line"; done
}

# run CMD...: runs the command, capturing stdout in $OUT, stderr in $ERR,
# and the exit status in $RC.
run() {
  "$@" >"$TMPDIR_TEST/out" 2>"$TMPDIR_TEST/err"
  RC=$?
  OUT=$(cat "$TMPDIR_TEST/out")
  ERR=$(cat "$TMPDIR_TEST/err")
}

# expect_rc NAME WANT: the last run exited with WANT.
expect_rc() {
  if [ "$RC" -eq "$2" ]; then tap_ok "$1"
  else tap_fail "$1" "exit $RC, want $2" "stdout: $OUT" "stderr: $ERR"; fi
}

# expect_eq NAME GOT WANT
expect_eq() {
  if [ "$2" = "$3" ]; then tap_ok "$1"
  else tap_fail "$1" "got:  $2" "want: $3"; fi
}

# expect_match NAME TEXT PATTERN: TEXT contains the fixed string PATTERN.
# A failure shows TEXT's last 20 lines (a log can be long).
expect_match() {
  case "$2" in
    *"$3"*) tap_ok "$1" ;;
    *)
      em_lines=$(printf '%s\n' "$2" | wc -l)
      if [ "$em_lines" -le 20 ]; then tap_fail "$1" "text: $2" "does not contain: $3"
      else tap_fail "$1" "text (its last 20 of $em_lines lines): $(printf '%s\n' "$2" | tail -n 20)" \
        "does not contain: $3"; fi ;;
  esac
}

# tap_skip_all REQUIREMENT WHY: the whole test cannot run here for want of
# REQUIREMENT (pg, chromium, ...): says so in the form scripts/run-tests
# reads, "# SKIP requires REQUIREMENT: WHY", and exits 77. The harness
# counts it as skipped, or as a failure when TK_REQUIRE_<REQUIREMENT> is 1
# (CI): the test itself never reads those variables.
tap_skip_all() {
  echo "# SKIP requires $1: $2"
  exit 77
}

tap_done() {
  echo "1..$tap_n"
  [ "$tap_failed" -eq 0 ]
}
