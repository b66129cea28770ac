// A worker for tasker's worker steps (handler = { kind = "worker", queue =
// ... }): long-lived, no dependencies. See README.md.
export { Permanent, Retry, WorkerError } from "./errors.js";
export { Step } from "./step.js";
export { Worker } from "./worker.js";
