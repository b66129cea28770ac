/* The scripted loopback HTTP server of http_stub.h: one thread, poll(2)
 * over the listening socket, a wake pipe and every connection. Each
 * connection carries one request and is closed after its answer
 * (Connection: close), which keeps the parser to a request line, headers
 * and a Content-Length body. */
#define _GNU_SOURCE
#include "http_stub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUTES 64

typedef struct route {
  char *path;
  const http_stub_answer *answers;
  int n, count;
  char *last;
} route;

typedef enum conn_state { READING, WAITING, WRITING } conn_state;

typedef struct conn {
  int fd;
  conn_state state;
  char *in;
  size_t in_len, in_cap;
  char *out;
  size_t out_len, out_off;
  const http_stub_answer *answer;
  long long due_ms;
  size_t req_len; /* bytes of in that the request being answered took */
} conn;

struct http_stub {
  int listen_fd, wake[2], port;
  pthread_t thread;
  pthread_mutex_t mu;
  _Atomic int stop;
  int peak;
  _Atomic int keep_alive; /* answer with keep-alive and read the next request */
  /* http_stub_hold, under mu: answers wait while hold_until > 0. */
  int hold_until, held;
  long long hold_end_ms;
  route routes[MAX_ROUTES];
  int nroutes;
  conn *conns;
  int nconns, cap;
};

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *reason_of(int status) {
  switch (status) {
  case 200: return "OK";
  case 201: return "Created";
  case 204: return "No Content";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 307: return "Temporary Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 404: return "Not Found";
  case 408: return "Request Timeout";
  case 425: return "Too Early";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return "Status";
  }
}

/* The route for the request's path (query string left out), or NULL. */
static route *find_route(http_stub *s, const char *path, size_t len) {
  for (int i = 0; i < s->nroutes; i++)
    if (strlen(s->routes[i].path) == len && memcmp(s->routes[i].path, path, len) == 0)
      return &s->routes[i];
  return NULL;
}

static const http_stub_answer NOT_FOUND = {HTTP_STUB_ANSWER, 404, NULL, "no such route\n", 1, 0, 0};

/* Bytes of a whole request in c->in (headers and Content-Length body),
 * or 0 while it is incomplete. */
static size_t request_length(const conn *c) {
  const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  if (end == NULL) return 0;
  size_t head = (size_t)(end - c->in) + 4, body = 0;
  for (const char *p = c->in; p < end;) {
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
    if (eol == NULL) eol = end;
    if ((size_t)(eol - p) > 15 && strncasecmp(p, "content-length:", 15) == 0)
      body = (size_t)strtoull(p + 15, NULL, 10);
    p = eol + 2;
  }
  return c->in_len >= head + body ? head + body : 0;
}

/* A whole request arrived: pick its answer (and count it) under the lock. */
static void take_request(http_stub *s, conn *c, size_t len) {
  const char *sp = memchr(c->in, ' ', len);
  const char *path = sp ? sp + 1 : c->in;
  size_t plen = 0;
  while (path + plen < c->in + len && path[plen] != ' ' && path[plen] != '?' && path[plen] != '\r')
    plen++;
  pthread_mutex_lock(&s->mu);
  route *r = find_route(s, path, plen);
  if (r != NULL) {
    c->answer = &r->answers[r->count < r->n ? r->count : r->n - 1];
    r->count++;
    free(r->last);
    r->last = strndup(c->in, len);
  } else {
    c->answer = &NOT_FOUND;
  }
  if (s->hold_until > 0) s->held++;
  pthread_mutex_unlock(&s->mu);
  c->state = WAITING;
  c->req_len = len;
  c->due_ms = now_ms() + c->answer->delay_ms;
}

/* Build the answer's bytes (NULL out when memory ran out: the connection
 * is then closed). */
static void build_answer(http_stub *s, conn *c) {
  const http_stub_answer *a = c->answer;
  size_t blen = a->body ? strlen(a->body) : 0, times = a->body_repeat ? a->body_repeat : 1;
  /* The body of the request: what follows its blank line. */
  const char *blank = memmem(c->in, c->req_len, "\r\n\r\n", 4);
  size_t skip = a->action == HTTP_STUB_ECHO_BODY && blank ? (size_t)(blank + 4 - c->in) : 0;
  size_t echoed = a->action != HTTP_STUB_ANSWER ? c->req_len - skip : 0;
  size_t total = blen * times + echoed;
  char head[1024], length[64] = "";
  if (!a->no_length) snprintf(length, sizeof length, "Content-Length: %zu\r\n", total);
  /* Without a length the body ends with the connection: no keep-alive. */
  int keep = s->keep_alive && !a->no_length;
  int h = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n%sConnection: %s\r\n%s\r\n",
                   a->status, reason_of(a->status), length, keep ? "keep-alive" : "close",
                   a->headers ? a->headers : "");
  if (h < 0 || (size_t)h >= sizeof head) h = 0;
  c->out = malloc((size_t)h + total + 1);
  if (c->out == NULL) return;
  memcpy(c->out, head, (size_t)h);
  for (size_t i = 0; a->body && i < times; i++) memcpy(c->out + h + i * blen, a->body, blen);
  memcpy(c->out + h + blen * times, c->in + skip, echoed);
  c->out_len = (size_t)h + total;
  c->out_off = 0;
  c->state = WRITING;
}

static void close_conn(http_stub *s, int i, int reset) {
  conn *c = &s->conns[i];
  if (reset) {
    struct linger l = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  close(c->fd);
  free(c->in);
  free(c->out);
  s->conns[i] = s->conns[--s->nconns];
}

static void accept_all(http_stub *s) {
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (s->nconns == s->cap) {
      int cap = s->cap ? s->cap * 2 : 64;
      conn *n = realloc(s->conns, (size_t)cap * sizeof *n);
      if (n == NULL) {
        close(fd);
        return;
      }
      s->conns = n;
      s->cap = cap;
    }
    s->conns[s->nconns++] = (conn){.fd = fd, .state = READING};
    pthread_mutex_lock(&s->mu);
    if (s->nconns > s->peak) s->peak = s->nconns;
    pthread_mutex_unlock(&s->mu);
  }
}

/* Read what a connection has; 0, or -1 when it is to be closed. */
static int read_conn(http_stub *s, conn *c) {
  for (;;) {
    if (c->in_cap - c->in_len < 4096) {
      size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
      char *n = realloc(c->in, cap);
      if (n == NULL) return -1;
      c->in = n;
      c->in_cap = cap;
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r == 0) return -1;
    if (r < 0) break;
    c->in_len += (size_t)r;
  }
  if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  size_t len = request_length(c);
  if (len > 0) take_request(s, c, len);
  return 0;
}

/* Whether answers are held now: a hold ends when its requests have
 * arrived or its time is up. */
static int holding(http_stub *s, long long now) {
  pthread_mutex_lock(&s->mu);
  if (s->hold_until > 0 && (s->held >= s->hold_until || now >= s->hold_end_ms))
    s->hold_until = 0;
  int held = s->hold_until > 0;
  pthread_mutex_unlock(&s->mu);
  return held;
}

static void *serve(void *arg) {
  http_stub *s = arg;
  struct pollfd *pfd = NULL;
  int pcap = 0;
  while (!s->stop) {
    if (pcap < s->nconns + 2) {
      pcap = (s->nconns + 2) * 2;
      struct pollfd *n = realloc(pfd, (size_t)pcap * sizeof *n);
      if (n == NULL) break;
      pfd = n;
    }
    long long now = now_ms(), wait = 50;
    int held = holding(s, now);
    pfd[0] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    for (int i = 0; i < s->nconns; i++) {
      conn *c = &s->conns[i];
      short ev = c->state == READING ? POLLIN : c->state == WRITING ? POLLOUT : 0;
      pfd[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
      if (c->state == WAITING && !held && c->due_ms - now < wait) wait = c->due_ms - now;
    }
    int n = s->nconns;
    poll(pfd, (nfds_t)n + 2, wait < 0 ? 0 : (int)wait);
    now = now_ms();
    /* Backwards, so that closing one (the last moves into its place)
     * leaves the ones still to visit where they were. */
    for (int i = n - 1; i >= 0; i--) {
      conn *c = &s->conns[i];
      if (c->state == READING && (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (read_conn(s, c) != 0) {
          close_conn(s, i, 0);
          continue;
        }
      }
      if (c->state == WAITING && !held && c->due_ms <= now) {
        if (c->answer->action == HTTP_STUB_RESET || c->answer->action == HTTP_STUB_CLOSE) {
          close_conn(s, i, c->answer->action == HTTP_STUB_RESET);
          continue;
        }
        build_answer(s, c);
        if (c->out == NULL) {
          close_conn(s, i, 0);
          continue;
        }
      }
      if (c->state == WRITING) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w > 0) c->out_off += (size_t)w;
        int sent = c->out_off == c->out_len;
        if (sent && s->keep_alive && !c->answer->no_length) {
          /* The next request, perhaps already read. */
          free(c->out);
          c->out = NULL;
          memmove(c->in, c->in + c->req_len, c->in_len - c->req_len);
          c->in_len -= c->req_len;
          c->state = READING;
          size_t len = request_length(c);
          if (len > 0) take_request(s, c, len);
        } else if (sent || (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          shutdown(c->fd, SHUT_WR);
          close_conn(s, i, 0);
        }
      }
    }
    if (pfd[0].revents & POLLIN) accept_all(s);
    if (pfd[1].revents & POLLIN) {
      char b[64];
      while (read(s->wake[0], b, sizeof b) > 0) {
      }
    }
  }
  free(pfd);
  while (s->nconns > 0) close_conn(s, s->nconns - 1, 0);
  return NULL;
}

http_stub *http_stub_start(void) {
  http_stub *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(s->listen_fd, 4096) != 0 ||
      getsockname(s->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
      pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    if (s->listen_fd >= 0) close(s->listen_fd);
    free(s);
    return NULL;
  }
  s->port = ntohs(a.sin_port);
  pthread_mutex_init(&s->mu, NULL);
  if (pthread_create(&s->thread, NULL, serve, s) != 0) {
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
    return NULL;
  }
  return s;
}

int http_stub_port(const http_stub *s) { return s->port; }

void http_stub_keep_alive(http_stub *s, int on) { s->keep_alive = on; }

const char *http_stub_url(const http_stub *s, const char *path) {
  static char url[1024];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
  return url;
}

void http_stub_route(http_stub *s, const char *path, const http_stub_answer *answers, int n) {
  pthread_mutex_lock(&s->mu);
  route *r = find_route(s, path, strlen(path));
  if (r == NULL && s->nroutes < MAX_ROUTES) {
    r = &s->routes[s->nroutes++];
    r->path = strdup(path);
  }
  if (r != NULL) {
    r->answers = answers;
    r->n = n;
    r->count = 0;
  }
  pthread_mutex_unlock(&s->mu);
}

int http_stub_count(http_stub *s, const char *path) {
  pthread_mutex_lock(&s->mu);
  route *r = find_route(s, path, strlen(path));
  int n = r ? r->count : 0;
  pthread_mutex_unlock(&s->mu);
  return n;
}

char *http_stub_last(http_stub *s, const char *path) {
  pthread_mutex_lock(&s->mu);
  route *r = find_route(s, path, strlen(path));
  char *copy = r && r->last ? strdup(r->last) : NULL;
  pthread_mutex_unlock(&s->mu);
  return copy;
}

void http_stub_hold(http_stub *s, int requests, int most_ms) {
  pthread_mutex_lock(&s->mu);
  s->hold_until = requests;
  s->held = 0;
  s->hold_end_ms = now_ms() + most_ms;
  pthread_mutex_unlock(&s->mu);
}

int http_stub_held(http_stub *s) {
  pthread_mutex_lock(&s->mu);
  int n = s->held;
  pthread_mutex_unlock(&s->mu);
  return n;
}

int http_stub_peak_connections(http_stub *s) {
  pthread_mutex_lock(&s->mu);
  int n = s->peak;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void http_stub_stop(http_stub *s) {
  if (s == NULL) return;
  s->stop = 1;
  (void)!write(s->wake[1], "x", 1);
  pthread_join(s->thread, NULL);
  close(s->listen_fd);
  close(s->wake[0]);
  close(s->wake[1]);
  for (int i = 0; i < s->nroutes; i++) {
    free(s->routes[i].path);
    free(s->routes[i].last);
  }
  pthread_mutex_destroy(&s->mu);
  free(s->conns);
  free(s);
}
