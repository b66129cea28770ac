// JSON over HTTP to one tasker serve, with fetch (its connections kept
// alive), each answer parsed.

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

/** A server's address and the workers' token. */
export class Api {
  constructor(url, token) {
    this.base = baseUrl(url);
    this.headers = { "Content-Type": "application/json", Accept: "application/json" };
    if (token) this.headers.Authorization = `Bearer ${token}`;
  }

  /** POST the JSON value `body` to the API path: the answer's JSON value
   * when 200, else HttpError; TransportError when no answer came (within
   * timeoutMs, or `signal` aborted the request). */
  async post(path, body, { timeoutMs = ANSWER_TIMEOUT_MS, signal } = {}) {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) ctl.abort();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    let res, raw;
    try {
      res = await fetch(this.base + path, {
        method: "POST",
        headers: this.headers,
        body: JSON.stringify(body),
        signal: ctl.signal,
      });
      raw = await res.text();
    } catch (e) {
      const why = signal?.aborted ? "request abandoned: the worker is stopping"
        : ctl.signal.aborted ? `no answer within ${timeoutMs} ms`
        : (e.cause?.message ?? e.message);
      throw new TransportError(`POST ${path.replace(/\/claims\/[^/]+/, "/claims/TOKEN")}: ${why}`, e);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
    return answer(res.status, raw);
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
