// What a step function is given: one claimed step and its input.

const INSTANCE = /^(.*)\[(\d+)\]$/;

/** A map instance's "NAME[i]" is run by NAME's function; others as named. */
export function baseName(step) {
  const m = INSTANCE.exec(step);
  return m ? m[1] : step;
}

const TOKEN = Symbol("token");

/** The claim token of a Step (kept off its enumerable properties: a secret). */
export function claimToken(step) {
  return step[TOKEN];
}

/** One claimed step: `name` as the server names it ("resize", or
 * "resize[3]" for a map's instance), `taskId`, `attempt` (1 on the first),
 * `input` ({context, parents, and item for a map's instance}) and its parts
 * `context`, `parents` (each parent's results by name), `item` and
 * `itemIndex` (null but for a map's instance); `leaseExpiresAt` (ms since the
 * epoch, as the server's API gives times) and `heartbeatMs`. `lost` turns true when the
 * worker learns the lease was lost (the step moved on): what the function
 * returns then is dropped, so a long function may give up early. */
export class Step {
  constructor(claim, worker) {
    if (typeof claim?.token !== "string" || typeof claim.step !== "string") {
      throw new TypeError("a claim without its token or step");
    }
    this.name = claim.step;
    this.taskId = claim.task_id;
    this.attempt = claim.attempt;
    this.input = claim.input ?? {};
    this.leaseExpiresAt = claim.lease_expires_at;
    this.heartbeatMs = claim.heartbeat_ms > 0 ? claim.heartbeat_ms : 10000;
    this.worker = worker;
    this.lost = false;
    Object.defineProperty(this, TOKEN, { value: claim.token });
  }

  get context() {
    return this.input.context;
  }

  get parents() {
    return this.input.parents ?? {};
  }

  get item() {
    return this.input.item ?? null;
  }

  get itemIndex() {
    return this.input.item_index ?? null;
  }

  toString() {
    return `step ${this.name} of task ${this.taskId}, attempt ${this.attempt}`;
  }
}
