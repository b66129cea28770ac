/* The http handler (DESIGN §8, docs/handlers.md) against a real loopback
 * server (common/http_stub.h), through the engine: inline on the manual
 * clock where times are checked (Retry-After in each of its forms becomes
 * the attempt's delay with source "server", capped by max_server_delay),
 * and with workers on real time for the asynchronous path (a reactor
 * thread, not a thread per request; leases kept by heartbeats; a stop
 * that waits for requests in flight; an engine freed with requests in
 * flight). Status classes and their overrides, transport errors (timeout,
 * reset, refused, closed, DNS through a resolver hook, a failed TLS
 * handshake), TLS verification against an HTTPS server with a
 * self-signed certificate (common/tls_stub.h: refused untrusted, accepted
 * through ca_file, refused for another host name), response limits,
 * redirects, placeholders, template-time checks (a URL curl cannot send,
 * a zero timeout, an unreadable ca_file), credentials and {{env.*}}
 * values kept out of messages, results, events and `tasker show` (on
 * SQLite and PostgreSQL), no Expect header, and runs of the tasker
 * binary. */
#define _GNU_SOURCE /* setenv, strcasestr */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include <tasker/toml.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/http_stub.h"
#include "common/run_cli.h"
#include "common/spec_read.h"
#include "common/tls_stub.h"
#include "handlers/handler.h"
#include "handlers/http.h"

typedef struct hfx {
  efx *f;
  http_stub *srv;
  tls_stub *tls; /* the TLS tests' server, if started */
  void *owned[64]; /* answers built at run time: they outlive the server */
  int nowned;
} hfx;

/* Keep p until the teardown (after the server has stopped). */
static void *own(hfx *h, void *p) {
  assert_true(h->nowned < 64);
  h->owned[h->nowned++] = p;
  return p;
}

static const char *const default_sets[] = {"backoff.jitter=none", NULL};

/* A fixture: a stub server, and the engine fixture with `sets`. */
static hfx *open_with(void **state, const char *const *sets) {
  hfx *h = calloc(1, sizeof *h);
  h->srv = http_stub_start();
  assert_non_null(h->srv);
  h->f = efx_new(sets ? sets : default_sets, "orch-1");
  *state = h;
  return h;
}

static int setup(void **state) {
  *state = NULL;
  return 0;
}

static int teardown(void **state) {
  hfx *h = *state;
  if (h == NULL) return 0;
  if (h->f) {
    efx_close(h->f);
    free(h->f);
  }
  http_stub_stop(h->srv);
  tls_stub_stop(h->tls);
  for (int i = 0; i < h->nowned; i++) free(h->owned[i]);
  free(h);
  return 0;
}

/* Store template `name`: one step "s" with the http handler `keys` (the
 * inside of its inline table after kind and url), URL `path` on the stub,
 * under `retry` (an inline table). */
static void http_step(hfx *h, const char *name, const char *path, const char *keys,
                      const char *retry) {
  char toml[4096];
  snprintf(toml, sizeof toml,
           "name = \"%s\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"%s\"%s%s }\nretry = %s\n",
           name, http_stub_url(h->srv, path), keys && *keys ? ", " : "", keys ? keys : "",
           retry ? retry : "{ max_attempts = 3 }");
  efx_template(h->f, toml);
}

/* A string member of a JSON object ("" if absent). */
static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* The attempt `n` (1-based) of step "s" in task `id`'s report (the
 * report is freed by the caller: *task). */
static json_t *attempt(hfx *h, int64_t id, int n, json_t **task) {
  *task = efx_task(h->f, id);
  json_t *a = json_array_get(json_object_get(efx_step(*task, "s"), "history"), (size_t)n - 1);
  if (a == NULL) fail_msg("no attempt %d", n);
  return a;
}

/* The last_error of step "s" (malloc'd). */
static char *last_error(hfx *h, int64_t id) {
  json_t *task = efx_task(h->f, id);
  char *e = strdup(str(efx_step(task, "s"), "last_error"));
  json_decref(task);
  return e;
}

/* A task of template `name` with `context` (NULL: {}) run until nothing is
 * scheduled: its step "s" fails permanently, after one attempt, with
 * last_error `want`. Returns the task's id. */
static int64_t fails_with(hfx *h, const char *name, const char *context, const char *want) {
  int64_t id = efx_submit(h->f, name, context);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "error", "s", "error", NULL);
  json_t *task = efx_task(h->f, id);
  json_t *s = efx_step(task, "s");
  assert_int_equal(json_integer_value(json_object_get(s, "attempts")), 1);
  assert_string_equal(str(s, "last_error"), want);
  json_decref(task);
  return id;
}

static void cli_ok(run_result *r, const char *const *args);

/* ---- 2xx ------------------------------------------------------------------------------ */

static void a_json_object_becomes_the_results(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer ok[] = {
      {HTTP_STUB_ANSWER, 200, "Content-Type: application/json\r\n", "{\"token\": \"t-1\", \"n\": 2}",
       1, 0, 0}};
  http_stub_route(h->srv, "/ok", ok, 1);
  http_step(h, "ok", "/ok", NULL, NULL);
  int64_t id = efx_submit(h->f, "ok", NULL);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  json_t *task = efx_task(h->f, id);
  char *r = json_dumps(json_object_get(efx_step(task, "s"), "results"), JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(r, "{\"n\":2,\"token\":\"t-1\"}");
  free(r);
  json_decref(task);
  /* A GET: no body, and the defaults' headers. */
  char *req = http_stub_last(h->srv, "/ok");
  expect_contains(req, "GET /ok HTTP/1.1\r\n");
  expect_contains(req, "Accept: application/json\r\n");
  expect_contains(req, "User-Agent: tasker/");
  /* No Expect header at all (curl would send one, empty or 100-continue). */
  assert_null(strcasestr(req, "\r\nExpect:"));
  free(req);
}

/* Run a one-step task against answers `a` and return its results as
 * compact sorted JSON (malloc'd). */
static char *results_of(hfx *h, const char *name, const http_stub_answer *a, const char *keys) {
  char path[64];
  snprintf(path, sizeof path, "/%s", name);
  http_stub_route(h->srv, path, a, 1);
  http_step(h, name, path, keys, NULL);
  int64_t id = efx_submit(h->f, name, NULL);
  efx_drive(h->f, 20);
  json_t *task = efx_task(h->f, id);
  json_t *s = efx_step(task, "s");
  if (strcmp(str(s, "state"), "complete") != 0)
    fail_msg("%s: %s: %s", name, str(s, "state"), str(s, "last_error"));
  char *r = json_dumps(json_object_get(s, "results"), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  json_decref(task);
  return r;
}

static void other_bodies_are_kept_never_dropped(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer text[] = {
      {HTTP_STUB_ANSWER, 200, "Content-Type: text/plain\r\n", "hello", 1, 0, 0}};
  static const http_stub_answer array[] = {
      {HTTP_STUB_ANSWER, 201, "Content-Type: application/json\r\n", "[1, 2]", 1, 0, 0}};
  static const http_stub_answer bare[] = {{HTTP_STUB_ANSWER, 200, NULL, "plain words", 1, 0, 0}};
  static const http_stub_answer bare_json[] = {{HTTP_STUB_ANSWER, 200, NULL, "{\"a\":1}", 1, 0, 0}};
  static const http_stub_answer empty[] = {{HTTP_STUB_ANSWER, 204, NULL, NULL, 1, 0, 0}};
  static const http_stub_answer binary[] = {
      {HTTP_STUB_ANSWER, 200, "Content-Type: application/octet-stream\r\n", "\xff\xfe", 1, 0, 0}};
  static const struct {
    const char *name;
    const http_stub_answer *answer;
    const char *results;
  } cases[] = {
      {"text", text, "{\"body\":\"hello\",\"content_type\":\"text/plain\",\"status\":200}"},
      {"array", array, "{\"body\":[1,2],\"content_type\":\"application/json\",\"status\":201}"},
      {"bare", bare, "{\"body\":\"plain words\",\"status\":200}"},
      {"bare_json", bare_json, "{\"a\":1}"},
      {"empty", empty, "null"},
      {"binary", binary, "{\"body_base64\":\"//4=\",\"content_type\":\"application/octet-stream\","
                         "\"status\":200}"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *r = results_of(h, cases[i].name, cases[i].answer, NULL);
    assert_string_equal(r, cases[i].results);
    free(r);
  }
}

static void a_body_that_says_json_and_is_not_fails_permanently(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer half[] = {
      {HTTP_STUB_ANSWER, 200, "Content-Type: application/json; charset=utf-8\r\n", "{\"x\": ", 1,
       0, 0}};
  http_stub_route(h->srv, "/half", half, 1);
  http_step(h, "half", "/half", NULL, NULL);
  char want[600];
  snprintf(want, sizeof want,
           "GET %s: HTTP 200 with Content-Type application/json; charset=utf-8, but the body is "
           "not JSON: invalid JSON at line 1, column 6: unexpected token near end of file; the "
           "body began \"{\\\"x\\\": \"",
           http_stub_url(h->srv, "/half"));
  fails_with(h, "half", NULL, want);
  assert_int_equal(http_stub_count(h->srv, "/half"), 1);
}

/* ---- Retry-After: the server's hint ---------------------------------------------------- */

/* 429 with `retry_after` then 200: the first attempt's row has the delay
 * `want_ms` from source "server", and the retry runs exactly then. */
static void hinted(hfx *h, const char *name, const char *retry_after, int64_t want_ms) {
  char path[64], *headers = own(h, malloc(200));
  snprintf(path, sizeof path, "/%s", name);
  snprintf(headers, 200, "Retry-After: %s\r\n", retry_after);
  http_stub_answer *a = own(h, calloc(2, sizeof *a));
  a[0] = (http_stub_answer){HTTP_STUB_ANSWER, 429, headers, "{\"error\": \"slow down\"}", 1, 0, 0};
  a[1] = (http_stub_answer){HTTP_STUB_ANSWER, 200, NULL, "{}", 1, 0, 0};
  http_stub_route(h->srv, path, a, 2);
  http_step(h, name, path, NULL, NULL);
  h->f->clock.now_ms = EFX_T0;
  int64_t id = efx_submit(h->f, name, NULL);
  efx_tick(h->f); /* claims, runs and records the first attempt */
  assert_int_equal(efx_tick(h->f), EFX_T0 + want_ms);
  json_t *task;
  json_t *a1 = attempt(h, id, 1, &task);
  assert_string_equal(str(a1, "outcome"), "failure");
  assert_int_equal(json_integer_value(json_object_get(a1, "delay_ms")), want_ms);
  assert_string_equal(str(a1, "delay_source"), "server");
  assert_int_equal(json_integer_value(json_object_get(a1, "next_run_at")), EFX_T0 + want_ms);
  char want[300];
  snprintf(want, sizeof want, "GET %s: HTTP 429 Too Many Requests (Retry-After: %s): "
           "\"{\\\"error\\\": \\\"slow down\\\"}\"", http_stub_url(h->srv, path), retry_after);
  assert_string_equal(str(a1, "error"), want);
  json_decref(task);
  /* Not a millisecond early (a date in the past is due at once). */
  if (want_ms > 0) {
    h->f->clock.now_ms = EFX_T0 + want_ms - 1;
    efx_tick(h->f);
    assert_int_equal(http_stub_count(h->srv, path), 1);
  }
  h->f->clock.now_ms = EFX_T0 + want_ms;
  efx_tick(h->f);
  assert_int_equal(http_stub_count(h->srv, path), 2);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  h->f->clock.now_ms = EFX_T0;
}

/* The manual clock starts at 2026-01-01 00:00:00 UTC, a Thursday. */
static void retry_after_in_each_form_is_the_servers_hint(void **state) {
  hfx *h = open_with(state, NULL);
  hinted(h, "seconds", "120", 120000);
  hinted(h, "imf", "Thu, 01 Jan 2026 00:02:00 GMT", 120000);
  hinted(h, "rfc850", "Thursday, 01-Jan-26 00:02:00 GMT", 120000);
  hinted(h, "asctime", "Thu Jan  1 00:02:00 2026", 120000);
  hinted(h, "past", "Wed, 31 Dec 2025 23:00:00 GMT", 0);
}

static void retry_after_is_capped_by_max_server_delay(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.max_server_delay=\"45s\"",
                                     NULL};
  hfx *h = open_with(state, sets);
  hinted(h, "capped", "120", 45000);
  hinted(h, "capped_date", "Thu, 01 Jan 2026 01:00:00 GMT", 45000);
  /* Too long to count, or the latest date there is: the cap too, not the
   * policy's delay (which would retry at once). */
  hinted(h, "huge", "99999999999999999999", 45000);
  hinted(h, "far_date", "Fri, 31 Dec 9999 23:59:59 GMT", 45000);
}

static void an_unreadable_retry_after_leaves_the_policys_delay(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=\"3s\"", NULL};
  hfx *h = open_with(state, sets);
  static const http_stub_answer a[] = {
      {HTTP_STUB_ANSWER, 503, "Retry-After: soon\r\n", NULL, 1, 0, 0},
      {HTTP_STUB_ANSWER, 200, NULL, NULL, 1, 0, 0}};
  http_stub_route(h->srv, "/soon", a, 2);
  http_step(h, "soon", "/soon", NULL, NULL);
  int64_t id = efx_submit(h->f, "soon", NULL);
  efx_tick(h->f);
  json_t *task;
  json_t *a1 = attempt(h, id, 1, &task);
  assert_int_equal(json_integer_value(json_object_get(a1, "delay_ms")), 3000);
  assert_string_equal(str(a1, "delay_source"), "computed");
  expect_contains(str(a1, "error"), "HTTP 503 Service Unavailable (Retry-After \"soon\": "
                                    "malformed; expected whole seconds or an HTTP-date");
  expect_contains(str(a1, "error"), "; ignored)");
  json_decref(task);
}

/* ---- status classes ---------------------------------------------------------------------- */

/* Status `status` for a step with `keys`: the step's state after one
 * attempt ("waiting_for_retry" or "error"), checked against want. */
static void one_status(hfx *h, int status, const char *keys, const char *want_state,
                       const char *want_error_part) {
  static int n;
  char name[32], path[40];
  snprintf(name, sizeof name, "st%d", ++n);
  snprintf(path, sizeof path, "/%s", name);
  http_stub_answer *a = own(h, calloc(1, sizeof *a));
  *a = (http_stub_answer){HTTP_STUB_ANSWER, status, NULL, "nope", 1, 0, 0};
  http_stub_route(h->srv, path, a, 1);
  http_step(h, name, path, keys, "{ max_attempts = 3 }");
  int64_t id = efx_submit(h->f, name, NULL);
  efx_tick(h->f);
  json_t *task = efx_task(h->f, id);
  json_t *s = efx_step(task, "s");
  if (strcmp(str(s, "state"), want_state) != 0)
    fail_msg("status %d with {%s}: %s, wanted %s (%s)", status, keys ? keys : "",
             str(s, "state"), want_state, str(s, "last_error"));
  expect_contains(str(s, "last_error"), want_error_part);
  json_decref(task);
}

static void status_classes_and_their_overrides(void **state) {
  hfx *h = open_with(state, NULL);
  const char *retry = "waiting_for_retry", *perm = "error";
  int retryable[] = {408, 425, 429, 500, 502, 503, 504, 507};
  for (size_t i = 0; i < sizeof retryable / sizeof retryable[0]; i++)
    one_status(h, retryable[i], NULL, retry, "HTTP ");
  one_status(h, 404, NULL, perm, "HTTP 404 Not Found: \"nope\"");
  int permanent[] = {400, 401, 403, 409, 422, 501, 505};
  for (size_t i = 0; i < sizeof permanent / sizeof permanent[0]; i++)
    one_status(h, permanent[i], NULL, perm, "HTTP ");
  /* The lists, per step. */
  one_status(h, 404, "retry_on = [404, 409]", retry, "HTTP 404 Not Found (retry_on): \"nope\"");
  one_status(h, 503, "permanent_on = [503]", perm,
             "HTTP 503 Service Unavailable (permanent_on): \"nope\"");
  one_status(h, 202, "retry_on = [202]", retry, "HTTP 202 Status (retry_on)");
  one_status(h, 500, "retry_on = [404]", retry, "HTTP 500");
}

/* ---- transport errors -------------------------------------------------------------------- */

/* A port on loopback where nothing listens. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* One attempt of template `name` (already stored): its row. */
static json_t *first_attempt(hfx *h, const char *name, json_t **task) {
  int64_t id = efx_submit(h->f, name, NULL);
  efx_tick(h->f);
  return attempt(h, id, 1, task);
}

static void transport_errors_are_retryable_and_named(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer slow[] = {{HTTP_STUB_ANSWER, 200, NULL, "{}", 1, 3000, 0}};
  static const http_stub_answer reset[] = {{HTTP_STUB_RESET, 0, NULL, NULL, 1, 0, 0}};
  static const http_stub_answer closed[] = {{HTTP_STUB_CLOSE, 0, NULL, NULL, 1, 0, 0}};
  http_stub_route(h->srv, "/slow", slow, 1);
  http_stub_route(h->srv, "/reset", reset, 1);
  http_stub_route(h->srv, "/closed", closed, 1);
  http_step(h, "slow", "/slow", "timeout = \"300ms\"", NULL);
  http_step(h, "reset", "/reset", NULL, NULL);
  http_step(h, "closed", "/closed", NULL, NULL);
  char toml[512];
  snprintf(toml, sizeof toml,
           "name = \"refused\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"http://127.0.0.1:%d/x\" }\n",
           closed_port());
  efx_template(h->f, toml);
  json_t *task;
  json_t *a = first_attempt(h, "slow", &task);
  assert_string_equal(str(a, "outcome"), "timeout");
  char want[300];
  snprintf(want, sizeof want, "GET %s: timed out after 300ms (timeout)",
           http_stub_url(h->srv, "/slow"));
  assert_string_equal(str(a, "error"), want);
  assert_string_equal(str(a, "delay_source"), "computed");
  json_decref(task);

  a = first_attempt(h, "reset", &task);
  assert_string_equal(str(a, "outcome"), "failure");
  assert_non_null(json_object_get(a, "delay_ms"));
  expect_contains(str(a, "error"), "connection reset by the server (");
  json_decref(task);

  a = first_attempt(h, "closed", &task);
  snprintf(want, sizeof want, "GET %s: the server closed the connection without answering",
           http_stub_url(h->srv, "/closed"));
  assert_string_equal(str(a, "error"), want);
  assert_non_null(json_object_get(a, "delay_ms"));
  json_decref(task);

  a = first_attempt(h, "refused", &task);
  expect_contains(str(a, "error"), ": connection refused (Failed to connect to 127.0.0.1 port ");
  assert_non_null(json_object_get(a, "delay_ms"));
  json_decref(task);
}

/* A host name that does not resolve: a retryable failure naming the
 * host, through curl's own path for it (the resolution refused by a test
 * hook, not asked of the machine's resolver). */
static void a_host_that_does_not_resolve_is_retryable_and_named(void **state) {
  hfx *h = open_with(state, NULL);
  efx_template(h->f, "name = \"dns\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
                     "handler = { kind = \"http\", url = \"http://orders.example:8080/x\" }\n"
                     "retry = { max_attempts = 3 }\n");
  tk__http_test_fail_resolves(1);
  json_t *task;
  int64_t id = efx_submit(h->f, "dns", NULL);
  efx_tick(h->f);
  tk__http_test_fail_resolves(0);
  json_t *a = attempt(h, id, 1, &task);
  assert_string_equal(str(a, "outcome"), "failure");
  assert_string_equal(str(a, "error"), "GET http://orders.example:8080/x: could not resolve the "
                                       "host (Could not resolve host: orders.example)");
  assert_string_equal(str(a, "delay_source"), "computed");
  assert_non_null(json_object_get(a, "next_run_at"));
  assert_string_equal(str(efx_step(task, "s"), "state"), "waiting_for_retry");
  json_decref(task);
  /* It is the hook that fails it: "localhost" (which the machine
   * resolves, to the stub here) fails too while it is on, and answers
   * once it is off. */
  static const http_stub_answer ok[] = {{HTTP_STUB_ANSWER, 200, NULL, "{}", 1, 0, 0}};
  http_stub_route(h->srv, "/local", ok, 1);
  char toml[512];
  snprintf(toml, sizeof toml,
           "name = \"local\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"http://localhost:%d/local\" }\n",
           http_stub_port(h->srv));
  efx_template(h->f, toml);
  tk__http_test_fail_resolves(1);
  a = first_attempt(h, "local", &task);
  tk__http_test_fail_resolves(0);
  expect_contains(str(a, "error"), "could not resolve the host (Could not resolve host: "
                                   "localhost)");
  json_decref(task);
  assert_int_equal(http_stub_count(h->srv, "/local"), 0);
  a = first_attempt(h, "local", &task);
  assert_string_equal(str(a, "outcome"), "success");
  json_decref(task);
}

/* A listener that answers whatever connects with plain text and closes:
 * what an https client meets at a server that does not speak TLS. */
typedef struct plain_server {
  int fd, port;
  pthread_t thread;
} plain_server;

static void *plain_serve(void *arg) {
  plain_server *p = arg;
  int c = accept(p->fd, NULL, NULL);
  if (c >= 0) {
    static const char text[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    (void)!write(c, text, sizeof text - 1);
    close(c);
  }
  return NULL;
}

static void plain_start(plain_server *p) {
  p->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(p->fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(p->fd, 4), 0);
  assert_int_equal(getsockname(p->fd, (struct sockaddr *)&a, &len), 0);
  p->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&p->thread, NULL, plain_serve, p), 0);
}

/* A failed handshake (a server that does not speak TLS) is a retryable
 * transport error that says it was TLS. */
static void a_failed_tls_handshake_is_retryable_and_named(void **state) {
  hfx *h = open_with(state, NULL);
  plain_server p;
  plain_start(&p);
  char toml[512];
  snprintf(toml, sizeof toml,
           "name = \"tls\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"https://127.0.0.1:%d/x\", timeout = \"5s\" }\n",
           p.port);
  efx_template(h->f, toml);
  json_t *task;
  json_t *a = first_attempt(h, "tls", &task);
  pthread_join(p.thread, NULL);
  close(p.fd);
  assert_string_equal(str(a, "outcome"), "failure");
  assert_non_null(json_object_get(a, "delay_ms"));
  expect_contains(str(a, "error"), "TLS");
  json_decref(task);
}

/* ---- TLS verification, against a server with a self-signed certificate ---- */

/* Start the fixture's HTTPS server, its certificate naming "localhost"
 * only (not 127.0.0.1), made in a directory of its own. */
static tls_stub *tls_open(hfx *h) {
  char dir[300], why[1024];
  snprintf(dir, sizeof dir, "%s/tls", h->f->dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  h->tls = tls_stub_start(dir, "localhost", why, sizeof why);
  if (h->tls == NULL) fail_msg("cannot start the TLS server: %s", why);
  return h->tls;
}

/* Store template `name`: one step "s" requesting https://HOST:PORT/x on
 * the TLS server, trusting `ca_file` (NULL: the system's CAs only). */
static void tls_step(hfx *h, const char *name, const char *host, const char *ca_file) {
  char toml[1024], ca[600] = "";
  if (ca_file) snprintf(ca, sizeof ca, ", ca_file = \"%s\"", ca_file);
  snprintf(toml, sizeof toml,
           "name = \"%s\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"https://%s:%d/x\", timeout = \"60s\"%s }\n",
           name, host, tls_stub_port(h->tls), ca);
  efx_template(h->f, toml);
}

/* The first attempt of template `name` was refused for the server's
 * certificate: a retryable failure naming `why` in curl's words, and no
 * request reached the server. */
static void refused_for_the_certificate(hfx *h, const char *name, const char *why) {
  json_t *task;
  json_t *a = first_attempt(h, name, &task);
  if (strcmp(str(a, "outcome"), "failure") != 0)
    fail_msg("%s: the attempt's outcome is %s, not a failure: its certificate was let through",
             name, str(a, "outcome"));
  expect_contains(str(a, "error"), "TLS: the server's certificate could not be verified (");
  expect_contains(str(a, "error"), why);
  assert_non_null(json_object_get(a, "delay_ms"));
  json_decref(task);
  assert_int_equal(tls_stub_count(h->tls), 0);
}

/* A certificate no trusted CA signed is refused without ca_file, though
 * the host name matches it. */
static void tls_refuses_a_certificate_it_does_not_trust(void **state) {
  hfx *h = open_with(state, NULL);
  tls_open(h);
  tls_step(h, "untrusted", "localhost", NULL);
  refused_for_the_certificate(h, "untrusted", "self-signed certificate");
}

/* The same server is accepted when ca_file trusts its certificate. */
static void tls_accepts_a_certificate_trusted_through_ca_file(void **state) {
  hfx *h = open_with(state, NULL);
  tls_open(h);
  tls_step(h, "trusted", "localhost", tls_stub_cert(h->tls));
  json_t *task;
  json_t *a = first_attempt(h, "trusted", &task);
  if (strcmp(str(a, "outcome"), "success") != 0)
    fail_msg("trusted through ca_file, yet: %s: %s", str(a, "outcome"), str(a, "error"));
  char *r = json_dumps(json_object_get(efx_step(task, "s"), "results"), JSON_COMPACT);
  assert_string_equal(r, "{\"tls\":true}");
  free(r);
  json_decref(task);
  assert_int_equal(tls_stub_count(h->tls), 1);
}

/* A trusted certificate for another name is refused: connected to as
 * 127.0.0.1, the server shows a certificate that names only localhost. */
static void tls_refuses_a_trusted_certificate_for_another_host_name(void **state) {
  hfx *h = open_with(state, NULL);
  tls_open(h);
  tls_step(h, "other-name", "127.0.0.1", tls_stub_cert(h->tls));
  refused_for_the_certificate(h, "other-name", "matches target host name '127.0.0.1'");
}

/* The template's CA file, removed after `template add` (or not a CA
 * bundle): every attempt would fail the same way, so the first is a
 * permanent failure saying so, not a retryable TLS one. */
static void a_ca_file_that_cannot_be_used_fails_permanently(void **state) {
  hfx *h = open_with(state, NULL);
  plain_server p;
  plain_start(&p);
  char ca[400], toml[1024], want[700];
  efx_write(h->f->dir, "gone.pem", "", ca, sizeof ca);
  snprintf(toml, sizeof toml,
           "name = \"gone\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"https://127.0.0.1:%d/x\", ca_file = \"%s\" }\n",
           p.port, ca);
  efx_template(h->f, toml);
  assert_int_equal(unlink(ca), 0);
  snprintf(want, sizeof want, "http: ca_file \"%s\" cannot be read (No such file or directory)",
           ca);
  fails_with(h, "gone", NULL, want);
  /* A file that is not a CA bundle: curl says so, permanently too. */
  efx_write(h->f->dir, "junk.pem", "not a certificate\n", ca, sizeof ca);
  snprintf(toml, sizeof toml,
           "name = \"junk\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
           "handler = { kind = \"http\", url = \"https://127.0.0.1:%d/x\", ca_file = \"%s\", "
           "timeout = \"5s\" }\n",
           p.port, ca);
  efx_template(h->f, toml);
  int64_t id = efx_submit(h->f, "junk", NULL);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "error", "s", "error", NULL);
  char *e = last_error(h, id);
  snprintf(want, sizeof want, "TLS: ca_file \"%s\" could not be used (", ca);
  expect_contains(e, want);
  free(e);
  /* The listener saw one connection at most; let it go. */
  shutdown(p.fd, SHUT_RDWR);
  close(p.fd);
  pthread_join(p.thread, NULL);
}

/* `tasker template add` refuses each http setting that could never work,
 * at its file:line:column, and stores nothing. */
static void the_binary_refuses_http_settings_that_cannot_work(void **state) {
  hfx *h = open_with(state, NULL);
  char cfg[400], url[420], tpl[400];
  efx_write(h->f->dir, "bad.toml", "", cfg, sizeof cfg);
  snprintf(url, sizeof url, "sqlite:%s/bad.db", h->f->dir);
  run_result r;
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "init", NULL});
  run_result_free(&r);
  const struct {
    const char *handler, *want;
  } cases[] = {
      {"url = \"https://x/a b\"", ":5:34: steps[1].handler.url: \"https://x/a b\": a URL cannot "
                                  "hold a space; write it %20"},
      {"url = \"https://x\", timeout = \"0s\"",
       ":5:57: steps[1].handler.timeout: 0 would mean no limit"},
      {"url = \"https://x\", ca_file = \"/nonexistent/ca.pem\"",
       ":5:57: steps[1].handler.ca_file: \"/nonexistent/ca.pem\" cannot be read (No such file or "
       "directory)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[512], want[600];
    snprintf(text, sizeof text,
             "name = \"bad\"\nversion = \"1\"\n[[steps]]\nname = \"s\"\n"
             "handler = { kind = \"http\", %s }\n",
             cases[i].handler);
    efx_write(h->f->dir, "bad-t.toml", text, tpl, sizeof tpl);
    const char *add[] = {"--config", cfg, "--db", url, "template", "add", tpl, NULL};
    assert_int_equal(run_cli(&r, NULL, add), 0);
    assert_int_not_equal(r.status, 0);
    snprintf(want, sizeof want, "%s%s", tpl, cases[i].want);
    expect_contains(r.err, want);
    run_result_free(&r);
  }
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "--json", "template", "list", NULL});
  json_t *list = json_loads(r.out, JSON_DECODE_ANY, NULL);
  run_result_free(&r);
  if (!json_is_array(list) || json_array_size(list) != 0)
    fail_msg("templates stored: %s", json_dumps(list, 0));
  json_decref(list);
}

/* ---- limits --------------------------------------------------------------------------------- */

static void an_oversized_body_fails_permanently(void **state) {
  hfx *h = open_with(state, NULL);
  /* 2 MiB announced by Content-Length; the same streamed without one. */
  static const http_stub_answer big[] = {
      {HTTP_STUB_ANSWER, 200, NULL, "0123456789abcdef", 131072, 0, 0}};
  static const http_stub_answer streamed[] = {
      {HTTP_STUB_ANSWER, 200, NULL, "0123456789abcdef", 131072, 0, 1}};
  static const http_stub_answer small[] = {
      {HTTP_STUB_ANSWER, 200, NULL, "0123456789abcdef", 8, 0, 1}};
  http_stub_route(h->srv, "/big", big, 1);
  http_stub_route(h->srv, "/streamed", streamed, 1);
  http_stub_route(h->srv, "/small", small, 1);
  http_step(h, "big", "/big", NULL, NULL);
  http_step(h, "streamed", "/streamed", NULL, NULL);
  http_step(h, "small", "/small", "max_response = 100", NULL);
  const char *names[] = {"big", "streamed", "small"};
  const char *wants[] = {"HTTP 200: the response body passed max_response (1048576 bytes, by its "
                         "Content-Length)",
                         "HTTP 200: the response body passed max_response (1048576 bytes)",
                         "HTTP 200: the response body passed max_response (100 bytes)"};
  for (int i = 0; i < 3; i++) {
    int64_t id = efx_submit(h->f, names[i], NULL);
    efx_drive(h->f, 20);
    efx_expect(h->f, id, "error", "s", "error", NULL);
    char *e = last_error(h, id);
    expect_contains(e, wants[i]);
    free(e);
    char path[32];
    snprintf(path, sizeof path, "/%s", names[i]);
    assert_int_equal(http_stub_count(h->srv, path), 1);
  }
}

static void redirects_are_followed_up_to_the_limit(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer r1[] = {{HTTP_STUB_ANSWER, 302, "Location: /r2\r\n", NULL, 1, 0, 0}};
  static const http_stub_answer r2[] = {{HTTP_STUB_ANSWER, 307, "Location: /r3\r\n", NULL, 1, 0, 0}};
  static const http_stub_answer r3[] = {{HTTP_STUB_ANSWER, 200, NULL, "{\"at\": 3}", 1, 0, 0}};
  http_stub_route(h->srv, "/r1", r1, 1);
  http_stub_route(h->srv, "/r2", r2, 1);
  http_stub_route(h->srv, "/r3", r3, 1);
  char *r = results_of(h, "r1", r1, "max_redirects = 2");
  assert_string_equal(r, "{\"at\":3}");
  free(r);
  /* The default (5) follows them too. */
  http_step(h, "dflt", "/r1", NULL, NULL);
  int64_t id = efx_submit(h->f, "dflt", NULL);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  /* One fewer than needed: refused, permanently, saying where it went. */
  http_step(h, "one", "/r1", "max_redirects = 1", NULL);
  char want[300];
  snprintf(want, sizeof want, "GET %s: more than 1 redirects (max_redirects); the last pointed "
           "to /r3", http_stub_url(h->srv, "/r1"));
  fails_with(h, "one", NULL, want);
  /* None at all. */
  http_step(h, "none", "/r1", "max_redirects = 0", NULL);
  snprintf(want, sizeof want, "GET %s: HTTP 302 Found: redirect to /r2 not followed "
           "(max_redirects = 0)", http_stub_url(h->srv, "/r1"));
  fails_with(h, "none", NULL, want);
}

/* ---- placeholders ------------------------------------------------------------------------ */

static void placeholders_fill_url_query_headers_and_body(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer a[] = {
      {HTTP_STUB_ANSWER, 200, NULL, "{\"token\": \"tk 1/2\", \"ids\": [7, 8]}", 1, 0, 0}};
  static const http_stub_answer b[] = {{HTTP_STUB_ANSWER, 200, NULL, "{}", 1, 0, 0}};
  http_stub_route(h->srv, "/orders/A%2042%2Fx", b, 1);
  http_stub_route(h->srv, "/fetch", a, 1);
  char toml[2048], fetch[128];
  snprintf(fetch, sizeof fetch, "%s", http_stub_url(h->srv, "/fetch"));
  snprintf(toml, sizeof toml,
           "name = \"ph\"\nversion = \"1\"\n"
           "[[steps]]\nname = \"fetch\"\nhandler = { kind = \"http\", url = \"%s\" }\n"
           "[[steps]]\nname = \"s\"\ndepends_on = [\"fetch\"]\n"
           "handler = { kind = \"http\", method = \"PUT\", "
           "url = \"%s/orders/{{context.order.id}}?n={{context.order.n}}\", "
           "query = { \"tok en\" = \"{{parents.fetch.token}}\", second = \"{{parents.fetch.ids.1}}\" }, "
           "headers = { X-Task = \"{{task.id}}-{{task.step}}-{{task.attempt}}\", "
           "X-Order = \"order {{context.order.id}}\" }, "
           "body = { order = \"{{context.order}}\", note = \"id={{context.order.id}}\", "
           "ids = \"{{parents.fetch.ids}}\", lit = \"{{\\\"{{\\\"}}x\", n = 5 } }\n",
           fetch, http_stub_url(h->srv, ""));
  efx_template(h->f, toml);
  int64_t id = efx_submit(h->f, "ph", "{\"order\": {\"id\": \"A 42/x\", \"n\": 3}}");
  efx_drive(h->f, 20);
  char *e = last_error(h, id);
  if (*e) fail_msg("%s", e);
  free(e);
  efx_expect(h->f, id, "complete", "fetch", "complete", "s", "complete", NULL);
  char *req = http_stub_last(h->srv, "/orders/A%2042%2Fx");
  assert_non_null(req);
  /* The query table comes in the order of its names (templates are
   * stored canonical, keys sorted). */
  expect_contains(req, "PUT /orders/A%2042%2Fx?n=3&second=8&tok%20en=tk%201%2F2 HTTP/1.1\r\n");
  char hdr[64];
  snprintf(hdr, sizeof hdr, "X-Task: %lld-s-1\r\n", (long long)id);
  expect_contains(req, hdr);
  expect_contains(req, "X-Order: order A 42/x\r\n");
  expect_contains(req, "Content-Type: application/json\r\n");
  const char *body = strstr(req, "\r\n\r\n") + 4;
  json_t *j = json_loads(body, 0, NULL);
  char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"ids\":[7,8],\"lit\":\"{{x\",\"n\":5,\"note\":\"id=A 42/x\","
                            "\"order\":{\"id\":\"A 42/x\",\"n\":3}}");
  free(text);
  json_decref(j);
  free(req);
}

static void the_input_is_the_default_body_of_a_post(void **state) {
  hfx *h = open_with(state, NULL);
  static const http_stub_answer ok[] = {{HTTP_STUB_ANSWER, 200, NULL, "{\"ok\": true}", 1, 0, 0}};
  http_stub_route(h->srv, "/post", ok, 1);
  http_step(h, "post", "/post", "method = \"POST\"", NULL);
  int64_t id = efx_submit(h->f, "post", "{\"order\": 42}");
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  char *req = http_stub_last(h->srv, "/post");
  expect_contains(req, "POST /post HTTP/1.1\r\n");
  expect_contains(req, "Content-Type: application/json\r\n");
  expect_contains(req, "\r\n\r\n{\"context\":{\"order\":42},\"parents\":{}}");
  assert_null(strcasestr(req, "\r\nExpect:"));
  free(req);
  /* A body past 1 KiB, where curl would ask "Expect: 100-continue". */
  char ctx[4200];
  snprintf(ctx, sizeof ctx, "{\"pad\": \"%04000d\"}", 0);
  id = efx_submit(h->f, "post", ctx);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  req = http_stub_last(h->srv, "/post");
  expect_contains(req, "\"pad\":\"0000");
  assert_null(strcasestr(req, "\r\nExpect:"));
  free(req);
}

static void a_missing_value_fails_permanently_naming_the_placeholder(void **state) {
  hfx *h = open_with(state, NULL);
  http_step(h, "miss", "/orders/{{context.order.id}}", NULL, NULL);
  fails_with(h, "miss", "{\"order\": {\"number\": 1}}",
             "http: placeholder in url: {{context.order.id}}: context.order has no member "
             "\"id\"");
  http_step(h, "parent", "/x", "headers = { X-T = \"{{parents.auth.token}}\" }", NULL);
  fails_with(h, "parent", NULL,
             "http: placeholder in headers.X-T: {{parents.auth.token}}: this step has no parent "
             "\"auth\" (its parents: none)");
  http_step(h, "envmiss", "/x", "headers = { Authorization = \"Bearer {{env.TK_NO_SUCH_VAR}}\" }",
            NULL);
  fails_with(h, "envmiss", NULL,
             "http: placeholder in headers.Authorization: {{env.TK_NO_SUCH_VAR}}: the "
             "orchestrator's environment has no TK_NO_SUCH_VAR");
  http_step(h, "obj", "/x/{{context.order}}", NULL, NULL);
  fails_with(h, "obj", "{\"order\": {\"number\": 1}}",
             "http: placeholder in url: {{context.order}} is an object; only a string, a number "
             "or a boolean can be written into text");
  /* {{item}} and {{item_index}} are an instance's of a map, not any step's. */
  http_step(h, "item", "/x/{{item.id}}", NULL, NULL);
  fails_with(h, "item", NULL,
             "http: placeholder in url: {{item.id}}: this step is not an instance of a map (its "
             "input has no item)");
  http_step(h, "index", "/x", "query = { i = \"{{item_index}}\" }", NULL);
  fails_with(h, "index", NULL,
             "http: placeholder in query.i: {{item_index}}: this step is not an instance of a "
             "map (its input has no item_index)");
  http_step(h, "nl", "/x", "headers = { X-A = \"{{context.v}}\" }", NULL);
  fails_with(h, "nl", "{\"v\": \"a\\r\\nX-Evil: 1\"}",
             "http: headers.X-A: a value from its placeholders holds a line break or NUL, which "
             "would end the header");
  assert_int_equal(http_stub_count(h->srv, "/x"), 0);
}

/* ---- template time --------------------------------------------------------------------------- */

static void bad_specs_are_refused_at_their_place(void **state) {
  (void)state;
  expect_spec_error("{ kind = \"http\" }",
                    "t.toml:1:5: steps[1].handler.url: missing: an http handler needs url = "
                    "\"https://...\"");
  expect_spec_error("{ kind = \"http\", url = \"ftp://x/y\" }",
                    "t.toml:1:28: steps[1].handler.url: \"ftp://x/y\": expected a URL beginning "
                    "http:// or https:// (written in the template, not taken from a placeholder)");
  expect_spec_error("{ kind = \"http\", url = \"{{context.base}}/y\" }",
                    "t.toml:1:28: steps[1].handler.url: \"{{context.base}}/y\": expected a URL "
                    "beginning http:// or https:// (written in the template, not taken from a "
                    "placeholder)");
  expect_spec_error("{ kind = \"http\", url = \"https://x/{{context.order.}}\" }",
                    "t.toml:1:28: steps[1].handler.url: placeholder \"{{context.order.}}\" (byte "
                    "11): expected a name after \".\" (letters, digits, '_' or '-')");
  expect_spec_error("{ kind = \"http\", url = \"https://x/{{contxt.id}}\" }",
                    "t.toml:1:28: steps[1].handler.url: placeholder \"{{contxt.id}}\" (byte 11): "
                    "unknown source \"contxt\"; expected context.PATH, parents.STEP.PATH, "
                    "item.PATH, item_index, env.NAME, task.id, task.step, task.attempt, "
                    "task.callback_url or task.callback_token");
  expect_spec_error("{ kind = \"http\", url = \"https://x/{{context.id\" }",
                    "t.toml:1:28: steps[1].handler.url: placeholder \"{{context.id\" (byte 11): "
                    "unclosed (expected \"}}\")");
  expect_spec_error("{ kind = \"http\", url = \"https://x/#top\" }",
                    "t.toml:1:28: steps[1].handler.url: \"https://x/#top\": a fragment (#...) is "
                    "never sent to the server; leave it out");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", method = \"get\" }",
                    "t.toml:1:50: steps[1].handler.method: \"get\": expected GET, HEAD, POST, PUT, "
                    "PATCH, DELETE or OPTIONS (in capitals)");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", retry_on = [404], permanent_on = "
                    "[503, 404] }",
                    "t.toml:1:74: steps[1].handler.permanent_on: 404 is also in retry_on: a status "
                    "is retryable or permanent, not both");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", retry_on = [99] }",
                    "t.toml:1:53: steps[1].handler.retry_on[1] = 99: must be an integer from 100 "
                    "to 599");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", headers = { \"X A\" = \"1\" } }",
                    "t.toml:1:61: steps[1].handler.headers.X A: \"X A\" is not a header name "
                    "(letters, digits and !#$%&'*+-.^_`|~)");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", headers = { X-A = \"a\\nb\" } }",
                    "t.toml:1:59: steps[1].handler.headers.X-A: a header value cannot hold a line "
                    "break or NUL");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", method = \"HEAD\", body = \"x\" }",
                    "t.toml:1:65: steps[1].handler.body: a HEAD request has no body");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", body = { a = [\"{{env}}\"] } }",
                    "t.toml:1:55: steps[1].handler.body.a[1]: placeholder \"{{env}}\" (byte 1): "
                    "env takes one name: {{env.NAME}}");
  expect_spec_error("{ kind = \"http\", url = \"https://x/{{item_index.a}}\" }",
                    "t.toml:1:28: steps[1].handler.url: placeholder \"{{item_index.a}}\" (byte "
                    "11): item_index is a number and takes no path: {{item_index}}");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", max_redirects = 51 }",
                    "t.toml:1:57: steps[1].handler.max_redirects = 51: must be an integer from 0 "
                    "to 50");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", insecure = true }",
                    "t.toml:1:41: unknown key \"steps[1].handler.insecure\" (known keys: kind, "
                    "timeout, url, method, query, headers, body, connect_timeout, max_redirects, "
                    "max_response, retry_on, permanent_on, ca_file, callback)");
  /* callback = { timeout = ... } (docs/callbacks.md): a table with its timeout. */
  expect_spec_error("{ kind = \"http\", url = \"https://x\", callback = \"1h\" }",
                    "t.toml:1:52: steps[1].handler.callback: expected a table, such as callback = "
                    "{ timeout = \"1h\" }");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", callback = { timout = \"1h\" } }",
                    "t.toml:1:54: unknown key \"steps[1].handler.callback.timout\" (did you mean "
                    "\"timeout\"?)");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", callback = {} }",
                    "t.toml:1:52: steps[1].handler.callback.timeout: missing: a callback needs "
                    "its timeout, such as callback = { timeout = \"1h\" }: how long the step "
                    "waits for the callback after the request's 2xx answer");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", callback = { timeout = \"0s\" } }",
                    "t.toml:1:64: steps[1].handler.callback.timeout = \"0s\": must be a duration "
                    "> 0, such as \"1h\"");
  /* A URL curl could never send: every attempt would fail "malformed
   * URL". */
  expect_spec_error("{ kind = \"http\", url = \"https://x/a b\" }",
                    "t.toml:1:28: steps[1].handler.url: \"https://x/a b\": a URL cannot hold a "
                    "space; write it %20 (a placeholder's value is percent-encoded for you)");
  expect_spec_error("{ kind = \"http\", url = \"https://x/{{context.a}} {{context.b}}\" }",
                    "t.toml:1:28: steps[1].handler.url: \"https://x/{{context.a}} {{context.b}}\": "
                    "a URL cannot hold a space; write it %20 (a placeholder's value is "
                    "percent-encoded for you)");
  expect_spec_error("{ kind = \"http\", url = \"https://x/a\\tb\" }",
                    "t.toml:1:28: steps[1].handler.url: \"https://x/a\tb\": a URL cannot hold "
                    "the control byte 0x09");
  expect_spec_error("{ kind = \"http\", url = \"http://x:80a/y\" }",
                    "t.toml:1:28: steps[1].handler.url: \"http://x:80a/y\": not a URL that can be "
                    "sent (Port number was not a decimal number between 0 and 65535)");
  /* Placeholders that make a valid URL are accepted, wherever they are. */
  json_t *ok = spec_of("{ kind = \"http\", url = \"http://api-{{context.region}}.x:"
                       "{{context.port}}/{{context.path}}?q={{context.q}}\" }");
  json_decref(ok);
  /* A zero timeout would mean no limit. */
  expect_spec_error("{ kind = \"http\", url = \"https://x\", timeout = \"0s\" }",
                    "t.toml:1:51: steps[1].handler.timeout: 0 would mean no limit, but an http "
                    "request is always limited: expected a duration of at least 1ms (without "
                    "timeout, 30s)");
  ok = spec_of("{ kind = \"http\", url = \"https://x\", timeout = \"1ms\" }");
  json_decref(ok);
  /* A CA file that is not there, or not a file. */
  expect_spec_error("{ kind = \"http\", url = \"https://x\", ca_file = \"/nonexistent/ca.pem\" }",
                    "t.toml:1:51: steps[1].handler.ca_file: \"/nonexistent/ca.pem\" cannot be read "
                    "(No such file or directory)");
  expect_spec_error("{ kind = \"http\", url = \"https://x\", ca_file = \"/\" }",
                    "t.toml:1:51: steps[1].handler.ca_file: \"/\" is not a file; expected a PEM "
                    "file of CA certificates");
  /* Credentials are never written into a template: they would be stored
   * and shown with it. */
  const char *advice = "a credential written into the template would be stored and shown with "
                       "it; take it from the orchestrator's environment or the task, e.g. "
                       "\"Bearer {{env.API_TOKEN}}\"";
  char want[600];
  snprintf(want, sizeof want, "t.toml:1:69: steps[1].handler.headers.Authorization: %s", advice);
  expect_spec_error("{ kind = \"http\", url = \"https://x\", headers = { Authorization = \"Bearer "
                    "abc\" } }", want);
  snprintf(want, sizeof want, "t.toml:1:28: steps[1].handler.url: query parameter \"api_key\": %s",
           advice);
  expect_spec_error("{ kind = \"http\", url = \"https://x/y?a=1&api_key=abc\" }", want);
  snprintf(want, sizeof want, "t.toml:1:28: steps[1].handler.url: a password in the URL: %s",
           advice);
  expect_spec_error("{ kind = \"http\", url = \"https://me:pw@x/y\" }", want);
  snprintf(want, sizeof want, "t.toml:1:66: steps[1].handler.query.access_token: %s", advice);
  expect_spec_error("{ kind = \"http\", url = \"https://x\", query = { access_token = \"abc\" } }",
                    want);
  /* A valid spec, as it is stored. */
  json_t *spec = spec_of("{ kind = \"http\", url = \"https://x/{{context.id}}?k={{env.K}}\", "
                         "method = \"POST\", timeout = \"5s\", headers = { Authorization = "
                         "\"Bearer {{env.T}}\" }, body = { a = 1, b = \"{{context}}\" }, "
                         "retry_on = [409] }");
  char *dump = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(dump, "{\"body\":{\"a\":1,\"b\":\"{{context}}\"},\"headers\":{\"Authorization\":"
                            "\"Bearer {{env.T}}\"},\"kind\":\"http\",\"method\":\"POST\","
                            "\"retry_on\":[409],\"timeout_ms\":5000,\"url\":"
                            "\"https://x/{{context.id}}?k={{env.K}}\"}");
  free(dump);
  json_decref(spec);
}

/* ---- credentials ------------------------------------------------------------------------------ */

#define TOKEN "s3cr3t-t0ken-value"

static void credentials_stay_out_of_messages_and_events(void **state) {
  hfx *h = open_with(state, NULL);
  setenv("TK_TEST_TOKEN", TOKEN, 1);
  static const http_stub_answer denied[] = {
      {HTTP_STUB_ANSWER, 401, NULL, "{\"error\": \"bad token " TOKEN "\"}", 1, 0, 0}};
  http_stub_route(h->srv, "/auth", denied, 1);
  http_step(h, "auth", "/auth?api_key={{env.TK_TEST_TOKEN}}",
            "headers = { Authorization = \"Bearer {{env.TK_TEST_TOKEN}}\" }", NULL);
  int64_t id = efx_submit(h->f, "auth", NULL);
  efx_drive(h->f, 20);
  efx_expect(h->f, id, "error", "s", "error", NULL);
  /* It was sent. */
  char *req = http_stub_last(h->srv, "/auth");
  expect_contains(req, "Authorization: Bearer " TOKEN "\r\n");
  expect_contains(req, "GET /auth?api_key=" TOKEN " HTTP/1.1");
  free(req);
  /* And is nowhere else. */
  char *e = last_error(h, id);
  char want[400];
  snprintf(want, sizeof want, "GET %s: HTTP 401 Unauthorized: \"{\\\"error\\\": \\\"bad token "
           "[REDACTED]\\\"}\"", http_stub_url(h->srv, "/auth?api_key=[REDACTED]"));
  assert_string_equal(e, want);
  free(e);
  char *events = json_dumps(h->f->events, 0);
  char *logs = json_dumps(h->f->logs, 0);
  assert_null(strstr(events, TOKEN));
  assert_null(strstr(logs, TOKEN));
  expect_contains(events, "[REDACTED]");
  free(events);
  free(logs);
  char *snap = efx_snapshot(h->f->db);
  assert_null(strstr(snap, TOKEN));
  free(snap);
}

#define PLAIN_SECRET "plain-env-value-42"

/* The results of a step whose 2xx answer echoes what it was sent: a
 * value from the environment is nowhere in them, nor anywhere stored,
 * whatever the header or field that carried it; other values stay. */
static void env_values_stay_out_of_results(void **state) {
  hfx *h = open_with(state, NULL);
  setenv("TK_TEST_TOKEN", TOKEN, 1);
  setenv("TK_TEST_PLAIN", PLAIN_SECRET, 1);
  static const http_stub_answer text[] = {
      {HTTP_STUB_ECHO_REQUEST, 200, "Content-Type: text/plain\r\n", NULL, 1, 0, 0}};
  static const http_stub_answer json[] = {{HTTP_STUB_ECHO_BODY, 200,
                                           "Content-Type: application/json\r\n", NULL, 1, 0, 0}};
  /* Not UTF-8: kept as body_base64. */
  static const http_stub_answer bytes[] = {{HTTP_STUB_ECHO_REQUEST, 200,
                                            "Content-Type: application/octet-stream\r\n", "\xff",
                                            1, 0, 0}};
  http_stub_route(h->srv, "/text", text, 1);
  http_stub_route(h->srv, "/json", json, 1);
  /* A value that comes back as a member's name. */
  static const http_stub_answer keyed[] = {{HTTP_STUB_ANSWER, 200,
                                            "Content-Type: application/json\r\n",
                                            "{\"" TOKEN "\": {\"k\": \"Bearer " TOKEN "\"}}", 1, 0,
                                            0}};
  http_stub_route(h->srv, "/bytes", bytes, 1);
  http_stub_route(h->srv, "/keyed", keyed, 1);
  const char *keys = "method = \"POST\", headers = { Authorization = \"Bearer "
                     "{{env.TK_TEST_TOKEN}}\", X-Trace = \"{{env.TK_TEST_PLAIN}}\" }, "
                     "body = { token = \"{{env.TK_TEST_TOKEN}}\", kept = \"{{context.kept}}\", "
                     "nested = { list = [\"a {{env.TK_TEST_PLAIN}} b\"] } }";
  http_step(h, "text", "/text", keys, NULL);
  http_step(h, "json", "/json", keys, NULL);
  http_step(h, "bytes", "/bytes", keys, NULL);
  http_step(h, "keyed", "/keyed", keys, NULL);
  const char *names[] = {"text", "json", "bytes", "keyed"};
  for (int i = 0; i < 4; i++) {
    int64_t id = efx_submit(h->f, names[i], "{\"kept\": \"visible-value\"}");
    efx_drive(h->f, 20);
    efx_expect(h->f, id, "complete", "s", "complete", NULL);
    /* It was sent ... */
    char path[16];
    snprintf(path, sizeof path, "/%s", names[i]);
    char *req = http_stub_last(h->srv, path);
    expect_contains(req, "Authorization: Bearer " TOKEN "\r\n");
    expect_contains(req, "X-Trace: " PLAIN_SECRET "\r\n");
    expect_contains(req, "\"token\":\"" TOKEN "\"");
    free(req);
    /* ... and came back, but is not in the results. */
    json_t *task = efx_task(h->f, id);
    char *r = json_dumps(json_object_get(efx_step(task, "s"), "results"),
                         JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(task);
    assert_null(strstr(r, TOKEN));
    assert_null(strstr(r, PLAIN_SECRET));
    if (i == 3)
      assert_string_equal(r, "{\"[REDACTED]\":{\"k\":\"Bearer [REDACTED]\"}}");
    if (i < 2) {
      expect_contains(r, "visible-value");
      expect_contains(r, "[REDACTED]");
    }
    if (i == 1)
      assert_string_equal(r, "{\"kept\":\"visible-value\",\"nested\":{\"list\":"
                             "[\"a [REDACTED] b\"]},\"token\":\"[REDACTED]\"}");
    if (i == 2) {
      /* The bytes, decoded: the value redacted before they were encoded. */
      json_t *doc = json_loads(r, 0, NULL);
      const char *b64 = str(doc, "body_base64");
      assert_true(strlen(b64) > 0);
      char *dec = calloc(1, strlen(b64)), *o = dec;
      static const char a64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      unsigned acc = 0;
      int bits = 0;
      for (const char *p = b64; *p && *p != '='; p++) {
        acc = acc << 6 | (unsigned)(strchr(a64, *p) - a64);
        if ((bits += 6) >= 8) *o++ = (char)(acc >> (bits -= 8) & 0xff);
      }
      assert_null(strstr(dec, TOKEN));
      assert_null(strstr(dec, PLAIN_SECRET));
      expect_contains(dec, "Authorization: Bearer [REDACTED]\r\n");
      expect_contains(dec, "visible-value");
      free(dec);
      json_decref(doc);
    }
    free(r);
  }
  char *snap = efx_snapshot(h->f->db);
  assert_null(strstr(snap, TOKEN));
  assert_null(strstr(snap, PLAIN_SECRET));
  free(snap);
  char *events = json_dumps(h->f->events, 0);
  assert_null(strstr(events, TOKEN));
  assert_null(strstr(events, PLAIN_SECRET));
  free(events);
}

/* ---- asynchronous: with workers ---------------------------------------------------------------- */

typedef struct watch {
  efx *f;
  int max_threads;
} watch;

/* Threads of this process now. */
static int threads_now(void) {
  FILE *p = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (p && fgets(line, sizeof line, p))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (p) fclose(p);
  return n;
}

/* Events into the fixture, and the most threads seen at any event. */
static void watching_sink(const char *line, void *ud) {
  watch *w = ud;
  efx_on_event(line, w->f);
  int n = threads_now();
  if (n > w->max_threads) w->max_threads = n;
}

/* Run until idle with `workers` on real time; returns the most threads
 * seen while it ran. */
static int run_workers(efx *f, int workers) {
  watch w = {f, 0};
  efx_run_workers_sink(f, "orch-w", workers, watching_sink, &w);
  return w.max_threads;
}

static const char *const fast_sets[] = {"backoff.jitter=none", "backoff.base=\"20ms\"",
                                        "backoff.max_delay=\"50ms\"",
                                        "backoff.max_server_delay=\"30ms\"", NULL};

static void with_workers_503s_then_200_retry_and_complete(void **state) {
  hfx *h = open_with(state, fast_sets);
  static const http_stub_answer flaky[] = {
      {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0},
      {HTTP_STUB_ANSWER, 429, "Retry-After: 10\r\n", NULL, 1, 0, 0},
      {HTTP_STUB_ANSWER, 200, NULL, "{\"done\": true}", 1, 0, 0}};
  http_stub_route(h->srv, "/flaky", flaky, 3);
  http_step(h, "flaky", "/flaky", NULL, "{ max_attempts = 5 }");
  int64_t id = efx_submit(h->f, "flaky", NULL);
  run_workers(h->f, 2);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  assert_int_equal(http_stub_count(h->srv, "/flaky"), 3);
  json_t *task;
  json_t *a1 = attempt(h, id, 1, &task);
  assert_string_equal(str(a1, "delay_source"), "computed");
  assert_int_equal(json_integer_value(json_object_get(a1, "delay_ms")), 20);
  json_t *a2 = json_array_get(json_object_get(efx_step(task, "s"), "history"), 1);
  assert_string_equal(str(a2, "delay_source"), "server");
  assert_int_equal(json_integer_value(json_object_get(a2, "delay_ms")), 30);
  /* The retry ran no earlier than its run_at. */
  json_t *a3 = json_array_get(json_object_get(efx_step(task, "s"), "history"), 2);
  assert_true(json_integer_value(json_object_get(a3, "started_at")) >=
              json_integer_value(json_object_get(a2, "next_run_at")));
  json_decref(task);
}

/* Route /slow to a 200 after delay_ms, and store template "slow", one
 * step requesting it with the handler's `keys` (NULL: none). */
static void slow_route(hfx *h, int delay_ms, const char *keys) {
  http_stub_answer *slow = own(h, calloc(1, sizeof *slow));
  *slow = (http_stub_answer){HTTP_STUB_ANSWER, 200, NULL, "{\"late\": 1}", 1, delay_ms, 0};
  http_stub_route(h->srv, "/slow", slow, 1);
  http_step(h, "slow", "/slow", keys, NULL);
}

/* Many slow requests at once: in flight together, far beyond the
 * workers, without a thread each. The server answers none of them until
 * all have arrived (a condition, however long a busy machine takes; the
 * bound only ends a run in which they never all come), so all were in
 * flight at once; the requests' timeout is longer than that bound. */
static void requests_in_flight_hold_no_thread(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "engine.claim_batch=64",
                                     "engine.max_async=1000", NULL};
  enum { N = 300, HOLD_MOST_MS = 120000 };
  hfx *h = open_with(state, sets);
  slow_route(h, 0, "timeout = \"5m\"");
  for (int i = 0; i < N; i++) efx_submit(h->f, "slow", NULL);
  http_stub_hold(h->srv, N, HOLD_MOST_MS);
  int before = threads_now();
  int most = run_workers(h->f, 2);
  /* Far more in flight than the two workers ... */
  if (http_stub_held(h->srv) < N)
    fail_msg("only %d of %d requests were in flight together: the rest had not been sent "
             "after %d s in which none was answered",
             http_stub_held(h->srv), N, HOLD_MOST_MS / 1000);
  assert_true(http_stub_peak_connections(h->srv) >= N);
  assert_int_equal(http_stub_count(h->srv, "/slow"), N);
  assert_int_equal(efx_sql_int(h->f->db, "SELECT count(*) FROM steps WHERE state = 'complete'"), N);
  /* ... on the workers, the engine's thread and one reactor thread. */
  if (most > before + 2 + 1) fail_msg("%d threads with %d before the run", most, before);
}

static void leases_are_kept_while_a_request_waits(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "engine.lease=\"400ms\"",
                                     "engine.heartbeat=\"100ms\"", NULL};
  hfx *h = open_with(state, sets);
  slow_route(h, 1200, NULL);
  int64_t id = efx_submit(h->f, "slow", NULL);
  run_workers(h->f, 1);
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
  assert_int_equal(efx_events(h->f, "step.lease_expired", NULL), 0);
  assert_int_equal(http_stub_count(h->srv, "/slow"), 1);
  assert_int_equal(efx_sql_int(h->f->db, "SELECT count(*) FROM attempts"), 1);
}

typedef struct runner {
  tk_engine *e;
  int rc;
  tk_err err;
} runner;

static void *run_thread(void *arg) {
  runner *r = arg;
  r->rc = tk_engine_run(r->e, 0, &r->err);
  return NULL;
}

static int one_request_arrived(void *ud) { return http_stub_count(ud, "/slow") >= 1; }

/* One task of a one-step template whose request (/slow) is answered
 * after delay_ms, and an engine with `workers` on real time for it (the
 * store's clock is the system's until the test puts the manual one back).
 * Returns the task's id. */
static int64_t slow_task_engine(hfx *h, int delay_ms, int workers, tk_engine **e) {
  slow_route(h, delay_ms, NULL);
  int64_t id = efx_submit(h->f, "slow", NULL);
  tk_store_set_clock(h->f->store, tk_clock_system());
  tk_engine_options o = {.store = h->f->store, .config = h->f->cfg, .seed = 1, .id = "orch-s",
                         .workers = workers};
  tk_err err;
  if (tk_engine_new(&o, e, &err) != 0) fail_msg("engine: %s", err.msg);
  return id;
}

/* A stop waits for the request in flight and records it, as it does for a
 * handler running on a worker. */
static void a_stop_waits_for_requests_in_flight(void **state) {
  hfx *h = open_with(state, NULL);
  runner r = {0};
  int64_t id = slow_task_engine(h, 300, 2, &r.e);
  pthread_t t;
  pthread_create(&t, NULL, run_thread, &r);
  assert_true(efx_wait_for(one_request_arrived, h->srv, 10000));
  tk_engine_stop(r.e);
  pthread_join(t, NULL);
  assert_int_equal(r.rc, 0);
  tk_engine_free(r.e);
  tk_store_set_clock(h->f->store, tk_clock_manual(&h->f->clock));
  efx_expect(h->f, id, "complete", "s", "complete", NULL);
}

/* An engine freed with a request in flight (driven by ticks, so nothing
 * waited for it) abandons it: the step keeps its lease for the reaper. */
static void an_engine_freed_mid_request_leaves_it_to_its_lease(void **state) {
  hfx *h = open_with(state, NULL);
  tk_engine *e;
  tk_err err;
  int64_t id = slow_task_engine(h, 5000, 1, &e);
  assert_int_equal(tk_engine_tick(e, NULL, &err), 0);
  assert_true(efx_wait_for(one_request_arrived, h->srv, 10000));
  tk_engine_free(e);
  tk_store_set_clock(h->f->store, tk_clock_manual(&h->f->clock));
  efx_expect(h->f, id, "in_progress", "s", "in_progress", NULL);
}

/* ---- the tasker binary ------------------------------------------------------------------------ */

static void the_tasker_binary_runs_http_steps_and_shows_the_servers_delay(void **state) {
  hfx *h = open_with(state, NULL);
  setenv("TK_TEST_TOKEN", TOKEN, 1);
  static const http_stub_answer limited[] = {
      {HTTP_STUB_ANSWER, 429, "Retry-After: 30\r\n", NULL, 1, 0, 0},
      {HTTP_STUB_ANSWER, 200, "Content-Type: application/json\r\n", "{\"charged\": true}", 1, 0,
       0}};
  static const http_stub_answer denied[] = {
      {HTTP_STUB_ANSWER, 403, NULL, "token " TOKEN " refused", 1, 0, 0}};
  http_stub_route(h->srv, "/charge", limited, 2);
  http_stub_route(h->srv, "/deny", denied, 1);
  char cfg[400], db[400], url[420], tpl[400], text[2048], charge_url[128];
  efx_write(h->f->dir, "cli.toml", "[backoff]\njitter = \"none\"\nmax_server_delay = \"50ms\"\n",
            cfg, sizeof cfg);
  snprintf(db, sizeof db, "%s/cli.db", h->f->dir);
  snprintf(url, sizeof url, "sqlite:%s", db);
  snprintf(charge_url, sizeof charge_url, "%s", http_stub_url(h->srv, "/charge"));
  snprintf(text, sizeof text,
           "name = \"pay\"\nnamespace = \"shop\"\nversion = \"1\"\n"
           "[[steps]]\nname = \"charge\"\n"
           "handler = { kind = \"http\", method = \"POST\", url = \"%s\", "
           "headers = { Authorization = \"Bearer {{env.TK_TEST_TOKEN}}\" } }\n"
           "[[steps]]\nname = \"audit\"\n"
           "handler = { kind = \"http\", url = \"%s\", "
           "headers = { X-Api-Key = \"{{env.TK_TEST_TOKEN}}\" } }\n",
           charge_url, http_stub_url(h->srv, "/deny"));
  efx_write(h->f->dir, "pay.toml", text, tpl, sizeof tpl);
  run_result r;
  const char *init[] = {"--config", cfg, "--db", url, "init", NULL};
  assert_int_equal(run_cli(&r, NULL, init), 0);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  const char *add[] = {"--config", cfg, "--db", url, "template", "add", tpl, NULL};
  assert_int_equal(run_cli(&r, NULL, add), 0);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  const char *submit[] = {"--config", cfg, "--db", url, "submit", "shop/pay", NULL};
  assert_int_equal(run_cli(&r, NULL, submit), 0);
  assert_int_equal(r.status, 0);
  char id[32];
  snprintf(id, sizeof id, "%s", r.out);
  id[strcspn(id, "\n")] = '\0';
  run_result_free(&r);
  const char *run[] = {"--config", cfg, "--db", url, "run", "--until-idle", NULL};
  assert_int_equal(run_cli(&r, NULL, run), 0);
  assert_int_equal(r.status, 0);
  assert_null(strstr(r.err, TOKEN));
  run_result_free(&r);
  const char *show[] = {"--config", cfg, "--db", url, "show", "--json", id, NULL};
  assert_int_equal(run_cli(&r, NULL, show), 0);
  assert_int_equal(r.status, 0);
  assert_null(strstr(r.out, TOKEN));
  json_t *task = json_loads(r.out, 0, NULL);
  run_result_free(&r);
  json_t *charge = efx_step(task, "charge");
  assert_string_equal(str(charge, "state"), "complete");
  json_t *a1 = json_array_get(json_object_get(charge, "history"), 0);
  assert_string_equal(str(a1, "delay_source"), "server");
  assert_int_equal(json_integer_value(json_object_get(a1, "delay_ms")), 50);
  expect_contains(str(a1, "error"), "HTTP 429 Too Many Requests (Retry-After: 30)");
  json_t *audit = efx_step(task, "audit");
  if (strcmp(str(audit, "state"), "error") != 0) fail_msg("%s", json_dumps(audit, 0));
  expect_contains(str(audit, "last_error"), "HTTP 403 Status: \"token [REDACTED] refused\"");
  json_decref(task);
  const char *plain[] = {"--config", cfg, "--db", url, "show", id, NULL};
  assert_int_equal(run_cli(&r, NULL, plain), 0);
  assert_null(strstr(r.out, TOKEN));
  expect_contains(r.out, "[REDACTED]");
  run_result_free(&r);
  const char *list[] = {"--config", cfg, "--db", url, "--json", "template", "list", NULL};
  assert_int_equal(run_cli(&r, NULL, list), 0);
  assert_null(strstr(r.out, TOKEN));
  run_result_free(&r);
  /* The request itself carried it. */
  char *req = http_stub_last(h->srv, "/charge");
  expect_contains(req, "Authorization: Bearer " TOKEN "\r\n");
  free(req);
}

/* Run tasker with args; it must exit 0. Its output is in *r. */
static void cli_ok(run_result *r, const char *const *args) {
  assert_int_equal(run_cli(r, NULL, args), 0);
  if (r->status != 0) fail_msg("%s %s: exit %d: %s", args[4], args[5] ? args[5] : "", r->status,
                               r->err);
}

static char pg_db[64];

/* A fresh database on TK_TEST_PG_URL's server: its URL into url (the
 * test is skipped without a server). TK_TEST_PG_URL is a URL
 * postgresql://[HOST]/DB[?PARAMS]: the database is swapped. */
static void pg_database(char *url, size_t len) {
  const char *base = efx_pg_server(getenv("TK_TEST_PG_URL"));
  PGconn *c = PQconnectdb(base);
  if (PQstatus(c) != CONNECTION_OK) fail_msg("TK_TEST_PG_URL: %s", PQerrorMessage(c));
  snprintf(pg_db, sizeof pg_db, "tk_http_%ld", (long)getpid());
  char sql[128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", pg_db);
  PGresult *res = PQexec(c, sql);
  if (PQresultStatus(res) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(res);
  PQfinish(c);
  const char *host = strstr(base, "://");
  assert_non_null(host);
  host += 3;
  size_t hl = strcspn(host, "/?");
  const char *params = strchr(host, '?');
  snprintf(url, len, "%.*s%s/%s%s", (int)(host - base + (ptrdiff_t)hl), base, "", pg_db,
           params ? params : "");
}

static void pg_drop(void) {
  if (!pg_db[0]) return;
  PGconn *c = PQconnectdb(getenv("TK_TEST_PG_URL"));
  char sql[160];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_db);
  PQclear(PQexec(c, sql));
  PQfinish(c);
  pg_db[0] = '\0';
}

/* Through the tasker binary on the store at `url`: a step whose 2xx
 * answer echoes its request (an Authorization header and a plain header,
 * both from the environment) completes, and `show --json`, `show` and the
 * stored results hold neither value. */
static void binary_keeps_env_values_out_of_results(hfx *h, const char *url) {
  setenv("TK_TEST_TOKEN", TOKEN, 1);
  setenv("TK_TEST_PLAIN", PLAIN_SECRET, 1);
  static const http_stub_answer echo[] = {
      {HTTP_STUB_ECHO_REQUEST, 200, "Content-Type: text/plain\r\n", NULL, 1, 0, 0}};
  http_stub_route(h->srv, "/echo", echo, 1);
  char cfg[400], tpl[400], text[1024];
  efx_write(h->f->dir, "echo.toml", "[backoff]\njitter = \"none\"\n", cfg, sizeof cfg);
  snprintf(text, sizeof text,
           "name = \"echo\"\nversion = \"1\"\n[[steps]]\nname = \"call\"\n"
           "handler = { kind = \"http\", method = \"POST\", url = \"%s\", "
           "headers = { Authorization = \"Bearer {{env.TK_TEST_TOKEN}}\", "
           "X-Trace = \"{{env.TK_TEST_PLAIN}}\" } }\n",
           http_stub_url(h->srv, "/echo"));
  efx_write(h->f->dir, "echo-t.toml", text, tpl, sizeof tpl);
  run_result r;
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "init", NULL});
  run_result_free(&r);
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "template", "add", tpl, NULL});
  run_result_free(&r);
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "submit", "echo", NULL});
  char id[32];
  snprintf(id, sizeof id, "%s", r.out);
  id[strcspn(id, "\n")] = '\0';
  run_result_free(&r);
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "run", "--until-idle", NULL});
  run_result_free(&r);
  /* It was sent, and echoed. */
  char *req = http_stub_last(h->srv, "/echo");
  expect_contains(req, "Authorization: Bearer " TOKEN "\r\n");
  expect_contains(req, "X-Trace: " PLAIN_SECRET "\r\n");
  free(req);
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "show", "--json", id, NULL});
  assert_null(strstr(r.out, TOKEN));
  assert_null(strstr(r.out, PLAIN_SECRET));
  json_t *task = json_loads(r.out, 0, NULL);
  run_result_free(&r);
  assert_non_null(task);
  json_t *call = efx_step(task, "call");
  assert_string_equal(str(call, "state"), "complete");
  const char *body = str(json_object_get(call, "results"), "body");
  expect_contains(body, "POST /echo HTTP/1.1\r\n");
  expect_contains(body, "Authorization: Bearer [REDACTED]\r\n");
  expect_contains(body, "X-Trace: [REDACTED]\r\n");
  json_decref(task);
  cli_ok(&r, (const char *[]){"--config", cfg, "--db", url, "show", id, NULL});
  assert_null(strstr(r.out, TOKEN));
  assert_null(strstr(r.out, PLAIN_SECRET));
  run_result_free(&r);
}

static void the_binary_keeps_env_values_out_of_results_on_sqlite(void **state) {
  hfx *h = open_with(state, NULL);
  char url[400];
  snprintf(url, sizeof url, "sqlite:%s/echo.db", h->f->dir);
  binary_keeps_env_values_out_of_results(h, url);
  char db[400];
  snprintf(db, sizeof db, "%s/echo.db", h->f->dir);
  char *snap = efx_snapshot(db);
  assert_null(strstr(snap, TOKEN));
  assert_null(strstr(snap, PLAIN_SECRET));
  expect_contains(snap, "[REDACTED]");
  free(snap);
}

static void the_binary_keeps_env_values_out_of_results_on_postgres(void **state) {
  hfx *h = open_with(state, NULL);
  char url[600];
  pg_database(url, sizeof url);
  binary_keeps_env_values_out_of_results(h, url);
  /* What the store holds, read with SQL. */
  PGconn *c = PQconnectdb(url);
  PGresult *res = PQexec(c, "SELECT coalesce(string_agg(results::text, ' '), '') FROM steps");
  if (PQresultStatus(res) != PGRES_TUPLES_OK) fail_msg("%s", PQerrorMessage(c));
  const char *all = PQgetvalue(res, 0, 0);
  assert_null(strstr(all, TOKEN));
  assert_null(strstr(all, PLAIN_SECRET));
  expect_contains(all, "[REDACTED]");
  PQclear(res);
  PQfinish(c);
  pg_drop();
}

/* examples/templates/http.toml is added as the README says. */
static void the_example_template_is_valid(void **state) {
  /* The example configuration's profile it names. */
  static const char *const sets[] = {"backoff.profiles.payments.max_delay=\"10m\"", NULL};
  hfx *h = open_with(state, sets);
  /* The checkout: $TASKER is BUILD/bin/tasker, and BUILD sits in it. */
  char top[1024];
  snprintf(top, sizeof top, "%s", tasker_path());
  for (int up = 0; up < 3; up++) {
    char *slash = strrchr(top, '/');
    if (slash) *slash = '\0';
    else snprintf(top, sizeof top, ".");
  }
  char path[1200];
  snprintf(path, sizeof path, "%s/examples/templates/http.toml", top);
  /* A build directory elsewhere: the checkout is the working directory. */
  if (access(path, R_OK) != 0) snprintf(path, sizeof path, "examples/templates/http.toml");
  tk_template_info info;
  tk_err err;
  if (tk_template_add_file(h->f->store, h->f->cfg, path, h->f->clock.now_ms, &info, &err) != 0)
    fail_msg("%s", err.msg);
  assert_string_equal(info.name, "fulfil");
  assert_int_equal(info.steps, 2);
}

/* ---- a retry budget during an outage ------------------------------------------------- */

/* The downstream fails every call for the first 8 (a scripted outage),
 * then answers. Its budget (per host, nothing for first attempts, a floor
 * of 2 retries per 1 s window) lets two retries through per window and
 * defers the others, spread as the budget allows: four tasks' first
 * attempts at 0 all go (never refused), their retries at 100, 100, 1000,
 * 1000, and the retries of the two that fail again at 2000
 * (tests/engine/test_retry_budget.c works the same figures through).
 * The downstream sees 2 calls per window at most after the first burst,
 * each deferral names its host, and every task completes once the outage
 * is over. */
static void a_budget_spreads_retries_to_a_failing_host(void **state) {
  static const char *const sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                     "backoff.multiplier=1", "budgets.api.ratio=0",
                                     "budgets.api.window=1s", "budgets.api.min_per_second=2",
                                     "budgets.api.per_host=true", NULL};
  hfx *h = open_with(state, sets);
  static const http_stub_answer outage[] = {
      {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0}, {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0},
      {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0}, {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0},
      {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0}, {HTTP_STUB_ANSWER, 503, NULL, "down", 1, 0, 0},
      {HTTP_STUB_ANSWER, 200, "Content-Type: application/json\r\n", "{\"ok\": true}", 1, 0, 0}};
  http_stub_route(h->srv, "/down", outage, 7);
  http_step(h, "call", "/down", NULL, "{ max_attempts = 3, budget = \"api\" }");
  int64_t id[4];
  for (int i = 0; i < 4; i++) id[i] = efx_submit(h->f, "call", NULL);
  efx_drive(h->f, 60);
  for (int i = 0; i < 4; i++) efx_expect(h->f, id[i], "complete", "s", "complete", NULL);
  /* 4 first attempts and 2 retries at 100, all 503; 2 retries deferred
   * to 1000, answered; the 2 that failed twice deferred to 2000 (the two
   * reserved at 1000 fill that window), answered. */
  assert_int_equal(http_stub_count(h->srv, "/down"), 10);
  char want[1024];
  snprintf(want, sizeof want,
           "%1$lld|1|failure|0|100|computed|100\n"
           "%1$lld|2|failure|100|1900|budget|2000\n"
           "%1$lld|3|success|2000|NULL|NULL|NULL\n"
           "%2$lld|1|failure|0|100|computed|100\n"
           "%2$lld|2|failure|100|1900|budget|2000\n"
           "%2$lld|3|success|2000|NULL|NULL|NULL\n"
           "%3$lld|1|failure|0|1000|budget|1000\n"
           "%3$lld|2|success|1000|NULL|NULL|NULL\n"
           "%4$lld|1|failure|0|1000|budget|1000\n"
           "%4$lld|2|success|1000|NULL|NULL|NULL",
           (long long)id[0], (long long)id[1], (long long)id[2], (long long)id[3]);
  efx_sql_expect(h->f->db, want,
                 "SELECT s.task_id, a.attempt, a.outcome, a.started_at - %1$lld, a.delay_ms,"
                 " a.delay_source, a.next_run_at - %1$lld FROM attempts a"
                 " JOIN steps s ON s.id = a.step_id ORDER BY s.task_id, a.attempt",
                 (long long)EFX_T0);
  /* Every deferral names the host the budget kept its state for. */
  char host[64];
  snprintf(host, sizeof host, "127.0.0.1:%d", http_stub_port(h->srv));
  size_t i;
  json_t *e;
  int deferred = 0;
  json_array_foreach(h->f->events, i, e) {
    if (strcmp(str(e, "type"), "step.retry_deferred") != 0) continue;
    deferred++;
    assert_string_equal(str(e, "budget"), "api");
    assert_string_equal(str(e, "host"), host);
  }
  assert_int_equal(deferred, 4);
  tk_engine_stats st = tk_engine_stats_get(h->f->engine);
  assert_int_equal(st.retries_deferred, (uint64_t)deferred);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_json_object_becomes_the_results, setup, teardown),
      cmocka_unit_test_setup_teardown(other_bodies_are_kept_never_dropped, setup, teardown),
      cmocka_unit_test_setup_teardown(a_body_that_says_json_and_is_not_fails_permanently, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(retry_after_in_each_form_is_the_servers_hint, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(retry_after_is_capped_by_max_server_delay, setup, teardown),
      cmocka_unit_test_setup_teardown(an_unreadable_retry_after_leaves_the_policys_delay, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(status_classes_and_their_overrides, setup, teardown),
      cmocka_unit_test_setup_teardown(transport_errors_are_retryable_and_named, setup, teardown),
      cmocka_unit_test_setup_teardown(an_oversized_body_fails_permanently, setup, teardown),
      cmocka_unit_test_setup_teardown(redirects_are_followed_up_to_the_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(placeholders_fill_url_query_headers_and_body, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_input_is_the_default_body_of_a_post, setup, teardown),
      cmocka_unit_test_setup_teardown(a_missing_value_fails_permanently_naming_the_placeholder,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(bad_specs_are_refused_at_their_place, setup, teardown),
      cmocka_unit_test_setup_teardown(env_values_stay_out_of_results, setup, teardown),
      cmocka_unit_test_setup_teardown(credentials_stay_out_of_messages_and_events, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(with_workers_503s_then_200_retry_and_complete, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(requests_in_flight_hold_no_thread, setup, teardown),
      cmocka_unit_test_setup_teardown(leases_are_kept_while_a_request_waits, setup, teardown),
      cmocka_unit_test_setup_teardown(a_stop_waits_for_requests_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(an_engine_freed_mid_request_leaves_it_to_its_lease, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          the_tasker_binary_runs_http_steps_and_shows_the_servers_delay, setup, teardown),
      cmocka_unit_test_setup_teardown(the_binary_keeps_env_values_out_of_results_on_sqlite, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_binary_keeps_env_values_out_of_results_on_postgres,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(the_example_template_is_valid, setup, teardown),
      cmocka_unit_test_setup_teardown(a_budget_spreads_retries_to_a_failing_host, setup, teardown),
      cmocka_unit_test_setup_teardown(a_ca_file_that_cannot_be_used_fails_permanently, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_binary_refuses_http_settings_that_cannot_work, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_host_that_does_not_resolve_is_retryable_and_named, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_failed_tls_handshake_is_retryable_and_named, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(tls_refuses_a_certificate_it_does_not_trust, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(tls_accepts_a_certificate_trusted_through_ca_file, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(tls_refuses_a_trusted_certificate_for_another_host_name,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
