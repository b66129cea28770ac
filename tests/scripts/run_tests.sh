#!/bin/sh
# scripts/run-tests' verdict on skips (issue 20 item 10): a skip that names
# its requirement ("# SKIP requires NAME: WHY") is counted as skipped, and
# as a failure when TK_REQUIRE_NAME=1; a skip that names none is always a
# failure. The harness runs on a checkout of its own: scripts/run-tests and
# tests/lib/tap.sh copied, fake tests beside real test programs of this
# build (test_durability, whose PostgreSQL half skips, since the copy has
# no scripts/pg-cluster to start a cluster with; test_toml_conformance,
# which finds no toml-test suite there and exits 77).
. "$(dirname "$0")/../lib/tap.sh"
W=$TMPDIR_TEST
TOP=${TK_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD_DIR=$(cd "$(dirname "$TASKER")/.." && pwd)
F=$W/top

mkdir -p "$F/scripts" "$F/tests/lib" "$F/tests/fake" "$F/build/tests/store" \
  "$F/build/tests/toml" "$F/build/tests/fake"
cp "$TOP/scripts/run-tests" "$F/scripts/"
cp "$TOP/tests/lib/tap.sh" "$F/tests/lib/"
cp "$BUILD_DIR/tests/store/test_durability" "$F/build/tests/store/"
cp "$BUILD_DIR/tests/toml/test_toml_conformance" "$F/build/tests/toml/"

cat >"$F/tests/fake/needs_chromium.sh" <<'EOF'
. "$(dirname "$0")/../lib/tap.sh"
tap_skip_all chromium "no browser here"
EOF
cat >"$F/tests/fake/says_no_why.sh" <<'EOF'
echo "# SKIP cannot run"
exit 77
EOF
cat >"$F/tests/fake/passes.sh" <<'EOF'
. "$(dirname "$0")/../lib/tap.sh"
tap_ok "fine"
tap_done
EOF
# A program that skips two results but names a requirement for one only.
cat >"$F/build/tests/fake/test_two_skips" <<'EOF'
#!/bin/sh
echo "1..2"
echo "# SKIP requires chromium: no browser here"
echo "not ok 1 # SKIP first"
echo "not ok 2 # SKIP second"
EOF
chmod +x "$F/build/tests/fake/test_two_skips"

# harness FILTER [VAR=VALUE...]: the copy's run-tests on the tests whose
# path contains FILTER, with no TK_REQUIRE_ variable but those given, from
# a directory two below $W, where no toml-test suite is to be found: not
# $W itself, whose ../shared is $TMPDIR/shared, the suite's own place when
# TMPDIR is the directory that holds the checkout (as on CI machines).
mkdir -p "$W/cwd/here"
cd "$W/cwd/here" || exit 1
harness() {
  hn_filter=$1
  shift
  run env -u TK_REQUIRE_PG -u TK_REQUIRE_CHROMIUM -u TK_REQUIRE_TOML_TEST -u TOML_TEST_DIR \
    BUILD="$F/build" "$@" sh "$F/scripts/run-tests" "$hn_filter"
  LAST=$(printf '%s\n' "$OUT" | tail -n 1)
}

# --- a skip that names its requirement ------------------------------------
harness needs_chromium
expect_rc "a named skip, not required: exit 0" 0
expect_match "it is reported as skipped, with its reason" "$OUT" \
  "skip tests/fake/needs_chromium.sh: requires chromium: no browser here"
expect_eq "the closing line counts it as skipped" "$LAST" \
  "0 passed, 0 failed, 1 skipped (not run: tests/fake/needs_chromium.sh)"

harness needs_chromium TK_REQUIRE_CHROMIUM=1
expect_rc "TK_REQUIRE_CHROMIUM=1: the same skip fails the run" 1
expect_match "it is a failure that says why" "$OUT" \
  "not ok - tests/fake/needs_chromium.sh: skipped, but TK_REQUIRE_CHROMIUM=1: no browser here"
expect_eq "the closing line counts it as failed" "$LAST" "0 passed, 1 failed"

harness needs_chromium TK_REQUIRE_CHROMIUM=0
expect_rc "TK_REQUIRE_CHROMIUM=0: skipped" 0
harness needs_chromium TK_REQUIRE_PG=1 TK_REQUIRE_TOML_TEST=1
expect_rc "other requirements required: still skipped" 0

# --- a skip that names no requirement -------------------------------------
harness says_no_why
expect_rc "a skip that names no requirement fails the run" 1
expect_match "it says so" "$OUT" "not ok - tests/fake/says_no_why.sh: a skip names no requirement"

harness test_two_skips
expect_rc "two skipped results, one named requirement: a failure" 1
expect_eq "both skips count as failed" "$LAST" "0 passed, 2 failed"

harness passes
expect_rc "a test that passes: exit 0" 0
expect_eq "counted as passed" "$LAST" "1 passed, 0 failed"

# --- real test programs -----------------------------------------------------
harness store/test_durability
expect_rc "test_durability without a server: exit 0" 0
expect_match "its PostgreSQL half skipped as requiring pg" \
  "$(printf '%s\n' "$OUT" | sed -n 's/^ok   tests\/store\/test_durability ([0-9]*, \(1 skipped)\)$/\1/p')" \
  "1 skipped)"
harness store/test_durability TK_REQUIRE_PG=1
expect_rc "TK_REQUIRE_PG=1: test_durability's skip fails the run" 1
expect_match "the failure names the variable and the reason" "$OUT" \
  "not ok - tests/store/test_durability: skipped, but TK_REQUIRE_PG=1: no PostgreSQL server ("
expect_match "and the cluster that did not start is a failure of its own" "$OUT" \
  "FAIL scripts/pg-cluster: PostgreSQL is required (TK_REQUIRE_PG=1)"

harness toml/test_toml_conformance
expect_rc "test_toml_conformance without the suite: exit 0" 0
expect_match "skipped as requiring toml-test" "$OUT" \
  "skip tests/toml/test_toml_conformance: requires toml-test: toml-test suite not found"
harness toml/test_toml_conformance TK_REQUIRE_TOML_TEST=1
expect_rc "TK_REQUIRE_TOML_TEST=1: its skip fails the run" 1
expect_match "the failure names the variable" "$OUT" \
  "skipped, but TK_REQUIRE_TOML_TEST=1: toml-test suite not found"

tap_done
