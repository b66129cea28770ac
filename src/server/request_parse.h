/* The API's requests read apart from HTTP (docs/api.md): the route a
 * method and path name, the query string, and the JSON bodies of submit,
 * bulk actions and signals. Nothing here knows libmicrohttpd or the store,
 * so the fuzz target (fuzz/fuzz_api.c) builds from this file and a few
 * core ones.
 *
 * Every refusal fills a tk__api_error: the HTTP status, the code of
 * docs/api.md, the parameter at fault and a message naming the value and
 * what was expected. */
#ifndef TASKER_SERVER_REQUEST_PARSE_H
#define TASKER_SERVER_REQUEST_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <tasker/error.h>
#include <tasker/query.h>
#include <tasker/workflow.h>

#include "engine/remote.h"

/* The largest request body accepted (413 beyond). */
#define TK__BODY_MAX (1024 * 1024)
/* Most tasks or steps one bulk request may list. */
#define TK__BULK_LIST_MAX 1000

typedef struct tk__api_error {
  int status;       /* HTTP status: 400, 404, ... */
  const char *code; /* "bad_request", "bad_filter", ... (static) */
  char param[64];   /* the parameter or body member at fault, or "" */
  char message[TK_ERR_MSG_MAX];
} tk__api_error;

/* Fill e (printf-style message; param may be NULL) and return -1. */
int tk__api_fail(tk__api_error *e, int status, const char *code, const char *param,
                 const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* {"error": {"status", "code", "message", "param"?}} as malloc'd text, or
 * NULL when memory ran out. */
char *tk__api_error_json(const tk__api_error *e);

/* ---- routes ------------------------------------------------------------ */

typedef enum tk__route_id {
  TK__R_STATUS = 1,  /* GET /api/v1/status */
  TK__R_TASKS,       /* GET (list), POST (submit) /api/v1/tasks */
  TK__R_TASK,        /* GET /api/v1/tasks/ID */
  TK__R_TASK_CANCEL, /* POST /api/v1/tasks/ID/cancel */
  TK__R_STEP_ACTION, /* POST /api/v1/tasks/ID/steps/STEP/{retry,resolve} */
  TK__R_INSTANCES,   /* GET /api/v1/tasks/ID/steps/STEP/instances */
  TK__R_BULK,        /* POST /api/v1/actions/ACTION */
  TK__R_STEPS,       /* GET /api/v1/steps */
  TK__R_TEMPLATES,   /* GET /api/v1/templates */
  TK__R_TEMPLATE,    /* GET /api/v1/templates/NAME (NAME may be ns/name) */
  TK__R_ACTIVITY,    /* GET /api/v1/activity */
  TK__R_BACKOFF,     /* GET /api/v1/backoff */
  TK__R_OPENAPI,     /* GET /api/v1/openapi.json: the document of all of these */
  TK__R_METRICS,     /* GET /metrics */
  TK__R_CLAIM,       /* POST /api/v1/queues/QUEUE/claim (a worker's) */
  TK__R_HEARTBEAT,   /* POST /api/v1/claims/TOKEN/heartbeat (a worker's) */
  TK__R_COMPLETE,    /* POST /api/v1/claims/TOKEN/complete (a worker's) */
  TK__R_FAIL,        /* POST /api/v1/claims/TOKEN/fail (a worker's) */
  TK__R_OUTCOMES,    /* POST /api/v1/claims/outcomes (a worker's: a batch) */
  TK__R_QUEUES,      /* GET /api/v1/queues */
  TK__R_BUDGETS,     /* GET /api/v1/budgets */
  TK__R_SIGNAL,      /* POST /api/v1/tasks/ID/steps/STEP/signal (DESIGN §18) */
  TK__R_CALLBACK,    /* POST /api/v1/callbacks/TOKEN (an http step's callback) */
  TK__R_CALLBACK_HEARTBEAT, /* POST /api/v1/callbacks/TOKEN/heartbeat */
  TK__R_ASSET        /* GET anything else outside /api/: the dashboard (last: tests
                      * iterate the routes up to it) */
} tk__route_id;

/* What route `id` serves, as its comment above says it ("GET
 * /api/v1/status"): the name a test gives a route the OpenAPI document
 * leaves out. NULL for an id that is none. */
const char *tk__route_name(tk__route_id id);

/* Methods, as bits. HEAD counts as GET. */
enum { TK__M_GET = 1, TK__M_POST = 2 };

typedef struct tk__route {
  tk__route_id id;
  int post;                  /* the request is a POST (else a GET or HEAD) */
  int64_t task;              /* TK__R_TASK, _TASK_CANCEL, _STEP_ACTION */
  char step[256];            /* TK__R_STEP_ACTION, _INSTANCES, _SIGNAL: the step's name,
                                decoded */
  tk_operator_action action; /* TK__R_STEP_ACTION, TK__R_BULK */
  char name[512];            /* TK__R_TEMPLATE: the name, decoded; TK__R_CLAIM: the
                                queue; TK__R_HEARTBEAT, _COMPLETE, _FAIL, _CALLBACK,
                                _CALLBACK_HEARTBEAT: the token */
  int worker;                /* a worker's endpoint: the worker token's (docs/api.md) */
  int callback;              /* a callback's: its token in the path is its credential */
  const char *path;          /* the path (into the request's URI), for assets */
  size_t path_len;
  const char *query;         /* the query string after '?', or "" */
  size_t query_len;
} tk__route;

/* Route `method` and `uri` (the request target as sent: path and query,
 * not NUL-terminated). 0 with *r filled, or -1: 404 not_found for an
 * unknown path or id syntax, 405 method_not_allowed (then *allow gets the
 * Allow header's value), 400 for a path that cannot be decoded. */
int tk__route_parse(const char *method, const char *uri, size_t len, tk__route *r,
                    const char **allow, tk__api_error *e);

/* "retry", "resolve", "cancel": 0 and *a, or -1. */
int tk__action_parse(const char *name, tk_operator_action *a);
const char *tk__action_name(tk_operator_action a);

/* Whether r is a worker's endpoint (claim, heartbeat, complete, fail). */
int tk__route_is_worker(tk__route_id id);

/* The longest queue name, TK__QUEUE_NAME_MAX, and the rule: */
#include "handlers/handler.h"

/* ---- query strings ----------------------------------------------------- */

/* %-decode s[0..n) into out (at least n + 1 bytes; NUL-terminated, *outlen
 * bytes), '+' as a space when plus_space. -1 for a malformed escape or an
 * encoded NUL. */
int tk__pct_decode(const char *s, size_t n, int plus_space, char *out, size_t *outlen);

typedef struct tk__query_arg {
  char *key, *value; /* decoded, NUL-terminated */
} tk__query_arg;

typedef struct tk__query {
  tk__query_arg *args;
  int n;
} tk__query;

/* Parse "a=1&b=x%20y" (application/x-www-form-urlencoded: '+' is a space).
 * Refused with 400 bad_request: a malformed %-escape, a NUL, a parameter
 * given twice, more than 64 parameters. */
int tk__query_parse(const char *qs, size_t len, tk__query *q, tk__api_error *e);
void tk__query_free(tk__query *q);
/* The value of `key`, or NULL. */
const char *tk__query_get(const tk__query *q, const char *key);
/* Whether `name` is one of `names` (NULL-terminated): the one check
 * behind every list of known parameters, members and states. */
int tk__name_in(const char *const *names, const char *name);
/* 400 naming the first parameter not in `known` (NULL-terminated). */
int tk__query_only(const tk__query *q, const char *const *known, tk__api_error *e);
/* An integer parameter in [min, max]; dflt when absent. */
int tk__query_int(const tk__query *q, const char *key, int64_t min, int64_t max, int64_t dflt,
                  int64_t *out, tk__api_error *e);

/* The parameters of a list (tasks or steps). Strings point into the query
 * (or the body); `since` is the text, which the caller turns into
 * filter.created_since with the store's time (tk_time_arg_parse). */
typedef struct tk__list_query {
  tk_task_filter filter;
  const char *since;      /* NULL: any */
  const char *cursor;     /* NULL: the first page */
  const char *step_state; /* steps lists: default "error" */
  int limit;              /* 1..TK_PAGE_MAX, default 50 */
} tk__list_query;

/* The list parameters of `q`; steps: a steps list (which takes `state` as
 * the step's state and `task_state` for the task's). Unknown parameters,
 * empty values and a bad limit are refused. */
int tk__list_query_parse(const tk__query *q, int steps, tk__list_query *out, tk__api_error *e);

/* ---- bodies ------------------------------------------------------------ */

/* POST /api/v1/tasks: {"template", "version"?, "context"?, "identity"?,
 * "priority"?, "deadline"?}. */
typedef struct tk__submit_body {
  json_t *root;
  const char *template_name, *version, *identity; /* into root */
  char *context;                                  /* JSON text; NULL: {} */
  /* "priority": an integer (0 when absent), its range left to the library
   * (tk_priority_check), which names the value the body gave. */
  int64_t priority;
  /* "deadline" (has_deadline): a duration ("2h", deadline_text, into
   * root) or ms, its range left to the library (tk_deadline_check). */
  int has_deadline;
  int64_t deadline_ms;
  const char *deadline_text;
} tk__submit_body;

int tk__submit_body_parse(const char *body, size_t len, tk__submit_body *out, tk__api_error *e);
void tk__submit_body_free(tk__submit_body *b);

/* Most submissions one POST /api/v1/tasks array may hold (the body's
 * size bounds it too). */
#define TK__SUBMIT_LIST_MAX 10000

/* Whether a POST /api/v1/tasks body is an array (bulk submit): its first
 * byte after white space is '['. */
int tk__submit_is_list(const char *body, size_t len);

/* A bulk submit: [{"template", "version"?, "context"?, "identity"?}, ...]
 * with 1 to TK__SUBMIT_LIST_MAX elements, each checked as a single
 * submit's body; a refusal names the element ("body[3]: ..."). items[i]
 * borrow from root, but their contexts. */
typedef struct tk__submit_list {
  json_t *root;
  tk__submit_body *items;
  size_t n;
} tk__submit_list;

int tk__submit_list_parse(const char *body, size_t len, tk__submit_list *out, tk__api_error *e);
void tk__submit_list_free(tk__submit_list *l);

typedef enum tk__bulk_kind { TK__BULK_TASKS = 1, TK__BULK_STEPS, TK__BULK_FILTER } tk__bulk_kind;

typedef struct tk__bulk_step {
  int64_t task;
  const char *step; /* into root */
} tk__bulk_step;

/* POST /api/v1/actions/ACTION: exactly one of "tasks", "steps" (retry and
 * resolve only), "filter" (with "max", default 1000, and "all", a boolean
 * into filter.filter.all). */
typedef struct tk__bulk_body {
  json_t *root;
  tk__bulk_kind kind;
  int64_t *tasks; /* TK__BULK_TASKS: n ids */
  tk__bulk_step *steps; /* TK__BULK_STEPS: n steps */
  size_t n;
  tk__list_query filter; /* TK__BULK_FILTER: filter and since */
  int64_t max;
} tk__bulk_body;

/* The checks every body shares (body_parse.c), for the worker bodies too. */
/* What a JSON value is, for messages ("missing" for NULL). */
const char *tk__json_type_name(const json_t *j);
/* The body as a JSON object into *root (an empty body refused). */
int tk__body_object(const char *body, size_t len, json_t **root, tk__api_error *e);
/* 400 naming the first member of obj not in `known` (NULL-terminated). */
int tk__body_only(json_t *obj, const char *where, const char *const *known,
                  const char *expected, tk__api_error *e);

int tk__bulk_body_parse(const char *body, size_t len, tk_operator_action action,
                        tk__bulk_body *out, tk__api_error *e);
void tk__bulk_body_free(tk__bulk_body *b);

/* POST /api/v1/tasks/ID/steps/STEP/signal: an object of "data" (any
 * JSON), "error" (a string) and "key" (a string), nothing else, each
 * member's type checked and a refusal naming it (a body that is not JSON:
 * the line and column). Whether they make a signal (exactly one of data
 * and error, an error not empty, a key's length) is the library's one
 * rule (store/rules.c: tk__signal_check), which the caller applies
 * to these parsed values: the data are parsed here once, not again.
 * data, error and key borrow from root (NULL when absent). */
typedef struct tk__signal_body {
  json_t *root;
  const json_t *data;
  const char *error, *key;
} tk__signal_body;

int tk__signal_body_parse(const char *body, size_t len, tk__signal_body *out, tk__api_error *e);
void tk__signal_body_free(tk__signal_body *b);

/* POST /api/v1/callbacks/TOKEN (docs/callbacks.md): {"status": "success",
 * "results": ANY} or {"status": "failure", "error": "...", "retryable":
 * BOOL, "retry_after": SECONDS | "30s"}; nothing else, a refusal naming
 * the member. results: compact JSON text (malloc'd; "null" when absent),
 * or error (borrowed from root) with retryable (default true) and
 * retry_after_ms (-1: none; only when retryable). */
typedef struct tk__callback_body {
  json_t *root;
  char *results;
  const char *error;
  int retryable;
  int64_t retry_after_ms;
} tk__callback_body;

int tk__callback_body_parse(const char *body, size_t len, tk__callback_body *out,
                            tk__api_error *e);
void tk__callback_body_free(tk__callback_body *b);

/* POST /api/v1/callbacks/TOKEN/heartbeat: no body, {} or {"timeout":
 * "10m" | SECONDS} (> 0, at most a year) into *timeout_ms (0: none). */
int tk__callback_heartbeat_parse(const char *body, size_t len, int64_t *timeout_ms,
                                 tk__api_error *e);

/* ---- the worker protocol's bodies (worker_body.c) ----------------------- */

/* Longest worker name, most steps one claim may ask for, longest wait. */
#define TK__WORKER_NAME_MAX 128
#define TK__CLAIM_MAX 100
#define TK__CLAIM_WAIT_MAX_S 60

/* Most outcomes one request may carry. */
#define TK__OUTCOMES_MAX 100

/* A batch of outcomes, {"outcomes": [ITEM, ...]} (POST /api/v1/claims/outcomes,
 * or a claim's "outcomes"): each ITEM {"token", "results"?} (a complete)
 * or {"token", "error", "retryable"?, "retry_after"?} (a fail), checked as
 * those endpoints check theirs. o[0..n): token and error borrow from root,
 * results is malloc'd JSON text (NULL: null). */
typedef struct tk__outcomes_body {
  json_t *root;
  tk__remote_outcome *o;
  int n;
} tk__outcomes_body;

int tk__outcomes_body_parse(const char *body, size_t len, tk__outcomes_body *out,
                            tk__api_error *e);
void tk__outcomes_body_free(tk__outcomes_body *b);

/* POST .../claim: {"worker": NAME, "max"?: 1..100 (1), "wait"?: 0..60 s (0),
 * "outcomes"?: [ITEM, ...] (recorded first, in the claim's transaction)}.
 * Free with tk__claim_body_free. */
typedef struct tk__claim_body {
  char worker[TK__WORKER_NAME_MAX + 1];
  int max;
  int64_t wait_ms;
  tk__outcomes_body outcomes;
} tk__claim_body;

int tk__claim_body_parse(const char *body, size_t len, tk__claim_body *out, tk__api_error *e);
void tk__claim_body_free(tk__claim_body *b);

/* POST .../heartbeat: {} or no body at all. */
int tk__heartbeat_body_parse(const char *body, size_t len, tk__api_error *e);

/* POST .../complete: {"results"?: ANY} (absent: null). results is the
 * value's JSON text (malloc'd). */
typedef struct tk__complete_body {
  char *results;
} tk__complete_body;

int tk__complete_body_parse(const char *body, size_t len, tk__complete_body *out,
                            tk__api_error *e);
void tk__complete_body_free(tk__complete_body *b);

/* Longest retry_after a worker may ask for: a year (the step's policy
 * bounds the delay anyway, as an http step's Retry-After). */
#define TK__RETRY_AFTER_MAX_S 31536000

/* POST .../fail: {"error": TEXT, "retryable"?: bool (true), "retry_after"?:
 * seconds >= 0 or null}. error borrows from root; retry_after_ms -1 when
 * none. */
typedef struct tk__fail_body {
  json_t *root;
  const char *error;
  int retryable;
  int64_t retry_after_ms;
} tk__fail_body;

int tk__fail_body_parse(const char *body, size_t len, tk__fail_body *out, tk__api_error *e);
void tk__fail_body_free(tk__fail_body *b);

#endif
