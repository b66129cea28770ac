/* tasker: the HTTP server behind `tasker serve` and `tasker run --metrics`
 * (DESIGN §15, docs/api.md).
 *
 * One server serves the JSON API under /api/v1 (the worker protocol of
 * DESIGN §19 included), Prometheus metrics at /metrics and the built-in
 * dashboard at /, from one thread of its own, which runs libmicrohttpd and
 * the claims that wait for work: every request is answered on that
 * thread, so the store given here is used by it alone while the server
 * runs (with an engine of the server's own, id "serve-HOST-PID", for the
 * workers' claims and outcomes). Store-wide figures that are costly to count (steps by
 * state over a million rows) are refreshed every snapshot_ms by a second
 * thread on its own store connection; /metrics and /api/v1/status serve
 * the last refresh.
 *
 * The server never prints: what it has to say goes to the log sink.
 */
#ifndef TASKER_SERVER_H
#define TASKER_SERVER_H

#include <stdint.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/error.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where `tasker serve` listens when not told: loopback only. */
#define TK_SERVER_DEFAULT_LISTEN "127.0.0.1:8080"

struct tk_metrics; /* <tasker/metrics.h> */

typedef struct tk_server_options {
  /* "ADDR:PORT" with an IPv4 address, or "[ADDR]:PORT" with an IPv6 one;
   * port 0 picks a free port (tk_server_port says which). NULL:
   * TK_SERVER_DEFAULT_LISTEN. An address other than loopback requires a
   * token. */
  const char *listen;
  /* The bearer token every /api/v1 and /metrics request must carry, or
   * NULL for none (loopback only; POSTs then need the same-origin check of
   * docs/api.md "Safety"). Copied. */
  const char *token;
  /* The token of the worker protocol's endpoints (/api/v1/queues/..., 
   * /api/v1/claims/...), which take it and no other; the operator's token
   * is refused there, and this one everywhere else. NULL: none (then those
   * endpoints answer 401, but on a server with no token at all: loopback,
   * docs/api.md "Safety"). Copied. */
  const char *worker_token;
  /* The store the API reads and changes; NULL: metrics only (/metrics
   * from `metrics`, every other path 404), as `tasker run --metrics`. */
  tk_store *store;
  /* The URL of the store, for the snapshot thread's own connection. NULL:
   * the store-wide figures are counted on the server's thread for each
   * request (fine for small stores and tests). */
  const char *store_url;
  const tk_config *config; /* required with a store: submit and backoff profiles */
  tk_clock clock;          /* zeroed: the store's clock */
  int64_t snapshot_ms;     /* refresh period of the store-wide figures; 0: 5000 */
  /* The metrics /metrics renders (tk_metrics_render): an engine's, in
   * metrics-only mode; may be NULL with a store (then /metrics is the
   * store-wide figures alone). Must outlive the server. */
  struct tk_metrics *metrics;
  tk_log_sink on_log; /* may be NULL: errors answered with 500, requests */
  void *log_ud;
} tk_server_options;

typedef struct tk_server tk_server;

/* Check the options, bind, and start serving. TK_EINVAL naming the option
 * (a malformed address, a non-loopback address without a token, a store
 * without a configuration), TK_EIO when the address cannot be bound (the
 * message says why), or the store's error opening the snapshot
 * connection. On success the server runs until tk_server_stop. */
int tk_server_start(const tk_server_options *opts, tk_server **out, tk_err *err);

/* The address bound, "127.0.0.1:41234" or "[::1]:8080", and its port. */
const char *tk_server_address(const tk_server *s);
int tk_server_port(const tk_server *s);

/* Stop serving (requests under way are finished), stop the snapshot
 * thread and free the server; NULL is allowed. The store is the
 * caller's again afterwards. */
void tk_server_stop(tk_server *s);

/* Parse "ADDR:PORT" / "[ADDR]:PORT" as tk_server_start does: 0, or
 * TK_EINVAL saying what was expected. *loopback says whether the address
 * is a loopback one (127.0.0.0/8, ::1). For callers that check before
 * starting (the CLI, to refuse early). */
int tk_server_listen_check(const char *listen, int *loopback, tk_err *err);

/* The one rule for where a server may listen, which tk_server_start
 * applies and callers that check before starting (`tasker serve
 * --listen`, `tasker run --metrics`) share: `listen` (NULL: the default)
 * well formed, and a loopback address unless `token` is given (NULL or ""
 * is none). 0, or TK_EINVAL saying which and what is expected. */
int tk_server_listen_allowed(const char *listen, const char *token, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
