/* The HTTP API (docs/api.md) over real HTTP (libcurl) against an
 * in-process server on port 0, over a SQLite store holding real tasks run
 * by an engine on the manual clock (failures, retries with delays, a
 * retry still waiting): every endpoint's answer, filters and pages,
 * submit, one and many actions; bad input answered with a clear JSON
 * error, the right status, and the store unchanged (every row of every
 * table compared); the token and the same-origin check; the real binary
 * (`tasker serve`, `tasker run --metrics`) as subprocesses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tasker/server.h>

#include "common/engine_fixture.h"
#include "common/skip_missing.h"
#include "server/assets.h"
#include "server/api_client.h"

static const char *const sets[] = {"backoff.base=1s", "backoff.jitter=none",
                                   "backoff.profiles.fast.base=100ms", NULL};

static const char etl_toml[] =
    "name = \"etl\"\nversion = \"1\"\n" EFX_STEP("extract") EFX_NOOP EFX_STEP("load")
    "depends_on = [\"extract\"]\nhandler = { kind = \"builtin\", name = \"fail\" }\n"
    "retry = { max_attempts = 3 }\n" EFX_STEP("report") "depends_on = [\"load\"]\n" EFX_NOOP;

static const char *const post_h[] = {"X-Tasker-Request: 1", NULL};

/* The dashboard's built-in files (the generated table; its last entry has
 * a NULL path). */
extern const tk__asset tk__assets[];

typedef struct world {
  efx *f;
  tk_server *srv;
  tk_store *srv_store; /* the server's own connection to f's store */
  char base[128];
  int64_t etl1, etl2, flaky, quick, waiting;
} world;

/* base + path in buf. */
static const char *url_in(world *w, const char *path, char *buf, size_t len) {
  snprintf(buf, len, "%s%s", w->base, path);
  return buf;
}
#define URL(w, path) url_in((w), (path), (char[1024]){0}, 1024)

/* GET path, expecting 200 JSON. */
static json_t *get_ok(world *w, const char *path) {
  api_resp r = api_request("GET", URL(w, path), NULL, 0, NULL);
  return api_expect_json(&r, 200);
}

/* A connection of its own to the test's store (on the test's manual
 * clock), for a server: a server's store is used by its thread alone, as
 * `tasker serve` opens its own (its reaper runs on that thread from its
 * start). server_store: w->srv's, closed by stop_server. */
static tk_store *open_again(world *w) {
  tk_store *s;
  tk_err err;
  if (tk_store_open(w->f->url, &s, &err) != 0) fail_msg("server's store: %s", err.msg);
  tk_store_set_clock(s, tk_clock_manual(&w->f->clock));
  return s;
}

static tk_store *server_store(world *w) {
  if (w->srv_store == NULL) w->srv_store = open_again(w);
  return w->srv_store;
}

/* Stop the server and close its connection. */
static void stop_server(world *w) {
  tk_server_stop(w->srv);
  w->srv = NULL;
  tk_store_close(w->srv_store);
  w->srv_store = NULL;
}

/* The server at w->base, with its own connection to the store, answering
 * status from a count made every snapshot_ms. */
static void serve(world *w, const char *token, int snapshot_ms) {
  tk_server_options o = {.listen = "127.0.0.1:0", .token = token, .store = server_store(w),
                         .store_url = w->f->url, .config = w->f->cfg,
                         .clock = tk_clock_manual(&w->f->clock), .snapshot_ms = snapshot_ms};
  tk_err err;
  if (tk_server_start(&o, &w->srv, &err) != 0) fail_msg("server: %s", err.msg);
  assert_true(tk_server_port(w->srv) > 0);
  snprintf(w->base, sizeof w->base, "http://%s", tk_server_address(w->srv));
}

static void start_server(world *w, const char *token) { serve(w, token, 3600000); }

/* Two etl tasks in error (load exhausted after 3 attempts), a flaky task
 * complete after two retries, a quick one complete, and a flaky one
 * waiting for its first retry. */
static void fill(world *w) {
  efx *f = w->f;
  efx_template(f, etl_toml);
  efx_one_step(f, "flaky", "{ kind = \"builtin\", name = \"fail\", times = 2 }",
               "{ max_attempts = 5 }");
  efx_one_step(f, "quick", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  w->etl1 = efx_submit(f, "etl", "{\"day\": \"mon\"}");
  w->etl2 = efx_submit(f, "etl", NULL);
  w->flaky = efx_submit(f, "flaky", NULL);
  w->quick = efx_submit(f, "quick", NULL);
  efx_drive(f, 100);
  w->waiting = efx_submit(f, "flaky", NULL);
  efx_tick(f);
  efx_expect(f, w->etl1, "error", "extract", "complete", "load", "error", "report", "pending",
             NULL);
  efx_expect(f, w->flaky, "complete", "s", "complete", NULL);
  efx_expect(f, w->waiting, "in_progress", "s", "waiting_for_retry", NULL);
}

static int setup(void **state) {
  world *w = calloc(1, sizeof *w);
  w->f = efx_new(sets, "orch-1");
  fill(w);
  start_server(w, NULL);
  *state = w;
  return 0;
}

static int teardown(void **state) {
  world *w = *state;
  if (w == NULL) return 0;
  stop_server(w);
  void *f = w->f;
  efx_teardown(&f);
  free(w);
  return 0;
}

static int64_t num(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* method on path with body (NULL: none) and headers must answer this
 * error and leave every row of the store as it was. */
static void refused(world *w, const char *method, const char *path, const char *body,
                    const char *const *headers, long status, const char *code, const char *param,
                    const char *says) {
  char *before = efx_snapshot(w->f->db);
  api_resp r = api_request(method, URL(w, path), body, -1, headers);
  api_expect_error(&r, status, code, param, says);
  efx_unchanged(w->f->db, before);
}

/* ---- reads ------------------------------------------------------------- */

static void status_and_metrics(void **state) {
  world *w = *state;
  json_t *s = get_ok(w, "/api/v1/status");
  assert_string_equal(json_string_value(json_object_get(s, "backend")), "sqlite");
  json_t *tasks = json_object_get(s, "tasks");
  assert_int_equal(num(tasks, "error"), 2);
  assert_int_equal(num(tasks, "complete"), 2);
  assert_int_equal(num(tasks, "in_progress"), 1);
  assert_int_equal(num(json_object_get(s, "steps"), "waiting_for_retry"), 1);
  assert_int_equal(num(s, "as_of"), w->f->clock.now_ms);
  json_decref(s);

  api_resp r = api_request("GET", URL(w, "/metrics"), NULL, 0, NULL);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  assert_true(api_metric(r.body, "tasker_store_tasks{state=\"error\"}") == 2);
  assert_true(api_metric(r.body, "tasker_store_tasks{state=\"complete\"}") == 2);
  api_resp_free(&r);
  /* HEAD: the headers of a GET without its body. */
  r = api_request("HEAD", URL(w, "/api/v1/status"), NULL, 0, NULL);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, 0);
  api_resp_free(&r);
}

static void task_list_filters(void **state) {
  world *w = *state;
  json_t *all = get_ok(w, "/api/v1/tasks");
  json_t *tasks = json_object_get(all, "tasks");
  assert_int_equal(json_array_size(tasks), 5);
  assert_true(json_is_null(json_object_get(all, "next_cursor")));
  /* Newest first. */
  assert_int_equal(num(json_array_get(tasks, 0), "id"), w->waiting);
  assert_int_equal(num(json_array_get(tasks, 4), "id"), w->etl1);
  json_t *etl = json_array_get(tasks, 3);
  assert_int_equal(num(etl, "id"), w->etl2);
  assert_string_equal(json_string_value(json_object_get(etl, "state")), "error");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(etl, "template"), "name")), "etl");
  assert_int_equal(num(etl, "steps_total"), 3);
  assert_int_equal(num(etl, "steps_error"), 1);
  assert_non_null(strstr(json_string_value(json_object_get(etl, "last_error")), "on purpose"));
  json_t *waiting = json_array_get(tasks, 0);
  assert_true(num(waiting, "next_run_at") > w->f->clock.now_ms - 1);
  json_decref(all);

  struct {
    const char *query;
    int n;
  } cases[] = {
      {"?state=error", 2},
      {"?state=complete", 2},
      {"?template=etl", 2},
      {"?template=default/flaky", 2},
      {"?template=nosuch", 0},
      {"?q=failing%20every", 2},
      {"?q=failing+attempt", 1},
      {"?since=1h", 5},
      {"?since=2100-01-01T00:00:00Z", 0},
      {"?since=2000-01-01T00:00:00Z&state=error&template=etl", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, "/api/v1/tasks%s", cases[i].query);
    json_t *page = get_ok(w, path);
    if ((int)json_array_size(json_object_get(page, "tasks")) != cases[i].n)
      fail_msg("%s: %zu tasks, expected %d", path, json_array_size(json_object_get(page, "tasks")),
               cases[i].n);
    json_decref(page);
  }
}

static void task_pages(void **state) {
  world *w = *state;
  int64_t seen[8];
  int n = 0;
  char path[512] = "/api/v1/tasks?limit=2";
  for (int pages = 0;; pages++) {
    assert_true(pages < 5);
    json_t *page = get_ok(w, path);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(page, "tasks"), i, t) {
      assert_true(n < 8);
      seen[n++] = num(t, "id");
    }
    json_t *next = json_object_get(page, "next_cursor");
    if (json_is_null(next)) {
      json_decref(page);
      break;
    }
    assert_int_equal(json_array_size(json_object_get(page, "tasks")), 2);
    snprintf(path, sizeof path, "/api/v1/tasks?limit=2&cursor=%s", json_string_value(next));
    json_decref(page);
  }
  const int64_t want[] = {w->waiting, w->quick, w->flaky, w->etl2, w->etl1};
  assert_int_equal(n, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(seen[i], want[i]);
}

static void steps_list(void **state) {
  world *w = *state;
  json_t *page = get_ok(w, "/api/v1/steps");
  json_t *steps = json_object_get(page, "steps");
  assert_int_equal(json_array_size(steps), 2);
  json_t *s = json_array_get(steps, 0);
  assert_int_equal(num(s, "task"), w->etl2);
  assert_string_equal(json_string_value(json_object_get(s, "step")), "load");
  assert_int_equal(num(s, "attempts"), 3);
  assert_true(json_is_true(json_object_get(s, "exhausted")));
  json_decref(page);
  page = get_ok(w, "/api/v1/steps?state=waiting_for_retry");
  assert_int_equal(json_array_size(json_object_get(page, "steps")), 1);
  assert_int_equal(num(json_array_get(json_object_get(page, "steps"), 0), "task"), w->waiting);
  json_decref(page);
  page = get_ok(w, "/api/v1/steps?state=complete&limit=1");
  assert_int_equal(json_array_size(json_object_get(page, "steps")), 1);
  assert_true(json_is_string(json_object_get(page, "next_cursor")));
  json_decref(page);
}

static void one_task(void **state) {
  world *w = *state;
  char path[64];
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)w->flaky);
  json_t *t = get_ok(w, path);
  assert_int_equal(num(t, "id"), w->flaky);
  json_t *s = json_array_get(json_object_get(t, "steps"), 0);
  json_t *history = json_object_get(s, "history");
  assert_int_equal(json_array_size(history), 3);
  json_t *first = json_array_get(history, 0);
  assert_string_equal(json_string_value(json_object_get(first, "delay_source")), "computed");
  assert_int_equal(num(first, "delay_ms"), 1000);
  json_decref(t);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)w->etl1);
  t = get_ok(w, path);
  json_t *load = json_array_get(json_object_get(t, "steps"), 1);
  assert_string_equal(json_string_value(json_array_get(json_object_get(load, "depends_on"), 0)),
                      "extract");
  json_decref(t);

  refused(w, "GET", "/api/v1/tasks/999", NULL, NULL, 404, "not_found", "id", "999");
  refused(w, "GET", "/api/v1/tasks/abc", NULL, NULL, 404, "not_found", "id", "\"abc\": a task id is a positive integer");
}

static void templates(void **state) {
  world *w = *state;
  json_t *list = get_ok(w, "/api/v1/templates");
  assert_int_equal(json_array_size(list), 3);
  json_decref(list);
  json_t *t = get_ok(w, "/api/v1/templates/etl");
  assert_string_equal(json_string_value(json_object_get(t, "name")), "etl");
  assert_int_equal(num(t, "steps"), 3);
  assert_true(json_is_object(json_object_get(t, "definition")));
  json_decref(t);
  t = get_ok(w, "/api/v1/templates/default/etl?version=1");
  assert_string_equal(json_string_value(json_object_get(t, "version")), "1");
  json_decref(t);
  refused(w, "GET", "/api/v1/templates/nosuch", NULL, NULL, 404, "not_found", "name", "nosuch");
  refused(w, "GET", "/api/v1/templates/etl?version=9", NULL, NULL, 404, "not_found", "name", "etl");
  refused(w, "GET", "/api/v1/templates/etl?versoin=1", NULL, NULL, 400, "bad_request", "versoin", "unknown query parameter \"versoin\"");
}

static void activity_and_backoff(void **state) {
  world *w = *state;
  json_t *a = get_ok(w, "/api/v1/activity?window=1h&bucket=1m");
  assert_int_equal(num(a, "bucket_ms"), 60000);
  assert_int_equal(json_array_size(json_object_get(a, "buckets")), 60);
  json_decref(a);
  refused(w, "GET", "/api/v1/activity?window=24h&bucket=1s", NULL, NULL, 400, "bad_request", "bucket", "at most 1440");
  refused(w, "GET", "/api/v1/activity?bucket=soon", NULL, NULL, 400, "bad_request", "bucket", "bucket=\"soon\": expected a positive duration");

  json_t *b = get_ok(w, "/api/v1/backoff?attempts=4");
  assert_string_equal(json_string_value(json_object_get(b, "profile")), "default");
  json_t *d = json_object_get(b, "delays");
  assert_int_equal(json_array_size(d), 4);
  assert_int_equal(num(json_array_get(d, 0), "median_ms"), 1000);
  assert_int_equal(num(json_array_get(d, 3), "raw_ms"), 8000);
  json_t *profiles = json_object_get(b, "profiles");
  assert_string_equal(json_string_value(json_array_get(profiles, 0)), "default");
  assert_string_equal(json_string_value(json_array_get(profiles, 1)), "fast");
  json_decref(b);
  /* Jitter: the band holds the median, a seed repeats itself, and
   * another seed draws other delays (the seed is used, not ignored). */
  b = get_ok(w, "/api/v1/backoff?profile=fast&jitter=full&attempts=3&seed=7");
  json_t *row = json_array_get(json_object_get(b, "delays"), 2);
  assert_true(num(row, "min_ms") <= num(row, "median_ms"));
  assert_true(num(row, "median_ms") <= num(row, "max_ms"));
  assert_true(num(row, "max_ms") <= 400);
  json_t *again = get_ok(w, "/api/v1/backoff?profile=fast&jitter=full&attempts=3&seed=7");
  assert_true(json_equal(b, again));
  json_decref(again);
  json_t *other = get_ok(w, "/api/v1/backoff?profile=fast&jitter=full&attempts=3&seed=8");
  if (json_equal(json_object_get(b, "delays"), json_object_get(other, "delays")))
    fail_msg("seed 7 and seed 8 drew the same delays: %s",
             json_dumps(json_object_get(b, "delays"), JSON_COMPACT));
  json_decref(other);
  json_decref(b);
  refused(w, "GET", "/api/v1/backoff?profile=slow", NULL, NULL, 404, "not_found", "profile", "no backoff profile \"slow\"");
  refused(w, "GET", "/api/v1/backoff?jitter=fuzzy", NULL, NULL, 400, "bad_request", "jitter", "expected none, proportional");
  refused(w, "GET", "/api/v1/backoff?attempts=0", NULL, NULL, 400, "bad_request", "attempts", "expected an integer from 1 to 1000");
  refused(w, "GET", "/api/v1/backoff?min=1m&cap=1s", NULL, NULL, 400, "bad_request", NULL, "the policy is not valid");
}

static void dashboard_assets(void **state) {
  world *w = *state;
  api_resp r = api_request("GET", URL(w, "/"), NULL, 0, NULL);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.content_type, "text/html"));
  assert_non_null(strstr(r.body, "<html"));
  api_resp_free(&r);
  refused(w, "GET", "/nosuch.js", NULL, NULL, 404, "not_found", NULL, "no such page");
}

/* ---- bad input: a clear error, and nothing changed --------------------- */

static void bad_queries(void **state) {
  world *w = *state;
  refused(w, "GET", "/api/v1/tasks?state=bogus", NULL, NULL, 400, "bad_filter", "state",
          "state \"bogus\"");
  refused(w, "GET", "/api/v1/tasks?since=yesterday", NULL, NULL, 400, "bad_filter", "since",
          "yesterday");
  refused(w, "GET", "/api/v1/tasks?state=", NULL, NULL, 400, "bad_filter", "state", "state is empty");
  refused(w, "GET", "/api/v1/tasks?limit=0", NULL, NULL, 400, "bad_request", "limit",
          "limit=\"0\": expected an integer from 1 to 1000");
  refused(w, "GET", "/api/v1/tasks?limit=ten", NULL, NULL, 400, "bad_request", "limit", "\"ten\"");
  refused(w, "GET", "/api/v1/tasks?cursor=zzz", NULL, NULL, 400, "bad_cursor", "cursor",
          "cursor \"zzz\"");
  /* Said once, not the cursor named twice over. */
  api_resp cr = api_request("GET", URL(w, "/api/v1/steps?cursor=zzz"), NULL, 0, NULL);
  json_t *cj = api_json(&cr);
  assert_string_equal(json_string_value(json_object_get(json_object_get(cj, "error"), "message")),
                      "cursor \"zzz\": expected the next_cursor of an earlier page");
  json_decref(cj);
  api_resp_free(&cr);
  refused(w, "GET", "/api/v1/tasks?statee=error", NULL, NULL, 400, "bad_request", "statee",
          "unknown query parameter \"statee\": expected one of state, template");
  refused(w, "GET", "/api/v1/tasks?state=error&state=complete", NULL, NULL, 400, "bad_request",
          "state", "given twice");
  /* A bad escape names its parameter: the name when that decodes, else
   * the name as sent. */
  refused(w, "GET", "/api/v1/tasks?q=%zz", NULL, NULL, 400, "bad_request", "q",
          "query parameter \"q=%zz\": malformed %-escape");
  refused(w, "GET", "/api/v1/tasks?q=%ZZ", NULL, NULL, 400, "bad_request", "q",
          "malformed %-escape");
  refused(w, "GET", "/api/v1/steps?state=error&templ%61te=a%2", NULL, NULL, 400, "bad_request",
          "template", "malformed %-escape");
  refused(w, "GET", "/api/v1/tasks?st%zzate=error", NULL, NULL, 400, "bad_request", "st%zzate",
          "malformed %-escape");
  refused(w, "GET", "/api/v1/tasks/1/steps/a%zzb", NULL, NULL, 400, "bad_request", NULL,
          "path segment \"a%zzb\": malformed %-escape");
  refused(w, "GET", "/api/v1/steps?state=broken", NULL, NULL, 400, "bad_filter", "state",
          "expected a step state");
  refused(w, "GET", "/api/v1/steps?task_state=broken", NULL, NULL, 400, "bad_filter", "task_state",
          "broken");
  refused(w, "GET", "/api/v1/nosuch", NULL, NULL, 404, "not_found", NULL, "no such API path");
  refused(w, "GET", "/api/v2/tasks", NULL, NULL, 404, "not_found", NULL, "/api/v1/");
  refused(w, "DELETE", "/api/v1/tasks", NULL, NULL, 405, "method_not_allowed", NULL,
          "method DELETE is not allowed here");
  /* An action is POST only. */
  char path[128];
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/cancel", (long long)w->waiting);
  api_resp r = api_request("GET", URL(w, path), NULL, 0, NULL);
  assert_string_equal(r.allow, "POST");
  api_expect_error(&r, 405, "method_not_allowed", NULL, "POST only");
  refused(w, "GET", "/api/v1/actions/retry", NULL, NULL, 405, "method_not_allowed", NULL, "POST");
  refused(w, "POST", "/api/v1/status", "{}", post_h, 405, "method_not_allowed", NULL,
          "expected GET, HEAD");
}

static void bad_bodies(void **state) {
  world *w = *state;
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\"", post_h, 400, "bad_request", NULL,
          "not valid JSON");
  /* An array is a bulk submit (tests/cli/submit_many.sh): its elements
   * must be submissions. */
  refused(w, "POST", "/api/v1/tasks", "[1]", post_h, 400, "bad_request", NULL,
          "body[0]: an integer: expected an object {\"template\"");
  refused(w, "POST", "/api/v1/tasks", "", post_h, 400, "bad_request", NULL, "no body");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"nosuch\"}", post_h, 404, "not_found",
          "template", "nosuch");
  refused(w, "POST", "/api/v1/tasks", "{\"version\": \"1\"}", post_h, 400, "bad_request",
          "template", "template is missing");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"context\": [1]}", post_h, 400,
          "bad_request", "context", "context: an array: expected a JSON object");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"ctx\": {}}", post_h, 400,
          "bad_request", "ctx", "unknown member \"ctx\"");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"template\": \"quick\"}", post_h,
          400, "bad_request", NULL, "duplicate");
  /* A deadline: a duration or ms within the library's range, in a
   * single submit and in each element of a bulk one; none is stored. */
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"deadline\": \"2x\"}", post_h, 400,
          "bad_request", "deadline", "deadline: ");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"deadline\": true}", post_h, 400,
          "bad_request", "deadline", "a boolean: expected a duration");
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"etl\", \"deadline\": 0}", post_h, 400,
          "bad_request", "deadline", "deadline");
  refused(w, "POST", "/api/v1/tasks",
          "[{\"template\": \"etl\", \"deadline\": \"1h\"}, {\"template\": \"etl\", "
          "\"deadline\": \"-5m\"}]",
          post_h, 400, "bad_request", "deadline", "body[1]: deadline");
  refused(w, "POST", "/api/v1/tasks",
          "[{\"template\": \"etl\"}, {\"template\": \"etl\", \"priority\": 5000}]", post_h, 400,
          "bad_request", "priority", "body[1]: ");
  refused(w, "POST", "/api/v1/actions/retry", "{\"tasks\": [1], \"filter\": {}}", post_h, 400,
          "bad_request", NULL, "exactly one of tasks, steps and filter");
  refused(w, "POST", "/api/v1/actions/retry", "{\"tasks\": [0]}", post_h, 400, "bad_request",
          "tasks", "tasks[0]: not positive");
  refused(w, "POST", "/api/v1/actions/retry", "{\"tasks\": []}", post_h, 400, "bad_request",
          "tasks", "0 entries");
  refused(w, "POST", "/api/v1/actions/cancel", "{\"steps\": [{\"task\": 1, \"step\": \"s\"}]}",
          post_h, 400, "bad_request", "steps", "cancel acts on whole tasks");
  refused(w, "POST", "/api/v1/actions/retry", "{\"steps\": [{\"task\": 1}]}", post_h, 400,
          "bad_request", "steps", "steps[0].step: missing");
  refused(w, "POST", "/api/v1/actions/retry", "{\"steps\": [{\"step\": \"load\"}]}", post_h, 400,
          "bad_request", "steps", "steps[0].task: missing: expected a positive task id");
  refused(w, "POST", "/api/v1/actions/retry", "{\"filter\": {\"state\": \"broken\"}}", post_h, 400,
          "bad_filter", "state", "broken");
  refused(w, "POST", "/api/v1/actions/retry", "{\"filter\": {\"since\": 5}}", post_h, 400,
          "bad_filter", "since", "expected a non-empty string");
  refused(w, "POST", "/api/v1/actions/retry", "{\"tasks\": [1], \"max\": 5}", post_h, 400,
          "bad_request", "max", "max applies to a filter only");
  refused(w, "POST", "/api/v1/actions/frobnicate", "{}", post_h, 404, "not_found", "action",
          "expected retry, resolve or cancel");
  /* A filter with no condition reaches every task: refused unless "all"
   * is true (issue 19: this cancelled every unfinished task). */
  refused(w, "POST", "/api/v1/actions/cancel", "{\"filter\": {}}", post_h, 400, "bad_filter",
          "filter", "no filter: that would act on every task");
  refused(w, "POST", "/api/v1/actions/retry", "{\"filter\": {}, \"all\": false}", post_h, 400,
          "bad_filter", "filter", "\"all\": true");
  refused(w, "POST", "/api/v1/actions/cancel", "{\"filter\": {}, \"all\": \"yes\"}", post_h, 400,
          "bad_request", "all", "all: a string: expected true or false");
  refused(w, "POST", "/api/v1/actions/cancel", "{\"tasks\": [1], \"all\": true}", post_h, 400,
          "bad_request", "all", "all applies to a filter only");
  /* More tasks match than max: 409, and nothing is done. */
  refused(w, "POST", "/api/v1/actions/cancel", "{\"filter\": {\"state\": \"error\"}, \"max\": 1}",
          post_h, 409, "conflict", "max", "more than 1 tasks match");
}

static void oversized_body(void **state) {
  world *w = *state;
  size_t n = 2 * 1024 * 1024;
  char *big = malloc(n + 1);
  memset(big, ' ', n);
  memcpy(big, "{\"template\": \"quick\", \"context\": {}}", 36);
  big[n] = '\0';
  char *before = efx_snapshot(w->f->db);
  api_resp r = api_request("POST", URL(w, "/api/v1/tasks"), big, (long)n, post_h);
  api_expect_error(&r, 413, "too_large", NULL, "more than 1048576 bytes");
  efx_unchanged(w->f->db, before);
  /* Sent in chunks, without a Content-Length: counted as it comes. */
  const char *chunked[] = {"X-Tasker-Request: 1", "Transfer-Encoding: chunked", NULL};
  before = efx_snapshot(w->f->db);
  r = api_request("POST", URL(w, "/api/v1/tasks"), big, (long)n, chunked);
  api_expect_error(&r, 413, "too_large", NULL, "more than 1048576 bytes");
  efx_unchanged(w->f->db, before);
  free(big);
  /* The connection is still usable afterwards. */
  json_decref(get_ok(w, "/api/v1/status"));
}

static void same_origin(void **state) {
  world *w = *state;
  const char *body = "{\"template\": \"quick\"}";
  refused(w, "POST", "/api/v1/tasks", body, NULL, 403, "forbidden", "X-Tasker-Request",
          "X-Tasker-Request: 1");
  const char *wrong[] = {"X-Tasker-Request: yes", NULL};
  refused(w, "POST", "/api/v1/tasks", body, wrong, 403, "forbidden", "X-Tasker-Request",
          "it is not 1");
  const char *foreign[] = {"X-Tasker-Request: 1", "Origin: http://evil.example", NULL};
  refused(w, "POST", "/api/v1/tasks", body, foreign, 403, "forbidden", "Origin",
          "\"http://evil.example\" is not this server's");
  /* DNS rebinding: a foreign name for this machine is refused, even for a
   * GET and the dashboard's page. */
  const char *rebound[] = {"Host: evil.example:8080", NULL};
  refused(w, "GET", "/api/v1/status", NULL, rebound, 403, "forbidden", "Host",
          "Host \"evil.example:8080\" is not this machine");
  refused(w, "GET", "/", NULL, rebound, 403, "forbidden", "Host", "127.0.0.1, [::1] or localhost");
  const char *local[] = {"Host: LocalHost:1", NULL};
  api_resp ok = api_request("GET", URL(w, "/api/v1/status"), NULL, 0, local);
  json_decref(api_expect_json(&ok, 200));
  char own[160];
  snprintf(own, sizeof own, "Origin: %s", w->base);
  const char *same[] = {"X-Tasker-Request: 1", own, NULL};
  api_resp r = api_request("POST", URL(w, "/api/v1/tasks"), body, -1, same);
  json_t *j = api_expect_json(&r, 201);
  json_decref(j);
}

/* ---- actions ----------------------------------------------------------- */

static void submit(void **state) {
  world *w = *state;
  api_resp r = api_request("POST", URL(w, "/api/v1/tasks"),
                           "{\"template\": \"etl\", \"version\": \"1\", \"context\": {\"day\": "
                           "\"tue\"}, \"identity\": \"etl-tue\"}",
                           -1, post_h);
  json_t *j = api_expect_json(&r, 201);
  int64_t id = num(j, "id");
  assert_true(json_is_false(json_object_get(j, "existed")));
  json_decref(j);
  r = api_request("POST", URL(w, "/api/v1/tasks"), "{\"template\": \"etl\", \"identity\": \"etl-tue\"}",
                  -1, post_h);
  j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "id"), id);
  assert_true(json_is_true(json_object_get(j, "existed")));
  json_decref(j);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)id);
  j = get_ok(w, path);
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "context"), "day")),
                      "tue");
  json_decref(j);
  efx_sql_expect(w->f->db, "6", "SELECT count(*) FROM tasks");
  /* A deadline, single and bulk: the task's deadline_at is its submit's
   * time plus the duration (or ms). */
  r = api_request("POST", URL(w, "/api/v1/tasks"), "{\"template\": \"etl\", \"deadline\": \"2h\"}",
                  -1, post_h);
  j = api_expect_json(&r, 201);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)num(j, "id"));
  json_decref(j);
  j = get_ok(w, path);
  int64_t created = num(j, "created_at"), at = num(j, "deadline_at");
  assert_true(at == created + 7200000);
  json_decref(j);
  r = api_request("POST", URL(w, "/api/v1/tasks"),
                  "[{\"template\": \"etl\", \"deadline\": 60000}, {\"template\": \"etl\"}]", -1,
                  post_h);
  j = api_expect_json(&r, 201);
  int64_t first = num(json_array_get(json_object_get(j, "tasks"), 0), "id");
  int64_t second = num(json_array_get(json_object_get(j, "tasks"), 1), "id");
  json_decref(j);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)first);
  j = get_ok(w, path);
  assert_true(num(j, "deadline_at") == num(j, "created_at") + 60000);
  json_decref(j);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)second);
  j = get_ok(w, path);
  assert_true(json_is_null(json_object_get(j, "deadline_at")));
  json_decref(j);
}

static void one_actions(void **state) {
  world *w = *state;
  char path[128];
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/steps/load/retry", (long long)w->etl1);
  api_resp r = api_request("POST", URL(w, path), NULL, 0, post_h);
  json_t *j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "task"), w->etl1);
  assert_string_equal(json_string_value(json_object_get(j, "step")), "load");
  assert_string_equal(json_string_value(json_object_get(j, "action")), "retry");
  assert_string_equal(json_string_value(json_object_get(j, "task_state")), "in_progress");
  json_decref(j);
  efx_sql_expect(w->f->db, "waiting_for_retry|0",
                 "SELECT s.state, s.attempts FROM steps s WHERE s.task_id = %lld AND s.name = 'load'",
                 (long long)w->etl1);
  /* Again: the step is no longer in error. */
  refused(w, "POST", path, NULL, post_h, 409, "conflict", NULL, "load");
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/steps/nosuch/resolve", (long long)w->etl2);
  refused(w, "POST", path, NULL, post_h, 404, "not_found", NULL, "nosuch");
  refused(w, "POST", "/api/v1/tasks/999/cancel", NULL, post_h, 404, "not_found", NULL, "999");
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/steps/load/resolve", (long long)w->etl2);
  r = api_request("POST", URL(w, path), NULL, 0, post_h);
  j = api_expect_json(&r, 200);
  json_decref(j);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/cancel", (long long)w->waiting);
  r = api_request("POST", URL(w, path), NULL, 0, post_h);
  j = api_expect_json(&r, 200);
  assert_true(json_is_null(json_object_get(j, "step")));
  assert_string_equal(json_string_value(json_object_get(j, "task_state")), "cancelled");
  json_decref(j);
  refused(w, "POST", path, NULL, post_h, 409, "conflict", NULL, "");
  efx_expect(w->f, w->waiting, "cancelled", "s", "cancelled", NULL);
}

static void bulk_actions(void **state) {
  world *w = *state;
  char body[256];
  snprintf(body, sizeof body, "{\"tasks\": [%lld, %lld, %lld]}", (long long)w->etl1,
           (long long)w->etl2, (long long)w->quick);
  api_resp r = api_request("POST", URL(w, "/api/v1/actions/retry"), body, -1, post_h);
  json_t *j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "matched"), 3);
  assert_int_equal(num(j, "done"), 2);
  assert_int_equal(num(j, "failed"), 1);
  json_t *e = json_array_get(json_object_get(j, "errors"), 0);
  assert_int_equal(num(e, "task"), w->quick);
  assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "no step in error"));
  assert_string_equal(json_string_value(json_object_get(e, "reason")), "no_failed_step");
  assert_int_equal(num(json_object_get(j, "refused"), "no_failed_step"), 1);
  json_decref(j);
  efx_sql_expect(w->f->db, "2", "SELECT count(*) FROM steps WHERE name = 'load' AND state = 'waiting_for_retry'");

  /* Run them into error again, then resolve one step by name and cancel
   * the rest by filter. */
  efx_drive(w->f, 100);
  snprintf(body, sizeof body, "{\"steps\": [{\"task\": %lld, \"step\": \"load\"}, {\"task\": "
                              "%lld, \"step\": \"nosuch\"}]}",
           (long long)w->etl1, (long long)w->etl1);
  r = api_request("POST", URL(w, "/api/v1/actions/resolve"), body, -1, post_h);
  j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "done"), 1);
  assert_int_equal(num(j, "failed"), 1);
  json_decref(j);
  r = api_request("POST", URL(w, "/api/v1/actions/cancel"),
                  "{\"filter\": {\"state\": \"error\", \"template\": \"etl\"}}", -1, post_h);
  j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "matched"), 1);
  /* A task in error may be cancelled by filter as by id (issue 19: the
   * filter passed over it). */
  assert_int_equal(num(j, "done"), 1);
  assert_int_equal(num(j, "failed"), 0);
  json_decref(j);
  efx_sql_expect(w->f->db, "cancelled", "SELECT state FROM tasks WHERE id = %lld",
                 (long long)w->etl2);
  /* And one by id: the task JSON says whether it may be (the dashboard's
   * button follows it). */
  int64_t failed = efx_submit(w->f, "etl", NULL);
  efx_drive(w->f, 100);
  char path[96];
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)failed);
  j = get_ok(w, path);
  assert_string_equal(json_string_value(json_object_get(j, "state")), "error");
  assert_true(json_is_true(json_object_get(j, "cancellable")));
  json_decref(j);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld/cancel", (long long)failed);
  r = api_request("POST", URL(w, path), NULL, 0, post_h);
  j = api_expect_json(&r, 200);
  assert_string_equal(json_string_value(json_object_get(j, "task_state")), "cancelled");
  json_decref(j);
  snprintf(path, sizeof path, "/api/v1/tasks/%lld", (long long)failed);
  j = get_ok(w, path);
  assert_true(json_is_false(json_object_get(j, "cancellable")));
  json_decref(j);
  int64_t fresh = efx_submit(w->f, "quick", NULL);
  r = api_request("POST", URL(w, "/api/v1/actions/cancel"), "{\"filter\": {\"state\": \"pending\"}}",
                  -1, post_h);
  j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "matched"), 1);
  assert_int_equal(num(j, "done"), 1);
  json_decref(j);
  efx_expect(w->f, fresh, "cancelled", NULL);
  /* Every task, asked for: none is left unfinished. */
  fresh = efx_submit(w->f, "quick", NULL);
  r = api_request("POST", URL(w, "/api/v1/actions/cancel"), "{\"filter\": {}, \"all\": true}", -1,
                  post_h);
  j = api_expect_json(&r, 200);
  assert_true(num(j, "done") >= 1);
  json_decref(j);
  efx_expect(w->f, fresh, "cancelled", NULL);
  efx_sql_expect(w->f->db, "0",
                 "SELECT count(*) FROM tasks WHERE state IN ('pending', 'in_progress')");
}

/* "Retry all matching" as the dashboard sends it (no task state: the
 * failed list shows every task's steps in error) takes a task still in
 * progress; a bulk answer counts every refusal by reason and lists the
 * first 20 with task and step (issue 19). */
static void bulk_retry_reaches_in_progress_and_reports_refusals(void **state) {
  world *w = *state;
  efx_template(w->f, "name = \"par\"\nversion = \"1\"\n" EFX_STEP("bad")
                     "handler = { kind = \"builtin\", name = \"fail\", permanent = true }\n"
                     "retry = { max_attempts = 1 }\n" EFX_STEP("slow")
                     "handler = { kind = \"builtin\", name = \"fail\", times = 100 }\n"
                     "retry = { max_attempts = 5 }\n");
  int64_t par = efx_submit(w->f, "par", NULL);
  efx_tick(w->f);
  efx_expect(w->f, par, "in_progress", "bad", "error", "slow", "waiting_for_retry", NULL);
  api_resp r = api_request("POST", URL(w, "/api/v1/actions/retry"),
                           "{\"filter\": {\"template\": \"par\"}, \"max\": 1000}", -1, post_h);
  json_t *j = api_expect_json(&r, 200);
  assert_int_equal(num(j, "matched"), 1);
  assert_int_equal(num(j, "done"), 1);
  assert_int_equal(num(j, "failed"), 0);
  json_decref(j);
  efx_expect(w->f, par, "in_progress", "bad", "waiting_for_retry", NULL);

  /* The task again (no step in error now), and 24 that do not exist. */
  char body[512];
  int len = snprintf(body, sizeof body, "{\"tasks\": [%lld", (long long)par);
  for (int i = 1; i <= 24; i++) len += snprintf(body + len, sizeof body - len, ", %d", 900000 + i);
  snprintf(body + len, sizeof body - len, "]}");
  char *before = efx_snapshot(w->f->db);
  r = api_request("POST", URL(w, "/api/v1/actions/retry"), body, -1, post_h);
  j = api_expect_json(&r, 200);
  efx_unchanged(w->f->db, before);
  assert_int_equal(num(j, "matched"), 25);
  assert_int_equal(num(j, "failed"), 25);
  json_t *refused = json_object_get(j, "refused");
  assert_int_equal(num(refused, "no_failed_step"), 1);
  assert_int_equal(num(refused, "not_found"), 24);
  assert_int_equal(num(refused, "state"), 0);
  json_t *errors = json_object_get(j, "errors");
  assert_int_equal(json_array_size(errors), 20);
  json_t *e = json_array_get(errors, 19);
  assert_int_equal(num(e, "task"), 900019);
  assert_true(json_is_null(json_object_get(e, "step")));
  assert_string_equal(json_string_value(json_object_get(e, "reason")), "not_found");
  json_decref(j);
  /* A step listed by name: a refusal names it. */
  snprintf(body, sizeof body, "{\"steps\": [{\"task\": %lld, \"step\": \"slow\"}]}",
           (long long)par);
  r = api_request("POST", URL(w, "/api/v1/actions/retry"), body, -1, post_h);
  j = api_expect_json(&r, 200);
  e = json_array_get(json_object_get(j, "errors"), 0);
  assert_string_equal(json_string_value(json_object_get(e, "step")), "slow");
  assert_string_equal(json_string_value(json_object_get(e, "reason")), "state");
  assert_int_equal(num(json_object_get(j, "refused"), "state"), 1);
  json_decref(j);
}

/* ---- headers on every answer ------------------------------------------- */

/* Every route, every kind of answer (success, created, each error status),
 * the dashboard's every file: each answer carries the security headers
 * (api_request checks them on every answer of every test; here each route
 * and status is reached on purpose, its status checked). */
static void security_headers_on_every_answer(void **state) {
  world *w = *state;
  char task[64], cancel[96], retry[96];
  snprintf(task, sizeof task, "/api/v1/tasks/%lld", (long long)w->etl1);
  snprintf(cancel, sizeof cancel, "/api/v1/tasks/%lld/cancel", (long long)w->waiting);
  snprintf(retry, sizeof retry, "/api/v1/tasks/%lld/steps/load/retry", (long long)w->etl2);
  const char *const no_xr[] = {"Origin: http://evil.example", NULL};
  struct {
    const char *method, *path, *body;
    const char *const *headers;
    long status;
  } routes[] = {
      {"GET", "/api/v1/status", NULL, NULL, 200},
      {"HEAD", "/api/v1/status", NULL, NULL, 200},
      {"GET", "/api/v1/tasks", NULL, NULL, 200},
      {"GET", task, NULL, NULL, 200},
      {"GET", "/api/v1/steps", NULL, NULL, 200},
      {"GET", "/api/v1/templates", NULL, NULL, 200},
      {"GET", "/api/v1/templates/etl", NULL, NULL, 200},
      {"GET", "/api/v1/activity", NULL, NULL, 200},
      {"GET", "/api/v1/backoff", NULL, NULL, 200},
      {"GET", "/metrics", NULL, NULL, 200},
      {"GET", "/", NULL, NULL, 200},
      {"POST", "/api/v1/tasks", "{\"template\": \"quick\"}", post_h, 201},
      {"POST", retry, NULL, post_h, 200},
      {"POST", cancel, NULL, post_h, 200},
      {"POST", "/api/v1/actions/resolve", "{\"filter\": {\"state\": \"error\"}}", post_h, 200},
      {"GET", "/api/v1/tasks?state=bogus", NULL, NULL, 400},
      {"POST", "/api/v1/tasks", "{\"template\": \"quick\"}", no_xr, 403},
      {"GET", "/api/v1/nosuch", NULL, NULL, 404},
      {"GET", "/nosuch.js", NULL, NULL, 404},
      {"DELETE", "/api/v1/tasks", NULL, NULL, 405},
      {"POST", cancel, NULL, post_h, 409},
  };
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    api_resp r = api_request(routes[i].method, URL(w, routes[i].path), routes[i].body, -1,
                             routes[i].headers);
    if (r.status != routes[i].status)
      fail_msg("%s %s: %ld, expected %ld: %s", routes[i].method, routes[i].path, r.status,
               routes[i].status, r.body);
    api_resp_free(&r);
  }
  for (const tk__asset *a = tk__assets; a->path; a++) {
    api_resp r = api_request("GET", URL(w, a->path), NULL, 0, NULL);
    if (r.status != 200) fail_msg("GET %s: %ld", a->path, r.status);
    api_resp_free(&r);
  }
  /* 413: a body over 1 MiB. */
  size_t n = 1024 * 1024 + 1;
  char *big = malloc(n + 1);
  memset(big, ' ', n);
  big[n] = '\0';
  api_resp r = api_request("POST", URL(w, "/api/v1/tasks"), big, (long)n, post_h);
  assert_int_equal(r.status, 413);
  api_resp_free(&r);
  free(big);
  /* 401: a server that asks for a token. */
  stop_server(w);
  start_server(w, "tok");
  r = api_request("GET", URL(w, "/api/v1/status"), NULL, 0, NULL);
  assert_int_equal(r.status, 401);
  api_resp_free(&r);
}

/* ---- the token, the listen address ------------------------------------- */

static void token_required(void **state) {
  world *w = *state;
  stop_server(w);
  start_server(w, "s3cret-token");
  api_resp r = api_request("GET", URL(w, "/api/v1/status"), NULL, 0, NULL);
  assert_string_equal(r.www_auth, "Bearer");
  api_expect_error(&r, 401, "unauthorized", "Authorization", "requires a token");
  const char *wrong[] = {"Authorization: Bearer s3cret-tokeN", NULL};
  refused(w, "GET", "/metrics", NULL, wrong, 401, "unauthorized", "Authorization",
          "not this server's");
  const char *basic[] = {"Authorization: Basic czNjcmV0", NULL};
  refused(w, "POST", "/api/v1/tasks", "{\"template\": \"quick\"}", basic, 401, "unauthorized",
          "Authorization", "expected \"Bearer TOKEN\"");
  const char *right[] = {"Authorization: Bearer s3cret-token", NULL};
  r = api_request("GET", URL(w, "/api/v1/status"), NULL, 0, right);
  json_decref(api_expect_json(&r, 200));
  /* With the token, a POST needs no same-origin header. */
  r = api_request("POST", URL(w, "/api/v1/tasks"), "{\"template\": \"quick\"}", -1, right);
  json_decref(api_expect_json(&r, 201));
  /* The dashboard's page itself asks for the token; it needs none. */
  r = api_request("GET", URL(w, "/"), NULL, 0, NULL);
  assert_int_equal(r.status, 200);
  api_resp_free(&r);
}

static void listen_addresses(void **state) {
  world *w = *state;
  tk_store *own = open_again(w); /* w->srv's is its thread's */
  tk_server_options o = {.store = own, .config = w->f->cfg};
  tk_server *s;
  tk_err err;
  const char *bad[] = {"0.0.0.0:0", "localhost:80", "127.0.0.1", "127.0.0.1:65536", "::1:80",
                       "[::1]80"};
  const char *says[] = {"is not loopback: serving beyond this machine requires a token",
                        "not a numeric IPv4 address", "no port", "port is not a number",
                        "must be in brackets", "no \"]:\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.listen = bad[i];
    assert_int_equal(tk_server_start(&o, &s, &err), TK_EINVAL);
    if (strstr(err.msg, says[i]) == NULL) fail_msg("%s: %s", bad[i], err.msg);
  }
  /* A port in use: the system's reason. */
  o.listen = tk_server_address(w->srv);
  assert_int_equal(tk_server_start(&o, &s, &err), TK_EIO);
  assert_non_null(strstr(err.msg, "in use"));
  tk_store_close(own);
}

/* Whether this machine can bind a socket to the IPv6 loopback, asked of
 * the system directly (not of the server under test); why not in why. */
static int ipv6_loopback_here(char *why, size_t len) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) {
    snprintf(why, len, "socket(AF_INET6): %s", strerror(errno));
    return 0;
  }
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (!ok) snprintf(why, len, "bind to [::1]:0: %s", strerror(errno));
  close(fd);
  return ok;
}

/* [::1] is served when the machine has an IPv6 loopback: the server may
 * fail there only when the system itself cannot bind it. Skipped without
 * one (scripts/run-tests fails the skip when TK_REQUIRE_IPV6=1). */
static void listen_ipv6_loopback(void **state) {
  world *w = *state;
  char why[160];
  if (!ipv6_loopback_here(why, sizeof why)) skip_missing("ipv6", "no IPv6 loopback here: %s", why);
  tk_store *own = open_again(w);
  tk_server_options o = {.listen = "[::1]:0", .store = own, .config = w->f->cfg};
  tk_server *s;
  tk_err err;
  if (tk_server_start(&o, &s, &err) != 0)
    fail_msg("the machine binds [::1]:0, the server does not: %s", err.msg);
  assert_non_null(strstr(tk_server_address(s), "[::1]:"));
  char url[128];
  snprintf(url, sizeof url, "http://%s/api/v1/status", tk_server_address(s));
  api_resp r = api_request("GET", url, NULL, 0, NULL);
  json_decref(api_expect_json(&r, 200));
  tk_server_stop(s);
  tk_store_close(own);
}

typedef struct pending_seen {
  world *w;
  int64_t want;
} pending_seen;

/* Whether the status counts want pending tasks. */
static int status_counts_pending(void *ud) {
  pending_seen *p = ud;
  json_t *s = get_ok(p->w, "/api/v1/status");
  int yes = num(json_object_get(s, "tasks"), "pending") == p->want;
  json_decref(s);
  return yes;
}

/* The snapshot thread counts again every snapshot_ms: a task submitted
 * through the API shows in the status and the metrics after a while. */
static void status_snapshot_refreshes(void **state) {
  world *w = *state;
  stop_server(w);
  serve(w, NULL, 20);
  pending_seen p = {w, 0};
  assert_true(status_counts_pending(&p));
  api_resp r = api_request("POST", URL(w, "/api/v1/tasks"), "{\"template\": \"quick\"}", -1, post_h);
  json_decref(api_expect_json(&r, 201));
  p.want = 1;
  assert_true(efx_wait_for(status_counts_pending, &p, 30000));
  r = api_request("GET", URL(w, "/metrics"), NULL, 0, NULL);
  assert_true(api_metric(r.body, "tasker_store_tasks{state=\"pending\"}") == 1);
  api_resp_free(&r);
}

/* ---- the binary -------------------------------------------------------- */

typedef struct line_wait {
  const char *path, *prefix;
  char url[128];
} line_wait;

/* Whether the file at w->path has a line starting with prefix; its URL
 * (up to the next '/' after the host) goes to w->url. */
static int has_line(void *ud) {
  line_wait *w = ud;
  char *text = efx_read(w->path);
  const char *at = strstr(text, w->prefix);
  int found = at && strchr(at, '\n');
  if (found) {
    const char *u = at + strlen(w->prefix);
    const char *end = strchr(u + strlen("http://"), '/');
    snprintf(w->url, sizeof w->url, "%.*s", (int)(end - u), u);
  }
  free(text);
  return found;
}

/* Start tasker with args, stderr to err_path, and wait for its line
 * starting with lw->prefix (lw->url gets the URL it names). */
static pid_t spawn_until_line(const char *const *args, const char *err_path, line_wait *lw) {
  pid_t pid = efx_spawn(args, NULL, err_path);
  lw->path = err_path;
  if (!efx_wait_for(has_line, lw, 30000)) {
    kill(pid, SIGKILL);
    efx_wait(pid);
    fail_msg("no line \"%s\": %s", lw->prefix, efx_read(err_path));
  }
  return pid;
}

static void serve_binary(void **state) {
  world *w = *state;
  char err_path[400];
  snprintf(err_path, sizeof err_path, "%s/serve.err", w->f->dir);
  const char *args[] = {"--db", w->f->url, "serve", "--listen", "127.0.0.1:0", NULL};
  line_wait lw = {err_path, "tasker serve: listening on ", ""};
  pid_t pid = spawn_until_line(args, err_path, &lw);
  char url[256];
  snprintf(url, sizeof url, "%s/api/v1/tasks?state=error", lw.url);
  api_resp r = api_request("GET", url, NULL, 0, NULL);
  json_t *j = api_expect_json(&r, 200);
  assert_int_equal(json_array_size(json_object_get(j, "tasks")), 2);
  json_decref(j);
  snprintf(url, sizeof url, "%s/api/v1/tasks", lw.url);
  r = api_request("POST", url, "{\"template\": \"quick\"}", -1, post_h);
  json_decref(api_expect_json(&r, 201));
  snprintf(url, sizeof url, "%s/metrics", lw.url);
  r = api_request("GET", url, NULL, 0, NULL);
  assert_int_equal(r.status, 200);
  assert_true(api_metric(r.body, "tasker_store_tasks{state=\"error\"}") == 2);
  api_resp_free(&r);
  kill(pid, SIGTERM);
  assert_int_equal(efx_wait_limit(pid, 30000), 0);
  char *err = efx_read(err_path);
  assert_non_null(strstr(err, "listening on http://127.0.0.1:"));
  free(err);

  /* Beyond loopback without a token: refused before anything starts. */
  unsetenv("TASKER_TOKEN");
  const char *open_args[] = {"--db", w->f->url, "serve", "--listen", "0.0.0.0:0", NULL};
  pid = efx_spawn(open_args, NULL, err_path);
  assert_int_equal(efx_wait_limit(pid, 30000), 2);
  err = efx_read(err_path);
  assert_string_equal(err, "tasker serve: --listen: listen address \"0.0.0.0:0\" is not loopback: "
                           "serving beyond this machine requires a token (--token-file PATH or "
                           "TASKER_TOKEN)\n");
  free(err);
  /* With a token file, it serves, and asks for the token. */
  char token_path[400];
  efx_write(w->f->dir, "token", "tok-123\n", token_path, sizeof token_path);
  const char *tok_args[] = {"--db", w->f->url, "serve", "--listen", "127.0.0.1:0", "--token-file",
                            token_path, NULL};
  pid = spawn_until_line(tok_args, err_path, &lw);
  const char *no_file[] = {"--db", w->f->url, "serve", "--token-file", "/nonexistent/token", NULL};
  snprintf(url, sizeof url, "%s/api/v1/status", lw.url);
  r = api_request("GET", url, NULL, 0, NULL);
  api_expect_error(&r, 401, "unauthorized", "Authorization", "requires a token");
  const char *auth[] = {"Authorization: Bearer tok-123", NULL};
  r = api_request("GET", url, NULL, 0, auth);
  json_decref(api_expect_json(&r, 200));
  kill(pid, SIGINT);
  assert_int_equal(efx_wait_limit(pid, 30000), 0);
  pid = efx_spawn(no_file, NULL, err_path);
  assert_int_equal(efx_wait_limit(pid, 30000), 2);
  err = efx_read(err_path);
  assert_string_equal(err, "tasker serve: --token-file: cannot open \"/nonexistent/token\": No such "
                           "file or directory\n");
  free(err);
}

typedef struct scrape {
  const char *url;
} scrape;

/* Whether the orchestrator's metrics show a successful attempt. */
static int attempts_seen(void *ud) {
  scrape *s = ud;
  api_resp r = api_request("GET", s->url, NULL, 0, NULL);
  int yes = r.status == 200 && strstr(r.body, "tasker_step_attempts_total{outcome=\"success\"} ") &&
            api_metric(r.body, "tasker_step_attempts_total{outcome=\"success\"}") >= 1;
  api_resp_free(&r);
  return yes;
}

static void run_metrics_binary(void **state) {
  world *w = *state;
  efx_submit(w->f, "quick", NULL);
  char err_path[400];
  snprintf(err_path, sizeof err_path, "%s/run.err", w->f->dir);
  const char *args[] = {"--db", w->f->url, "run", "--metrics", "127.0.0.1:0", NULL};
  line_wait lw = {err_path, "tasker run: metrics on ", ""};
  pid_t pid = spawn_until_line(args, err_path, &lw);
  char url[256];
  snprintf(url, sizeof url, "%s/metrics", lw.url);
  scrape sc = {url};
  int ok = efx_wait_for(attempts_seen, &sc, 30000);
  /* metrics only: the API is not served by an orchestrator */
  char api[256];
  snprintf(api, sizeof api, "%s/api/v1/status", lw.url);
  api_resp r = api_request("GET", api, NULL, 0, NULL);
  long api_status = r.status;
  api_resp_free(&r);
  kill(pid, SIGTERM);
  int status = efx_wait_limit(pid, 30000);
  if (!ok) fail_msg("no successful attempt in the metrics: %s", efx_read(err_path));
  assert_int_equal(api_status, 404);
  assert_int_equal(status, 0);
  /* Beyond loopback without a token: refused, in the words of serve's
   * rule (the library's one), before the store is opened. */
  unsetenv("TASKER_TOKEN");
  const char *bad[] = {"--db", w->f->url, "run", "--metrics", "0.0.0.0:0", NULL};
  pid = efx_spawn(bad, NULL, err_path);
  assert_int_equal(efx_wait_limit(pid, 30000), 2);
  char *err = efx_read(err_path);
  assert_string_equal(err, "tasker run: --metrics: listen address \"0.0.0.0:0\" is not loopback: "
                           "serving beyond this machine requires a token (--token-file PATH or "
                           "TASKER_TOKEN)\n");
  free(err);
  const char *stray[] = {"--db", w->f->url, "run", "--token-file", "/nonexistent/token", NULL};
  pid = efx_spawn(stray, NULL, err_path);
  assert_int_equal(efx_wait_limit(pid, 30000), 2);
  err = efx_read(err_path);
  assert_string_equal(err, "tasker run: --token-file: only with --metrics (the token its /metrics "
                           "asks for)\n");
  free(err);
  /* With --token-file as serve takes it: it serves on every address and
   * asks each scrape for the token. */
  char token_path[400];
  efx_write(w->f->dir, "token", "tok-run-7\n", token_path, sizeof token_path);
  efx_submit(w->f, "quick", NULL);
  const char *open_args[] = {"--db", w->f->url, "run", "--metrics", "0.0.0.0:0", "--token-file",
                             token_path, NULL};
  line_wait any = {err_path, "tasker run: metrics on ", ""};
  pid = spawn_until_line(open_args, err_path, &any);
  assert_int_equal(strncmp(any.url, "http://0.0.0.0:", 15), 0);
  snprintf(url, sizeof url, "http://127.0.0.1:%s/metrics", any.url + 15);
  r = api_request("GET", url, NULL, 0, NULL);
  api_expect_error(&r, 401, "unauthorized", "Authorization", "requires a token");
  const char *wrong[] = {"Authorization: Bearer tok-run-8", NULL};
  r = api_request("GET", url, NULL, 0, wrong);
  api_expect_error(&r, 401, "unauthorized", "Authorization", "not this server's");
  const char *auth[] = {"Authorization: Bearer tok-run-7", NULL};
  r = api_request("GET", url, NULL, 0, auth);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "tasker_step_attempts_total"));
  api_resp_free(&r);
  kill(pid, SIGTERM);
  assert_int_equal(efx_wait_limit(pid, 30000), 0);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_ALL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(status_and_metrics, setup, teardown),
      cmocka_unit_test_setup_teardown(task_list_filters, setup, teardown),
      cmocka_unit_test_setup_teardown(task_pages, setup, teardown),
      cmocka_unit_test_setup_teardown(steps_list, setup, teardown),
      cmocka_unit_test_setup_teardown(one_task, setup, teardown),
      cmocka_unit_test_setup_teardown(templates, setup, teardown),
      cmocka_unit_test_setup_teardown(activity_and_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(dashboard_assets, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_queries, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_bodies, setup, teardown),
      cmocka_unit_test_setup_teardown(oversized_body, setup, teardown),
      cmocka_unit_test_setup_teardown(same_origin, setup, teardown),
      cmocka_unit_test_setup_teardown(submit, setup, teardown),
      cmocka_unit_test_setup_teardown(one_actions, setup, teardown),
      cmocka_unit_test_setup_teardown(bulk_actions, setup, teardown),
      cmocka_unit_test_setup_teardown(bulk_retry_reaches_in_progress_and_reports_refusals, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(security_headers_on_every_answer, setup, teardown),
      cmocka_unit_test_setup_teardown(token_required, setup, teardown),
      cmocka_unit_test_setup_teardown(listen_addresses, setup, teardown),
      cmocka_unit_test_setup_teardown(listen_ipv6_loopback, setup, teardown),
      cmocka_unit_test_setup_teardown(status_snapshot_refreshes, setup, teardown),
      cmocka_unit_test_setup_teardown(serve_binary, setup, teardown),
      cmocka_unit_test_setup_teardown(run_metrics_binary, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return failed;
}
