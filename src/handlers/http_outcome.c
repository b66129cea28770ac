/* The outcome of one http attempt (docs/handlers.md, "http"): a status's
 * class decides (2xx success, the retryable ones, the permanent rest, the
 * step's retry_on and permanent_on), Retry-After is a retryable answer's
 * hint, a 2xx body becomes the step's results (never dropped), transport
 * errors are named, and the request's credentials are taken out of the
 * message. */
#include "handlers/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <tasker/backoff.h>
#include <tasker/duration.h>

/* Bytes of a failed response's body quoted in its message. */
#define BODY_QUOTE 160

/* "METHOD URL" for messages (a long URL cut). */
static const char *target(const tk__http_req *r, char *buf, size_t len) {
  size_t ul = strlen(r->url);
  snprintf(buf, len, "%s %.*s%s", r->method, (int)(ul > 200 ? 200 : ul), r->url,
           ul > 200 ? "..." : "");
  return buf;
}

/* A transport failure (no usable response): which, and curl's words. */
static void transport(tk__http_req *r, CURLcode code) {
  tk_handler_result *out = r->out;
  const tk__http_step *hs = r->hs;
  char t[256], d[32];
  target(r, t, sizeof t);
  long os = 0;
  curl_easy_getinfo(r->xfer.easy, CURLINFO_OS_ERRNO, &os);
  const char *detail = r->errbuf[0] ? r->errbuf : curl_easy_strerror(code);
  tk_handler_status retry = TK_HANDLER_RETRY, perm = TK_HANDLER_PERMANENT;
  switch (code) {
  case CURLE_OPERATION_TIMEDOUT: {
    curl_off_t connected = 0;
    curl_easy_getinfo(r->xfer.easy, CURLINFO_CONNECT_TIME_T, &connected);
    int64_t limit = r->timeout_ms;
    int connect = connected == 0 && hs->connect_timeout_ms < r->timeout_ms;
    tk_duration_format(connect ? hs->connect_timeout_ms : limit, d, sizeof d);
    tk__handler_fail(out, retry, "%s: %s after %s (%s)", t,
                     connect ? "could not connect" : "timed out", d,
                     connect ? "connect_timeout" : "timeout");
    out->timed_out = 1;
    return;
  }
  case CURLE_COULDNT_CONNECT:
    tk__handler_fail(out, retry, "%s: %s (%s)", t,
                     os == ECONNREFUSED ? "connection refused" : "could not connect", detail);
    return;
  case CURLE_COULDNT_RESOLVE_HOST:
    tk__handler_fail(out, retry, "%s: could not resolve the host (%s)", t, detail);
    return;
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
    tk__handler_fail(out, retry, "%s: %s (%s)", t,
                     os == ECONNRESET ? "connection reset by the server"
                                      : "the connection failed",
                     detail);
    return;
  case CURLE_GOT_NOTHING:
    tk__handler_fail(out, retry, "%s: the server closed the connection without answering", t);
    return;
  case CURLE_PARTIAL_FILE:
    tk__handler_fail(out, retry, "%s: the response ended early (%s)", t, detail);
    return;
  case CURLE_PEER_FAILED_VERIFICATION:
    tk__handler_fail(out, retry, "%s: TLS: the server's certificate could not be verified (%s)",
                     t, detail);
    return;
  case CURLE_SSL_CACERT_BADFILE:
    /* The template's own CA file is not a CA bundle: so it stays. */
    if (hs->ca_file) {
      tk__handler_fail(out, perm, "%s: TLS: ca_file \"%.200s\" could not be used (%s)", t,
                       hs->ca_file, detail);
      return;
    }
    /* fall through */
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
    tk__handler_fail(out, retry, "%s: TLS failed (%s)", t, detail);
    return;
  case CURLE_TOO_MANY_REDIRECTS:
    /* The Location as the server wrote it (maybe relative). */
    tk__handler_fail(out, perm, "%s: more than %ld redirects (max_redirects); the last pointed "
                     "to %.200s", t, hs->max_redirects, r->location);
    return;
  case CURLE_UNSUPPORTED_PROTOCOL:
    tk__handler_fail(out, perm, "%s: a redirect to a URL that is not http or https was refused "
                     "(%s)", t, detail);
    return;
  case CURLE_URL_MALFORMAT:
    tk__handler_fail(out, perm, "%s: malformed URL (%s)", t, detail);
    return;
  default:
    tk__handler_fail(out, retry, "%s: the transfer failed (%s)", t, detail);
    return;
  }
}

/* Standard base64 of s[0..n), malloc'd. */
static char *base64(const unsigned char *s, size_t n) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
  if (o == NULL) return NULL;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                 (i + 2 < n ? s[i + 2] : 0);
    *p++ = a[v >> 18 & 63];
    *p++ = a[v >> 12 & 63];
    *p++ = i + 1 < n ? a[v >> 6 & 63] : '=';
    *p++ = i + 2 < n ? a[v & 63] : '=';
  }
  *p = '\0';
  return o;
}

/* Whether the media type says JSON: application/json or any +json. */
static int json_media(const char *ct) {
  size_t n = strcspn(ct, "; \t");
  return (n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
         (n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0);
}

/* A 2xx: the body as the step's results. A JSON object is the results;
 * any other body is kept under {"status", "content_type", "body"} (text,
 * or "body_base64" when it is not UTF-8), never dropped; a body that says
 * it is JSON and is not fails the attempt, permanently. */
static void results(tk__http_req *r, const char *t) {
  tk_handler_result *out = r->out;
  const char *b = r->in.p ? r->in.p : "";
  size_t len = r->in.len, i = 0;
  while (i < len && strchr(" \t\r\n", b[i])) i++;
  if (i == len) return; /* no body: no results */
  json_t *doc = NULL, *value = NULL;
  int says_json = json_media(r->content_type);
  if (says_json || r->content_type[0] == '\0') {
    json_error_t e;
    value = json_loadb(b, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
    if (value == NULL && says_json) {
      char q[BODY_QUOTE * 4 + 8];
      tk__handler_fail(out, TK_HANDLER_PERMANENT, "%s: HTTP %ld with Content-Type %s, but the "
                       "body is not JSON: invalid JSON at line %d, column %d: %s; the body began %s",
                       t, r->status, r->content_type, e.line, e.column, e.text,
                       tk__quote_start(b + i, len - i, BODY_QUOTE, 1, q, sizeof q));
      return;
    }
  }
  if (json_is_object(value)) {
    doc = value;
  } else {
    doc = json_pack("{s:i}", "status", (int)r->status);
    if (doc && r->content_type[0])
      json_object_set_new(doc, "content_type", json_string(r->content_type));
    json_t *text = value ? NULL : json_stringn(b, len);
    if (value) {
      json_object_set_new(doc, "body", value);
    } else if (text) {
      json_object_set_new(doc, "body", text);
    } else {
      /* Base64 hides a secret from tk__redact_result: out before encoding. */
      tk__buf raw = {0};
      tk__scrub_bytes(&r->secrets, b, len, &raw);
      char *enc = raw.oom ? NULL : base64((const unsigned char *)(raw.p ? raw.p : ""), raw.len);
      tk__buf_free(&raw);
      json_object_set_new(doc, "body_base64", enc ? json_string(enc) : NULL);
      free(enc);
    }
  }
  out->results = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (out->results == NULL)
    tk__handler_fail(out, TK_HANDLER_RETRY, "%s: out of memory keeping the response as results",
                     t);
}

/* A response: its status's class decides; Retry-After is the hint of a
 * retryable one. */
static void response(tk__http_req *r, const char *t) {
  tk_handler_result *out = r->out;
  const tk__http_step *hs = r->hs;
  long st = 0;
  curl_easy_getinfo(r->xfer.easy, CURLINFO_RESPONSE_CODE, &st);
  if (st > 0) r->status = st;
  st = r->status;
  tk__http_class cls = st >= 100 && st < 600 ? (tk__http_class)hs->classes[st] : TK__HTTP_PERMANENT;
  if (cls == TK__HTTP_SUCCESS) {
    results(r, t);
    return;
  }
  /* Which list made the difference, if one did. */
  tk__http_class dflt = st >= 100 && st < 600 ? tk__http_default_class((int)st) : cls;
  const char *list = cls == dflt ? "" : cls == TK__HTTP_RETRY ? " (retry_on)" : " (permanent_on)";
  char what[400];
  int w = snprintf(what, sizeof what, "HTTP %ld%s%s%s", st, r->reason[0] ? " " : "", r->reason,
                   list);
  if (st / 100 == 3 && w > 0 && (size_t)w < sizeof what && r->location[0])
    snprintf(what + w, sizeof what - (size_t)w,
             ": redirect to %.200s not followed (max_redirects = %ld)", r->location,
             hs->max_redirects);
  else if (st / 100 == 3 && w > 0 && (size_t)w < sizeof what)
    snprintf(what + w, sizeof what - (size_t)w, ": a redirect without a Location");
  char hint[200] = "";
  if (cls == TK__HTTP_RETRY && r->has_retry_after) {
    int64_t ms;
    tk_err err;
    if (tk_retry_after_parse(r->retry_after, strlen(r->retry_after), tk_clock_now(r->clock), &ms,
                             &err) == 0) {
      out->retry_after_ms = ms;
      snprintf(hint, sizeof hint, " (Retry-After: %.100s)", r->retry_after);
    } else {
      snprintf(hint, sizeof hint, " (%.150s; ignored)", err.msg);
    }
  }
  char q[BODY_QUOTE * 4 + 8] = "";
  if (r->in.len > 0) tk__quote_start(r->in.p, r->in.len, BODY_QUOTE, 1, q, sizeof q);
  tk__handler_fail(out, cls == TK__HTTP_RETRY ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                   "%s: %s%s%s%s", t, what, hint, q[0] ? ": " : "", q);
}

void tk__http_req_conclude(tk__http_req *r, CURLcode code) {
  tk_handler_result *out = r->out;
  char t[256];
  target(r, t, sizeof t);
  if (r->oversized) {
    tk__handler_fail(out, TK_HANDLER_PERMANENT, "%s: HTTP %ld: the response body passed "
                     "max_response (%zu bytes%s)", t, r->status, r->hs->max_response,
                     r->announced ? ", by its Content-Length" : "");
  } else if (code == CURLE_WRITE_ERROR && r->in.oom) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "%s: out of memory reading the response", t);
  } else if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && r->cut)) {
    response(r, t);
  } else {
    transport(r, code);
  }
  tk__redact_result(&r->secrets, out);
}

