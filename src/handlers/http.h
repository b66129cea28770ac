/* The http handler's parts (docs/handlers.md, "http"), shared by its files:
 *   http.c          the kind: validate, prepare, run (blocking), start (async)
 *   http_spec.c     the spec: template-time checks and the per-engine
 *                   compiled form
 *   http_request.c  one attempt: the request filled from the task, the
 *                   response captured
 *   http_outcome.c  what the response (or its failure) means for the step
 *   http_redact.c   what counts as a credential (its value a secret,
 *                   redact.h)
 *   http_reactor.c  one thread per engine driving every in-flight request
 *                   through a curl multi handle */
#ifndef TASKER_HANDLERS_HTTP_H
#define TASKER_HANDLERS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "handlers/handler.h"
#include "handlers/placeholder.h"
#include "handlers/redact.h"

#define TK__HTTP_DEFAULT_TIMEOUT_MS 30000
#define TK__HTTP_DEFAULT_CONNECT_TIMEOUT_MS 10000
#define TK__HTTP_DEFAULT_MAX_REDIRECTS 5
#define TK__HTTP_DEFAULT_MAX_RESPONSE (1 << 20)
#define TK__HTTP_MAX_RESPONSE_LIMIT (64 << 20)

/* How a status code ends an attempt. */
typedef enum tk__http_class {
  TK__HTTP_SUCCESS = 0,
  TK__HTTP_RETRY,
  TK__HTTP_PERMANENT
} tk__http_class;

/* One header or query parameter: a literal name, a value with
 * placeholders. */
typedef struct tk__http_field {
  char *name;
  tk__ph *value;
  int credential; /* its value is a secret (redact.h) */
} tk__http_field;

/* What the body of a request is. */
typedef enum tk__http_body {
  TK__HTTP_BODY_DEFAULT, /* no `body`: the step's input {context, parents} as JSON for POST,
                            PUT and PATCH, none for the other methods */
  TK__HTTP_BODY_TEXT,  /* `body` a string: its text, placeholders as text */
  TK__HTTP_BODY_VALUE, /* `body` a string that is one placeholder: that value (an object as JSON) */
  TK__HTTP_BODY_JSON   /* `body` a table or array: JSON, placeholders filled (tk__ph_fill_json) */
} tk__http_body;

/* A step's spec compiled once per engine (prepare). */
typedef struct tk__http_step {
  tk__ph *method, *url;
  tk__http_field *headers, *query;
  size_t nheaders, nquery;
  tk__http_body body_kind;
  tk__ph *body_text; /* TEXT and VALUE */
  json_t *body_json; /* JSON: the template, borrowed from the spec */
  int64_t connect_timeout_ms;
  long max_redirects;
  size_t max_response;
  char *ca_file;                  /* NULL: the system's CA bundle */
  unsigned char classes[600];     /* tk__http_class of each status 100..599 */
  char *broken;                   /* non-NULL: why runs fail (a spec this build cannot read) */
  struct tk__http_reactor *reactor; /* this engine's (host->shared) */
} tk__http_step;

/* An in-flight transfer: its easy handle, and what to do when it ends. */
typedef struct tk__http_transfer {
  CURL *easy; /* its CURLOPT_PRIVATE is this transfer */
  /* On the reactor thread, once: the transfer ended with `code`, or
   * (aborted) the reactor is being freed first. The easy handle is out of
   * the multi handle by then and is the reactor's again afterwards. */
  void (*finish)(struct tk__http_transfer *t, CURLcode code, int aborted);
  struct tk__http_transfer *prev, *next;
} tk__http_transfer;

/* ---- http_spec.c ---------------------------------------------------------------------- */

/* The kind's validate (handler.h). */
int tk__http_validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec);

/* The compiled form of a stored spec; NULL only when out of memory. A
 * spec it cannot compile gives a step whose `broken` says why. */
tk__http_step *tk__http_compile(json_t *spec);
void tk__http_step_free(tk__http_step *s);

/* Whether the CA file at path cannot be used: it does not exist, cannot
 * be read or is not a regular file. 1 with why (naming the path and the
 * reason), else 0. Checked at template time and before each attempt
 * (a file removed since is a permanent failure, not a TLS one). */
int tk__http_ca_file_unreadable(const char *path, char *why, size_t len);

/* The class of status code `status` under the defaults (DESIGN §8): 2xx
 * success; 408, 425, 429 and every 5xx but 501 and 505 retryable;
 * anything else permanent. */
tk__http_class tk__http_default_class(int status);

/* ---- http_redact.c -------------------------------------------------------------------- */

/* Whether a header or query parameter named name[0..len) carries a
 * credential: Authorization, Proxy-Authorization, Cookie, Set-Cookie,
 * X-Api-Key, or any name holding "token", "secret", "key", "password",
 * "passwd", "session" or "auth", in any case. */
int tk__http_is_credential(const char *name, size_t len);

/* ---- http_request.c ------------------------------------------------------------------- */

/* One attempt's request and response. */
typedef struct tk__http_req {
  tk__http_transfer xfer; /* first: the reactor hands it back (finish) */
  const tk__http_step *hs;
  tk_handler_result *out;
  const tk_clock *clock;
  tk__handler_done done; /* asynchronous: the engine's callback */
  void *done_ud;
  /* The request. */
  char method[16];
  char *url;
  struct curl_slist *headers;
  char *body;
  size_t body_len;
  int has_body;
  int64_t timeout_ms;
  tk__secrets secrets; /* env values, credentials: redacted (redact.h) */
  /* The response (of the last request, when redirects were followed). */
  long status;
  char reason[64];
  char retry_after[128];
  int has_retry_after;
  char content_type[128];
  char location[256];
  tk__buf in;      /* the body kept: all of a 2xx one, the start of another */
  size_t received; /* body bytes that arrived */
  int oversized;   /* a 2xx body passed max_response: the transfer was stopped */
  int announced;   /* ... as its Content-Length said it would, before it was read */
  int cut;         /* a failed response's long body was stopped (not an error) */
  char errbuf[CURL_ERROR_SIZE];
} tk__http_req;

/* The attempt's request, filled from the task (placeholders), or NULL
 * with a failure in out: a value that is not there is permanent and names
 * the placeholder. step and call are read here only; out is written
 * until tk__http_req_conclude. */
tk__http_req *tk__http_req_new(const tk__http_step *hs, const tk_handler_call *call,
                               const tk__handler_step *step, tk_handler_result *out);

/* Set easy up for the request (options, callbacks). 0, or -1 with a
 * failure in the result. */
int tk__http_req_setup(tk__http_req *r, CURL *easy);

/* http_outcome.c: decide the outcome from curl's code and the response
 * into the result: status classes, Retry-After, results, messages with
 * credentials taken out. */
void tk__http_req_conclude(tk__http_req *r, CURLcode code);

void tk__http_req_free(tk__http_req *r);

/* For tests of the DNS-failure path without the machine's resolver: while
 * on, requests set up from then on fail to resolve any host name, as curl
 * does when a resolver finds nothing (CURLE_COULDNT_RESOLVE_HOST). */
void tk__http_test_fail_resolves(int on);

/* r as a transfer for the reactor: when it ends, r is concluded and
 * freed, and then done(ud) is called (an aborted one is only freed). */
tk__http_transfer *tk__http_req_transfer(tk__http_req *r, tk__handler_done done, void *ud);

/* ---- http_reactor.c ------------------------------------------------------------------- */

typedef struct tk__http_reactor tk__http_reactor;

/* A reactor, without its thread yet (started by the first submit); NULL
 * when out of memory. */
tk__http_reactor *tk__http_reactor_new(void);

/* An easy handle for a transfer: a recycled one (reset) or a new one;
 * NULL when out of memory. Thread-safe. */
CURL *tk__http_reactor_easy(tk__http_reactor *r);

/* Hand t (t->easy set up) to the reactor; its finish is then called once
 * on the reactor thread. 0, or TK_ENOMEM (no thread could be started:
 * finish is not called). Thread-safe. */
int tk__http_reactor_submit(tk__http_reactor *r, tk__http_transfer *t);

/* Stop the thread, aborting what is in flight (their finish gets aborted
 * = 1), and free the reactor. */
void tk__http_reactor_free(tk__http_reactor *r);

/* libcurl's process-wide initialisation, once (pthread_once). */
void tk__http_global_init(void);

#endif
