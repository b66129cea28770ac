"""The example's worker in Python (images.toml says how to run it):
python3 worker.py [URL], URL tasker serve's (http://127.0.0.1:8080), the
workers' token (if the server has one) in TASKER_WORKER_TOKEN."""

import sys

from tasker_worker import Worker

worker = Worker(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080", None, "images")


@worker.step("fetch")
def fetch(step):
    return {"bytes": len(step.context["url"]) * 1000}


@worker.step("resize")
def resize(step):
    return {"width": step.context["width"], "bytes": step.parents["fetch"]["bytes"] // 4}


worker.run()
