/* The server's pieces (include/tasker/server.h): the listening socket,
 * the snapshot of store-wide figures, and the API's handlers, which fill a
 * response that server.c hands to libmicrohttpd. */
#ifndef TASKER_SERVER_INTERNAL_H
#define TASKER_SERVER_INTERNAL_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include <tasker/server.h>

#include "engine/remote.h"
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

struct MHD_Connection;

/* Most connections the daemon holds at once (docs/api.md "Safety"), and
 * so most claims waiting at once. */
#define TK__SERVER_CONNECTION_LIMIT 128

/* What made the server answer a claim: nothing (at once), or why its
 * waiting connection was resumed. */
typedef enum tk__wake {
  TK__WAKE_NONE = 0, /* not waiting: answered at once */
  TK__WAKE_SIGNAL,   /* the store's signal: steps may have become ready */
  TK__WAKE_LOCAL,    /* a change made through this server (its own NOTIFY
                        does not come back to it) */
  TK__WAKE_DUE,      /* a retry this server scheduled came due */
  TK__WAKE_RECHECK,  /* the periodic recheck (loop.c) */
  TK__WAKE_MORE,     /* the claim before it on its queue got all it asked for */
  TK__WAKE_TIMEOUT,  /* its wait ran out: claim once more, then answer */
  TK__WAKE_GONE,     /* the worker hung up: answer nothing, claim nothing */
  TK__WAKE_STOP,     /* the server stops: answer what there is */
  TK__WAKE_N
} tk__wake;

/* The names of the tk__wake values in /metrics (api.c). */
extern const char *const tk__wake_names[TK__WAKE_N];

/* A worker's request whose connection the server suspends, part of its
 * request: a claim with a wait (a long-poll), read once, then claimed
 * again on each wake (loop.c); or a complete or fail waiting for the
 * group of outcomes the loop records after the pass it arrived in (group
 * commit, tk__api_outcomes_record). */
typedef struct tk__waiter {
  int started; /* the body was read: queue, body and deadline hold */
  int outcome; /* an outcome (not a claim): it waits in the server's outcomes */
  char queue[TK__QUEUE_NAME_MAX + 1];
  tk__claim_body body;
  json_t *answers; /* a claim's: the answers to the outcomes it carried, or NULL */
  int64_t deadline_ns; /* monotonic: when the wait runs out */
  int64_t due_ns; /* monotonic: when its queue's claim may find more (loop.c) */
  int due_why;    /* the tk__wake that due_ns stands for */
  /* An outcome's: its request as read, then what the group recorded. */
  tk__remote_outcome rec;
  char token[TK__CLAIM_TOKEN_MAX + 1];
  tk__complete_body complete;
  tk__fail_body fail;
  struct MHD_Connection *conn;
  int fd;       /* the connection's socket, watched for a hang-up while it waits */
  int linked;   /* in the server's list of waiters */
  tk__wake woken;
  struct tk__waiter *prev, *next;
} tk__waiter;

struct tk_server {
  struct MHD_Daemon *daemon;
  int fd;
  char address[96];
  int port;
  char *token; /* the operator token; NULL: none */
  size_t token_len;
  char *worker_token; /* NULL: none */
  size_t worker_token_len;
  struct tk_engine *engine;       /* the worker protocol's (remote.h); NULL without a store */
  struct tk_metrics *own_metrics; /* the engine's metrics when none were given */
  /* The event loop (loop.c): one thread runs libmicrohttpd, the waiting
   * claims and the store's wake-up descriptor. */
  pthread_t thread;
  int thread_started;
  int stop_fd;                  /* an eventfd: written to stop the loop */
  tk__waiter *waiters, *waiters_tail; /* oldest first */
  int nwaiters;
  tk__waiter *outcomes, *outcomes_tail; /* completes and fails read this pass */
  int noutcomes;
  int resumed;  /* connections were resumed since the last poll: poll without waiting */
  int stopping; /* the loop stops: answer claims at once, record outcomes at once */
  int64_t due_ns;               /* the earliest retry this server scheduled, or INT64_MAX */
  int64_t claim_answers[TK__WAKE_N]; /* claims answered, by what made the server answer */
  int64_t claim_queries;             /* store claims made for workers */
  int64_t outcome_groups, outcomes_recorded; /* group commits, and the outcomes in them */
  /* worker_seen's recent pairs (api_workers.c): each recorded at most
   * once per TK__SEEN_MS. */
  struct tk__seen *seen;
  int nseen;
  int changed; /* a request changed the store: wake the waiting claims after it */
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
/* POST /api/v1/callbacks/TOKEN[/heartbeat] (api_callbacks.c). */
void tk__api_callback(tk_server *s, const tk__route *r, const char *body, size_t len,
                      tk__response *out);

/* The task filter of lq with `since` resolved at now and every member
 * checked: 0, or -1 with a bad_filter error naming the parameter
 * (state_param: "state" or "task_state"). */
int tk__filter_resolve(tk__list_query *lq, int64_t now, const char *state_param,
                       tk__api_error *e);

/* Map a library error to the API's: ENOENT 404, ESTATE 409, EINVAL 400,
 * anything else 500 (logged). */
void tk__respond_tk_error(tk_server *s, tk__response *out, const tk_err *err, const char *param);

/* The worker protocol (api_workers.c). POST .../claim: 0 with *out
 * filled, or 1 when w must wait (the caller suspends its connection and
 * hands it to tk__loop_wait); called again, with body NULL, each time the
 * connection is resumed. */
int tk__api_claim(tk_server *s, const tk__route *r, const char *body, size_t len, tk__waiter *w,
                  tk__response *out);
/* POST /api/v1/claims/TOKEN/{heartbeat,complete,fail} and
 * /api/v1/claims/outcomes: 0 with *out
 * filled (a heartbeat, a refusal), or 1 for a complete or fail to record
 * with the pass's group: the caller suspends its connection and hands w to
 * tk__loop_wait; it is resumed with its answer ready. */
int tk__api_claim_outcome(tk_server *s, const tk__route *r, const char *body, size_t len,
                          tk__waiter *w, tk__response *out);
/* A resumed connection's request w (tk__api_claim's or an outcome's):
 * as tk__api_claim. */
int tk__api_worker_resumed(tk_server *s, tk__waiter *w, tk__response *out);
/* Record the outcomes read this pass as one group, set each one's answer
 * and resume its connection (loop.c, after each pass of the daemon). */
void tk__api_outcomes_record(tk_server *s);
/* Free what w holds (its request ends). */
void tk__api_worker_free(tk__waiter *w);
/* How often one (queue, worker) pair is recorded by worker_seen. */
#define TK__SEEN_MS 10000

/* The long-polls' series for /metrics (malloc'd text), or NULL when
 * memory ran out. */
char *tk__workers_metrics(const tk_server *s);

/* The event loop (loop.c). Start the thread that runs the daemon (started
 * without a thread of its own) until tk__loop_stop, which answers every
 * waiting claim and joins it. */
int tk__loop_start(tk_server *s, tk_err *err);
void tk__loop_stop(tk_server *s);
/* w's connection is suspended: a claim waits for work, its deadline or a
 * hang-up; an outcome for the pass's group. */
void tk__loop_wait(tk_server *s, tk__waiter *w);
/* Take w out of the waiters or the outcomes (its request ends); nothing
 * if not in. */
void tk__loop_unlink(tk_server *s, tk__waiter *w);
/* Resume w's suspended connection: its request is called again. */
void tk__loop_resume(tk_server *s, tk__waiter *w);
/* A retry this server recorded is due at monotonic time at_ns: wake the
 * waiting claims then. */
void tk__loop_due(tk_server *s, int64_t at_ns);
/* A claim of `queue` found that more may come due at store time
 * next_due_at (unix ms; INT64_MAX: not before a signal; INT64_MIN:
 * unknown): w (not yet waiting, may be NULL) and the claims waiting on the
 * queue are woken then. */
void tk__loop_queue_due(tk_server *s, const char *queue, tk__waiter *w, int64_t next_due_at);
/* A claim of `queue` got all it asked for: there may be more, so wake the
 * next claim waiting on that queue. */
void tk__loop_more(tk_server *s, const char *queue);

/* Constant-time comparison of a presented secret with the server's. */
int tk__secret_equal(const char *given, size_t given_len, const char *secret, size_t secret_len);

#endif
