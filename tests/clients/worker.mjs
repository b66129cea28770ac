// The tests' Node worker (tests/clients/lib/clients.sh says what each step
// does): node worker.mjs URL QUEUE NAME LOG [CONCURRENCY]. Each function
// appends "start|done STEP TASK ATTEMPT WORKER" lines to LOG.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { Permanent, Retry, Worker } from "../../clients/node/src/index.js";

const [url, queue, name, logPath, concurrency = "4"] = process.argv.slice(2);
const w = new Worker({ url, token: process.env.TK_WTOKEN, queue, worker: name,
  concurrency: Number(concurrency), grace: 20 });

// One write of one line, appended: lines of several processes never mix.
const note = (event, step) =>
  appendFileSync(logPath, `${event} ${step.name} ${step.taskId} ${step.attempt} ${name}\n`);

const logged = (fn) => async (step) => {
  note("start", step);
  const results = await fn(step);
  note("done", step);
  return results;
};

// lease_ms: the claim's lease expiry is integer ms since the epoch, ahead.
w.step("double", logged(async (step) => ({ n: step.context.n * 2, by: step.worker,
  lease_ms: Number.isInteger(step.leaseExpiresAt) && step.leaseExpiresAt > Date.now() - 60000 })));
w.step("plus", logged(async (step) => ({ sum: step.parents.double.n + 1 })));
w.step("flaky", logged(async (step) => {
  if (step.attempt === 1) throw new Retry("busy, come back later", { after: 1.5 });
  return { attempt: step.attempt };
}));
w.step("doom", async (step) => {
  note("start", step);
  throw new Permanent("bad input: no such image");
});
w.step("boom", async (step) => {
  note("start", step);
  throw new TypeError("kaput");
});
w.step("list", logged(async (step) => ({ items: step.context.items })));
w.step("each", logged(async (step) => ({ tenfold: step.item * 10, index: step.itemIndex })));
w.step("total", logged(async (step) => ({ sum: step.parents.each.reduce((s, r) => s + r.tenfold, 0) })));
w.step("slow", logged(async (step) => {
  await sleep(step.context.secs * 1000);
  return { slept: step.context.secs, by: step.worker };
}));

await w.run();
