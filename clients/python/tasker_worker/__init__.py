"""A worker for tasker's worker steps (handler = { kind = "worker", queue
= ... }): long-lived, standard library only. See README.md."""

from .errors import Permanent, Retry, WorkerError
from .step import Step
from .worker import Worker

__all__ = ["Worker", "Step", "Retry", "Permanent", "WorkerError"]
__version__ = "0.1.0"
