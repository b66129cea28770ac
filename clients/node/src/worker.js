// A worker: claims steps of one queue from tasker serve (docs/api.md
// "Workers"), runs each with the async function registered for its name,
// at most `concurrency` at once, heartbeats while it runs, and reports its
// outcome: outcomes are sent in batches, with the next claim when there is
// room for it (one round trip, one store transaction), else after FLUSH_MS
// on their own (POST /api/v1/claims/outcomes).

import os from "node:os";

import { Permanent, Retry, WorkerError } from "./errors.js";
import { ANSWER_TIMEOUT_MS, Api, HttpError, TransportError } from "./http.js";
import { Step, baseName, claimToken } from "./step.js";

const QUEUE_NAME = /^[a-z0-9_.-]{1,64}$/;
const WORKER_NAME = /^[\x21-\x7e]{1,128}$/;
const CLAIM_MAX = 100; // the most one claim may ask for
const WAIT_MAX = 60; // the longest a claim may wait, in seconds
const ERROR_MAX = 4096; // characters of a failure's text sent, the rest cut
const OUTCOMES_MAX = 100; // the most outcomes one request may carry
// How long a finished step's outcome may wait for the next claim to carry
// it before it is sent on its own (a claim waiting for work carries none).
const FLUSH_MS = 5;
// How long a claim waits for more places to come free once one is, so
// that one claim takes (and reports) several steps.
const GATHER_MS = 2;

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

/** An outcome as a batch carries it: its endpoint's body and the token. */
function outcomeItem(o) {
  return { token: claimToken(o.rec.step), ...o.body };
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
  #running = 0; // held steps whose functions have not returned yet
  #outcomes = []; // [{rec, kind, body}]: to report, oldest first
  #flushTimer = null;
  #flushing = false;
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
   * `prefetch` how many steps more than `concurrency` it may hold claimed,
   * waiting for their turn (their leases run and are heartbeaten
   * meanwhile): 0 claims only for free places; more keeps the functions
   * busy while the next claim is on its way (short steps), at the cost of
   * steps another worker could have started; `logger` has debug, info,
   * warn and error (default: stderr). */
  constructor({ url, token, queue, worker, concurrency = 8, wait = 30, grace = 30, prefetch = 0, logger } = {}) {
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
    if (!Number.isInteger(prefetch) || prefetch < 0) {
      throw new TypeError(`prefetch ${prefetch}: expected a whole number, at least 0`);
    }
    if (!isNumber(grace, 0, Infinity)) throw new TypeError(`grace ${grace}: expected seconds, at least 0`);
    this.#api = new Api(url, token === undefined ? process.env.TASKER_WORKER_TOKEN : token);
    this.url = url;
    this.queue = queue;
    this.worker = worker;
    this.concurrency = concurrency;
    this.wait = wait;
    this.grace = grace;
    this.prefetch = prefetch;
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
    this.#scheduleFlush();
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

  /** Resolves when a step's function returns (or a stop), or after ms. */
  #slotChange(ms) {
    return new Promise((resolve) => {
      const timer = ms === undefined ? null : setTimeout(done, ms);
      const waiters = this.#slotWaiters;
      function done() {
        clearTimeout(timer);
        const i = waiters.indexOf(done);
        if (i >= 0) waiters.splice(i, 1);
        resolve();
      }
      waiters.push(done);
    });
  }

  /** Claims as many steps as there is room for, waiting for work, and
   * carries the outcomes ready by then, until stopped. */
  async #claimLoop() {
    const backoff = new Backoff();
    const path = `/api/v1/queues/${this.queue}/claim`;
    const stopping = this.#stopping.signal;
    const capacity = this.concurrency + this.prefetch;
    while (!stopping.aborted) {
      while (this.#running >= capacity && !stopping.aborted) await this.#slotChange();
      // A moment for more places to come free, up to a function's worth
      // each: one claim for them all.
      const gather = Date.now() + GATHER_MS;
      while (this.#running > this.prefetch && !stopping.aborted && Date.now() < gather) {
        await this.#slotChange(Math.max(1, gather - Date.now()));
      }
      if (stopping.aborted) return;
      const carried = this.#outcomes.splice(0, OUTCOMES_MAX);
      const body = { worker: this.worker, max: Math.min(capacity - this.#running, CLAIM_MAX), wait: this.wait };
      if (carried.length) body.outcomes = carried.map(outcomeItem);
      let answer;
      try {
        // A claim waiting is hung up on at a stop (nothing is claimed for
        // it); one that carries outcomes is answered at once: it is let
        // finish, so they are not sent twice.
        answer = carried.length
          ? await this.#api.post(path, body, { timeoutMs: ANSWER_TIMEOUT_MS })
          : await this.#api.post(path, body, { timeoutMs: this.wait * 1000 + ANSWER_TIMEOUT_MS, signal: stopping });
      } catch (e) {
        if (carried.length && e instanceof HttpError && (e.status === 413 || String(e.param ?? "").startsWith("outcomes"))) {
          // One of them the server would not take in a batch: each on its
          // own (a complete over the limit becomes a fail).
          for (const o of carried) this.#reportAlone(o.rec, o.kind, o.body);
          continue;
        }
        this.#putBack(carried, stopping.aborted ? undefined : e);
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
      if (carried.length) this.#answered(carried, answer?.outcomes);
      const claims = answer?.claims;
      if (!Array.isArray(claims)) {
        this.log.error(`worker ${this.worker}: claim: an answer without claims: ${JSON.stringify(answer).slice(0, 160)}`);
        await sleep(backoff.next(), stopping);
        continue;
      }
      for (const claim of claims) this.#hold(claim);
    }
  }

  /** Outcomes a request did not deliver, to be sent again (a second try of
   * one that did arrive is answered 409: never recorded twice). */
  #putBack(carried, why) {
    if (!carried.length) return;
    for (const o of why === undefined ? [] : carried) {
      this.log.warn(`worker ${this.worker}: ${o.kind} of ${o.rec.step}: ${why.message}; trying again`);
    }
    this.#outcomes.unshift(...carried);
    this.#scheduleFlush();
  }

  /** Send the outcomes no claim carried within FLUSH_MS (at once when
   * stopping). */
  #scheduleFlush() {
    if (this.#flushTimer || this.#flushing || !this.#outcomes.length) return;
    const ms = this.#stopping.signal.aborted ? 0 : FLUSH_MS;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = null;
      this.#flush();
    }, ms);
  }

  /** POST the outcomes waiting to /api/v1/claims/outcomes, in batches,
   * until none waits (tried again after a connection error or 5xx). */
  async #flush() {
    this.#flushing = true;
    const backoff = new Backoff();
    try {
      while (this.#outcomes.length && !this.#abandon.signal.aborted) {
        const batch = this.#outcomes.splice(0, OUTCOMES_MAX).filter((o) => !this.#dropped(o.rec));
        if (!batch.length) continue;
        try {
          const answer = await this.#api.post("/api/v1/claims/outcomes", { outcomes: batch.map(outcomeItem) });
          this.#answered(batch, answer?.outcomes);
          backoff.reset();
        } catch (e) {
          if (e instanceof HttpError && (e.status === 413 || e.status === 400)) {
            for (const o of batch) this.#reportAlone(o.rec, o.kind, o.body);
            continue;
          }
          if (!(e instanceof HttpError || e instanceof TransportError)) throw e;
          for (const o of batch) this.log.warn(`worker ${this.worker}: ${o.kind} of ${o.rec.step}: ${e.message}; trying again`);
          this.#outcomes.unshift(...batch);
          await sleep(backoff.next(), this.#abandon.signal);
        }
      }
    } finally {
      this.#flushing = false;
      if (this.#abandon.signal.aborted) {
        for (const o of this.#outcomes.splice(0)) this.#dropped(o.rec);
      }
      this.#scheduleFlush();
    }
  }

  /** Whether the step's outcome is no longer to be sent (then it is let go). */
  #dropped(rec) {
    if (rec.abandoned) {
      this.log.warn(`worker ${this.worker}: ${rec.step} not reported: stopped past its grace`);
    } else if (rec.step.lost) {
      this.log.warn(`worker ${this.worker}: ${rec.step} dropped: its lease was lost`);
    } else {
      return false;
    }
    this.#letGo(rec);
    return true;
  }

  /** The server's answers to the outcomes `sent`, one each, in order. */
  #answered(sent, answers) {
    if (!Array.isArray(answers) || answers.length !== sent.length) {
      this.log.error(`worker ${this.worker}: outcomes answered without one answer each: ${JSON.stringify(answers)?.slice(0, 160)}`);
      answers = sent.map(() => null);
    }
    const again = [];
    sent.forEach((o, i) => {
      const ans = answers[i];
      const step = o.rec.step;
      const err = ans && typeof ans === "object" ? ans.error : undefined;
      if (ans && typeof ans === "object" && err === undefined) {
        this.log.debug(`worker ${this.worker}: ${step}: ${o.kind}`);
      } else if (!err || typeof err !== "object") {
        this.log.error(`worker ${this.worker}: ${o.kind} of ${step}: an answer without its state: ${JSON.stringify(ans)?.slice(0, 160)}`);
      } else if (err.status === 409) {
        step.lost = true;
        this.log.warn(`worker ${this.worker}: ${o.kind} of ${step} refused, dropped: ${err.message}`);
      } else if (err.status >= 500) {
        this.log.warn(`worker ${this.worker}: ${o.kind} of ${step}: ${err.message}; trying again`);
        again.push(o);
        return;
      } else {
        this.log.error(`worker ${this.worker}: ${o.kind} of ${step} refused: HTTP ${err.status} ${err.code}: ${err.message}`);
      }
      this.#letGo(o.rec);
    });
    this.#putBack(again);
  }

  /** The step is done with: no more heartbeats, its place free. */
  #letGo(rec) {
    if (rec.done) return;
    rec.done = true;
    clearTimeout(rec.timer);
    this.#held.delete(claimToken(rec.step));
    this.#wake(this.#slotWaiters);
    if (this.#held.size === 0) this.#wake(this.#idleWaiters);
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
    this.#running += 1;
    this.#execute(rec);
  }

  async #execute(rec) {
    this.#scheduleHeartbeat(rec, rec.step.heartbeatMs);
    let outcome = null;
    try {
      const [kind, body] = await this.#call(rec.step);
      rec.finishing = true;
      outcome = { rec, kind, body };
    } catch (e) {
      this.log.error(`worker ${this.worker}: ${rec.step}: ${e.stack ?? e}`);
    }
    this.#running -= 1;
    if (outcome) {
      this.#outcomes.push(outcome);
      this.#scheduleFlush();
      this.#wake(this.#slotWaiters);
    } else {
      this.#letGo(rec);
    }
  }

  /** Sends the step's outcome on its own (its endpoint), then lets it go. */
  async #reportAlone(rec, kind, body) {
    try {
      await this.#report(rec, kind, body);
    } catch (e) {
      this.log.error(`worker ${this.worker}: ${rec.step}: ${e.stack ?? e}`);
    } finally {
      this.#letGo(rec);
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
