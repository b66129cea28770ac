/* One attempt of the http handler: the request filled from the task
 * (placeholders: percent-encoded in the URL, text in headers, typed in a
 * JSON body), curl set up for it, and the response captured within its
 * limits (docs/handlers.md, "http"). http_outcome.c decides what the
 * response means. */
#include "handlers/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* Bytes of a failed response's body kept for its message's quote. */
#define ERROR_BODY_KEEP 512


/* ---- filling the request ------------------------------------------------------------- */

/* Fail the attempt at set-up: "http: WHAT". */
#define setup_fail(r, status, ...) tk__handler_fail((r)->out, status, __VA_ARGS__)

/* The value of a hexadecimal digit, or -1. */
static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Percent-decoded copy of s[0..n) ('+' as a space, as in a query),
 * malloc'd (NULL when out of memory). */
static char *decoded(const char *s, size_t n) {
  char *d = malloc(n + 1), *o = d;
  if (d == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    int hi = s[i] == '%' && i + 2 < n ? hex_digit(s[i + 1]) : -1;
    int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
    if (lo >= 0) {
      *o++ = (char)(hi * 16 + lo);
      i += 2;
    } else {
      *o++ = s[i] == '+' ? ' ' : s[i];
    }
  }
  *o = '\0';
  return d;
}

/* A value as it appears in the URL, and decoded, as secrets. */
static void url_secret(tk__http_req *r, const char *v, size_t n) {
  tk__secret_add(&r->secrets, v, n);
  char *d = decoded(v, n);
  if (d) tk__secret_add(&r->secrets, d, strlen(d));
  free(d);
}

/* The URL's password and the values of its query parameters whose names
 * say credential, as secrets: they were filled from placeholders (the
 * template holds none, http_spec.c), and stay out of messages. */
static void url_secrets(tk__http_req *r) {
  const char *u = r->url;
  const char *auth = strstr(u, "://");
  auth = auth ? auth + 3 : u;
  size_t alen = strcspn(auth, "/?#");
  const char *at = memchr(auth, '@', alen);
  if (at) {
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (colon) url_secret(r, colon + 1, (size_t)(at - colon - 1));
  }
  const char *q = strchr(u, '?');
  for (const char *p = q ? q + 1 : NULL; p && *p;) {
    size_t plen = strcspn(p, "&#");
    const char *eq = memchr(p, '=', plen);
    if (eq && tk__http_is_credential(p, (size_t)(eq - p)))
      url_secret(r, eq + 1, plen - (size_t)(eq - p) - 1);
    if (p[plen] != '&') break;
    p += plen + 1;
  }
}

/* "host" or "host:port" of the URL into out->downstream. */
static void downstream(tk__http_req *r) {
  CURLU *u = curl_url();
  char *host = NULL, *port = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, r->url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
    curl_url_get(u, CURLUPART_PORT, &port, 0);
    snprintf(r->out->downstream, sizeof r->out->downstream, "%s%s%s", host, port ? ":" : "",
             port ? port : "");
  }
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
}

/* Whether the headers set `name` themselves. */
static int has_header(const tk__http_step *hs, const char *name) {
  for (size_t i = 0; i < hs->nheaders; i++)
    if (strcasecmp(hs->headers[i].name, name) == 0) return 1;
  return 0;
}

/* Append "Name: value" to the header list; 0, or -1 when out of memory. */
static int add_header(tk__http_req *r, const char *name, const char *value) {
  tk__buf line = {0};
  /* "Name;" is how curl is told to send a header with an empty value. */
  if (*value) tk__buf_addf(&line, "%s: %s", name, value);
  else tk__buf_addf(&line, "%s;", name);
  struct curl_slist *l = line.oom ? NULL : curl_slist_append(r->headers, line.p);
  tk__buf_free(&line);
  if (l == NULL) return -1;
  r->headers = l;
  return 0;
}

/* The method, from its placeholder if it has one; 0 or -1 (failed). */
static int fill_method(tk__http_req *r, const tk__ph_scope *sc) {
  char why[TK_ERR_MSG_MAX];
  tk__buf m = {0};
  int rc = tk__ph_expand(r->hs->method, sc, TK__PH_PLAIN, &m, why, sizeof why);
  if (rc) {
    setup_fail(r, rc == TK_ENOMEM ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
               "http: placeholder in method: %s", why);
    tk__buf_free(&m);
    return -1;
  }
  static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
  int ok = 0;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(m.p, known[i]) == 0;
  if (!ok)
    setup_fail(r, TK_HANDLER_PERMANENT, "http: method \"%.40s\" (from its placeholder) is not one "
               "of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", m.p);
  else
    snprintf(r->method, sizeof r->method, "%s", m.p);
  tk__buf_free(&m);
  return ok ? 0 : -1;
}

/* The URL with its placeholders percent-encoded and the query table
 * appended; 0 or -1 (failed). */
static int fill_url(tk__http_req *r, const tk__ph_scope *sc) {
  const tk__http_step *hs = r->hs;
  char why[TK_ERR_MSG_MAX];
  tk__buf u = {0};
  int rc = tk__ph_expand(hs->url, sc, TK__PH_URL, &u, why, sizeof why);
  const char *where = "url";
  for (size_t i = 0; rc == 0 && i < hs->nquery; i++) {
    tk__buf_addc(&u, u.p && strchr(u.p, '?') ? '&' : '?');
    /* The name is literal (no placeholders), percent-encoded. */
    for (const char *p = hs->query[i].name; *p; p++) {
      unsigned char c = (unsigned char)*p;
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr("-._~", c))
        tk__buf_addc(&u, (char)c);
      else
        tk__buf_addf(&u, "%%%02X", c);
    }
    tk__buf_addc(&u, '=');
    where = hs->query[i].name;
    rc = tk__ph_expand(hs->query[i].value, sc, TK__PH_URL, &u, why, sizeof why);
  }
  if (rc == 0 && u.oom) rc = TK_ENOMEM;
  if (rc) {
    if (strcmp(where, "url") == 0)
      setup_fail(r, rc == TK_ENOMEM ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                 "http: placeholder in url: %s", why);
    else
      setup_fail(r, rc == TK_ENOMEM ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                 "http: placeholder in query.%s: %s", where, why);
    tk__buf_free(&u);
    return -1;
  }
  r->url = tk__buf_take(&u);
  url_secrets(r);
  return 0;
}

/* The header list: the spec's, filled as text (a line break from a value
 * is refused: it would start another header), then the defaults it does
 * not set. 0 or -1 (failed). */
static int fill_headers(tk__http_req *r, const tk__ph_scope *sc, const char *content_type) {
  const tk__http_step *hs = r->hs;
  char why[TK_ERR_MSG_MAX];
  for (size_t i = 0; i < hs->nheaders; i++) {
    const tk__http_field *f = &hs->headers[i];
    tk__buf v = {0};
    int rc = tk__ph_expand(f->value, sc, TK__PH_PLAIN, &v, why, sizeof why);
    if (rc) {
      setup_fail(r, rc == TK_ENOMEM ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
                 "http: placeholder in headers.%s: %s", f->name, why);
      tk__buf_free(&v);
      return -1;
    }
    const char *value = v.p ? v.p : "";
    if (strpbrk(value, "\r\n") || strlen(value) != v.len) {
      setup_fail(r, TK_HANDLER_PERMANENT, "http: headers.%s: a value from its placeholders holds "
                 "a line break or NUL, which would end the header", f->name);
      tk__buf_free(&v);
      return -1;
    }
    if (f->credential) {
      /* The whole value, and the token after a scheme ("Bearer x"), which
       * a server may echo alone. */
      tk__secret_add(&r->secrets, value, v.len);
      const char *sp = strchr(value, ' ');
      if (sp) tk__secret_add(&r->secrets, sp + 1, strlen(sp + 1));
    }
    rc = add_header(r, f->name, value);
    tk__buf_free(&v);
    if (rc) goto oom;
  }
  if (!has_header(hs, "Accept") && add_header(r, "Accept", "application/json")) goto oom;
  if (!has_header(hs, "User-Agent") && add_header(r, "User-Agent", "tasker/" TK_VERSION))
    goto oom;
  /* No "Expect: 100-continue" round trip before a large body: "Expect:"
   * (a colon, no value) is how curl is told to send no Expect at all. */
  if (!has_header(hs, "Expect")) {
    struct curl_slist *l = curl_slist_append(r->headers, "Expect:");
    if (l == NULL) goto oom;
    r->headers = l;
  }
  if (content_type && !has_header(hs, "Content-Type") &&
      add_header(r, "Content-Type", content_type))
    goto oom;
  return 0;
oom:
  setup_fail(r, TK_HANDLER_RETRY, "http: out of memory building the request's headers");
  return -1;
}

/* Keep text[0..len) as the body (a copy); 0, or -1 when out of memory. */
static int keep_body(tk__http_req *r, const char *text, size_t len) {
  if ((r->body = malloc(len + 1)) == NULL) return -1;
  memcpy(r->body, text, len);
  r->body[len] = '\0';
  r->body_len = len;
  return 0;
}

/* Keep v written as compact JSON as the body; 0, or -1 when out of
 * memory. */
static int keep_json(tk__http_req *r, json_t *v) {
  if ((r->body = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL) return -1;
  r->body_len = strlen(r->body);
  return 0;
}

/* The body and its content type (*ct, NULL: none); 0 or -1 (failed). */
static int fill_body(tk__http_req *r, const tk__ph_scope *sc, const char *input,
                     const char **ct) {
  const tk__http_step *hs = r->hs;
  char why[TK_ERR_MSG_MAX];
  int rc = 0, oom = 0;
  static const char json_ct[] = "application/json", text_ct[] = "text/plain; charset=utf-8";
  *ct = json_ct;
  switch (hs->body_kind) {
  case TK__HTTP_BODY_DEFAULT:
    if (strcmp(r->method, "POST") && strcmp(r->method, "PUT") && strcmp(r->method, "PATCH")) {
      *ct = NULL;
      return 0;
    }
    if (input == NULL) input = "{}";
    oom = keep_body(r, input, strlen(input));
    break;
  case TK__HTTP_BODY_TEXT: {
    tk__buf b = {0};
    *ct = text_ct;
    if ((rc = tk__ph_expand(hs->body_text, sc, TK__PH_PLAIN, &b, why, sizeof why)) == 0)
      oom = keep_body(r, b.p ? b.p : "", b.len);
    tk__buf_free(&b);
    break;
  }
  case TK__HTTP_BODY_VALUE: {
    /* One placeholder: a string as text, anything else as JSON. */
    json_t *v;
    if ((rc = tk__ph_value(hs->body_text, sc, &v, why, sizeof why)) != 0) break;
    if (json_is_string(v)) *ct = text_ct;
    oom = json_is_string(v) ? keep_body(r, json_string_value(v), json_string_length(v))
                            : keep_json(r, v);
    json_decref(v);
    break;
  }
  case TK__HTTP_BODY_JSON: {
    json_t *v;
    if ((rc = tk__ph_fill_json(hs->body_json, sc, &v, why, sizeof why)) != 0) break;
    oom = keep_json(r, v);
    json_decref(v);
    break;
  }
  }
  if (rc) {
    setup_fail(r, rc == TK_ENOMEM ? TK_HANDLER_RETRY : TK_HANDLER_PERMANENT,
               "http: placeholder in body: %s", why);
    return -1;
  }
  if (oom) {
    setup_fail(r, TK_HANDLER_RETRY, "http: out of memory building the request's body");
    return -1;
  }
  r->has_body = 1;
  return 0;
}

tk__http_req *tk__http_req_new(const tk__http_step *hs, const tk_handler_call *call,
                               const tk__handler_step *step, tk_handler_result *out) {
  const tk_clock *clock = step->clock;
  if (hs == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: out of memory preparing the step");
    return NULL;
  }
  if (hs->broken) {
    tk__handler_fail(out, TK_HANDLER_PERMANENT, "%s", hs->broken);
    return NULL;
  }
  tk__http_req *r = calloc(1, sizeof *r);
  if (r == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: out of memory starting the request");
    return NULL;
  }
  r->hs = hs;
  r->out = out;
  r->clock = clock;
  json_t *input = NULL;
  if (call->input) {
    json_error_t e;
    input = json_loads(call->input, 0, &e);
    if (input == NULL) {
      tk__handler_fail(out, TK_HANDLER_RETRY, "http: cannot read the step's input: %s", e.text);
      tk__http_req_free(r);
      return NULL;
    }
  }
  /* Every value read from the environment becomes a secret (redact.h). */
  tk__ph_scope sc = {input, call->task_id, call->step, call->attempt, tk__secret_getenv,
                     &r->secrets, step->callback_url, step->callback_token};
  /* The callback's token is a secret wherever it goes (its URL holds it). */
  if (step->callback_token)
    tk__secret_add(&r->secrets, step->callback_token, strlen(step->callback_token));
  const char *ct = NULL;
  int failed = fill_method(r, &sc) || fill_url(r, &sc) || fill_body(r, &sc, call->input, &ct) ||
               fill_headers(r, &sc, ct);
  json_decref(input);
  if (failed) {
    tk__redact_result(&r->secrets, out);
    tk__http_req_free(r);
    return NULL;
  }
  downstream(r);
  /* The step's timeout, which the engine turned into a deadline; without
   * one a request still has a limit, so a stop is never held up for long. */
  if (call->deadline_ms > 0) {
    r->timeout_ms = call->deadline_ms - tk_clock_now(clock);
    if (r->timeout_ms < 1) r->timeout_ms = 1;
  } else {
    r->timeout_ms = TK__HTTP_DEFAULT_TIMEOUT_MS;
  }
  return r;
}

void tk__http_req_free(tk__http_req *r) {
  if (r == NULL) return;
  free(r->url);
  free(r->body);
  curl_slist_free_all(r->headers);
  tk__secrets_free(&r->secrets);
  tk__buf_free(&r->in);
  free(r);
}

/* ---- the response ---------------------------------------------------------------------- */

/* Copy value[0..n) into dst (of size len), truncating. */
static void copy_value(char *dst, size_t len, const char *v, size_t n) {
  if (n >= len) n = len - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

/* One header line (curl calls it for each, status lines included, of
 * every response: a redirect's or a 100 Continue's, then the last). */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  tk__http_req *r = ud;
  size_t len = size * n, all = len;
  while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n')) len--;
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
    /* A new response: forget the previous one's. */
    r->status = 0;
    r->reason[0] = r->retry_after[0] = r->content_type[0] = r->location[0] = '\0';
    r->has_retry_after = 0;
    const char *sp = memchr(p, ' ', len);
    if (sp) {
      size_t rest = len - (size_t)(sp + 1 - p);
      long st = 0;
      size_t i = 0;
      for (; i < rest && i < 3 && sp[1 + i] >= '0' && sp[1 + i] <= '9'; i++)
        st = st * 10 + (sp[1 + i] - '0');
      r->status = st;
      if (i < rest && sp[1 + i] == ' ') copy_value(r->reason, sizeof r->reason, sp + 2 + i, rest - i - 1);
    }
    return all;
  }
  const char *colon = memchr(p, ':', len);
  if (colon == NULL) return all;
  size_t nlen = (size_t)(colon - p);
  const char *v = colon + 1;
  size_t vlen = len - nlen - 1;
  while (vlen > 0 && (*v == ' ' || *v == '\t')) v++, vlen--;
  while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
#define IS(name) (nlen == sizeof name - 1 && strncasecmp(p, name, nlen) == 0)
  if (IS("retry-after")) {
    copy_value(r->retry_after, sizeof r->retry_after, v, vlen);
    r->has_retry_after = 1;
  } else if (IS("content-type")) {
    copy_value(r->content_type, sizeof r->content_type, v, vlen);
  } else if (IS("location")) {
    copy_value(r->location, sizeof r->location, v, vlen);
  } else if (IS("content-length") && r->status / 100 == 2) {
    /* A body announced past the limit is refused before it is read. */
    char num[32];
    copy_value(num, sizeof num, v, vlen);
    if (strtoull(num, NULL, 10) > r->hs->max_response) {
      r->oversized = r->announced = 1;
      return 0;
    }
  }
#undef IS
  return all;
}

/* Body bytes: all of a 2xx body up to max_response (past it the transfer
 * stops: oversized); of another, the first ERROR_BODY_KEEP for the
 * message, and the transfer stops (cut) once max_response have come. */
static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  tk__http_req *r = ud;
  size_t len = size * n;
  r->received += len;
  if (r->status / 100 == 2) {
    if (r->in.len + len > r->hs->max_response) {
      r->oversized = 1;
      return 0;
    }
    tk__buf_add(&r->in, p, len);
    return r->in.oom ? 0 : len;
  }
  if (r->in.len < ERROR_BODY_KEEP) {
    size_t keep = ERROR_BODY_KEEP - r->in.len;
    tk__buf_add(&r->in, p, len < keep ? len : keep);
  }
  if (r->received > r->hs->max_response) {
    r->cut = 1;
    return 0;
  }
  return len;
}

/* Tests only (tk__http_test_fail_resolves): every name resolution fails. */
static _Atomic int fail_resolves;

void tk__http_test_fail_resolves(int on) { fail_resolves = on; }

/* curl's resolver-start callback: non-zero stops the resolution before it
 * starts, which curl reports as CURLE_COULDNT_RESOLVE_HOST. */
static int refuse_resolve(void *state, void *reserved, void *ud) {
  (void)state, (void)reserved, (void)ud;
  return 1;
}

int tk__http_req_setup(tk__http_req *r, CURL *easy) {
  const tk__http_step *hs = r->hs;
  r->xfer.easy = easy;
  /* The template's CA file, gone or unreadable since: the same request
   * would fail the same way until someone restores it. */
  char why[TK_ERR_MSG_MAX];
  if (hs->ca_file && tk__http_ca_file_unreadable(hs->ca_file, why, sizeof why)) {
    tk__handler_fail(r->out, TK_HANDLER_PERMANENT, "http: ca_file %s", why);
    return -1;
  }
  CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                      \
  do {                                                                                     \
    if (c == CURLE_OK) c = curl_easy_setopt(easy, opt, val);                               \
  } while (0)
  SET(CURLOPT_URL, r->url);
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
  SET(CURLOPT_ERRORBUFFER, r->errbuf);
  SET(CURLOPT_PRIVATE, &r->xfer); /* how the reactor finds the transfer */
  SET(CURLOPT_HTTPHEADER, r->headers);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, r);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, r);
  SET(CURLOPT_ACCEPT_ENCODING, ""); /* what this libcurl decodes; max_response counts decoded bytes */
  SET(CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
  SET(CURLOPT_CONNECTTIMEOUT_MS,
      (long)(hs->connect_timeout_ms < r->timeout_ms ? hs->connect_timeout_ms : r->timeout_ms));
  SET(CURLOPT_FOLLOWLOCATION, hs->max_redirects > 0 ? 1L : 0L);
  SET(CURLOPT_MAXREDIRS, hs->max_redirects);
  /* Verification is libcurl's default; said here so that no reader
   * wonders. There is no key to turn it off (ca_file trusts a private CA). */
  SET(CURLOPT_SSL_VERIFYPEER, 1L);
  SET(CURLOPT_SSL_VERIFYHOST, 2L);
  if (hs->ca_file) SET(CURLOPT_CAINFO, hs->ca_file);
  if (fail_resolves) SET(CURLOPT_RESOLVER_START_FUNCTION, refuse_resolve);
  if (strcmp(r->method, "HEAD") == 0) {
    SET(CURLOPT_NOBODY, 1L);
  } else if (r->has_body) {
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    SET(CURLOPT_POSTFIELDS, r->body);
    if (strcmp(r->method, "POST") != 0) SET(CURLOPT_CUSTOMREQUEST, r->method);
  } else if (strcmp(r->method, "POST") == 0) {
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    SET(CURLOPT_POSTFIELDS, "");
  } else if (strcmp(r->method, "GET") != 0) {
    SET(CURLOPT_CUSTOMREQUEST, r->method);
  }
#undef SET
  if (c != CURLE_OK) {
    tk__handler_fail(r->out, TK_HANDLER_RETRY, "http: cannot set up the request: %s",
                     curl_easy_strerror(c));
    return -1;
  }
  return 0;
}

/* ---- asynchronous -------------------------------------------------------------------- */

/* The reactor's end of r's transfer: conclude, free, then tell the engine
 * (after which the result is not touched). Aborted: free only. */
static void finish(tk__http_transfer *t, CURLcode code, int aborted) {
  tk__http_req *r = (tk__http_req *)t;
  tk__handler_done done = r->done;
  void *ud = r->done_ud;
  if (!aborted) tk__http_req_conclude(r, code);
  tk__http_req_free(r);
  if (!aborted) done(ud);
}

tk__http_transfer *tk__http_req_transfer(tk__http_req *r, tk__handler_done done, void *ud) {
  r->done = done;
  r->done_ud = ud;
  r->xfer.finish = finish;
  return &r->xfer;
}
