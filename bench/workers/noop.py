"""A bench worker (bench/bench_workers.sh, bench_workers.c): the Python
client (clients/python) with a noop function for step "s" of queue
"bench". Usage: noop.py URL MODE N THREADS
- MODE count: run until N steps have run, then stop (finishing and
  reporting them) and print the seconds from the first step's start to the
  stop's end;
- MODE starts: print time.monotonic_ns() (the system's CLOCK_MONOTONIC, as
  the bench's own clock) when each step's function starts, until N."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from tasker_worker import Worker  # noqa: E402

url, mode, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
worker = Worker(url, token=os.environ.get("TASKER_WORKER_TOKEN"), queue="bench",
                worker="bench-py", threads=threads, wait=30,
                prefetch=int(os.environ.get("BENCH_PREFETCH", "0")))
lock = threading.Lock()
seen = [0, None]


@worker.step("s")
def s(step):
    started = time.monotonic_ns()
    with lock:
        seen[0] += 1
        if seen[1] is None:
            seen[1] = time.monotonic()
        count = seen[0]
    if mode == "starts":
        sys.stdout.write(f"{started}\n")
        sys.stdout.flush()
    if count >= n:
        worker.stop()
    return None


worker.run(handle_signals=True)
if mode == "count":
    print(f"{time.monotonic() - seen[1]:.3f}")
