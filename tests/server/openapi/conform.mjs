// node conform.mjs DOC.json: every operation of the OpenAPI document
// called on the running `tasker serve` at $BASE (tests/server/openapi.sh
// made its store: the tasks below), each answer checked against the
// document: its status is the one this call expects and one the document
// lists for the operation, its Content-Type is the documented one, and its
// body validates against the documented schema for that status. The
// parameters and bodies sent are checked against the document too: those
// the server takes must fit it, those it refuses for being out of bounds
// must not (the document's types, enums and bounds are the server's).
// Every operation must be called with an answer in 2xx at least once. A
// call may save the token of the claim it got (save: NAME) for a later
// call's path (token: () => saved.NAME).
// $TOKEN_BASE is a second server with the token $TOKEN (the 401s).
// One line per check: "ok<TAB>NAME" or "not ok<TAB>NAME<TAB>WHY".
import { readFileSync } from "node:fs";
import { schemaCompiler } from "./schemas.mjs";

const say = (ok, name, why = "") =>
  console.log(ok ? `ok\t${name}` : `not ok\t${name}\t${String(why).replace(/\s+/g, " ").slice(0, 1500)}`);

const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));
const compile = schemaCompiler(doc);
const coercing = schemaCompiler(doc, { coerceTypes: true });
const { BASE, TOKEN_BASE, TOKEN, CB_TOKEN } = process.env;

// operationId -> {method, path, op, params (path-level and its own)}.
const ops = new Map();
const deref = (x) => (x && x.$ref ? x.$ref.split("/").slice(1).reduce((o, k) => o[k], doc) : x);
for (const [path, item] of Object.entries(doc.paths)) {
  for (const method of ["get", "post", "put", "patch", "delete", "head"]) {
    const op = item[method];
    if (!op) continue;
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
    ops.set(op.operationId, { method, path, op, params });
  }
}

// Whether `value` fits `schema` (strings from a URL coerced to its type).
const fits = (schema, value, coerce) => {
  const check = (coerce ? coercing : compile)({ type: "object", properties: { v: schema } });
  return check({ v: value }) ? "" : JSON.stringify(check.errors);
};

// The calls, in order (some change what later ones see). want: the status
// this call must get; outOfBounds: the parameter (or "body") the document
// must refuse too.
const X = { "X-Tasker-Request": "1" };
const calls = [
  { op: "getStatus", want: 200 },
  { op: "getStatus", query: { x: "1" }, want: 400 },
  { op: "getOpenApi", want: 200 },
  { op: "getMetrics", want: 200 },
  { op: "listTasks", want: 200 },
  { op: "listTasks", query: { state: "error", limit: "1000" }, want: 200 },
  { op: "listTasks", query: { limit: "1" }, want: 200, then: "cursor" },
  { op: "listTasks", query: { limit: "1" }, want: 200, then: "cursor" },
  { op: "listTasks", query: { template: "ops/quick", since: "1h", q: "fail" }, want: 200 },
  { op: "listTasks", query: { state: "broken" }, want: 400, outOfBounds: "state" },
  { op: "listTasks", query: { limit: "1001" }, want: 400, outOfBounds: "limit" },
  { op: "listTasks", query: { limit: "0" }, want: 400, outOfBounds: "limit" },
  { op: "listTasks", query: { cursor: "zzz" }, want: 400 },
  { op: "getTask", path: { id: 1 }, want: 200 },
  { op: "getTask", path: { id: 3 }, want: 200 },
  { op: "getTask", path: { id: 4 }, want: 200 },
  { op: "getTask", path: { id: 99 }, want: 404 },
  { op: "getTask", path: { id: "abc" }, want: 404, outOfBounds: "id" },
  { op: "listInstances", path: { id: 4, step: "process" }, query: { limit: "5" }, want: 200 },
  { op: "listInstances", path: { id: 4, step: "process" }, query: { after: "20" }, want: 200 },
  { op: "listInstances", path: { id: 4, step: "process" }, query: { after: "-1" }, want: 400, outOfBounds: "after" },
  { op: "listInstances", path: { id: 1, step: "extract" }, want: 400 },
  { op: "listInstances", path: { id: 99, step: "process" }, want: 404 },
  { op: "listInstances", path: { id: 4, step: "nosuch" }, want: 404 },
  { op: "listSteps", want: 200 },
  { op: "listSteps", query: { state: "complete", task_state: "error", limit: "2" }, want: 200 },
  { op: "listSteps", query: { state: "broken" }, want: 400, outOfBounds: "state" },
  { op: "listTemplates", want: 200 },
  { op: "getTemplate", path: { name: "ops/quick" }, want: 200 },
  { op: "getTemplate", path: { name: "etl" }, query: { version: "1" }, want: 200 },
  { op: "getTemplate", path: { name: "nosuch" }, want: 404 },
  { op: "getActivity", want: 200 },
  { op: "getActivity", query: { window: "2h", bucket: "5m" }, want: 200 },
  { op: "getActivity", query: { window: "1h", bucket: "1s" }, want: 400 },
  { op: "getBackoff", want: 200 },
  { op: "getBackoff", query: { profile: "slow", attempts: "3", samples: "10", seed: "7", jitter: "equal", multiplier: "3", jitter_fraction: "0.5" }, want: 200 },
  { op: "getBackoff", query: { profile: "nosuch" }, want: 404 },
  { op: "getBackoff", query: { attempts: "0" }, want: 400, outOfBounds: "attempts" },
  { op: "getBackoff", query: { jitter: "wobbly" }, want: 400, outOfBounds: "jitter" },
  { op: "getBackoff", query: { jitter_fraction: "2" }, want: 400, outOfBounds: "jitter_fraction" },
  { op: "submitTasks", body: { template: "etl" }, headers: X, want: 201 },
  { op: "submitTasks", body: { template: "ops/quick", version: "1", context: { n: 1 }, identity: "k1" }, headers: X, want: 201 },
  { op: "submitTasks", body: { template: "ops/quick", identity: "k1" }, headers: X, want: 200 },
  { op: "submitTasks", body: [{ template: "etl" }, { template: "ops/quick", identity: "k1" }], headers: X, want: 201 },
  { op: "submitTasks", body: [{ template: "ops/quick", identity: "k1" }], headers: X, want: 200 },
  { op: "submitTasks", body: { template: "ops/quick", priority: 7 }, headers: X, want: 201 },
  { op: "submitTasks", body: [{ template: "ops/quick", priority: -1000 }], headers: X, want: 201 },
  { op: "submitTasks", body: { template: "ops/quick", priority: 1001 }, headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: [{ template: "ops/quick", priority: -1001 }], headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: { template: "ops/quick", priority: "high" }, headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: { template: "nosuch" }, headers: X, want: 404 },
  { op: "submitTasks", body: { templat: "etl" }, headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: [], headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: { template: "etl", context: [1] }, headers: X, want: 400, outOfBounds: "body" },
  { op: "submitTasks", body: { template: "etl" }, want: 403 },
  { op: "submitTasks", raw: JSON.stringify({ template: "etl", context: { pad: "x".repeat(1100000) } }), headers: X, want: 413 },
  { op: "cancelTask", path: { id: 5 }, headers: X, want: 200 },
  { op: "cancelTask", path: { id: 5 }, headers: X, want: 409 },
  { op: "cancelTask", path: { id: 99 }, headers: X, want: 404 },
  { op: "retryStep", path: { id: 1, step: "load" }, headers: X, want: 200 },
  { op: "retryStep", path: { id: 1, step: "load" }, headers: X, want: 409 },
  { op: "retryStep", path: { id: 4, step: "process[12]" }, headers: X, want: 200 },
  { op: "retryStep", path: { id: 99, step: "load" }, headers: X, want: 404 },
  { op: "resolveStep", path: { id: 3, step: "review" }, headers: X, want: 200 },
  { op: "resolveStep", path: { id: 3, step: "review" }, headers: X, want: 409 },
  { op: "resolveStep", path: { id: 3, step: "nosuch" }, headers: X, want: 404 },
  // Task 9's wait step is pending: a signal is kept until it waits.
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { data: { ok: true }, key: "k1" }, headers: X, want: 200 },
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { data: { ok: false }, key: "k1" }, headers: X, want: 200 },
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { error: "no" }, headers: X, want: 409 },
  { op: "signalStep", path: { id: 9, step: "nosuch" }, body: { data: 1 }, headers: X, want: 404 },
  { op: "signalStep", path: { id: 1, step: "load" }, body: { data: 1 }, headers: X, want: 400 },
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { data: 1, error: "x" }, headers: X, want: 400, outOfBounds: "body" },
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { dat: 1 }, headers: X, want: 400, outOfBounds: "body" },
  { op: "signalStep", path: { id: 9, step: "approve" }, body: { data: 1 }, want: 403 },
  // Callbacks (tests/server/openapi.sh: task 10's http step waits for its
  // callback, whose token $CB_TOKEN the export service received).
  { op: "heartbeatCallback", path: { token: CB_TOKEN }, body: { timeout: "10m" }, want: 200 },
  { op: "heartbeatCallback", path: { token: CB_TOKEN }, body: { timeout: 0 }, want: 400, outOfBounds: "body" },
  { op: "postCallback", path: { token: CB_TOKEN }, body: { status: "done" }, want: 400, outOfBounds: "body" },
  { op: "postCallback", path: { token: CB_TOKEN }, body: { status: "failure", retryable: false, retry_after: 1 }, want: 400, outOfBounds: "body" },
  { op: "postCallback", path: { token: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }, body: { status: "success" }, want: 404 },
  { op: "postCallback", path: { token: CB_TOKEN }, body: { status: "success" }, headers: { "Content-Type": "text/plain" }, want: 403 },
  { op: "postCallback", path: { token: CB_TOKEN }, body: { status: "success", results: { rows: 1 } }, want: 200 },
  { op: "postCallback", path: { token: CB_TOKEN }, body: { status: "success" }, want: 409 },
  { op: "bulkAction", path: { action: "cancel" }, body: { tasks: [2, 6, 99] }, headers: X, want: 200 },
  { op: "bulkAction", path: { action: "resolve" }, body: { steps: [{ task: 1, step: "load" }] }, headers: X, want: 200 },
  { op: "bulkAction", path: { action: "retry" }, body: { filter: { template: "etl" }, max: 1000 }, headers: X, want: 200 },
  { op: "bulkAction", path: { action: "cancel" }, body: { filter: {}, all: true, max: 1 }, headers: X, want: 409 },
  { op: "bulkAction", path: { action: "retry" }, body: { filter: {} }, headers: X, want: 400 },
  { op: "bulkAction", path: { action: "retry" }, body: { tasks: [] }, headers: X, want: 400, outOfBounds: "body" },
  { op: "bulkAction", path: { action: "retry" }, body: { tasks: [1], max: 5 }, headers: X, want: 400, outOfBounds: "body" },
  { op: "bulkAction", path: { action: "explode" }, body: { tasks: [1] }, headers: X, want: 404, outOfBounds: "action" },
  // The queues: pix (tasks 7 and 8's worker steps) and payments, which
  // the configuration limits (tests/server/openapi.sh).
  { op: "listQueues", want: 200 },
  { op: "listQueues", query: { x: "1" }, want: 400 },
  // The retry budgets: api's state, which ops/quick's first attempt
  // counted in (tests/server/openapi.sh).
  { op: "listBudgets", want: 200 },
  { op: "listBudgets", query: { x: "1" }, want: 400 },
  // The worker protocol (tests/server/openapi.sh: tasks 7 and 8 wait for
  // a worker of queue "pix"); no token on this server: JSON is the proof.
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", max: 1, wait: 0 }, want: 200, save: "a" },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", max: 1, wait: 0.5 }, want: 200, save: "b" },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform" }, want: 200 },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", max: 101 }, want: 400, outOfBounds: "body" },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", wait: 61 }, want: 400, outOfBounds: "body" },
  { op: "claimSteps", path: { queue: "pix" }, body: { max: 1 }, want: 400, outOfBounds: "body" },
  { op: "claimSteps", path: { queue: "Pix!" }, body: { worker: "conform" }, want: 404, outOfBounds: "queue" },
  { op: "heartbeatClaim", path: { token: () => saved.a }, body: {}, want: 200 },
  { op: "heartbeatClaim", path: { token: () => saved.a }, body: { x: 1 }, want: 400, outOfBounds: "body" },
  { op: "completeClaim", path: { token: () => saved.a }, body: { results: { width: 640 } }, want: 200 },
  { op: "completeClaim", path: { token: () => saved.a }, body: { results: 1 }, want: 409 },
  { op: "heartbeatClaim", path: { token: () => saved.a }, body: {}, want: 409 },
  { op: "failClaim", path: { token: () => saved.b }, body: { error: "" }, want: 400, outOfBounds: "body" },
  { op: "failClaim", path: { token: () => saved.b }, body: { error: "x", retryable: false, retry_after: 1 }, want: 400 },
  { op: "failClaim", path: { token: () => saved.b }, body: { error: "S3 timed out", retryable: true, retry_after: 2.5 }, want: 200 },
  { op: "failClaim", path: { token: () => saved.b }, body: { error: "again" }, want: 409 },
  // A claim carrying no outcomes waits for b's retry (2.5 s); a batch and a
  // claim carrying outcomes, each answered one by one (a stale token: 409
  // in its answer).
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", max: 1, wait: 10, outcomes: [] }, want: 200, save: "c" },
  { op: "recordOutcomes", body: () => ({ outcomes: [{ token: saved.c, results: { width: 320 } }, { token: saved.a, error: "late", retryable: false }] }), want: 200 },
  { op: "claimSteps", path: { queue: "pix" }, body: () => ({ worker: "conform", max: 2, outcomes: [{ token: saved.c, results: null }] }), want: 200 },
  { op: "recordOutcomes", body: { outcomes: [] }, want: 200 },
  { op: "recordOutcomes", body: { outcomes: "all" }, want: 400, outOfBounds: "body" },
  { op: "recordOutcomes", body: { outcomes: [{ token: "x", results: 1, error: "both" }] }, want: 400, outOfBounds: "body" },
  { op: "recordOutcomes", body: { outcomes: Array.from({ length: 101 }, () => ({ token: "x" })) }, want: 400, outOfBounds: "body" },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform", outcomes: [{ token: 7 }] }, want: 400, outOfBounds: "body" },
  { op: "completeClaim", path: { token: "not-a-token" }, body: {}, want: 404 },
  { op: "completeClaim", path: { token: "bad!token" }, body: {}, want: 404, outOfBounds: "token" },
  { op: "claimSteps", path: { queue: "pix" }, body: { worker: "conform" }, headers: { "Content-Type": "text/plain" }, want: 403 },
  { op: "claimSteps", base: TOKEN_BASE, path: { queue: "pix" }, body: { worker: "conform" }, headers: { Authorization: `Bearer ${TOKEN}` }, want: 401 },
  { op: "getStatus", base: TOKEN_BASE, want: 401 },
  { op: "getStatus", base: TOKEN_BASE, headers: { Authorization: `Bearer ${TOKEN}` }, want: 200 },
  { op: "submitTasks", base: TOKEN_BASE, body: { template: "etl" }, headers: { Authorization: `Bearer ${TOKEN}` }, want: 201 },
];

const called = new Set();
let cursor = null;
const saved = {}; // claim tokens, by the name a call saved one under
for (const c of calls) {
  const entry = ops.get(c.op);
  const query = { ...(c.query ?? {}) };
  // Path values saved by an earlier call are read now.
  // So is a body given as a function (one that names a saved token).
  const cBody = typeof c.body === "function" ? c.body() : c.body;
  const pathValues = Object.fromEntries(Object.entries(c.path ?? {}).map(([k, v]) => [k, typeof v === "function" ? v() : v]));
  if (c.then === "cursor" && cursor) query.cursor = cursor;
  const label = `${c.op} ${JSON.stringify({ ...pathValues, ...query })}${cBody ? " " + JSON.stringify(cBody).slice(0, 80) : ""}${c.base ? " (token server)" : ""} -> ${c.want}`;
  if (!entry) {
    say(false, label, `no operation ${c.op} in the document`);
    continue;
  }
  const { method, path, op, params } = entry;
  const problems = [];
  // The parameters sent against the document.
  const sent = { ...pathValues, ...query };
  for (const [name, value] of Object.entries(sent)) {
    const p = params.find((q) => q.name === name);
    if (!p) {
      if (c.want < 300) problems.push(`parameter ${name} is not documented`);
      continue;
    }
    const misfit = fits(p.schema, value, true);
    if (c.outOfBounds === name && !misfit) problems.push(`the document takes ${name}=${value}, which the server refuses`);
    if (c.outOfBounds !== name && c.want < 300 && misfit) problems.push(`the document refuses ${name}=${value}: ${misfit}`);
  }
  if (cBody !== undefined) {
    const schema = op.requestBody?.content?.["application/json"]?.schema;
    const misfit = schema ? fits(schema, cBody, false) : "no request body documented";
    if (c.outOfBounds === "body" && !misfit) problems.push("the document takes this body, which the server refuses");
    if (c.outOfBounds !== "body" && c.want < 300 && misfit) problems.push(`the document refuses this body: ${misfit}`);
  }
  // The call.
  let url = (c.base ?? BASE) + path.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(String(pathValues[k])));
  const qs = new URLSearchParams(query).toString();
  if (qs) url += "?" + qs;
  const body = c.raw ?? (cBody !== undefined ? JSON.stringify(cBody) : undefined);
  let res, text;
  try {
    res = await fetch(url, { method: method.toUpperCase(), headers: { ...(body ? { "Content-Type": "application/json" } : {}), ...(c.headers ?? {}) }, body });
    text = await res.text();
  } catch (e) {
    say(false, label, `${method.toUpperCase()} ${url}: ${e.message}`);
    continue;
  }
  if (res.status !== c.want) problems.push(`status ${res.status}, want ${c.want}: ${text.slice(0, 300)}`);
  const documented = deref(op.responses[String(res.status)]);
  if (!documented) problems.push(`status ${res.status} is not documented for ${c.op}`);
  else {
    const [type, media] = Object.entries(documented.content ?? {})[0] ?? [];
    if (type && res.headers.get("content-type") !== type)
      problems.push(`Content-Type ${res.headers.get("content-type")}, documented ${type}`);
    if (type === "application/json") {
      let json;
      try {
        json = JSON.parse(text);
      } catch (e) {
        problems.push(`the body is not JSON: ${e.message}`);
      }
      if (json !== undefined) {
        const check = compile(media.schema);
        if (!check(json)) problems.push(`the body does not fit the documented schema: ${JSON.stringify(check.errors).slice(0, 800)}`);
        if (c.then === "cursor") cursor = json.next_cursor;
        if (c.save) saved[c.save] = json.claims?.[0]?.token;
      }
    } else if (type && typeof media.schema?.type === "string" && media.schema.type !== "string") {
      problems.push(`a ${type} body documented as ${media.schema.type}`);
    }
  }
  if (res.status >= 200 && res.status < 300) called.add(c.op);
  say(problems.length === 0, label, problems.join("; "));
}
if (!cursor) say(false, "listTasks: a page of 1 has a next_cursor to follow", "none");

// Every documented operation answered at least once with success.
for (const [id, { method, path }] of ops)
  say(called.has(id), `${id} (${method.toUpperCase()} ${path}) is called and succeeds`, "no call of this operation succeeded: add one to tests/server/openapi/conform.mjs");
