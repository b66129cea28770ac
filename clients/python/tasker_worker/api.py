"""JSON over HTTP to one tasker serve: keep-alive connections in a pool
(as many as requests at once, no more), each request's answer parsed."""

import http.client
import json
import socket
import re
import threading
import urllib.parse

# How long any answer may take beyond a claim's own wait.
ANSWER_TIMEOUT_S = 30.0
_CLAIM_TOKEN = re.compile(r"/claims/[^/]+/")


class TransportError(Exception):
    """No answer: the connection failed or broke (worth retrying)."""


class HttpError(Exception):
    """An answer with a status other than 200, with the API's error body."""

    def __init__(self, status, code, message, param=None):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.param = param


def parse_url(url):
    """(scheme, host, port, path prefix) of a server's base URL; ValueError
    for one that is not http(s)://HOST[:PORT][/PREFIX]."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"server URL {url!r}: expected http://HOST:PORT or https://HOST:PORT")
    if parts.query or parts.fragment:
        raise ValueError(f"server URL {url!r}: expected no query or fragment")
    return parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/")


class Connection:
    """One keep-alive connection; abort() (from any thread) breaks off the
    request under way on it, and every later one, with TransportError."""

    def __init__(self, api):
        self._api = api
        self._conn = None
        self._used = False
        self._aborted = False
        self._lock = threading.Lock()

    def post(self, path, body, timeout=ANSWER_TIMEOUT_S):
        """POST the JSON value `body` to the API path; the answer's JSON
        value when 200, else HttpError; TransportError when no answer came.
        A connection kept alive that the server has closed meanwhile is
        replaced and the request sent again once, at once."""
        data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        for first in (True, False):
            reused = self._used
            try:
                return self._post_once(path, data, timeout)
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if self._aborted:
                    raise TransportError("request abandoned: the worker is stopping") from e
                if not (first and reused):
                    shown = _CLAIM_TOKEN.sub("/claims/TOKEN/", path)  # a token is a secret
                    raise TransportError(f"POST {shown}: {e or type(e).__name__}") from e

    def _post_once(self, path, data, timeout):
        with self._lock:
            if self._aborted:
                raise ConnectionAbortedError("aborted")
            if self._conn is None:
                self._conn = self._api.new_connection(timeout)
                self._used = False
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
            else:
                self._conn.connect()
        self._used = True
        self._conn.request("POST", self._api.prefix + path, body=data, headers=self._api.headers)
        resp = self._conn.getresponse()
        raw = resp.read()
        if resp.will_close:
            self.close()
        return self._api.answer(resp.status, raw)

    def abort(self):
        """Break off the request under way (if any) and refuse later ones."""
        with self._lock:
            self._aborted = True
            conn = self._conn
            if conn is not None and conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class Api:
    """A server's address, its worker token and a pool of idle connections."""

    def __init__(self, url, token):
        self.scheme, self.host, self.port, self.prefix = parse_url(url)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._idle = []
        self._lock = threading.Lock()

    def new_connection(self, timeout):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def post(self, path, body):
        """POST through an idle pooled connection (a new one when none is)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else Connection(self)
        try:
            return conn.post(path, body)
        finally:
            with self._lock:
                self._idle.append(conn)

    def close(self):
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    @staticmethod
    def answer(status, raw):
        """The JSON value of a 200 answer; HttpError for any other."""
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            value = None
        if status == 200:
            if value is None:
                raise HttpError(status, "bad_answer", f"the answer is not JSON: {raw[:160]!r}")
            return value
        err = value.get("error") if isinstance(value, dict) else None
        if isinstance(err, dict):
            raise HttpError(status, err.get("code", "?"), err.get("message", ""), err.get("param"))
        raise HttpError(status, "http_error", raw[:160].decode("utf-8", "replace"))
