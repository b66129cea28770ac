/* Test helper: real HTTP requests with libcurl to a tasker server, and
 * checks of the API's answers (docs/api.md). Include after <cmocka.h>;
 * every helper fails the running test on an unexpected error, and every
 * answer must carry the security headers docs/api.md lists. */
#ifndef TESTS_SERVER_API_CLIENT_H
#define TESTS_SERVER_API_CLIENT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>

typedef struct api_resp {
  long status;
  char *body; /* NUL-terminated, owned */
  size_t len;
  char content_type[128];
  char allow[64];
  char www_auth[64];
  char security[5][160]; /* the values of api_security_headers, in order */
} api_resp;

/* What every answer of the server carries (docs/api.md "Safety"). */
static const char *const api_security_headers[5][2] = {
    {"X-Content-Type-Options", "nosniff"},
    {"Cache-Control", "no-store"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors "
                                "'none'; form-action 'none'"},
};

static size_t api_on_body(char *p, size_t size, size_t n, void *ud) {
  api_resp *r = ud;
  size_t add = size * n;
  r->body = realloc(r->body, r->len + add + 1);
  assert_non_null(r->body);
  memcpy(r->body + r->len, p, add);
  r->len += add;
  r->body[r->len] = '\0';
  return add;
}

/* Keep a header's value (trimmed) when its name matches. */
static void api_keep(const char *line, size_t n, const char *name, char *out, size_t cap) {
  size_t k = strlen(name);
  if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') return;
  const char *v = line + k + 1;
  while (*v == ' ') v++;
  size_t len = (size_t)(line + n - v);
  while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n')) len--;
  snprintf(out, cap, "%.*s", (int)len, v);
}

static size_t api_on_header(char *p, size_t size, size_t n, void *ud) {
  api_resp *r = ud;
  api_keep(p, size * n, "Content-Type", r->content_type, sizeof r->content_type);
  api_keep(p, size * n, "Allow", r->allow, sizeof r->allow);
  api_keep(p, size * n, "WWW-Authenticate", r->www_auth, sizeof r->www_auth);
  for (int i = 0; i < 5; i++)
    api_keep(p, size * n, api_security_headers[i][0], r->security[i], sizeof r->security[i]);
  return size * n;
}

/* `method` on url with body (may be NULL: none; len -1: strlen) and extra
 * headers (NULL-terminated, may be NULL). */
static api_resp api_request(const char *method, const char *url, const char *body, long len,
                            const char *const *headers) {
  api_resp r;
  memset(&r, 0, sizeof r);
  r.body = calloc(1, 1);
  CURL *c = curl_easy_init();
  assert_non_null(c);
  struct curl_slist *h = NULL;
  for (int i = 0; headers && headers[i]; i++) h = curl_slist_append(h, headers[i]);
  h = curl_slist_append(h, "Expect:"); /* send bodies at once */
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(len < 0 ? (long)strlen(body) : len));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, api_on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, api_on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) fail_msg("%s %s: %s", method, url, curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  /* Every answer, whatever its route or status. */
  for (int i = 0; i < 5; i++)
    if (strcmp(r.security[i], api_security_headers[i][1]) != 0)
      fail_msg("%s %s: %ld answered with %s: \"%s\", expected \"%s\"", method, url, r.status,
               api_security_headers[i][0], r.security[i], api_security_headers[i][1]);
  return r;
}

static void api_resp_free(api_resp *r) {
  free(r->body);
  r->body = NULL;
}

/* The body as JSON (decref when done), failing when it is not JSON. */
static json_t *api_json(const api_resp *r) {
  json_error_t e;
  json_t *j = json_loads(r->body, 0, &e);
  if (j == NULL) fail_msg("not JSON (%s): %s", e.text, r->body);
  return j;
}

/* Assert r is the error shape of docs/api.md with this status, code,
 * param (NULL: none) and a message containing `says`; frees r. */
static void api_expect_error(api_resp *r, long status, const char *code, const char *param,
                             const char *says) {
  if (r->status != status) fail_msg("status %ld, expected %ld: %s", r->status, status, r->body);
  assert_string_equal(r->content_type, "application/json");
  json_t *j = api_json(r), *e = json_object_get(j, "error");
  assert_non_null(e);
  assert_int_equal(json_integer_value(json_object_get(e, "status")), status);
  assert_string_equal(json_string_value(json_object_get(e, "code")), code);
  const char *p = json_string_value(json_object_get(e, "param"));
  if (param) {
    if (p == NULL || strcmp(p, param) != 0) fail_msg("param %s, expected %s: %s", p, param, r->body);
  } else if (p != NULL) {
    fail_msg("param %s, expected none: %s", p, r->body);
  }
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (msg == NULL || strstr(msg, says) == NULL)
    fail_msg("message does not say \"%s\": %s", says, r->body);
  json_decref(j);
  api_resp_free(r);
}

/* Assert status and return the parsed body (r freed). */
static json_t *api_expect_json(api_resp *r, long status) {
  if (r->status != status) fail_msg("status %ld, expected %ld: %s", r->status, status, r->body);
  assert_string_equal(r->content_type, "application/json");
  json_t *j = api_json(r);
  api_resp_free(r);
  return j;
}

/* Parse Prometheus text: every sample line is NAME[{LABELS}] VALUE with a
 * number; returns the value of `series` (the whole NAME{LABELS}), failing
 * when absent or when any line is malformed. */
static double api_metric(const char *text, const char *series) {
  double found = -1;
  int seen = 0;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    if (n > 0 && line[0] != '#') {
      const char *sp = line + n;
      while (sp > line && *sp != ' ') sp--;
      if (*sp != ' ') fail_msg("metrics line without a value: %.*s", (int)n, line);
      char value[64];
      snprintf(value, sizeof value, "%.*s", (int)(line + n - sp - 1), sp + 1);
      char *stop;
      double v = strtod(value, &stop);
      if (*stop != '\0' || value[0] == '\0') fail_msg("metrics value not a number: %.*s", (int)n, line);
      if ((size_t)(sp - line) == strlen(series) && strncmp(line, series, strlen(series)) == 0) {
        found = v;
        seen = 1;
      }
    }
    line = end ? end + 1 : line + n;
  }
  if (!seen) fail_msg("no series %s in:\n%s", series, text);
  return found;
}

#endif
