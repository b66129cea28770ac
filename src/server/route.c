/* Which endpoint a request names (docs/api.md "Endpoints"). The path is
 * split into '/'-separated segments, each %-decoded on its own, so a step
 * or template name may hold an encoded '/' or space. */
#include "server/request_parse.h"

#include "engine/remote.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 8

typedef struct segs {
  char text[MAX_SEGMENTS][512];
  size_t len[MAX_SEGMENTS];
  int n;
} segs;

int tk__action_parse(const char *name, tk_operator_action *a) {
  if (strcmp(name, "retry") == 0) *a = TK_OP_RETRY;
  else if (strcmp(name, "resolve") == 0) *a = TK_OP_RESOLVE;
  else if (strcmp(name, "cancel") == 0) *a = TK_OP_CANCEL;
  else return -1;
  return 0;
}

const char *tk__action_name(tk_operator_action a) {
  return a == TK_OP_RETRY ? "retry" : a == TK_OP_RESOLVE ? "resolve" : "cancel";
}

const char *tk__route_name(tk__route_id id) {
  static const char *const names[] = {
      [TK__R_STATUS] = "GET /api/v1/status",
      [TK__R_TASKS] = "GET, POST /api/v1/tasks",
      [TK__R_TASK] = "GET /api/v1/tasks/ID",
      [TK__R_TASK_CANCEL] = "POST /api/v1/tasks/ID/cancel",
      [TK__R_STEP_ACTION] = "POST /api/v1/tasks/ID/steps/STEP/{retry,resolve}",
      [TK__R_INSTANCES] = "GET /api/v1/tasks/ID/steps/STEP/instances",
      [TK__R_BULK] = "POST /api/v1/actions/ACTION",
      [TK__R_STEPS] = "GET /api/v1/steps",
      [TK__R_TEMPLATES] = "GET /api/v1/templates",
      [TK__R_TEMPLATE] = "GET /api/v1/templates/NAME",
      [TK__R_ACTIVITY] = "GET /api/v1/activity",
      [TK__R_BACKOFF] = "GET /api/v1/backoff",
      [TK__R_OPENAPI] = "GET /api/v1/openapi.json",
      [TK__R_METRICS] = "GET /metrics",
      [TK__R_CLAIM] = "POST /api/v1/queues/QUEUE/claim",
      [TK__R_HEARTBEAT] = "POST /api/v1/claims/TOKEN/heartbeat",
      [TK__R_COMPLETE] = "POST /api/v1/claims/TOKEN/complete",
      [TK__R_FAIL] = "POST /api/v1/claims/TOKEN/fail",
      [TK__R_OUTCOMES] = "POST /api/v1/claims/outcomes",
      [TK__R_QUEUES] = "GET /api/v1/queues",
      [TK__R_BUDGETS] = "GET /api/v1/budgets",
      [TK__R_SIGNAL] = "POST /api/v1/tasks/ID/steps/STEP/signal",
      [TK__R_CALLBACK] = "POST /api/v1/callbacks/TOKEN",
      [TK__R_CALLBACK_HEARTBEAT] = "POST /api/v1/callbacks/TOKEN/heartbeat",
      [TK__R_ASSET] = "GET /PATH (the dashboard's files)",
  };
  return (int)id > 0 && (size_t)id < sizeof names / sizeof names[0] ? names[id] : NULL;
}

int tk__route_is_worker(tk__route_id id) {
  return id == TK__R_CLAIM || id == TK__R_HEARTBEAT || id == TK__R_COMPLETE || id == TK__R_FAIL ||
         id == TK__R_OUTCOMES;
}

/* A queue's name as a path segment, under the rule a worker step's queue
 * follows (tk__queue_name_ok, docs/handlers.md); 404 otherwise,
 * since no step can be in such a queue. */
static int queue_name(const char *text, size_t n, char *out, tk__api_error *e) {
  if (!tk__queue_name_ok(text, n))
    return tk__api_fail(e, 404, "not_found", "queue",
                        "no queue \"%.100s\": a queue's name is 1 to %d of a-z, 0-9, _, . and -",
                        text, TK__QUEUE_NAME_MAX);
  memcpy(out, text, n + 1);
  return 0;
}

/* A claim token as a path segment: URL-safe base64 of at most
 * TK__CLAIM_TOKEN_MAX characters; 404 otherwise (no claim has such a token). What it holds is
 * the engine's to check. */
static int claim_token(const char *text, size_t n, char *out, tk__api_error *e) {
  if (n == 0 || n > TK__CLAIM_TOKEN_MAX ||
      strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != n)
    return tk__api_fail(e, 404, "not_found", "token",
                        "no claim \"%.100s\": a claim token is what a claim answered (up to %d of "
                        "A-Z, a-z, 0-9, - and _)",
                        text, TK__CLAIM_TOKEN_MAX);
  memcpy(out, text, n + 1);
  return 0;
}

/* Split and decode path[0..len) after its leading "/api/"; a segment too
 * long or too many segments is an unknown path. */
static int split(const char *p, size_t len, segs *s, tk__api_error *e) {
  s->n = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && p[i] != '/') continue;
    if (s->n == MAX_SEGMENTS || i - start >= sizeof s->text[0])
      return tk__api_fail(e, 404, "not_found", NULL, "no such API path");
    size_t out;
    if (tk__pct_decode(p + start, i - start, 0, s->text[s->n], &out) != 0)
      return tk__api_fail(e, 400, "bad_request", NULL,
                          "path segment \"%.*s\": malformed %%-escape or encoded NUL: "
                          "expected %%XX with two hex digits",
                          (int)(i - start > 100 ? 100 : i - start), p + start);
    s->len[s->n++] = out;
    start = i + 1;
  }
  return 0;
}

/* A task id segment: a positive decimal integer. */
static int task_id(const char *text, int64_t *id, tk__api_error *e) {
  size_t n = strlen(text);
  if (n == 0 || n > 18 || strspn(text, "0123456789") != n || (*id = strtoll(text, NULL, 10)) <= 0)
    return tk__api_fail(e, 404, "not_found", "id",
                        "no task \"%.100s\": a task id is a positive integer", text);
  return 0;
}

/* Whether segment i exists and is `word`. */
static int is(const segs *s, int i, const char *word) {
  return i < s->n && strcmp(s->text[i], word) == 0;
}

/* Match the segments after /api/v1; *methods gets the methods allowed. */
static int match_api(const segs *s, tk__route *r, int *methods, tk__api_error *e) {
  const int first = 1; /* segment 0 is "v1" */
  int k = s->n - first;
  *methods = TK__M_GET;
  if (k == 1 && is(s, first, "status")) r->id = TK__R_STATUS;
  else if (k == 1 && is(s, first, "steps")) r->id = TK__R_STEPS;
  else if (k == 1 && is(s, first, "templates")) r->id = TK__R_TEMPLATES;
  else if (k == 1 && is(s, first, "activity")) r->id = TK__R_ACTIVITY;
  else if (k == 1 && is(s, first, "backoff")) r->id = TK__R_BACKOFF;
  else if (k == 1 && is(s, first, "openapi.json")) r->id = TK__R_OPENAPI;
  else if (k == 1 && is(s, first, "queues")) r->id = TK__R_QUEUES;
  else if (k == 1 && is(s, first, "budgets")) r->id = TK__R_BUDGETS;
  else if (k == 1 && is(s, first, "tasks")) {
    r->id = TK__R_TASKS;
    *methods = TK__M_GET | TK__M_POST;
  } else if (k >= 2 && is(s, first, "templates")) {
    /* NAME or NAMESPACE/NAME: the rest of the path. */
    size_t used = 0;
    for (int i = first + 1; i < s->n; i++) {
      if (s->len[i] == 0 || used + s->len[i] + 2 > sizeof r->name)
        return tk__api_fail(e, 404, "not_found", "name", "no such template path");
      if (used) r->name[used++] = '/';
      memcpy(r->name + used, s->text[i], s->len[i]);
      used += s->len[i];
    }
    r->name[used] = '\0';
    r->id = TK__R_TEMPLATE;
  } else if (k == 2 && is(s, first, "actions")) {
    if (tk__action_parse(s->text[first + 1], &r->action) != 0)
      return tk__api_fail(e, 404, "not_found", "action",
                          "no action \"%.100s\": expected retry, resolve or cancel",
                          s->text[first + 1]);
    r->id = TK__R_BULK;
    *methods = TK__M_POST;
  } else if (k == 3 && is(s, first, "queues") && is(s, first + 2, "claim")) {
    if (queue_name(s->text[first + 1], s->len[first + 1], r->name, e) != 0) return -1;
    r->id = TK__R_CLAIM;
    *methods = TK__M_POST;
  } else if (k == 2 && is(s, first, "claims") && is(s, first + 1, "outcomes")) {
    r->id = TK__R_OUTCOMES;
    *methods = TK__M_POST;
  } else if (k == 3 && is(s, first, "claims") &&
             (is(s, first + 2, "heartbeat") || is(s, first + 2, "complete") ||
              is(s, first + 2, "fail"))) {
    if (claim_token(s->text[first + 1], s->len[first + 1], r->name, e) != 0) return -1;
    r->id = is(s, first + 2, "heartbeat")  ? TK__R_HEARTBEAT
            : is(s, first + 2, "complete") ? TK__R_COMPLETE
                                           : TK__R_FAIL;
    *methods = TK__M_POST;
  } else if ((k == 2 || (k == 3 && is(s, first + 2, "heartbeat"))) &&
             is(s, first, "callbacks")) {
    if (claim_token(s->text[first + 1], s->len[first + 1], r->name, e) != 0) {
      e->message[0] = '\0'; /* never quote a token back */
      return tk__api_fail(e, 404, "not_found", "token", "no callback has this token");
    }
    r->id = k == 2 ? TK__R_CALLBACK : TK__R_CALLBACK_HEARTBEAT;
    r->callback = 1;
    *methods = TK__M_POST;
  } else if (k >= 2 && is(s, first, "tasks")) {
    if (task_id(s->text[first + 1], &r->task, e) != 0) return -1;
    if (k == 2) {
      r->id = TK__R_TASK;
    } else if (k == 3 && is(s, first + 2, "cancel")) {
      r->id = TK__R_TASK_CANCEL;
      r->action = TK_OP_CANCEL;
      *methods = TK__M_POST;
    } else if (k == 5 && is(s, first + 2, "steps") && s->len[first + 3] > 0 &&
               s->len[first + 3] < sizeof r->step &&
               (is(s, first + 4, "retry") || is(s, first + 4, "resolve"))) {
      memcpy(r->step, s->text[first + 3], s->len[first + 3] + 1);
      tk__action_parse(s->text[first + 4], &r->action);
      r->id = TK__R_STEP_ACTION;
      *methods = TK__M_POST;
    } else if (k == 5 && is(s, first + 2, "steps") && s->len[first + 3] > 0 &&
               s->len[first + 3] < sizeof r->step && is(s, first + 4, "signal")) {
      memcpy(r->step, s->text[first + 3], s->len[first + 3] + 1);
      r->id = TK__R_SIGNAL;
      *methods = TK__M_POST;
    } else if (k == 5 && is(s, first + 2, "steps") && s->len[first + 3] > 0 &&
               s->len[first + 3] < sizeof r->step && is(s, first + 4, "instances")) {
      memcpy(r->step, s->text[first + 3], s->len[first + 3] + 1);
      r->id = TK__R_INSTANCES;
    } else {
      return tk__api_fail(e, 404, "not_found", NULL, "no such API path");
    }
  } else {
    return tk__api_fail(e, 404, "not_found", NULL, "no such API path");
  }
  return 0;
}

int tk__route_parse(const char *method, const char *uri, size_t len, tk__route *r,
                    const char **allow, tk__api_error *e) {
  memset(r, 0, sizeof *r);
  *allow = NULL;
  const char *q = memchr(uri, '?', len);
  r->path = uri;
  r->path_len = q ? (size_t)(q - uri) : len;
  r->query = q ? q + 1 : "";
  r->query_len = q ? len - r->path_len - 1 : 0;
  if (r->path_len == 0 || uri[0] != '/')
    return tk__api_fail(e, 404, "not_found", NULL, "the request's target is not a path");
  int methods = TK__M_GET;
  static const char api[] = "/api/";
  if (r->path_len >= sizeof api - 1 && memcmp(uri, api, sizeof api - 1) == 0) {
    segs s;
    if (split(uri + sizeof api - 1, r->path_len - (sizeof api - 1), &s, e) != 0) return -1;
    if (!is(&s, 0, "v1"))
      return tk__api_fail(e, 404, "not_found", NULL,
                          "no such API path: the API's paths start with /api/v1/");
    if (match_api(&s, r, &methods, e) != 0) return -1;
  } else if (r->path_len == 8 && memcmp(uri, "/metrics", 8) == 0) {
    r->id = TK__R_METRICS;
  } else {
    r->id = TK__R_ASSET;
  }
  r->worker = tk__route_is_worker(r->id);
  int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  r->post = strcmp(method, "POST") == 0;
  if ((get && (methods & TK__M_GET)) || (r->post && (methods & TK__M_POST))) return 0;
  *allow = methods == TK__M_POST ? "POST" : methods == TK__M_GET ? "GET, HEAD" : "GET, HEAD, POST";
  return tk__api_fail(e, 405, "method_not_allowed", NULL,
                      "method %.20s is not allowed here: expected %s%s", method, *allow,
                      methods == TK__M_POST ? " (actions change the store: POST only)" : "");
}
