// The example's worker in Node (images.toml says how to run it):
// node worker.mjs [URL], URL tasker serve's (http://127.0.0.1:8080), the
// workers' token (if the server has one) in TASKER_WORKER_TOKEN. In a
// project of your own, import from "tasker-worker" (npm install
// /path/to/tasker/clients/node).
import { Worker } from "../../clients/node/src/index.js";

const worker = new Worker({ url: process.argv[2] ?? "http://127.0.0.1:8080", queue: "images" });
worker.step("fetch", async (step) => ({ bytes: step.context.url.length * 1000 }));
worker.step("resize", async (step) => ({ width: step.context.width, bytes: step.parents.fetch.bytes / 4 }));
await worker.run();
