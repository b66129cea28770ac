// A bench worker (bench/bench_workers.sh, bench_workers.c): the Node client
// (clients/node) with a noop function for step "s" of queue "bench".
// Usage: noop.mjs URL MODE N CONCURRENCY; MODE as noop.py's: "count" prints
// the seconds from the first step's start to the stop's end, "starts"
// prints process.hrtime.bigint() (CLOCK_MONOTONIC) as each function starts.
import { Worker } from "../../clients/node/src/index.js";

const [url, mode, nText, concText] = process.argv.slice(2);
const n = Number(nText);
const worker = new Worker({ url, queue: "bench", worker: "bench-node", concurrency: Number(concText), wait: 30, prefetch: Number(process.env.BENCH_PREFETCH ?? 0),
  logger: { debug() {}, info() {}, warn: console.error, error: console.error } });
let seen = 0;
let first = null;
worker.step("s", async () => {
  const started = process.hrtime.bigint();
  seen++;
  if (first === null) first = started;
  if (mode === "starts") process.stdout.write(`${started}\n`);
  if (seen >= n) worker.stop();
  return null;
});
await worker.run();
if (mode === "count") console.log((Number(process.hrtime.bigint() - first) / 1e9).toFixed(3));
