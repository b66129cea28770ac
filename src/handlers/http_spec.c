/* The http handler's spec: the keys of its table, the checks that span
 * them (placeholders that compile, a literal http(s) scheme, a URL curl
 * can send, header names, no credential written into the template, a
 * timeout, a CA file that can be read), and the form an engine compiles
 * it into once per step. */
#include "handlers/http.h"
#include "toml/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- template time ------------------------------------------------------------------- */

static const char *const methods[] = {"GET",    "HEAD",   "POST",   "PUT",
                                      "PATCH",  "DELETE", "OPTIONS", NULL};

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "url", .kind = TK__K_STRING, .allowed = "an http:// or https:// URL",
     .missing = "an http handler needs url = \"https://...\""},
    {.name = "method", .kind = TK__K_STRING,
     .allowed = "GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"},
    {.name = "query", .kind = TK__K_STRMAP, .allowed = "a table of strings"},
    {.name = "headers", .kind = TK__K_STRMAP, .allowed = "a table of strings"},
    {.name = "body", .kind = TK__K_OTHER},
    {.name = "connect_timeout", .kind = TK__K_DURATION, .json = "connect_timeout_ms", .min = 1,
     .max = 3600000, .allowed = "a duration from 1ms to 1h"},
    {.name = "max_redirects", .kind = TK__K_INT, .min = 0, .max = 50,
     .allowed = "an integer from 0 to 50"},
    {.name = "max_response", .kind = TK__K_INT, .min = 1, .max = TK__HTTP_MAX_RESPONSE_LIMIT,
     .allowed = "a number of bytes from 1 to 67108864"},
    {.name = "retry_on", .kind = TK__K_INTS, .min = 100, .max = 599,
     .allowed = "an array of HTTP status codes (100 to 599)"},
    {.name = "permanent_on", .kind = TK__K_INTS, .min = 100, .max = 599,
     .allowed = "an array of HTTP status codes (100 to 599)"},
    {.name = "ca_file", .kind = TK__K_STRING, .allowed = "the path of a PEM file of CA certificates"},
    {.name = "callback", .kind = TK__K_OTHER},
};

static const tk__schema schema = {"http", keys, sizeof keys / sizeof keys[0]};

/* callback = { timeout = "1h" } (docs/callbacks.md): a 2xx answer starts
 * the work, which calls back before the timeout. */
static const tk__key callback_keys[] = {
    {.name = "timeout", .kind = TK__K_DURATION, .json = "callback_timeout_ms", .min = 1,
     .max = INT64_MAX / 4, .allowed = "a duration > 0, such as \"1h\"",
     .missing = "a callback needs its timeout, such as callback = { timeout = \"1h\" }: how "
                "long the step waits for the callback after the request's 2xx answer"},
};

static const tk__schema callback_schema = {"http callback", callback_keys,
                                           sizeof callback_keys / sizeof callback_keys[0]};

/* The callback table, if any, into spec's callback_timeout_ms (an http
 * step is never a batch step: the kind has no run_batch). */
static int check_callback(const tk__spec_where *w, const tk_toml_value *cb, json_t *spec) {
  if (cb == NULL) return 0;
  if (tk_toml_type_of(cb) != TK_TOML_TABLE)
    return tk__spec_fail(w, cb, "callback",
                         "expected a table, such as callback = { timeout = \"1h\" }");
  char path[256];
  snprintf(path, sizeof path, "%s.callback", w->path);
  tk__spec_where sub = {w->file, path, w->err};
  return tk__spec_read(&sub, &callback_schema, cb, spec);
}

/* Compile the string `text` of key `key` (at v) to check its placeholders;
 * *t gets it (NULL: free it). 0, or TK_ECONFIG at v. */
static int check_text(const tk__spec_where *w, const tk_toml_value *v, const char *key,
                      const char *text, size_t len, tk__ph **t) {
  char why[TK_ERR_MSG_MAX];
  tk__ph *ph;
  int rc = tk__ph_compile(text, len, &ph, why, sizeof why);
  if (rc == TK_ENOMEM) return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  if (rc) return tk__spec_fail(w, v, key, "%s", why);
  if (t) *t = ph;
  else tk__ph_free(ph);
  return 0;
}

/* RFC 9110 tchar: what a header's name is made of. */
static int is_token(const char *s, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr("!#$%&'*+-.^_`|~", c)))
      return 0;
  }
  return 1;
}

static const char credential_advice[] =
    "a credential written into the template would be stored and shown with it; take it from "
    "the orchestrator's environment or the task, e.g. \"Bearer {{env.API_TOKEN}}\"";

/* One value of the headers or query table, under `key`: its placeholders
 * compile, and a credential's value comes from one. */
static int check_field(const tk__spec_where *w, const tk_toml_entry *e, const char *key) {
  size_t len;
  const char *text = tk_toml_string(e->value, &len);
  tk__ph *t;
  int rc = check_text(w, e->value, key, text, len, &t);
  if (rc) return rc;
  int literal = tk__ph_refs(t) == 0;
  tk__ph_free(t);
  if (literal && tk__http_is_credential(e->key, e->key_len))
    return tk__spec_fail(w, e->value, key, "%s", credential_advice);
  return 0;
}

/* The headers: names are tokens curl does not compute itself, values
 * hold no line break, and check_field. */
static int check_headers(const tk__spec_where *w, const tk_toml_value *h) {
  for (size_t i = 0; h && i < tk_toml_table_len(h); i++) {
    const tk_toml_entry *e = tk_toml_table_at(h, i);
    char key[200];
    snprintf(key, sizeof key, "headers.%s", e->key);
    if (!is_token(e->key, e->key_len))
      return tk__spec_fail(w, e->value, key, "\"%s\" is not a header name (letters, digits and "
                           "!#$%%&'*+-.^_`|~)", e->key);
    if (strcasecmp(e->key, "content-length") == 0 || strcasecmp(e->key, "transfer-encoding") == 0)
      return tk__spec_fail(w, e->value, key, "set by the handler from the body");
    size_t len;
    const char *text = tk_toml_string(e->value, &len);
    if (memchr(text, '\r', len) || memchr(text, '\n', len) || strlen(text) != len)
      return tk__spec_fail(w, e->value, key, "a header value cannot hold a line break or NUL");
    int rc = check_field(w, e, key);
    if (rc) return rc;
  }
  return 0;
}

/* The query table: check_field for each value. */
static int check_query(const tk__spec_where *w, const tk_toml_value *q) {
  for (size_t i = 0; q && i < tk_toml_table_len(q); i++) {
    const tk_toml_entry *e = tk_toml_table_at(q, i);
    char key[200];
    snprintf(key, sizeof key, "query.%s", e->key);
    int rc = check_field(w, e, key);
    if (rc) return rc;
  }
  return 0;
}

/* The URL's shape (\x01 for each placeholder) is one curl can send:
 * no space or control byte among its literal parts, and, with each
 * placeholder standing for "1" (a value is percent-encoded, and "1" fits
 * a host, a port, a path and a query alike), one curl's parser takes.
 * Else every attempt would fail "malformed URL". */
static int check_sendable(const tk__spec_where *w, const tk_toml_value *v, const char *text,
                          tk__buf *shape) {
  for (size_t i = 0; i < shape->len; i++) {
    unsigned char c = (unsigned char)shape->p[i];
    if (c == ' ')
      return tk__spec_fail(w, v, "url", "\"%.60s\": a URL cannot hold a space; write it %%20 "
                           "(a placeholder's value is percent-encoded for you)", text);
    if ((c < 0x20 && c != 0x01) || c == 0x7f)
      return tk__spec_fail(w, v, "url", "\"%.60s\": a URL cannot hold the control byte 0x%02X",
                           text, c);
  }
  for (size_t i = 0; i < shape->len; i++)
    if (shape->p[i] == '\x01') shape->p[i] = '1';
  CURLU *u = curl_url();
  if (u == NULL) return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  CURLUcode uc = curl_url_set(u, CURLUPART_URL, shape->p, 0);
  curl_url_cleanup(u);
  if (uc == CURLUE_OUT_OF_MEMORY)
    return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  if (uc != CURLUE_OK)
    return tk__spec_fail(w, v, "url", "\"%.60s\": not a URL that can be sent (%s)", text,
                         curl_url_strerror(uc));
  return 0;
}

/* The URL: placeholders compile; the scheme is written, http or https,
 * and a host follows; no fragment; no literal password, and no literal
 * value for a query parameter whose name says credential. Read on the
 * URL's shape, with \x01 standing for each placeholder. */
static int check_url(const tk__spec_where *w, const tk_toml_value *v) {
  size_t len;
  const char *text = tk_toml_string(v, &len);
  tk__ph *t;
  int rc = check_text(w, v, "url", text, len, &t);
  if (rc) return rc;
  tk__buf shape = {0};
  tk__ph_shape(t, "\x01", &shape);
  tk__ph_free(t);
  if (shape.oom) {
    tk__buf_free(&shape);
    return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  }
  const char *url = shape.p ? shape.p : "";
  len = shape.len;
  size_t scheme = strncasecmp(url, "https://", 8) == 0   ? 8
                  : strncasecmp(url, "http://", 7) == 0 ? 7
                                                         : 0;
  size_t auth_end = scheme;
  while (scheme && auth_end < len && !strchr("/?#", url[auth_end])) auth_end++;
  const char *at = scheme ? memchr(url + scheme, '@', auth_end - scheme) : NULL;
  const char *colon = at ? memchr(url + scheme, ':', (size_t)(at - url) - scheme) : NULL;
  const char *hash = memchr(url, '#', len);
  const char *q = memchr(url, '?', len);
  const char *bad_param = NULL;
  size_t bad_len = 0;
  for (const char *p = q ? q + 1 : url + len; p < url + len && !bad_param;) {
    const char *amp = memchr(p, '&', (size_t)(url + len - p));
    if (amp == NULL) amp = url + len;
    const char *eq = memchr(p, '=', (size_t)(amp - p));
    if (eq && tk__http_is_credential(p, (size_t)(eq - p)) &&
        !memchr(eq + 1, '\x01', (size_t)(amp - eq - 1)))
      bad_param = p, bad_len = (size_t)(eq - p);
    p = amp + 1;
  }
  if (scheme == 0)
    rc = tk__spec_fail(w, v, "url", "\"%.60s\": expected a URL beginning http:// or https:// "
                       "(written in the template, not taken from a placeholder)", text);
  else if (auth_end == scheme || (at && at + 1 == url + auth_end))
    rc = tk__spec_fail(w, v, "url", "\"%.60s\": expected a host after \"%.*s\"", text,
                       (int)scheme, text);
  else if (hash)
    rc = tk__spec_fail(w, v, "url", "\"%.60s\": a fragment (#...) is never sent to the server; "
                       "leave it out", text);
  else if (colon && !memchr(colon, '\x01', (size_t)(at - colon)))
    rc = tk__spec_fail(w, v, "url", "a password in the URL: %s", credential_advice);
  else if (bad_param)
    rc = tk__spec_fail(w, v, "url", "query parameter \"%.*s\": %s", (int)bad_len, bad_param,
                       credential_advice);
  else
    rc = check_sendable(w, v, text, &shape);
  tk__buf_free(&shape);
  return rc;
}

/* The placeholders of every string in the body (named by its path, such
 * as body.items[2], and placed at the string itself). */
static int check_body(const tk__spec_where *w, const tk_toml_value *v, char *path, size_t plen) {
  size_t used = strlen(path);
  int rc = 0;
  if (tk_toml_type_of(v) == TK_TOML_STRING) {
    size_t len;
    const char *text = tk_toml_string(v, &len);
    rc = check_text(w, v, path, text, len, NULL);
  } else if (tk_toml_type_of(v) == TK_TOML_TABLE) {
    for (size_t i = 0; rc == 0 && i < tk_toml_table_len(v); i++) {
      const tk_toml_entry *e = tk_toml_table_at(v, i);
      snprintf(path + used, plen - used, ".%s", e->key);
      rc = check_body(w, e->value, path, plen);
    }
  } else if (tk_toml_type_of(v) == TK_TOML_ARRAY) {
    for (size_t i = 0; rc == 0 && i < tk_toml_array_len(v); i++) {
      snprintf(path + used, plen - used, "[%zu]", i + 1);
      rc = check_body(w, tk_toml_array_at(v, i), path, plen);
    }
  }
  path[used] = '\0';
  return rc;
}

/* The status lists: each code in at most one of them. */
static int check_lists(const tk__spec_where *w, const tk_toml_value *table, json_t *spec) {
  json_t *retry = json_object_get(spec, "retry_on");
  json_t *perm = json_object_get(spec, "permanent_on");
  size_t i, k;
  json_t *a, *b;
  json_array_foreach(retry, i, a) json_array_foreach(perm, k, b) {
    if (json_integer_value(a) == json_integer_value(b))
      return tk__spec_fail(w, tk_toml_get(table, "permanent_on"), "permanent_on",
                           "%lld is also in retry_on: a status is retryable or permanent, not "
                           "both", (long long)json_integer_value(a));
  }
  return 0;
}

int tk__http_validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  const tk__spec_where *w = &site->where;
  int rc = tk__spec_read(w, &schema, table, spec);
  if (rc) return rc;
  if ((rc = check_url(w, tk_toml_get(table, "url")))) return rc;
  const tk_toml_value *m = tk_toml_get(table, "method");
  const char *method = m ? tk_toml_string(m, NULL) : "GET";
  if (m) {
    tk__ph *t;
    if ((rc = check_text(w, m, "method", method, strlen(method), &t))) return rc;
    int literal = tk__ph_refs(t) == 0;
    tk__ph_free(t);
    int known = 0;
    for (int i = 0; methods[i]; i++) known |= strcmp(methods[i], method) == 0;
    if (literal && !known)
      return tk__spec_fail(w, m, "method", "\"%s\": expected GET, HEAD, POST, PUT, PATCH, DELETE "
                           "or OPTIONS (in capitals)", method);
  }
  const tk_toml_value *timeout = tk_toml_get(table, "timeout");
  if (timeout && tk__spec_int(spec, "timeout_ms", -1) == 0)
    return tk__spec_fail(w, timeout, "timeout", "0 would mean no limit, but an http request "
                         "is always limited: expected a duration of at least 1ms (without "
                         "timeout, 30s)");
  const tk_toml_value *ca = tk_toml_get(table, "ca_file");
  char why[TK_ERR_MSG_MAX];
  if (ca && tk__http_ca_file_unreadable(tk_toml_string(ca, NULL), why, sizeof why))
    return tk__spec_fail(w, ca, "ca_file", "%s", why);
  if ((rc = check_headers(w, tk_toml_get(table, "headers")))) return rc;
  if ((rc = check_query(w, tk_toml_get(table, "query")))) return rc;
  if ((rc = check_lists(w, table, spec))) return rc;
  if ((rc = check_callback(w, tk_toml_get(table, "callback"), spec))) return rc;
  const tk_toml_value *body = tk_toml_get(table, "body");
  if (body) {
    if (strcmp(method, "HEAD") == 0)
      return tk__spec_fail(w, body, "body", "a HEAD request has no body");
    json_t *j;
    const tk_toml_value *bad = NULL;
    rc = tk__toml_to_json(body, &j, &bad);
    if (rc == TK_ECONFIG)
      return tk__spec_fail(w, bad, "body", "JSON has no nan or inf");
    if (rc) return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
    char path[256] = "body";
    if ((rc = check_body(w, body, path, sizeof path)) != 0) {
      json_decref(j);
      return rc;
    }
    if (json_object_set_new(spec, "body", j) != 0)
      return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  }
  return 0;
}

/* ---- the compiled form ---------------------------------------------------------------- */

int tk__http_ca_file_unreadable(const char *path, char *why, size_t len) {
  struct stat st;
  FILE *f = NULL;
  if (stat(path, &st) != 0 || (S_ISREG(st.st_mode) && (f = fopen(path, "r")) == NULL)) {
    snprintf(why, len, "\"%.200s\" cannot be read (%s)", path, strerror(errno));
    return 1;
  }
  if (f) fclose(f);
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, len, "\"%.200s\" is not a file; expected a PEM file of CA certificates", path);
    return 1;
  }
  return 0;
}

tk__http_class tk__http_default_class(int status) {
  if (status >= 200 && status < 300) return TK__HTTP_SUCCESS;
  switch (status) {
  case 408: /* Request Timeout */
  case 425: /* Too Early */
  case 429: /* Too Many Requests */
    return TK__HTTP_RETRY;
  case 501: /* Not Implemented: this server never will */
  case 505: /* HTTP Version Not Supported */
    return TK__HTTP_PERMANENT;
  default:
    /* A server's failure (5xx) may pass, and the attempts bound the
     * cost; a client's (4xx, or a 3xx not followed) would be repeated. */
    return status >= 500 && status < 600 ? TK__HTTP_RETRY : TK__HTTP_PERMANENT;
  }
}

/* Note why the step cannot run (the first reason is kept). */
static void broken(tk__http_step *s, const char *what, const char *why) {
  if (s->broken) return;
  size_t len = strlen(what) + strlen(why) + 64;
  s->broken = malloc(len);
  if (s->broken) snprintf(s->broken, len, "http: the stored spec's %s: %s", what, why);
}

/* Compile a spec string (an empty one when absent). */
static tk__ph *compile_str(tk__http_step *s, json_t *v, const char *what) {
  char why[TK_ERR_MSG_MAX];
  tk__ph *t = NULL;
  const char *text = json_is_string(v) ? json_string_value(v) : "";
  if (tk__ph_compile(text, json_is_string(v) ? json_string_length(v) : 0, &t, why, sizeof why))
    broken(s, what, why);
  return t;
}

/* The fields of a table of strings (headers, query). */
static tk__http_field *compile_fields(tk__http_step *s, json_t *table, const char *what,
                                      size_t *n) {
  *n = 0;
  size_t size = json_object_size(table);
  tk__http_field *f = calloc(size + 1, sizeof *f);
  if (f == NULL) {
    broken(s, what, "out of memory");
    return NULL;
  }
  const char *key;
  json_t *v;
  json_object_foreach(table, key, v) {
    f[*n].name = strdup(key);
    f[*n].value = compile_str(s, v, what);
    f[*n].credential = tk__http_is_credential(key, strlen(key));
    if (f[*n].name == NULL) broken(s, what, "out of memory");
    (*n)++;
  }
  return f;
}

static void free_fields(tk__http_field *f, size_t n) {
  for (size_t i = 0; f && i < n; i++) {
    free(f[i].name);
    tk__ph_free(f[i].value);
  }
  free(f);
}

tk__http_step *tk__http_compile(json_t *spec) {
  tk__http_step *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  json_t *method = json_object_get(spec, "method");
  char why[TK_ERR_MSG_MAX];
  if (method) s->method = compile_str(s, method, "method");
  else if (tk__ph_compile("GET", 3, &s->method, why, sizeof why)) broken(s, "method", why);
  s->url = compile_str(s, json_object_get(spec, "url"), "url");
  s->headers = compile_fields(s, json_object_get(spec, "headers"), "headers", &s->nheaders);
  s->query = compile_fields(s, json_object_get(spec, "query"), "query", &s->nquery);
  json_t *body = json_object_get(spec, "body");
  if (body == NULL) {
    s->body_kind = TK__HTTP_BODY_DEFAULT;
  } else if (json_is_string(body)) {
    s->body_text = compile_str(s, body, "body");
    s->body_kind = s->body_text && tk__ph_single(s->body_text) ? TK__HTTP_BODY_VALUE
                                                                : TK__HTTP_BODY_TEXT;
  } else {
    s->body_kind = TK__HTTP_BODY_JSON;
    s->body_json = body;
  }
  s->connect_timeout_ms =
      tk__spec_int(spec, "connect_timeout_ms", TK__HTTP_DEFAULT_CONNECT_TIMEOUT_MS);
  s->max_redirects = (long)tk__spec_int(spec, "max_redirects", TK__HTTP_DEFAULT_MAX_REDIRECTS);
  s->max_response = (size_t)tk__spec_int(spec, "max_response", TK__HTTP_DEFAULT_MAX_RESPONSE);
  const char *ca = json_string_value(json_object_get(spec, "ca_file"));
  if (ca && (s->ca_file = strdup(ca)) == NULL) broken(s, "ca_file", "out of memory");
  for (int code = 100; code < 600; code++)
    s->classes[code] = (unsigned char)tk__http_default_class(code);
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(spec, "retry_on"), i, c) {
    json_int_t code = json_integer_value(c);
    if (code >= 100 && code < 600) s->classes[code] = TK__HTTP_RETRY;
  }
  json_array_foreach(json_object_get(spec, "permanent_on"), i, c) {
    json_int_t code = json_integer_value(c);
    if (code >= 100 && code < 600) s->classes[code] = TK__HTTP_PERMANENT;
  }
  return s;
}

void tk__http_step_free(tk__http_step *s) {
  if (s == NULL) return;
  tk__ph_free(s->method);
  tk__ph_free(s->url);
  free_fields(s->headers, s->nheaders);
  free_fields(s->query, s->nquery);
  tk__ph_free(s->body_text);
  free(s->ca_file);
  free(s->broken);
  free(s);
}
