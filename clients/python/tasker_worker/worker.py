"""A worker: claims steps of one queue from tasker serve (docs/api.md
"Workers"), runs each by the function registered for its name on a pool of
threads, heartbeats while it runs, and reports its outcome: outcomes are
sent in batches, with the next claim when a thread is free for it (one
round trip, one store transaction), else after FLUSH_S on their own
(POST /api/v1/claims/outcomes)."""

import json
import logging
import os
import random
import re
import select
import signal
import socket
import threading
import time
import urllib.parse
import queue as queue_module

from .errors import Permanent, Retry, WorkerError
from .api import ANSWER_TIMEOUT_S, Api, Connection, HttpError, TransportError
from .step import Step, base_name

QUEUE_NAME = re.compile(r"^[a-z0-9_.-]{1,64}$")
WORKER_NAME = re.compile(r"^[\x21-\x7e]{1,128}$")
CLAIM_MAX = 100  # the most one claim may ask for
WAIT_MAX = 60  # the longest a claim may wait, in seconds
ERROR_MAX = 4096  # characters of a failure's text sent, the rest cut
OUTCOMES_MAX = 100  # the most outcomes one request may carry
# How long a finished step's outcome may wait for the next claim to carry
# it before it is sent on its own (a claim waiting for work carries none).
FLUSH_S = 0.005
# How long a claim waits for more busy threads to come free once one is,
# so that one claim takes (and reports) several steps.
GATHER_S = 0.002


class _Backoff:
    """Delays between tries after connection errors: 0.1 s doubling up to
    5 s, each drawn between half and all of that."""

    def __init__(self, first=0.1, most=5.0):
        self._first = first
        self._most = most
        self._next = first

    def next(self):
        d = self._next
        self._next = min(d * 2, self._most)
        return random.uniform(d / 2, d)

    def reset(self):
        self._next = self._first


def _error_text(message, fallback):
    """A failure's text as the server takes it: not empty, not too long."""
    text = str(message).strip() or fallback
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 1] + "\u2026"


def _outcome_item(st, kind, body):
    """An outcome as a batch carries it: its endpoint's body and the token."""
    return {"token": st._token, **body}


def _default_worker_name():
    return f"{socket.gethostname()[:100]}.{os.getpid()}"


class Worker:
    """Runs the steps of worker queue `queue` of the server at `url` (its
    base, e.g. http://127.0.0.1:8080) with the workers' token `token`
    (None: the environment's TASKER_WORKER_TOKEN; none at all for a
    loopback server with no tokens), `threads` at a time. `worker` names
    this worker to the server (default HOST.PID); `wait` is how long each
    claim waits for work (seconds, up to 60); `grace` how long a stop lets
    running functions finish before their leases are left to expire;
    `prefetch` how many steps more than `threads` it may hold claimed,
    waiting for a thread (their leases run and are heartbeaten meanwhile):
    0 claims only for free threads; more keeps the threads busy while the
    next claim is on its way (short steps), at the cost of steps another
    worker could have started."""

    def __init__(self, url, token=None, queue=None, worker=None, threads=8, *, wait=30,
                 grace=30.0, prefetch=0, logger=None):
        if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
            raise ValueError(f"queue {queue!r}: expected 1 to 64 of a-z 0-9 _ . -")
        worker = _default_worker_name() if worker is None else worker
        if not isinstance(worker, str) or not WORKER_NAME.match(worker):
            raise ValueError(f"worker {worker!r}: expected 1 to 128 printable ASCII characters")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads {threads!r}: expected a whole number, at least 1")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= WAIT_MAX:
            raise ValueError(f"wait {wait!r}: expected 0 to {WAIT_MAX} seconds")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"prefetch {prefetch!r}: expected a whole number, at least 0")
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
            raise ValueError(f"grace {grace!r}: expected seconds, at least 0")
        if token is None:
            token = os.environ.get("TASKER_WORKER_TOKEN")
        self.url = url
        self.queue = queue
        self.worker = worker
        self.threads = threads
        self.wait = wait
        self.grace = grace
        self.prefetch = prefetch
        self.log = logger or logging.getLogger("tasker_worker")
        self._api = Api(url, token)
        self._functions = {}
        # One lock, a condition per waiter, so that each is woken only for
        # what it waits for: the claim loop (a thread coming free), the
        # reporter (outcomes to send) and the heartbeats (a first step).
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._report_cond = threading.Condition(lock)
        self._beat_cond = threading.Condition(lock)
        self._beat_idle = False  # the heartbeats wait with no step to heartbeat
        self._carrying = False  # the claim under way carries outcomes
        self._held = {}  # claim token -> Step: claimed, outcome not yet reported
        self._running = 0  # steps held whose functions have not returned yet
        self._outcomes = []  # [(Step, kind, body, when ready)]: to report, oldest first
        self._stopping = threading.Event()  # no more claims
        self._abandon = threading.Event()  # the grace ran out: report nothing more
        self._done = False  # run() is over: the heartbeats end
        self._fatal = None
        self._started = False
        self._claim_conn = Connection(self._api)
        self._jobs = queue_module.SimpleQueue()
        # Stop requests (a signal, stop(), a refusal) and the last held step
        # going, as bytes on a pipe: all a signal handler may safely do.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def __del__(self):
        # Not in run(): a step left running past the grace may still wake.
        for fd in (getattr(self, "_wake_r", None), getattr(self, "_wake_w", None)):
            if fd is not None:
                os.close(fd)

    def step(self, name):
        """Decorator: the function runs every step named `name` (and each
        instance "name[i]" of a map step so named). It gets a Step and
        returns the step's results (any JSON value); raising Retry or
        Permanent fails the attempt so, any other exception fails it
        retryably with the exception's text."""
        if not isinstance(name, str) or not name or "[" in name:
            raise ValueError(f"step name {name!r}: expected a template's step name")

        def register(fn):
            if name in self._functions:
                raise ValueError(f"step {name!r} already has a function")
            self._functions[name] = fn
            return fn

        return register

    def stop(self):
        """Ask run() to stop, as SIGTERM does (from any thread); a second
        call stops at once, without waiting out the grace."""
        self._wake(b"x")

    def _wake(self, why):
        try:
            os.write(self._wake_w, why)
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already

    def _on_signal(self, signum, frame):
        self._wake(b"s")

    def run(self, handle_signals=True):
        """Claim and run steps until stopped: by SIGTERM or SIGINT (when
        `handle_signals` and called from the main thread) or stop(). A stop
        claims nothing more, lets running functions finish and report for up
        to `grace` seconds (a second signal: none), then returns, leaving the
        leases of any still running to expire (their outcomes are never
        reported). Raises WorkerError when the server refuses the worker for
        good (its token, its queue)."""
        if self._started:
            raise RuntimeError("a Worker runs once")
        self._started = True
        previous = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._api.close()
        if self._fatal is not None:
            raise self._fatal

    def _run(self):
        executors = [threading.Thread(target=self._execute, name=f"tasker-worker-{i}", daemon=True)
                     for i in range(self.threads)]
        heartbeats = threading.Thread(target=self._heartbeat_loop, name="tasker-heartbeats",
                                      daemon=True)
        claims = threading.Thread(target=self._claim_loop, name="tasker-claims", daemon=True)
        reporter = threading.Thread(target=self._report_loop, name="tasker-outcomes", daemon=True)
        for t in executors + [heartbeats, claims, reporter]:
            t.start()
        self.log.info("worker %s: running steps of queue %s from %s, %d at a time", self.worker,
                      self.queue, self.url, self.threads)
        while not any(c in b"sxf" for c in os.read(self._wake_r, 256)):
            pass
        self._stopping.set()
        with self._cond:
            # A claim waiting is abandoned (nothing is claimed for it); one
            # that carries outcomes is answered at once: it is let finish,
            # so they are not sent twice.
            if not self._carrying:
                self._claim_conn.abort()
            self._notify_all()
        claims.join()
        deadline = time.monotonic() + self.grace
        with self._cond:
            running = len(self._held)
        if running and self._fatal is None:
            self.log.info("worker %s: stopping; %d step(s) running, waiting up to %gs for them",
                          self.worker, running, self.grace)
        while running:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self._wake_r], [], [], left)
            if ready and any(c in b"sx" for c in os.read(self._wake_r, 256)):
                break  # asked again: stop now
            with self._cond:
                running = len(self._held)
        with self._cond:
            for st in self._held.values():
                st._abandoned = True
                self.log.warning("worker %s: %r left running; its lease will expire and the "
                                 "step be retried", self.worker, st)
            self._done = True
            self._notify_all()
        self._abandon.set()
        for _ in executors:
            self._jobs.put(None)
        self.log.info("worker %s: stopped", self.worker)

    def _notify_all(self):
        """Wake every waiter (the lock held): a stop, the end."""
        for cond in (self._cond, self._report_cond, self._beat_cond):
            cond.notify_all()

    def _claim_loop(self):
        """Claims as many steps as threads are free, waiting for work, and
        carries the outcomes ready by then."""
        backoff = _Backoff()
        path = f"/api/v1/queues/{self.queue}/claim"
        while not self._stopping.is_set():
            with self._cond:
                capacity = self.threads + self.prefetch
                while self._running >= capacity and not self._stopping.is_set():
                    self._cond.wait()
                # A moment for more places to come free, up to a thread's
                # worth each: one claim for them all.
                gather = time.monotonic() + GATHER_S
                while self._running > self.prefetch and not self._stopping.is_set():
                    left = gather - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self._stopping.is_set():
                    return
                free = capacity - self._running
                carried = self._outcomes[:OUTCOMES_MAX]
                del self._outcomes[:OUTCOMES_MAX]
                self._carrying = bool(carried)
            body = {"worker": self.worker, "max": min(free, CLAIM_MAX), "wait": self.wait}
            if carried:
                body["outcomes"] = [_outcome_item(st, kind, b) for st, kind, b, _ in carried]
            try:
                answer = self._claim_conn.post(
                    path, body, timeout=ANSWER_TIMEOUT_S + (0 if carried else self.wait))
            except TransportError as e:
                self._put_back(carried, e)
                if self._stopping.is_set():
                    return
                self.log.warning("worker %s: claim: %s; trying again", self.worker, e)
                self._stopping.wait(backoff.next())
                continue
            except HttpError as e:
                if carried and (e.status == 413 or (e.param or "").startswith("outcomes")):
                    # One of them the server would not take in a batch: each
                    # on its own (a complete over the limit becomes a fail).
                    for st, kind, b, _ in carried:
                        self._report(st, kind, b)
                    continue
                self._put_back(carried, e)
                if e.status in (400, 401, 403, 404):
                    self._refused(e)
                    return
                self.log.warning("worker %s: claim: %s; trying again", self.worker, e)
                self._stopping.wait(backoff.next())
                continue
            backoff.reset()
            if carried:
                self._answered(carried, answer.get("outcomes") if isinstance(answer, dict) else None)
            claimed = answer.get("claims") if isinstance(answer, dict) else None
            if not isinstance(claimed, list):
                self.log.error("worker %s: claim: an answer without claims: %.160r", self.worker,
                               answer)
                self._stopping.wait(backoff.next())
                continue
            for claim in claimed:
                self._hold(claim)

    def _put_back(self, carried, why=None):
        """Outcomes a request did not deliver (`why`: its error, logged for
        each), to be sent again (a second try of one that did arrive is
        answered 409: never recorded twice)."""
        for st, kind, _, _ in carried if why is not None else ():
            self.log.warning("worker %s: %s of %r: %s; trying again", self.worker, kind, st, why)
        if carried:
            with self._cond:
                self._outcomes[:0] = carried
                self._report_cond.notify()

    def _report_loop(self):
        """Sends the outcomes no claim carried within FLUSH_S, in batches
        (at once when stopping), until run() is over."""
        backoff = _Backoff()
        while True:
            with self._cond:
                while True:
                    if self._done:
                        return
                    if self._outcomes:
                        due = self._outcomes[0][3] + FLUSH_S
                        if self._stopping.is_set() or time.monotonic() >= due:
                            break
                        self._report_cond.wait(due - time.monotonic())
                    else:
                        self._report_cond.wait()
                batch = self._outcomes[:OUTCOMES_MAX]
                del self._outcomes[:OUTCOMES_MAX]
            if self._send(batch):
                backoff.reset()
            else:
                self._abandon.wait(backoff.next())

    def _send(self, batch):
        """POST the batch to /api/v1/claims/outcomes: True when the server
        answered it (each outcome done with), False when it is to be sent
        again (no answer, or the server's own error)."""
        live = [o for o in batch if not self._dropped(o[0])]
        if not live:
            return True
        try:
            answer = self._api.post("/api/v1/claims/outcomes",
                                    {"outcomes": [_outcome_item(st, k, b) for st, k, b, _ in live]})
        except TransportError as e:
            self._put_back(live, e)
            return False
        except HttpError as e:
            if e.status == 413 or e.status == 400:
                for st, kind, b, _ in live:  # each on its own, as its endpoint takes it
                    self._report(st, kind, b)
                return True
            self._put_back(live, e)
            return e.status < 500
        self._answered(live, answer.get("outcomes") if isinstance(answer, dict) else None)
        return True

    def _dropped(self, st):
        """Whether st's outcome is no longer to be sent (then it is let go)."""
        if st._abandoned:
            self.log.warning("worker %s: %r not reported: stopped past its grace", self.worker, st)
        elif st.lost:
            self.log.warning("worker %s: %r dropped: its lease was lost", self.worker, st)
        else:
            return False
        self._let_go(st)
        return True

    def _answered(self, sent, answers):
        """The server's answers to the outcomes `sent`, one each, in order."""
        if not isinstance(answers, list) or len(answers) != len(sent):
            self.log.error("worker %s: outcomes answered without one answer each: %.160r",
                           self.worker, answers)
            answers = [None] * len(sent)
        retry = []
        for (st, kind, body, when), ans in zip(sent, answers):
            err = ans.get("error") if isinstance(ans, dict) else None
            if isinstance(ans, dict) and err is None:
                self.log.debug("worker %s: %r: %s", self.worker, st, kind)
            elif not isinstance(err, dict):
                self.log.error("worker %s: %s of %r: an answer without its state: %.160r",
                               self.worker, kind, st, ans)
            elif err.get("status") == 409:
                st.lost = True
                self.log.warning("worker %s: %s of %r refused, dropped: %s", self.worker, kind, st,
                                 err.get("message"))
            elif isinstance(err.get("status"), int) and err["status"] >= 500:
                self.log.warning("worker %s: %s of %r: %s; trying again", self.worker, kind, st,
                                 err.get("message"))
                retry.append((st, kind, body, when))
                continue
            else:
                self.log.error("worker %s: %s of %r refused: HTTP %s %s: %s", self.worker, kind,
                               st, err.get("status"), err.get("code"), err.get("message"))
            self._let_go(st)
        self._put_back(retry)

    def _let_go(self, st):
        """st is done with: no more heartbeats, its place free."""
        with self._cond:
            self._held.pop(st._token, None)
            last = not self._held
        if last and self._stopping.is_set():
            self._wake(b"e")

    def _refused(self, e):
        """The server refused a claim for good: run() raises WorkerError."""
        hint = ""
        if e.status == 401:
            hint = ("; the worker's token must be the server's workers' token "
                    "(tasker serve --worker-token-file, TASKER_WORKER_TOKEN)")
        self._fatal = WorkerError(f"worker {self.worker}: the server refused its claims on queue "
                                  f"{self.queue}: {e}{hint}", e.status, e.code)
        self.log.error("%s", self._fatal)
        self._wake(b"f")

    def _hold(self, claim):
        try:
            st = Step(claim, self.worker)
        except (KeyError, TypeError) as e:
            self.log.error("worker %s: a claim without %s: dropped", self.worker, e)
            return
        st._next_heartbeat = time.monotonic() + st.heartbeat_ms / 1000
        with self._cond:
            self._held[st._token] = st
            self._running += 1
            if self._beat_idle:
                self._beat_cond.notify()
        self._jobs.put(st)

    def _execute(self):
        """One thread of the pool: runs held steps one at a time."""
        while True:
            st = self._jobs.get()
            if st is None:
                return
            outcome = None
            try:
                kind, body = self._call(st)
                st._finishing = True
                outcome = (st, kind, body, time.monotonic())
            except Exception:  # a bug here must not lose the thread
                self.log.exception("worker %s: %r", self.worker, st)
            with self._cond:
                self._running -= 1
                if outcome is not None:
                    self._outcomes.append(outcome)
                    if len(self._outcomes) == 1:
                        self._report_cond.notify()  # else it waits for the oldest's time
                self._cond.notify()
            if outcome is None:
                self._let_go(st)

    def _call(self, st):
        """The outcome of running st's function: ("complete", body) or
        ("fail", body), each as its endpoint takes it."""
        name = base_name(st.name)
        fn = self._functions.get(name)
        if fn is None:
            known = ", ".join(sorted(self._functions)) or "none"
            return "fail", {"error": _error_text(
                f"worker {self.worker} has no function for step {name!r} (it runs: {known})", ""),
                "retryable": False}
        try:
            results = fn(st)
        except Retry as e:
            body = {"error": _error_text(e.message, "retry requested"), "retryable": True}
            if e.after is not None:
                body["retry_after"] = e.after
            return "fail", body
        except Permanent as e:
            return "fail", {"error": _error_text(e.message, "permanent failure"),
                            "retryable": False}
        except BaseException as e:  # SystemExit too: it must not end a pool thread
            self.log.info("worker %s: %r failed: %s: %s", self.worker, st, type(e).__name__, e)
            return "fail", {"error": _error_text(f"{type(e).__name__}: {e}", type(e).__name__),
                            "retryable": True}
        try:
            json.dumps(results, allow_nan=False)
        except (TypeError, ValueError) as e:
            return "fail", {"error": _error_text(f"the results are not JSON: {e}", ""),
                            "retryable": False}
        return "complete", {"results": results}

    def _report(self, st, kind, body):
        """Sends st's outcome on its own (its endpoint) until the server
        takes or refuses it, then lets st go."""
        try:
            self._report_one(st, kind, body)
        finally:
            self._let_go(st)

    def _report_one(self, st, kind, body):
        """_report's: a connection error or 5xx is tried again (a second
        try of one that did arrive is answered 409, which drops it: never
        recorded twice)."""
        backoff = _Backoff()
        token = urllib.parse.quote(st._token, safe="")
        while True:
            if st._abandoned:
                self.log.warning("worker %s: %r not reported: stopped past its grace",
                                 self.worker, st)
                return
            if st.lost:
                self.log.warning("worker %s: %r dropped: its lease was lost", self.worker, st)
                return
            try:
                self._api.post(f"/api/v1/claims/{token}/{kind}", body)
                self.log.debug("worker %s: %r: %s", self.worker, st, kind)
                return
            except TransportError as e:
                self.log.warning("worker %s: %s of %r: %s; trying again", self.worker, kind, st, e)
            except HttpError as e:
                if e.status == 409:
                    st.lost = True
                    self.log.warning("worker %s: %s of %r refused, dropped: %s", self.worker, kind,
                                     st, e.message)
                    return
                if e.status == 413 and kind == "complete":
                    kind, body = "fail", {"error": _error_text(
                        f"the results are over the server's body limit: {e.message}", ""),
                        "retryable": False}
                    continue
                if e.status < 500:
                    self.log.error("worker %s: %s of %r refused: %s", self.worker, kind, st, e)
                    return
                self.log.warning("worker %s: %s of %r: %s; trying again", self.worker, kind, st, e)
            self._abandon.wait(backoff.next())

    def _heartbeat_loop(self):
        """Heartbeats each held step every heartbeat_ms its claim said."""
        while True:
            with self._cond:
                while True:
                    if self._done:
                        return
                    now = time.monotonic()
                    live = [st for st in self._held.values() if not st.lost and not st._abandoned]
                    due = [st for st in live if st._next_heartbeat <= now]
                    if due:
                        break
                    # A step claimed later is heartbeated no sooner than
                    # those held now: only with none is the wait woken.
                    nearest = min((st._next_heartbeat for st in live), default=None)
                    self._beat_idle = nearest is None
                    self._beat_cond.wait(None if nearest is None else nearest - now)
                    self._beat_idle = False
                for st in due:
                    st._next_heartbeat = now + st.heartbeat_ms / 1000
            for st in due:
                self._heartbeat(st)

    def _heartbeat(self, st):
        token = urllib.parse.quote(st._token, safe="")
        try:
            self._api.post(f"/api/v1/claims/{token}/heartbeat", {})
        except TransportError as e:
            self.log.warning("worker %s: heartbeat of %r: %s", self.worker, st, e)
            # Sooner than the next one due: the lease may be short of it.
            with self._cond:
                st._next_heartbeat = time.monotonic() + min(1.0, st.heartbeat_ms / 4000)
        except HttpError as e:
            if e.status != 409:
                self.log.warning("worker %s: heartbeat of %r: %s", self.worker, st, e)
                return
            st.lost = True
            if not st._finishing:
                self.log.warning("worker %s: %r lost its lease (%s): its outcome will be "
                                 "dropped", self.worker, st, e.message)
