"""What a step function is given: one claimed step and its input."""

import re

_INSTANCE = re.compile(r"^(.*)\[(\d+)\]$")


def base_name(step):
    """A map instance's "NAME[i]" is run by NAME's function; others as named."""
    m = _INSTANCE.match(step)
    return m.group(1) if m else step


class Step:
    """One claimed step: `name` as the server names it ("resize", or
    "resize[3]" for a map's instance), `task_id`, `attempt` (1 on the first),
    `input` ({"context", "parents", and "item" for a map's instance}) and its
    parts `context`, `parents` (each parent's results by name), `item` and
    `item_index` (None but for a map's instance); `lease_expires_at` (ms since the
    epoch, as the server's API gives times) and `heartbeat_ms`. `lost` turns True when
    the worker learns the lease was lost (the step moved on): whatever the
    function returns then is dropped, so a long function may give up early."""

    __slots__ = ("name", "task_id", "attempt", "input", "lease_expires_at", "heartbeat_ms",
                 "worker", "lost", "_token", "_finishing", "_abandoned", "_next_heartbeat")

    def __init__(self, claim, worker):
        self.name = claim["step"]
        self.task_id = claim["task_id"]
        self.attempt = claim["attempt"]
        self.input = claim.get("input") or {}
        self.lease_expires_at = claim.get("lease_expires_at")
        self.heartbeat_ms = claim.get("heartbeat_ms") or 10000
        self.worker = worker
        self._token = claim["token"]
        self.lost = False  # a heartbeat or an outcome was answered 409
        self._finishing = False  # its outcome is being reported
        self._abandoned = False  # left behind by a stop past its grace
        self._next_heartbeat = 0.0

    @property
    def context(self):
        return self.input.get("context")

    @property
    def parents(self):
        return self.input.get("parents") or {}

    @property
    def item(self):
        return self.input.get("item")

    @property
    def item_index(self):
        return self.input.get("item_index")

    def __repr__(self):
        return f"<Step {self.name} of task {self.task_id}, attempt {self.attempt}>"
