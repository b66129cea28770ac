"""The tests' Python worker (tests/clients/lib/clients.sh says what each
step does): python3 worker.py URL QUEUE NAME LOG [THREADS]. Each function
appends "start|done STEP TASK ATTEMPT WORKER" lines to LOG."""

import logging
import os
import sys
import time

from tasker_worker import Permanent, Retry, Worker

url, queue, name, log_path = sys.argv[1:5]
threads = int(sys.argv[5]) if len(sys.argv) > 5 else 4
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
w = Worker(url, os.environ.get("TK_WTOKEN"), queue, worker=name, threads=threads, grace=20)


def note(event, step):
    # One write of one line with O_APPEND: lines of several processes never mix.
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {step.name} {step.task_id} {step.attempt} {name}\n".encode())
    finally:
        os.close(fd)


def logged(fn):
    def run(step):
        note("start", step)
        results = fn(step)
        note("done", step)
        return results
    return run


@w.step("double")
@logged
def double(step):
    # lease_ms: the claim's lease expiry is integer ms since the epoch, ahead.
    lease = step.lease_expires_at
    return {"n": step.context["n"] * 2, "by": step.worker,
            "lease_ms": isinstance(lease, int) and lease > time.time() * 1000 - 60000}


@w.step("plus")
@logged
def plus(step):
    return {"sum": step.parents["double"]["n"] + 1}


@w.step("flaky")
@logged
def flaky(step):
    if step.attempt == 1:
        raise Retry("busy, come back later", after=1.5)
    return {"attempt": step.attempt}


@w.step("doom")
def doom(step):
    note("start", step)
    raise Permanent("bad input: no such image")


@w.step("boom")
def boom(step):
    note("start", step)
    raise ValueError("kaput")


@w.step("list")
@logged
def list_items(step):
    return {"items": step.context["items"]}


@w.step("each")
@logged
def each(step):
    return {"tenfold": step.item * 10, "index": step.item_index}


@w.step("total")
@logged
def total(step):
    return {"sum": sum(r["tenfold"] for r in step.parents["each"])}


@w.step("slow")
@logged
def slow(step):
    time.sleep(step.context["secs"])
    return {"slept": step.context["secs"], "by": step.worker}


w.run()
