/* The HTTP side of the server (libmicrohttpd): one thread (loop.c) runs
 * the daemon and answers every request (no thread per connection, no
 * pool), which is what lets the API use one store connection: a tk_store
 * is used by one thread at a time, and that thread is this one. Bodies are
 * gathered here up to TK__BODY_MAX; routing, authorization and the
 * same-origin check come before any handler runs. A claim that waits for
 * work has its connection suspended, and is answered when loop.c resumes
 * it. */
#include "server/server_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include <tasker/metrics.h>

#include "core/buf.h"
#include "server/assets.h"

/* Limits (docs/api.md "Safety"). */
#define CONNECTION_TIMEOUT_S 30
#define PER_IP_CONNECTION_LIMIT 64
#define CONNECTION_MEMORY 65536 /* per connection: the request line and headers */

/* One request under way, made when its URI arrives (so the raw target,
 * query string included, is ours to parse). */
typedef struct request {
  char *uri;
  int started;
  int too_large;
  tk__buf body;
  size_t body_seen;
  tk__waiter waiter; /* a claim's long-poll */
} request;

void tk__server_log(const tk_server *s, tk_log_level level, const char *fmt, ...) {
  if (s->on_log == NULL) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  s->on_log(level, msg, s->log_ud);
}

void tk__respond_error(tk__response *out, const tk__api_error *e) {
  out->status = e->status;
  out->content_type = NULL;
  out->body = tk__api_error_json(e);
  out->len = out->body ? strlen(out->body) : 0;
  out->static_body = 0;
}

void tk__respond_json(tk__response *out, int status, char *text) {
  if (text == NULL) {
    tk__api_error e;
    tk__api_fail(&e, 500, "internal", NULL, "out of memory building the answer");
    tk__respond_error(out, &e);
    return;
  }
  out->status = status;
  out->content_type = NULL;
  out->body = text;
  out->len = strlen(text);
  out->static_body = 0;
}

void tk__respond_json_value(tk__response *out, int status, json_t *j) {
  tk__respond_json(out, status, j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL);
  json_decref(j);
}

int tk__secret_equal(const char *given, size_t given_len, const char *secret, size_t secret_len) {
  /* Every byte of the secret is compared whatever the input, so the time
   * taken says nothing about how much of it matched. */
  volatile unsigned char diff = given_len != secret_len;
  for (size_t i = 0; i < secret_len; i++)
    diff |= (unsigned char)(secret[i] ^ (i < given_len ? given[i] : 0));
  return diff == 0;
}

/* A request header's value, or NULL. */
static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The token route r takes (the worker token for a worker's endpoint, the
 * operator token for the rest), or NULL when the server has none. */
static const char *route_secret(const tk_server *s, const tk__route *r, size_t *len) {
  *len = r->worker ? s->worker_token_len : s->token_len;
  return r->worker ? s->worker_token : s->token;
}

/* The token check for /api/v1 and /metrics: 0, or -1 with a 401. Each kind
 * of endpoint takes its own token only. */
static int authorize(const tk_server *s, struct MHD_Connection *c, const tk__route *r,
                     tk__api_error *e) {
  size_t secret_len;
  const char *secret = route_secret(s, r, &secret_len);
  const char *which = r->worker ? "worker token" : "token";
  if (secret == NULL && r->worker && s->token != NULL)
    return tk__api_fail(e, 401, "unauthorized", "Authorization",
                        "this server takes no workers: it has no worker token (tasker serve "
                        "--worker-token-file PATH or TASKER_WORKER_TOKEN)");
  if (secret == NULL) return 0;
  const char *auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
  if (auth == NULL)
    return tk__api_fail(e, 401, "unauthorized", "Authorization",
                        "this server requires a %s: send Authorization: Bearer TOKEN", which);
  if (strncasecmp(auth, "Bearer ", 7) != 0)
    return tk__api_fail(e, 401, "unauthorized", "Authorization",
                        "Authorization: expected \"Bearer TOKEN\"");
  const char *given = auth + 7;
  while (*given == ' ') given++;
  if (!tk__secret_equal(given, strlen(given), secret, secret_len))
    return tk__api_fail(e, 401, "unauthorized", "Authorization",
                        "the token is not this server's %s", which);
  return 0;
}

/* Without a token, every request must be addressed to this machine by
 * name: a page elsewhere whose name an attacker re-points at 127.0.0.1
 * (DNS rebinding) would otherwise be the same origin as the dashboard.
 * 0, or -1 with a 403. */
static int loopback_host(const tk_server *s, struct MHD_Connection *c, const tk__route *r,
                         tk__api_error *e) {
  size_t len;
  const char *host = header(c, MHD_HTTP_HEADER_HOST);
  if (route_secret(s, r, &len) != NULL || tk__loopback_host(host)) return 0;
  return tk__api_fail(e, 403, "forbidden", "Host",
                      "Host \"%.200s\" is not this machine: without a token the server answers "
                      "requests for 127.0.0.1, [::1] or localhost only",
                      host ? host : "(none)");
}

/* Whether a Content-Type header's media type is application/json. */
static int json_content(const char *type) {
  static const char json[] = "application/json";
  if (type == NULL || strncasecmp(type, json, sizeof json - 1) != 0) return 0;
  char after = type[sizeof json - 1];
  return after == '\0' || after == ';' || after == ' ';
}

/* Without a token, a POST must come from the dashboard's own origin, and
 * a worker's must be JSON (docs/api.md "Safety"): 0, or -1 with a 403. */
static int same_origin(const tk_server *s, struct MHD_Connection *c, const tk__route *r,
                       tk__api_error *e) {
  size_t len;
  /* A bearer token is never sent by a cross-site form. */
  if (!r->callback && route_secret(s, r, &len) != NULL) return 0;
  if (r->worker || r->callback) {
    /* A form can send only urlencoded, multipart or text/plain bodies, and
     * a script elsewhere cannot send JSON without a CORS preflight this
     * server never grants. */
    const char *type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!json_content(type))
      return tk__api_fail(e, 403, "forbidden", "Content-Type",
                          "%s must send Content-Type: application/json (%s)",
                          r->callback ? "a callback"
                                      : "a worker's request to a server without tokens",
                          type ? "it sent another" : "it sent none");
  } else {
    const char *xr = header(c, "X-Tasker-Request");
    if (xr == NULL || strcmp(xr, "1") != 0)
      return tk__api_fail(e, 403, "forbidden", "X-Tasker-Request",
                          "an action needs the header X-Tasker-Request: 1 (%s)",
                          xr ? "it is not 1" : "it is missing");
  }
  const char *origin = header(c, "Origin"), *host = header(c, MHD_HTTP_HEADER_HOST);
  if (origin == NULL) return 0;
  if (host == NULL || strncmp(origin, "http://", 7) != 0 || strcmp(origin + 7, host) != 0)
    return tk__api_fail(e, 403, "forbidden", "Origin",
                        "Origin \"%.200s\" is not this server's (http://%.200s): actions come "
                        "from the dashboard's own page",
                        origin, host ? host : "no Host header");
  return 0;
}

/* The dashboard's files; anything else is a 404 in JSON. */
static void serve_asset(const tk__route *r, tk__response *out) {
  char path[512];
  size_t n = r->path_len < sizeof path ? r->path_len : sizeof path - 1;
  memcpy(path, r->path, n);
  path[n] = '\0';
  const tk__asset *a = r->path_len < sizeof path ? tk__asset_find(path) : NULL;
  if (a == NULL) {
    tk__api_error e;
    tk__api_fail(&e, 404, "not_found", NULL, "no such page: %.200s", path);
    tk__respond_error(out, &e);
    return;
  }
  out->status = 200;
  out->content_type = a->content_type;
  out->body = (char *)a->data;
  out->len = a->len;
  out->static_body = 1;
}

/* Answer one complete request into *out: 0, or 1 when it is a claim that
 * waits for work (then *out is not filled). */
static int answer(tk_server *s, struct MHD_Connection *c, const char *method, request *rq,
                  tk__response *out) {
  tk__route r;
  tk__api_error e;
  const char *allow;
  int rc = tk__route_parse(method, rq->uri, strlen(rq->uri), &r, &allow, &e);
  /* A callback's token, in its path, is its credential: it comes from the
   * service an http step called, which holds no token of this server. */
  if (rc == 0 && r.id != TK__R_ASSET && !r.callback) rc = authorize(s, c, &r, &e);
  if (rc == 0 && !r.callback) rc = loopback_host(s, c, &r, &e);
  if (rc == 0 && rq->too_large)
    rc = tk__api_fail(&e, 413, "too_large", NULL,
                      "the request body has more than %d bytes (%zu sent)", TK__BODY_MAX,
                      rq->body_seen);
  if (rc == 0 && r.post) rc = same_origin(s, c, &r, &e);
  if (rc == 0 && s->store == NULL && r.id != TK__R_METRICS)
    rc = tk__api_fail(&e, 404, "not_found", NULL,
                      "this server serves /metrics only (an orchestrator's)");
  if (rc != 0) {
    tk__respond_error(out, &e);
    out->allow = allow;
    return 0;
  }
  if (r.id == TK__R_ASSET) {
    serve_asset(&r, out);
    return 0;
  }
  tk__buf_addc(&rq->body, '\0'); /* handlers read the body as text */
  const char *body = rq->body.p ? rq->body.p : "";
  if (r.id == TK__R_CLAIM) return tk__api_claim(s, &r, body, rq->body_seen, &rq->waiter, out);
  if (r.worker) return tk__api_claim_outcome(s, &r, body, rq->body_seen, &rq->waiter, out);
  tk__api_handle(s, &r, body, rq->body_seen, out);
  /* A submit, an action or an outcome may have made steps ready. */
  if (r.post && r.id != TK__R_HEARTBEAT && out->status < 300) s->changed = 1;
  return 0;
}

/* Suspend the connection of a claim that waits, or of an outcome waiting
 * for its group, until loop.c resumes it. */
static enum MHD_Result wait_for_work(tk_server *s, struct MHD_Connection *c, request *rq) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  rq->waiter.conn = c;
  rq->waiter.fd = ci ? ci->connect_fd : -1;
  MHD_suspend_connection(c);
  tk__loop_wait(s, &rq->waiter);
  return MHD_YES;
}

/* Queue *out (its body handed over) with the headers every answer carries. */
static enum MHD_Result send_response(struct MHD_Connection *c, tk__response *out) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      out->len, out->body, out->static_body ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
  if (resp == NULL) {
    if (!out->static_body) free(out->body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          out->content_type ? out->content_type : "application/json");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                          "form-action 'none'");
  if (out->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, out->allow);
  if (out->status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)out->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  (void)url;
  (void)version;
  tk_server *s = cls;
  request *rq = *req_cls;
  if (rq == NULL) return MHD_NO; /* out of memory when the URI came: drop the connection */
  if (!rq->started) {
    rq->started = 1;
    const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > TK__BODY_MAX) rq->too_large = 1;
    return MHD_YES;
  }
  if (*upload_size > 0) {
    /* Past the limit the body is read and dropped, so the client gets the
     * 413 rather than a reset connection. */
    rq->body_seen += *upload_size;
    if (rq->body_seen > TK__BODY_MAX) rq->too_large = 1;
    if (rq->too_large) tk__buf_free(&rq->body);
    else tk__buf_add(&rq->body, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  tk__response out = {0};
  if (rq->waiter.started) {
    /* A waiting claim, resumed: claim again, or answer; an outcome: answer. */
    if (tk__api_worker_resumed(s, &rq->waiter, &out) == 1) return wait_for_work(s, c, rq);
  } else if (rq->body.oom) {
    tk__api_error e;
    tk__api_fail(&e, 500, "internal", NULL, "out of memory reading the request body");
    tk__respond_error(&out, &e);
  } else if (answer(s, c, method, rq, &out) == 1) {
    return wait_for_work(s, c, rq);
  }
  if (out.body == NULL) return MHD_NO;
  /* A callback's path holds its token: never logged. */
  if (out.status >= 500)
    tk__server_log(s, TK_LOG_ERROR, "%s %s: %d %.*s", method,
                   strncmp(rq->uri, "/api/v1/callbacks/", 18) == 0 ? "/api/v1/callbacks/..."
                                                                   : rq->uri,
                   out.status, (int)out.len, out.body);
  return send_response(c, &out);
}

/* A new request: its context, holding the target as sent (query included). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)cls;
  (void)c;
  request *rq = calloc(1, sizeof *rq);
  if (rq && (rq->uri = strdup(uri)) == NULL) {
    free(rq);
    rq = NULL;
  }
  return rq;
}

static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
                    enum MHD_RequestTerminationCode toe) {
  (void)c;
  (void)toe;
  request *rq = *req_cls;
  if (rq == NULL) return;
  tk__loop_unlink(cls, &rq->waiter);
  tk__api_worker_free(&rq->waiter);
  tk__buf_free(&rq->body);
  free(rq->uri);
  free(rq);
  *req_cls = NULL;
}

/* libmicrohttpd's own messages, as warnings through the log sink. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  tk_server *s = cls;
  if (s->on_log == NULL) return;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n > 0 && msg[n - 1] == '\n') msg[--n] = '\0';
  s->on_log(TK_LOG_WARN, msg, s->log_ud);
}

const char *tk_server_address(const tk_server *s) { return s->address; }
int tk_server_port(const tk_server *s) { return s->port; }

/* The worker protocol's engine (remote.h) on the server's store, and its
 * metrics when the caller gave none. */
static int start_engine(tk_server *s, const tk_server_options *o, tk_err *err) {
  char host[64] = "host", id[128];
  gethostname(host, sizeof host - 1);
  snprintf(id, sizeof id, "serve-%s-%d", host, (int)getpid());
  tk_engine_options eo = {.store = o->store, .config = o->config, .clock = o->clock, .id = id,
                          .workers = 0, .on_log = o->on_log, .log_ud = o->log_ud};
  int rc = tk_engine_new(&eo, &s->engine, err);
  if (rc == 0 && s->metrics == NULL &&
      ((rc = tk_metrics_new(&s->own_metrics, err)) != 0 ||
       (rc = tk_metrics_attach(s->own_metrics, s->engine, err)) != 0))
    return rc;
  if (s->metrics == NULL) s->metrics = s->own_metrics;
  return rc;
}

/* A copy of token into *out (NULL or "": none). */
static int copy_token(const char *token, char **out, size_t *len) {
  if (token == NULL || token[0] == '\0') return 0;
  *len = strlen(token);
  return (*out = strdup(token)) == NULL ? -1 : 0;
}

int tk_server_start(const tk_server_options *o, tk_server **out, tk_err *err) {
  *out = NULL;
  const char *listen = o->listen ? o->listen : TK_SERVER_DEFAULT_LISTEN;
  int rc = tk_server_listen_allowed(listen, o->token, err);
  if (rc) return rc;
  if (o->store != NULL && o->config == NULL)
    return tk_err_set(err, TK_EINVAL, "server options: a store needs its configuration (config)");
  if (o->store == NULL && o->metrics == NULL)
    return tk_err_set(err, TK_EINVAL, "server options: nothing to serve: give a store or metrics");
  tk_server *s = calloc(1, sizeof *s);
  if (s == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory starting the server");
  s->fd = -1;
  s->stop_fd = -1;
  s->due_ns = INT64_MAX;
  s->store = o->store;
  s->config = o->config;
  s->metrics = o->metrics;
  s->on_log = o->on_log;
  s->log_ud = o->log_ud;
  if (copy_token(o->token, &s->token, &s->token_len) != 0 ||
      copy_token(o->worker_token, &s->worker_token, &s->worker_token_len) != 0) {
    tk_server_stop(s);
    return tk_err_set(err, TK_ENOMEM, "out of memory starting the server");
  }
  /* The engine first: a clock given is installed as the store's there. */
  if (o->store && (rc = start_engine(s, o, err)) != 0) {
    tk_server_stop(s);
    return rc;
  }
  s->clock = o->clock.now_ms ? o->clock : o->store ? tk_store_clock(o->store) : tk_clock_system();
  int ipv6;
  if ((rc = tk__listen_open(listen, &s->fd, s->address, sizeof s->address, &s->port, &ipv6,
                            err)) != 0) {
    tk_server_stop(s);
    return rc;
  }
  /* Bound first, so a taken port fails before the first (costly) count. */
  if (o->store && o->store_url &&
      (rc = tk__snapshot_start(o->store_url, o->clock, o->snapshot_ms > 0 ? o->snapshot_ms : 5000,
                               &s->snapshot, err)) != 0) {
    tk_server_stop(s);
    return rc;
  }
  /* No thread of its own: loop.c runs it (epoll), with the waiting claims. */
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | (ipv6 ? MHD_USE_IPv6 : 0);
  s->daemon = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->fd,
      MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)TK__SERVER_CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)PER_IP_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)CONNECTION_MEMORY, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
  if (s->daemon == NULL) {
    tk_server_stop(s);
    return tk_err_set(err, TK_EIO, "cannot start the HTTP server on %s (libmicrohttpd refused)",
                      listen);
  }
  if ((rc = tk__loop_start(s, err)) != 0) {
    tk_server_stop(s);
    return rc;
  }
  *out = s;
  return 0;
}

void tk_server_stop(tk_server *s) {
  if (s == NULL) return;
  tk__loop_stop(s); /* answers the waiting claims: none is left suspended */
  if (s->daemon) MHD_stop_daemon(s->daemon); /* closes the listening socket too */
  else if (s->fd >= 0) close(s->fd);
  tk__snapshot_stop(s->snapshot);
  tk_engine_free(s->engine);
  free(s->seen);
  tk_metrics_free(s->own_metrics);
  free(s->token);
  free(s->worker_token);
  free(s);
}
