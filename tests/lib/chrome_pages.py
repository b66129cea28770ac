#!/usr/bin/env python3
"""One headless Chromium for the dashboard's test (tests/lib/chrome.sh).

Starting Chromium costs seconds; the test loads a page a dozen times. This
starts one browser, driven over --remote-debugging-pipe (DevTools JSON
messages, each ended by a NUL, on its fds 3 and 4), and loads each page
the test asks for in a tab of its own, as `chromium --headless
--virtual-time-budget=5000 --dump-dom` and `--screenshot` each would: the
page's virtual clock held while its requests are pending, its timers run
until 5000 virtual ms have passed; then its DOM (doctype and outerHTML),
its screenshot at the window's size (--window-size, the viewport's), and the exceptions nothing caught
("Uncaught ..." lines) in the page's console.

usage: chrome_pages.py DIR CHROMIUM [CHROMIUM_ARGS...]
Requests are files DIR/N.req (N = 1, 2, ...; written whole, then renamed
into place), four lines: URL, the DOM's file, the screenshot's file ("-"
for none), the console's file. The answer, DIR/N.done, is "ok" or what
went wrong. DIR/stop closes the browser; exit 0 when it closed cleanly.
"""
import base64
import json
import os
import select
import signal
import subprocess
import sys
import time

BUDGET_MS = 5000
PAGE_SECONDS = 240  # real seconds a page may take, the machine busy (a hang: a failure)
DOM_JS = ("(document.doctype ? new XMLSerializer().serializeToString(document.doctype)"
          " + '\\n' : '') + document.documentElement.outerHTML")


class Browser:
    """The browser process and its pipe: commands out, answers and events in."""

    def __init__(self, argv):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child():
            # Its fds 3 and 4 are the pipe; it dies with this driver.
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
            try:
                import ctypes
                ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            except (OSError, AttributeError):
                pass

        self.proc = subprocess.Popen(argv + ["--remote-debugging-pipe", "about:blank"],
                                     stdin=subprocess.DEVNULL, preexec_fn=child,
                                     pass_fds=(3, 4))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.events = []  # (sessionId, method, params) not yet taken
        self.size = None  # --window-size=W,H: each page's viewport
        for arg in argv:
            if arg.startswith("--window-size="):
                self.size = [int(v) for v in arg.split("=", 1)[1].split(",")]

    def _read_one(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium in time")
            ready, _, _ = select.select([self.from_chrome], [], [], left)
            if ready:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed its pipe (exit %s)" % self.proc.poll())
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, deadline=None):
        """Send a command; its result (an error answer raises)."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.to_chrome, data):]
        deadline = deadline or time.monotonic() + PAGE_SECONDS
        while True:
            m = self._read_one(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"].get("message")))
                return m.get("result", {})
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def wait_event(self, session, method, deadline):
        """Wait for an event of the session; the events before it stay."""
        while True:
            for i, (s, meth, _) in enumerate(self.events):
                if s == session and meth == method:
                    return self.events.pop(i)[2]
            m = self._read_one(deadline)
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def take_events(self, session, method):
        """The session's events of that method so far, taken out."""
        mine = [e[2] for e in self.events if e[0] == session and e[1] == method]
        self.events = [e for e in self.events if not (e[0] == session and e[1] == method)]
        return mine


def exception_line(params):
    """One console line for an exception nothing caught."""
    d = params.get("exceptionDetails", {})
    text = d.get("exception", {}).get("description") or d.get("text", "")
    return "Uncaught: %s (%s:%s)" % (text.replace("\n", " | "), d.get("url", ""),
                                     d.get("lineNumber", ""))


def load(browser, url, dom_file, png_file, console_file):
    """One page in a new tab: its DOM, screenshot and console written."""
    deadline = time.monotonic() + PAGE_SECONDS
    target = browser.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                           deadline=deadline)["sessionId"]
    try:
        for method in ("Page.enable", "Runtime.enable"):
            browser.call(method, session=session, deadline=deadline)
        if browser.size:
            # The page's viewport the whole window, as --screenshot has it.
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": browser.size[0], "height": browser.size[1],
                          "deviceScaleFactor": 1, "mobile": False}, session, deadline)
        # Chromium's own order for a budget: the clock paused, the page
        # asked for, then the budget (tests of headless virtual time).
        browser.call("Emulation.setVirtualTimePolicy", {"policy": "pause"}, session, deadline)
        nav = browser.call("Page.navigate", {"url": url}, session, deadline)
        if nav.get("errorText"):
            raise RuntimeError("navigate: " + nav["errorText"])
        browser.call("Emulation.setVirtualTimePolicy",
                     {"policy": "pauseIfNetworkFetchesPending", "budget": BUDGET_MS},
                     session, deadline)
        browser.wait_event(session, "Emulation.virtualTimeBudgetExpired", deadline)
        dom = browser.call("Runtime.evaluate", {"expression": DOM_JS, "returnByValue": True},
                           session, deadline)["result"]["value"]
        with open(dom_file, "w", encoding="utf-8") as f:
            f.write(dom + "\n")
        if png_file != "-":
            shot = browser.call("Page.captureScreenshot", {"format": "png"}, session, deadline)
            with open(png_file, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
    finally:
        with open(console_file, "w", encoding="utf-8") as f:
            for params in browser.take_events(session, "Runtime.exceptionThrown"):
                f.write(exception_line(params) + "\n")
        # The rest of its events, and the browser's own (attached, detached).
        browser.events = [e for e in browser.events if e[0] not in (session, None)]
        browser.call("Target.closeTarget", {"targetId": target})


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: chrome_pages.py DIR CHROMIUM [CHROMIUM_ARGS...]\n")
        return 2
    work, argv = sys.argv[1], sys.argv[2:]
    browser = Browser(argv)
    n = 1
    while not os.path.exists(os.path.join(work, "stop")):
        req = os.path.join(work, "%d.req" % n)
        if not os.path.exists(req):
            if browser.proc.poll() is not None:
                sys.stderr.write("chromium exited with status %s\n" % browser.proc.returncode)
                return 1
            time.sleep(0.02)
            continue
        with open(req, encoding="utf-8") as f:
            url, dom_file, png_file, console_file = f.read().split("\n")[:4]
        try:
            load(browser, url, dom_file, png_file, console_file)
            answer = "ok"
        except (OSError, RuntimeError, TimeoutError, EOFError, KeyError, ValueError) as e:
            answer = "%s: %s" % (type(e).__name__, e)
        with open(os.path.join(work, "%d.done.new" % n), "w", encoding="utf-8") as f:
            f.write(answer + "\n")
        os.rename(os.path.join(work, "%d.done.new" % n), os.path.join(work, "%d.done" % n))
        n += 1
    try:
        browser.call("Browser.close", deadline=time.monotonic() + 30)
    except EOFError:
        pass  # it closed before answering
    try:
        return 0 if browser.proc.wait(30) == 0 else 1
    except subprocess.TimeoutExpired:
        browser.proc.kill()
        return 1


if __name__ == "__main__":
    sys.exit(main())
