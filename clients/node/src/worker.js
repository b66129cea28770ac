// A worker: claims steps of one queue from tasker serve (docs/api.md
// "Workers"), runs each with the async function registered for its name,
// at most `concurrency` at once, heartbeats while it runs, and reports its
// outcome.

import os from "node:os";

import { Permanent, Retry, WorkerError } from "./errors.js";
import { ANSWER_TIMEOUT_MS, Api, HttpError, TransportError } from "./http.js";
import { Step, baseName, claimToken } from "./step.js";

const QUEUE_NAME = /^[a-z0-9_.-]{1,64}$/;
const WORKER_NAME = /^[\x21-\x7e]{1,128}$/;
const CLAIM_MAX = 100; // the most one claim may ask for
const WAIT_MAX = 60; // the longest a claim may wait, in seconds
const ERROR_MAX = 4096; // characters of a failure's text sent, the rest cut

/** Delays between tries after connection errors: 100 ms doubling up to
 * 5 s, each drawn between half and all of that. */
class Backoff {
  #next = 100;
  next() {
    const d = this.#next;
    this.#next = Math.min(d * 2, 5000);
    return d / 2 + (Math.random() * d) / 2;
  }
  reset() {
    this.#next = 100;
  }
}

/** Resolves after ms, or as soon as signal aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A failure's text as the server takes it: not empty, not too long. */
function errorText(message, fallback) {
  const text = String(message ?? "").trim() || fallback;
  return text.length <= ERROR_MAX ? text : text.slice(0, ERROR_MAX - 1) + "\u2026";
}

function describe(e) {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

function isNumber(v, lo, hi) {
  return typeof v === "number" && Number.isFinite(v) && v >= lo && v <= hi;
}

const stamp = (level, m) => `${new Date().toISOString()} ${level} ${m}`;
const defaultLogger = {
  debug() {},
  info: (m) => console.error(stamp("INFO", m)),
  warn: (m) => console.error(stamp("WARNING", m)),
  error: (m) => console.error(stamp("ERROR", m)),
};

export class Worker {
  #api;
  #functions = new Map();
  #held = new Map(); // claim token -> {step, timer, finishing, abandoned, done}
  #slotWaiters = []; // the claim loop, waiting for a step to end
  #idleWaiters = []; // run(), waiting for the last held step to end
  #stopping = new AbortController(); // no more claims
  #hurry = new AbortController(); // a second stop: no grace
  #abandon = new AbortController(); // the grace ran out: report nothing more
  #stops = 0;
  #fatal = null;
  #started = false;

  /** Runs the steps of worker queue `queue` of the server at `url` (its
   * base, e.g. http://127.0.0.1:8080) with the workers' token `token`
   * (undefined: the environment's TASKER_WORKER_TOKEN; none at all for a
   * loopback server with no tokens), `concurrency` at a time. `worker`
   * names this worker to the server (default HOST.PID); `wait` is how long
   * each claim waits for work (seconds, up to 60); `grace` how long a stop
   * lets running functions finish before their leases are left to expire;
   * `logger` has debug, info, warn and error (default: stderr). */
  constructor({ url, token, queue, worker, concurrency = 8, wait = 30, grace = 30, logger } = {}) {
    if (typeof queue !== "string" || !QUEUE_NAME.test(queue)) {
      throw new TypeError(`queue ${JSON.stringify(queue)}: expected 1 to 64 of a-z 0-9 _ . -`);
    }
    worker ??= `${os.hostname().slice(0, 100)}.${process.pid}`;
    if (typeof worker !== "string" || !WORKER_NAME.test(worker)) {
      throw new TypeError(`worker ${JSON.stringify(worker)}: expected 1 to 128 printable ASCII characters`);
    }
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new TypeError(`concurrency ${concurrency}: expected a whole number, at least 1`);
    }
    if (!isNumber(wait, 0, WAIT_MAX)) throw new TypeError(`wait ${wait}: expected 0 to ${WAIT_MAX} seconds`);
    if (!isNumber(grace, 0, Infinity)) throw new TypeError(`grace ${grace}: expected seconds, at least 0`);
    this.#api = new Api(url, token === undefined ? process.env.TASKER_WORKER_TOKEN : token);
    this.url = url;
    this.queue = queue;
    this.worker = worker;
    this.concurrency = concurrency;
    this.wait = wait;
    this.grace = grace;
    this.log = logger ?? defaultLogger;
  }

  /** `fn` (async or not) runs every step named `name` (and each instance
   * "name[i]" of a map step so named). It gets a Step and returns the
   * step's results (any JSON value); throwing Retry or Permanent fails the
   * attempt so, anything else thrown fails it retryably with its text. */
  step(name, fn) {
    if (typeof name !== "string" || !name || name.includes("[")) {
      throw new TypeError(`step name ${JSON.stringify(name)}: expected a template's step name`);
    }
    if (typeof fn !== "function") throw new TypeError(`step ${name}: expected a function`);
    if (this.#functions.has(name)) throw new Error(`step ${JSON.stringify(name)} already has a function`);
    this.#functions.set(name, fn);
    return this;
  }

  /** Ask run() to stop, as SIGTERM does; a second call stops at once,
   * without waiting out the grace. */
  stop() {
    this.#stops += 1;
    if (this.#stops > 1) this.#hurry.abort();
    this.#stopping.abort(); // a claim waiting is hung up on: nothing is claimed for it
    this.#wake(this.#slotWaiters);
  }

  #wake(waiters) {
    for (const resolve of waiters.splice(0)) resolve();
  }

  /** Claim and run steps until stopped: by SIGTERM or SIGINT (when
   * `handleSignals`) or stop(). A stop claims nothing more, lets running
   * functions finish and report for up to `grace` seconds (a second
   * signal: none), then resolves, leaving the leases of any still running
   * to expire (their outcomes are never reported). Rejects with
   * WorkerError when the server refuses the worker for good. */
  async run({ handleSignals = true } = {}) {
    if (this.#started) throw new Error("a Worker runs once");
    this.#started = true;
    const onSignal = () => this.stop();
    if (handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    try {
      this.log.info(`worker ${this.worker}: running steps of queue ${this.queue} from ${this.url}, ` +
        `${this.concurrency} at a time`);
      await this.#claimLoop();
      if (this.#held.size && !this.#fatal) {
        this.log.info(`worker ${this.worker}: stopping; ${this.#held.size} step(s) running, waiting ` +
          `up to ${this.grace}s for them`);
      }
      if (this.#held.size) {
        const idle = new Promise((resolve) => this.#idleWaiters.push(resolve));
        // The grace's timer ends with the race: left running, it would keep
        // the process alive for the whole grace after the last step.
        const graceOver = new AbortController();
        const onHurry = () => graceOver.abort();
        this.#hurry.signal.addEventListener("abort", onHurry, { once: true });
        if (this.#hurry.signal.aborted) graceOver.abort();
        await Promise.race([idle, sleep(this.grace * 1000, graceOver.signal)]);
        graceOver.abort();
        this.#hurry.signal.removeEventListener("abort", onHurry);
      }
      for (const rec of this.#held.values()) {
        rec.abandoned = true;
        clearTimeout(rec.timer);
        this.log.warn(`worker ${this.worker}: ${rec.step} left running; its lease will expire and ` +
          `the step be retried`);
      }
      this.#abandon.abort();
      this.#api.close();
      this.log.info(`worker ${this.worker}: stopped`);
    } finally {
      if (handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    if (this.#fatal) throw this.#fatal;
  }

  /** Claims as many steps as are free, waiting for work, until stopped. */
  async #claimLoop() {
    const backoff = new Backoff();
    const path = `/api/v1/queues/${this.queue}/claim`;
    const stopping = this.#stopping.signal;
    while (!stopping.aborted) {
      while (this.#held.size >= this.concurrency && !stopping.aborted) {
        await new Promise((resolve) => this.#slotWaiters.push(resolve));
      }
      if (stopping.aborted) return;
      const body = { worker: this.worker, max: Math.min(this.concurrency - this.#held.size, CLAIM_MAX), wait: this.wait };
      let answer;
      try {
        answer = await this.#api.post(path, body, { timeoutMs: this.wait * 1000 + ANSWER_TIMEOUT_MS, signal: stopping });
      } catch (e) {
        if (stopping.aborted) return;
        if (e instanceof HttpError && [400, 401, 403, 404].includes(e.status)) {
          this.#refused(e);
          return;
        }
        if (!(e instanceof HttpError || e instanceof TransportError)) throw e;
        this.log.warn(`worker ${this.worker}: claim: ${e.message}; trying again`);
        await sleep(backoff.next(), stopping);
        continue;
      }
      backoff.reset();
      const claims = answer?.claims;
      if (!Array.isArray(claims)) {
        this.log.error(`worker ${this.worker}: claim: an answer without claims: ${JSON.stringify(answer).slice(0, 160)}`);
        await sleep(backoff.next(), stopping);
        continue;
      }
      for (const claim of claims) this.#hold(claim);
    }
  }

  /** The server refused a claim for good: run() rejects with WorkerError. */
  #refused(e) {
    const hint = e.status === 401
      ? "; the worker's token must be the server's workers' token (tasker serve --worker-token-file, TASKER_WORKER_TOKEN)"
      : "";
    this.#fatal = new WorkerError(`worker ${this.worker}: the server refused its claims on queue ${this.queue}: ` +
      `${e.message}${hint}`, e.status, e.code);
    this.log.error(this.#fatal.message);
    this.#stopping.abort();
  }

  #hold(claim) {
    let step;
    try {
      step = new Step(claim, this.worker);
    } catch (e) {
      this.log.error(`worker ${this.worker}: ${e.message}: dropped`);
      return;
    }
    const rec = { step, timer: null, finishing: false, abandoned: false, done: false };
    this.#held.set(claimToken(step), rec);
    this.#execute(rec);
  }

  async #execute(rec) {
    this.#scheduleHeartbeat(rec, rec.step.heartbeatMs);
    try {
      const [kind, body] = await this.#call(rec.step);
      await this.#report(rec, kind, body);
    } catch (e) {
      this.log.error(`worker ${this.worker}: ${rec.step}: ${e.stack ?? e}`);
    } finally {
      rec.done = true;
      clearTimeout(rec.timer);
      this.#held.delete(claimToken(rec.step));
      this.#wake(this.#slotWaiters);
      if (this.#held.size === 0) this.#wake(this.#idleWaiters);
    }
  }

  /** The outcome of running the step's function: ["complete", body] or
   * ["fail", body], each as its endpoint takes it. */
  async #call(step) {
    const name = baseName(step.name);
    const fn = this.#functions.get(name);
    if (!fn) {
      const known = [...this.#functions.keys()].sort().join(", ") || "none";
      return ["fail", { error: errorText(`worker ${this.worker} has no function for step ` +
        `${JSON.stringify(name)} (it runs: ${known})`, ""), retryable: false }];
    }
    let results;
    try {
      results = await fn(step);
    } catch (e) {
      if (e instanceof Retry) {
        const body = { error: errorText(e.message, "retry requested"), retryable: true };
        if (e.after !== null) body.retry_after = e.after;
        return ["fail", body];
      }
      if (e instanceof Permanent) {
        return ["fail", { error: errorText(e.message, "permanent failure"), retryable: false }];
      }
      this.log.info(`worker ${this.worker}: ${step} failed: ${describe(e)}`);
      return ["fail", { error: errorText(describe(e), "Error"), retryable: true }];
    }
    try {
      JSON.stringify(results);
    } catch (e) {
      return ["fail", { error: errorText(`the results are not JSON: ${e.message}`, ""), retryable: false }];
    }
    return ["complete", { results: results === undefined ? null : results }];
  }

  /** Sends the step's outcome until the server takes or refuses it: a
   * connection error or 5xx is tried again (a second try of one that did
   * arrive is answered 409, which drops it: never recorded twice). */
  async #report(rec, kind, body) {
    const backoff = new Backoff();
    const step = rec.step;
    rec.finishing = true;
    for (;;) {
      if (rec.abandoned) {
        this.log.warn(`worker ${this.worker}: ${step} not reported: stopped past its grace`);
        return;
      }
      if (step.lost) {
        this.log.warn(`worker ${this.worker}: ${step} dropped: its lease was lost`);
        return;
      }
      try {
        await this.#api.post(`/api/v1/claims/${encodeURIComponent(claimToken(step))}/${kind}`, body);
        this.log.debug(`worker ${this.worker}: ${step}: ${kind}`);
        return;
      } catch (e) {
        if (e instanceof HttpError && e.status === 409) {
          step.lost = true;
          this.log.warn(`worker ${this.worker}: ${kind} of ${step} refused, dropped: ${e.detail}`);
          return;
        }
        if (e instanceof HttpError && e.status === 413 && kind === "complete") {
          kind = "fail";
          body = { error: errorText(`the results are over the server's body limit: ${e.detail}`, ""), retryable: false };
          continue;
        }
        if (e instanceof HttpError && e.status < 500) {
          this.log.error(`worker ${this.worker}: ${kind} of ${step} refused: ${e.message}`);
          return;
        }
        if (!(e instanceof HttpError || e instanceof TransportError)) throw e;
        this.log.warn(`worker ${this.worker}: ${kind} of ${step}: ${e.message}; trying again`);
      }
      await sleep(backoff.next(), this.#abandon.signal);
    }
  }

  /** Heartbeats the step every heartbeatMs until it ends or is lost. */
  #scheduleHeartbeat(rec, ms) {
    rec.timer = setTimeout(async () => {
      const step = rec.step;
      let next = step.heartbeatMs;
      try {
        await this.#api.post(`/api/v1/claims/${encodeURIComponent(claimToken(step))}/heartbeat`, {});
      } catch (e) {
        if (e instanceof HttpError && e.status === 409) {
          step.lost = true;
          if (!rec.finishing) {
            this.log.warn(`worker ${this.worker}: ${step} lost its lease (${e.detail}): its outcome will be dropped`);
          }
          return;
        }
        this.log.warn(`worker ${this.worker}: heartbeat of ${step}: ${e.message}`);
        // Sooner than the next one due: the lease may be short of it.
        if (e instanceof TransportError) next = Math.min(1000, step.heartbeatMs / 4);
      }
      if (!rec.done && !rec.abandoned) this.#scheduleHeartbeat(rec, next);
    }, ms);
  }
}
