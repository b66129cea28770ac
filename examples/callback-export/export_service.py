#!/usr/bin/env python3
"""A small export service that calls back (docs/callbacks.md).

It takes POST /export with a JSON body {"callback": URL, "mode": MODE,
"rows": N}, answers 202 at once, works a moment on a thread of its own, and
then POSTs its callback to URL:
  success    {"status": "success", "results": {"rows": N, "file": ...}}
  fail_once  the first request of a task: {"status": "failure", "error":
             ..., "retryable": true, "retry_after": "1s"}; later ones succeed
  heartbeat  a heartbeat first (POST URL/heartbeat {"timeout": "1h"}), then
             success
  twice      success, then the same callback again (answered 409: a
             callback is taken once)
  silent     the first request of a task: never calls back (its wait times
             out); later ones: heartbeats (timeout 1h) until one extends the
             wait (the step waits once the engine has the 202), and no
             callback: someone else calls back
Python's standard library only. Usage:
  export_service.py [--port N] [--port-file FILE] [--log FILE] [--delay SECONDS]
With --port-file the port it listens on (0: any free one) is written
there; with --log each request is appended as a JSON line (for tests)."""
import argparse
import http.client
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SEEN = {}  # task -> requests so far (fail_once)


def post(url, body):
    """POST body as JSON to url; the answer's status and body. A request
    that gets no answer (refused, reset: the server limits connections from
    one address, and a thousand callbacks at once exceed it) is sent again
    after a pause that doubles from 50 ms up to 2 s, for up to 2 minutes,
    as a service that calls back must; then (0, the last error)."""
    data = json.dumps(body).encode()
    pause, give_up = 0.05, time.monotonic() + 120
    while True:
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            if time.monotonic() >= give_up:
                return 0, str(e)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def log(args, entry):
    if args.log:
        with LOCK, open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def work(args, req):
    time.sleep(args.delay)
    url, mode, task = req["callback"], req.get("mode", "success"), req.get("task")
    with LOCK:
        SEEN[task] = SEEN.get(task, 0) + 1
        first = SEEN[task] == 1
    if mode == "silent":
        for _ in range(0 if first else 600):
            status, text = post(url + "/heartbeat", {"timeout": "1h"})
            if status != 200 or json.loads(text).get("until") is not None:
                log(args, {"task": task, "heartbeat": status, "answer": text})
                return
            time.sleep(0.1)
        return
    if mode == "heartbeat":
        status, text = post(url + "/heartbeat", {"timeout": "1h"})
        log(args, {"task": task, "heartbeat": status, "answer": text})
    if mode == "fail_once" and first:
        body = {"status": "failure", "error": "the export service is busy", "retryable": True,
                "retry_after": "1s"}
    else:
        body = {"status": "success", "results": {"rows": req.get("rows", 0),
                                                 "file": "export-%s.csv" % task}}
    status, text = post(url, body)
    log(args, {"task": task, "callback": status, "answer": text})
    if mode == "twice":
        status, text = post(url, body)
        log(args, {"task": task, "again": status, "answer": text})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8088)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--delay", type=float, default=0.5)
    args = ap.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                req = json.loads(self.rfile.read(n))
                if self.path != "/export" or not isinstance(req.get("callback"), str):
                    raise ValueError("expected POST /export with a callback URL")
            except ValueError as e:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(str(e).encode())
                return
            log(args, {"task": req.get("task"), "mode": req.get("mode"),
                       "callback_url": req["callback"],
                       "token": self.headers.get("X-Callback-Token")})
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"accepted": true}')
            threading.Thread(target=work, args=(args, req), daemon=True).start()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.port_file:
        with open(args.port_file + ".new", "w") as f:
            f.write(str(srv.server_address[1]))
        import os
        os.rename(args.port_file + ".new", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
