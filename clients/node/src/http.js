// JSON over HTTP to one tasker serve, with node:http (or node:https) and
// a keep-alive Agent: its connections are kept open between requests and
// reused. (fetch cost about 2.7 ms of CPU per step; with this the whole
// worker takes about 0.6 ms per noop step, bench/bench_workers.sh.)
import http from "node:http";
import https from "node:https";

/** How long any answer may take beyond a claim's own wait, in ms. */
export const ANSWER_TIMEOUT_MS = 30000;

/** No answer: the connection failed or broke (worth retrying). */
export class TransportError extends Error {
  constructor(message, cause) {
    super(message, { cause });
    this.name = "TransportError";
  }
}

/** An answer with a status other than 200, with the API's error body. */
export class HttpError extends Error {
  constructor(status, code, message, param) {
    super(`HTTP ${status} ${code}: ${message}`);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.detail = message;
    this.param = param;
  }
}

/** The base URL without a trailing slash; throws for one that is not
 * http(s)://HOST[:PORT][/PREFIX]. */
export function baseUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`server URL ${JSON.stringify(url)}: expected http://HOST:PORT or https://HOST:PORT`);
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.search || u.hash) {
    throw new TypeError(`server URL ${JSON.stringify(url)}: expected http://HOST:PORT or https://HOST:PORT`);
  }
  return u.href.replace(/\/+$/, "");
}

/** A server's address, the workers' token and the Agent that keeps the
 * connections to it alive (close() ends them). */
export class Api {
  constructor(url, token) {
    this.base = baseUrl(url);
    const u = new URL(this.base);
    this.module = u.protocol === "https:" ? https : http;
    this.target = { protocol: u.protocol, hostname: u.hostname.replace(/^\[|\]$/g, ""), port: u.port || undefined };
    this.prefix = u.pathname.replace(/\/+$/, "");
    this.headers = { "Content-Type": "application/json", Accept: "application/json" };
    if (token) this.headers.Authorization = `Bearer ${token}`;
    // Idle sockets are unref'd by the Agent: they keep no process alive.
    this.agent = new this.module.Agent({ keepAlive: true });
  }

  /** POST the JSON value `body` to the API path: the answer's JSON value
   * when 200, else HttpError; TransportError when no answer came (within
   * timeoutMs, or `signal` aborted the request). A request on a kept-alive
   * connection that the server had closed meanwhile is sent again once, at
   * once, on a new one. */
  async post(path, body, { timeoutMs = ANSWER_TIMEOUT_MS, signal } = {}) {
    const data = Buffer.from(JSON.stringify(body));
    for (let first = true; ; first = false) {
      try {
        const { status, raw } = await this.#send(path, data, timeoutMs, signal);
        return answer(status, raw);
      } catch (e) {
        if (!(e instanceof TransportError) || !first || !e.reused || signal?.aborted) throw e;
      }
    }
  }

  /** One POST: {status, raw} or TransportError (with .reused: the
   * connection was a kept-alive one). */
  #send(path, data, timeoutMs, signal) {
    const shown = `POST ${path.replace(/\/claims\/[^/]+/, "/claims/TOKEN")}`;
    return new Promise((resolve, reject) => {
      let why = null;
      let settled = false;
      const req = this.module.request({
        ...this.target,
        method: "POST",
        path: this.prefix + path,
        agent: this.agent,
        headers: { ...this.headers, "Content-Length": data.length },
      });
      const onAbort = () => {
        why = "request abandoned: the worker is stopping";
        req.destroy();
      };
      const timer = setTimeout(() => {
        why = `no answer within ${timeoutMs} ms`;
        req.destroy();
      }, timeoutMs);
      const settle = (err, value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(value);
      };
      const broke = (e) => {
        if (settled) return; // "close" follows every answer
        const err = new TransportError(`${shown}: ${why ?? e.message}`, e);
        err.reused = why === null && req.reusedSocket;
        settle(err);
      };
      req.on("error", broke);
      req.on("close", () => broke(new Error("the connection closed before the answer")));
      req.on("response", (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", broke);
        res.on("end", () => settle(null, { status: res.statusCode, raw: Buffer.concat(chunks).toString("utf8") }));
      });
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
      req.end(data);
    });
  }

  /** End the kept-alive connections (the worker stopped). */
  close() {
    this.agent.destroy();
  }
}

/** The JSON value of a 200 answer; HttpError for any other. */
function answer(status, raw) {
  let value = null;
  try {
    value = raw ? JSON.parse(raw) : null;
  } catch {
    value = null;
  }
  if (status === 200) {
    if (value === null) throw new HttpError(status, "bad_answer", `the answer is not JSON: ${raw.slice(0, 160)}`);
    return value;
  }
  const err = value && typeof value === "object" ? value.error : null;
  if (err && typeof err === "object") {
    throw new HttpError(status, err.code ?? "?", err.message ?? "", err.param);
  }
  throw new HttpError(status, "http_error", raw.slice(0, 160));
}
