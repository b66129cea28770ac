/* The server's pieces (include/tasker/server.h): the listening socket,
 * the snapshot of store-wide figures, and the API's handlers, which fill a
 * response that server.c hands to libmicrohttpd. */
#ifndef TASKER_SERVER_INTERNAL_H
#define TASKER_SERVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <tasker/server.h>

#include "server/request_parse.h"

/* A socket bound and listening on `listen`: the descriptor, the address
 * as "127.0.0.1:PORT" / "[::1]:PORT" and the port. TK_EINVAL for a
 * malformed address, TK_EIO (with the system's reason) when it cannot be
 * bound. */
int tk__listen_open(const char *listen, int *fd, char *addr, size_t addrlen, int *port,
                    int *ipv6, tk_err *err);

/* Whether a Host header's value ("127.0.0.1:8080", "[::1]:8080",
 * "localhost:8080", with or without the port) names this machine. */
int tk__loopback_host(const char *host);

/* Store-wide figures refreshed on a thread of their own (snapshot.c). */
typedef struct tk__snapshot tk__snapshot;

/* Open a connection to url (clock installed when clock.now_ms is set),
 * take a first snapshot, and refresh every interval_ms until stopped. */
int tk__snapshot_start(const char *url, tk_clock clock, int64_t interval_ms,
                       tk__snapshot **out, tk_err *err);
/* Copies (malloc'd) of the last snapshot: the status JSON (with backend
 * and as_of) and the store-wide metrics text. Either pointer may be NULL.
 * TK_ENOMEM, or the error of the last refresh when none succeeded. */
int tk__snapshot_get(tk__snapshot *s, char **status, char **metrics, tk_err *err);
void tk__snapshot_stop(tk__snapshot *s);

/* Count the figures now on store s (what a snapshot holds). */
int tk__store_figures(tk_store *s, int64_t now, char **status, char **metrics, tk_err *err);

struct tk_server {
  struct MHD_Daemon *daemon;
  int fd;
  char address[96];
  int port;
  char *token; /* NULL: none */
  size_t token_len;
  tk_store *store;
  const tk_config *config;
  tk_clock clock;
  struct tk_metrics *metrics;
  tk__snapshot *snapshot; /* NULL: figures counted per request */
  int store_lost;         /* the last reconnect failed: try again before the next request */
  tk_log_sink on_log;
  void *log_ud;
};

/* What a handler answers. body is malloc'd (freed by the server) unless
 * static_body is set. */
typedef struct tk__response {
  int status;
  const char *content_type; /* NULL: application/json */
  char *body;
  size_t len;
  int static_body;
  const char *allow; /* the Allow header of a 405 */
} tk__response;

/* Answer a JSON error. */
void tk__respond_error(tk__response *out, const tk__api_error *e);
/* Answer `status` with JSON text (taken over). NULL text: 500. */
void tk__respond_json(tk__response *out, int status, char *text);
/* Answer `status` with j as compact JSON; j is released. NULL j (a
 * json_pack that ran out of memory): 500. */
void tk__respond_json_value(tk__response *out, int status, json_t *j);

/* Log through the server's sink, if any (printf-style). */
void tk__server_log(const tk_server *s, tk_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The API (api_*.c): answer route r of an authorized request. body is the
 * request's body (len bytes, NUL-terminated) for POSTs. */
void tk__api_handle(tk_server *s, const tk__route *r, const char *body, size_t len,
                    tk__response *out);
void tk__api_lists(tk_server *s, const tk__route *r, const tk__query *q, tk__response *out);
void tk__api_actions(tk_server *s, const tk__route *r, const char *body, size_t len,
                     tk__response *out);
void tk__api_backoff(tk_server *s, const tk__query *q, tk__response *out);

/* The task filter of lq with `since` resolved at now and every member
 * checked: 0, or -1 with a bad_filter error naming the parameter
 * (state_param: "state" or "task_state"). */
int tk__filter_resolve(tk__list_query *lq, int64_t now, const char *state_param,
                       tk__api_error *e);

/* Map a library error to the API's: ENOENT 404, ESTATE 409, EINVAL 400,
 * anything else 500 (logged). */
void tk__respond_tk_error(tk_server *s, tk__response *out, const tk_err *err, const char *param);

/* Constant-time comparison of a presented secret with the server's. */
int tk__secret_equal(const char *given, size_t given_len, const char *secret, size_t secret_len);

#endif
