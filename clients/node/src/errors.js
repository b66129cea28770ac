// The errors a step function throws to say how its attempt failed, and the
// one run() rejects with when the server refuses the worker for good.

/** Fail this attempt and ask for a retry after `after` seconds: a hint
 * under the step's retry policy, as an http step's Retry-After (capped by
 * the policy's max_server_delay); none leaves the policy's delay. With no
 * attempts left the step ends in error all the same. */
export class Retry extends Error {
  constructor(message = "retry requested", { after } = {}) {
    super(message);
    this.name = "Retry";
    if (after !== undefined && after !== null) {
      if (typeof after !== "number" || !Number.isFinite(after) || after < 0 || after > 31536000) {
        throw new RangeError(`Retry after ${after}: expected 0 to 31536000 seconds`);
      }
    }
    this.after = after ?? null;
  }
}

/** Fail the step for good at this attempt, whatever attempts are left. */
export class Permanent extends Error {
  constructor(message) {
    super(message);
    this.name = "Permanent";
  }
}

/** The server refused the worker's claims for good (a wrong token, an
 * unknown queue): retrying would not help. */
export class WorkerError extends Error {
  constructor(message, status, code) {
    super(message);
    this.name = "WorkerError";
    this.status = status;
    this.code = code;
  }
}
