/* The server's connection limits (docs/api.md "Safety"), over raw sockets
 * to an in-process server on port 0: a connection idle for 30 s is closed
 * (one that never sent a byte, and one kept alive after an answer); at
 * most 64 connections from one address (the 65th is closed unanswered)
 * and 128 in all (the 129th waits, unanswered, until one closes, then is
 * served); a request's line and headers over 64 KiB are refused (431),
 * and what else the HTTP layer cannot read gets its own answer.
 *
 * Waits are on conditions (a socket readable, closed) with generous
 * bounds that fail clearly; the one time measured is a lower bound (the
 * idle close comes no earlier than 30 s), which a slow machine cannot
 * break. The idle test takes those 30 s: the timeout is not a setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tasker/clock.h>
#include <tasker/server.h>

#include "common/engine_fixture.h"

#define BOUND_MS 120000 /* what a wait may take before the test fails */

typedef struct world {
  efx *f;
  tk_server *srv;
} world;

static int setup(void **state) {
  world *w = calloc(1, sizeof *w);
  w->f = efx_new(NULL, "orch-1");
  tk_server_options o = {.listen = "127.0.0.1:0", .store = w->f->store, .config = w->f->cfg,
                         .snapshot_ms = 3600000};
  tk_err err;
  if (tk_server_start(&o, &w->srv, &err) != 0) fail_msg("server: %s", err.msg);
  *state = w;
  return 0;
}

static int teardown(void **state) {
  world *w = *state;
  tk_server_stop(w->srv);
  void *f = w->f;
  efx_teardown(&f);
  free(w);
  return 0;
}

static int64_t now_ms(void) { return tk_monotonic_ns() / 1000000; }

/* A TCP connection to the server from source address `from` (any of
 * 127/8: the per-address limit counts by it). */
static int connect_from(world *w, const char *from) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, from, &a.sin_addr), 1);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) fail_msg("bind %s: %s", from, strerror(errno));
  a.sin_port = htons((uint16_t)tk_server_port(w->srv));
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &a.sin_addr), 1);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
    fail_msg("connect from %s: %s", from, strerror(errno));
  return fd;
}

/* Send text whole; 0, or -1 when the server closed the connection. */
static int send_all(int fd, const char *text, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, text, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    text += k;
    n -= (size_t)k;
  }
  return 0;
}

static int ask(int fd) {
  static const char req[] = "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  return send_all(fd, req, sizeof req - 1);
}

enum { CLOSED = -1, SILENT = -2 };

/* One whole answer on fd within timeout_ms (its head into head[cap]):
 * its status; CLOSED when the server closed the connection before one
 * (or reset it), SILENT when nothing came in time. */
static int answer(int fd, int64_t timeout_ms, char *head, size_t cap) {
  char buf[70000];
  size_t have = 0;
  int64_t deadline = now_ms() + timeout_ms;
  long body = -1;
  size_t head_len = 0;
  for (;;) {
    if (body >= 0 && have >= head_len + (size_t)body) break;
    struct pollfd p = {fd, POLLIN, 0};
    int64_t left = deadline - now_ms();
    int r = poll(&p, 1, left > 0 ? (int)left : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return SILENT;
    ssize_t k = recv(fd, buf + have, sizeof buf - 1 - have, 0);
    if (k <= 0) return CLOSED; /* an answer cut short counts as none */
    have += (size_t)k;
    buf[have] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    if (body < 0 && end) {
      head_len = (size_t)(end + 4 - buf);
      const char *cl = strstr(buf, "Content-Length: ");
      body = cl && cl < end ? strtol(cl + 16, NULL, 10) : 0;
    }
  }
  if (head) snprintf(head, cap, "%.*s", (int)head_len, buf);
  return (int)strtol(buf + 9, NULL, 10); /* "HTTP/1.1 200" */
}

/* Ask on fd and expect a 200. */
static void served(int fd, const char *what) {
  int st = ask(fd) == 0 ? answer(fd, BOUND_MS, NULL, 0) : CLOSED;
  if (st != 200) fail_msg("%s: %s", what, st == CLOSED ? "closed unanswered" : "no 200 answer");
}

/* How long until the server closes fd (sending nothing), from `since`;
 * fails after BOUND_MS. */
static int64_t closed_after(int fd, int64_t since, const char *what) {
  int st = answer(fd, BOUND_MS, NULL, 0);
  if (st == SILENT) fail_msg("%s: still open after %d s idle", what, BOUND_MS / 1000);
  if (st != CLOSED) fail_msg("%s: an answer (%d) where the connection should close", what, st);
  return now_ms() - since;
}

static void idle_connections_are_closed_after_30s(void **state) {
  world *w = *state;
  int64_t start = now_ms();
  int silent = connect_from(w, "127.0.0.1");
  int kept = connect_from(w, "127.0.0.1");
  served(kept, "a kept-alive connection's request");
  int64_t answered = now_ms();
  int64_t silent_ms = closed_after(silent, start, "a connection that sent nothing");
  int64_t kept_ms = closed_after(kept, answered, "a kept-alive connection");
  /* A lower bound only: a busy machine makes the close later, not sooner. */
  if (silent_ms < 29000 || kept_ms < 29000)
    fail_msg("closed after %lld ms and %lld ms idle: expected 30 s", (long long)silent_ms,
             (long long)kept_ms);
  close(silent);
  close(kept);
  /* The server itself still answers. */
  int again = connect_from(w, "127.0.0.1");
  served(again, "a new connection");
  close(again);
}

static void connections_are_capped_per_address_and_in_all(void **state) {
  world *w = *state;
  enum { PER_ADDRESS = 64, ALL = 128 };
  int fds[ALL];
  char what[64];
  for (int i = 0; i < PER_ADDRESS; i++) {
    fds[i] = connect_from(w, "127.0.0.1");
    snprintf(what, sizeof what, "connection %d from 127.0.0.1", i + 1);
    served(fds[i], what);
  }
  /* The 65th from one address: closed unanswered. */
  int over = connect_from(w, "127.0.0.1");
  int st = ask(over) == 0 ? answer(over, BOUND_MS, NULL, 0) : CLOSED;
  if (st != CLOSED) fail_msg("a 65th connection from 127.0.0.1 was %s", st == SILENT ? "kept open" : "served");
  close(over);
  for (int i = PER_ADDRESS; i < ALL; i++) {
    fds[i] = connect_from(w, "127.0.0.2");
    snprintf(what, sizeof what, "connection %d from 127.0.0.2", i - PER_ADDRESS + 1);
    served(fds[i], what);
  }
  /* The 129th (another address): not served while 128 are open. Three
   * answers on an open connection show the server looked at its sockets
   * since the 129th's request came. */
  int waiting = connect_from(w, "127.0.0.3");
  assert_int_equal(ask(waiting), 0);
  for (int i = 0; i < 3; i++) served(fds[0], "an open connection while 128 are");
  st = answer(waiting, 0, NULL, 0);
  if (st != SILENT)
    fail_msg("a 129th connection was %s while 128 were open", st == CLOSED ? "closed" : "served");
  /* One closes: the 129th is taken and served. */
  close(fds[1]);
  fds[1] = -1;
  st = answer(waiting, BOUND_MS, NULL, 0);
  if (st != 200) fail_msg("the 129th connection, once one closed: %s", st == CLOSED ? "closed" : "no answer");
  close(waiting);
  for (int i = 0; i < ALL; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* Send raw on a new connection: the status of the answer (CLOSED, SILENT). */
static int raw_status(world *w, const char *raw, size_t n) {
  int fd = connect_from(w, "127.0.0.1");
  int st = send_all(fd, raw, n) == 0 ? answer(fd, BOUND_MS, NULL, 0) : CLOSED;
  close(fd);
  return st;
}

/* A request's line and headers are read into 64 KiB: more is refused, 32
 * KiB served; what the HTTP layer cannot read is answered by it
 * (libmicrohttpd's own answers, docs/api.md "Safety"). */
static void requests_the_http_layer_cannot_read_are_refused(void **state) {
  world *w = *state;
  size_t n = 70 * 1024;
  char *req = malloc(n + 200);
  int len = snprintf(req, 200, "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ");
  memset(req + len, 'a', n);
  memcpy(req + len + n, "\r\n\r\n", 5);
  int st = raw_status(w, req, strlen(req));
  if (st != 431) fail_msg("70 KiB of headers: %d, expected 431", st);
  memcpy(req + len + 32 * 1024, "\r\n\r\n", 5);
  st = raw_status(w, req, strlen(req));
  if (st != 200) fail_msg("32 KiB of headers: %d, expected 200", st);
  /* A 70 KiB target. */
  len = snprintf(req, 200, "GET /");
  memset(req + len, 'a', n);
  static const char rest[] = " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  memcpy(req + len + n, rest, sizeof rest);
  st = raw_status(w, req, strlen(req));
  if (st != 414) fail_msg("a 70 KiB target: %d, expected 414", st);
  free(req);
  static const char bad_length[] =
      "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ten\r\n\r\n";
  st = raw_status(w, bad_length, sizeof bad_length - 1);
  if (st != 400) fail_msg("Content-Length: ten: %d, expected 400", st);
  static const char bad_chunk[] = "POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "X-Tasker-Request: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "zz\r\n{}\r\n0\r\n\r\n";
  st = raw_status(w, bad_chunk, sizeof bad_chunk - 1);
  if (st != 400) fail_msg("a malformed chunk: %d, expected 400", st);
  static const char http2[] = "GET /api/v1/status HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n";
  st = raw_status(w, http2, sizeof http2 - 1);
  if (st != 505) fail_msg("HTTP/2.0: %d, expected 505", st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(connections_are_capped_per_address_and_in_all, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(requests_the_http_layer_cannot_read_are_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(idle_connections_are_closed_after_30s, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
