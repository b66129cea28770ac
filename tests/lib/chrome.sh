# One headless Chromium for a test's pages (tests/lib/chrome_pages.py):
# started once, each page loaded in a tab of its own, as
# `chromium --headless --virtual-time-budget=5000 --dump-dom` and
# `--screenshot` would each load it, without a browser's start (seconds)
# per page. Source after tap.sh, with W the test's scratch directory; the
# driver runs under bg.sh's bg_start, so the test's EXIT trap ends it (and
# Chromium with it) when the test stops early. Needs $CHROMIUM and python3.
. "$(dirname "$0")/../lib/bg.sh"

# chrome_start ARGS...: Chromium with ARGS (--headless and the rest) under
# the driver; pages are loaded in the order asked.
chrome_start() {
  CHROME_DIR=$W/chrome-pages
  CHROME_N=0
  mkdir -p "$CHROME_DIR"
  bg_start chrome python3 "$TK_TOP/tests/lib/chrome_pages.py" "$CHROME_DIR" "$CHROMIUM" "$@" \
    2>"$W/chrome.err"
}

# chrome_load URL DOM PNG CONSOLE: the page at URL after its scripts ran
# (5000 virtual ms), its DOM in the file DOM, its screenshot in PNG ("-":
# none), the exceptions it did not catch in CONSOLE ("Uncaught: ..." lines).
# 1, with the reason in CHROME_WHY, when it could not be loaded.
chrome_load() {
  CHROME_N=$((CHROME_N + 1))
  cl_req=$CHROME_DIR/$CHROME_N
  printf '%s\n%s\n%s\n%s\n' "$1" "$2" "$3" "$4" >"$cl_req.tmp" && mv "$cl_req.tmp" "$cl_req.req"
  if ! poll 300 chrome_answered "$cl_req.done"; then
    CHROME_WHY="no answer from the driver after 300s"
    return 1
  fi
  if [ ! -e "$cl_req.done" ]; then
    CHROME_WHY="the driver exited ($(cat "$W/chrome.rc")): $(tail -n 5 "$W/chrome.err")"
    return 1
  fi
  CHROME_WHY=$(cat "$cl_req.done")
  [ "$CHROME_WHY" = ok ]
}

# chrome_answered FILE: the driver answered in FILE, or ended.
chrome_answered() { [ -e "$1" ] || bg_exited chrome; }

# chrome_stop: the browser closed; it and its driver must exit 0 within 60 s.
chrome_stop() {
  : >"$CHROME_DIR/stop"
  if bg_wait chrome 60; then
    RC=$BG_RC
    OUT=""
    ERR=$(tail -n 20 "$W/chrome.err")
    expect_rc "chromium closes" 0
  else
    tap_fail "chromium closes" "it did not end within 60s; killed" "$(tail -n 5 "$W/chrome.err")"
  fi
}
