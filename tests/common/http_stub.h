/* Test helper: a scripted HTTP/1.1 server on loopback, for the http
 * handler's tests. One thread polls every connection, so a thousand slow
 * requests cost no thread each; a route answers its requests from a
 * script, in order, the last answer repeating. Written by hand rather than
 * on libmicrohttpd because the tests need what a correct server never
 * does: reset a connection mid-request, close it without an answer, stall
 * before the status line. */
#ifndef TESTS_HTTP_STUB_H
#define TESTS_HTTP_STUB_H

#include <stddef.h>

typedef enum http_stub_action {
  HTTP_STUB_ANSWER, /* the status, headers and body below */
  HTTP_STUB_RESET,  /* reset the connection (RST) without answering */
  HTTP_STUB_CLOSE,  /* close it cleanly without answering */
  /* Answer as HTTP_STUB_ANSWER with the request sent back after the body,
   * as a server that echoes its request does: */
  HTTP_STUB_ECHO_REQUEST, /* all of it as it arrived: request line, headers, body */
  HTTP_STUB_ECHO_BODY,    /* its body */
} http_stub_action;

typedef struct http_stub_answer {
  http_stub_action action;
  int status;          /* e.g. 200, 429 */
  const char *headers; /* extra header lines, each ending "\r\n"; NULL: none */
  const char *body;    /* NULL: empty; with body_repeat, repeated */
  size_t body_repeat;  /* send the body this many times (0 or 1: once) */
  int delay_ms;        /* wait this long before answering (or resetting) */
  int no_length;       /* no Content-Length: the body ends when the connection closes */
} http_stub_answer;

typedef struct http_stub http_stub;

/* Start a server on 127.0.0.1 on a free port. NULL when it cannot. */
http_stub *http_stub_start(void);

/* Its port, and a URL for path on it ("http://127.0.0.1:PORT" path), in a
 * static buffer that the next call overwrites. */
int http_stub_port(const http_stub *s);
const char *http_stub_url(const http_stub *s, const char *path);

/* Answer requests for exactly `path` (without its query string) with
 * answers[0], answers[1], … and the last one from then on. The answers and
 * their strings must outlive the server. A path with no route gets 404. */
void http_stub_route(http_stub *s, const char *path, const http_stub_answer *answers, int n);

/* Keep each connection open after an answer (HTTP/1.1 keep-alive) and
 * read the next request from it, instead of closing it (the default), as
 * a production server would: for benchmarks. */
void http_stub_keep_alive(http_stub *s, int on);

/* Requests received for path so far (whole requests, read to their
 * body's end). */
int http_stub_count(http_stub *s, const char *path);

/* A copy of the last request for path (request line, headers, body), or
 * NULL for none; the caller frees it. */
char *http_stub_last(http_stub *s, const char *path);

/* Answer nothing until `requests` requests (whole, over every route,
 * counted from this call on) have arrived or `most_ms` have passed,
 * whichever comes first; then answer them all, each as its route says
 * (a delay_ms counts from its arrival). So a test sees that many requests
 * in flight together however slow the machine, instead of hoping that
 * they all arrive within some delay. */
void http_stub_hold(http_stub *s, int requests, int most_ms);

/* The requests that had arrived when the last hold ended (so far, while
 * it lasts). */
int http_stub_held(http_stub *s);

/* The most connections open at once since the start. */
int http_stub_peak_connections(http_stub *s);

/* Stop the server and free it. */
void http_stub_stop(http_stub *s);

#endif
