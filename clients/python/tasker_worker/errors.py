"""The exceptions a step function raises to say how its attempt failed,
and the one the worker raises when it cannot go on."""

import math


class Retry(Exception):
    """Fail this attempt and ask for a retry after `after` seconds.

    `after` is a hint taken under the step's retry policy, exactly as an
    http step's Retry-After (capped by the policy's max_server_delay);
    None leaves the policy's delay. When the step has no attempts left it
    ends in error all the same."""

    def __init__(self, message="retry requested", after=None):
        if after is not None:
            if isinstance(after, bool) or not isinstance(after, (int, float)):
                raise TypeError(f"Retry(after=...) takes seconds as a number, not {after!r}")
            if not math.isfinite(after) or after < 0 or after > 31536000:
                raise ValueError(f"Retry(after={after!r}): expected 0 to 31536000 seconds")
        super().__init__(message)
        self.message = str(message)
        self.after = after


class Permanent(Exception):
    """Fail the step for good at this attempt, whatever attempts are left."""

    def __init__(self, message):
        super().__init__(message)
        self.message = str(message)


class WorkerError(Exception):
    """The worker stopped because the server refused it for good (a wrong
    token, an unknown queue): retrying would not help."""

    def __init__(self, message, status=None, code=None):
        super().__init__(message)
        self.status = status
        self.code = code
