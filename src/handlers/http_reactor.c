/* The http handler's reactor: one thread per engine that drives every
 * request in flight through one curl multi handle, so that a thousand
 * slow requests cost a thousand sockets and transfer records, not a
 * thousand threads. It uses curl's socket interface over epoll (a Linux
 * interface, like the pidfd and memfd the command handler uses): curl
 * says which sockets to watch and when its next timer is due, and each
 * wake-up handles only the sockets that are ready, so the cost of a
 * request does not grow with the number of others waiting (a
 * curl_multi_perform loop visits every transfer on every wake-up). Other
 * threads hand it transfers (submit) and wake it through an eventfd; it
 * alone touches the multi handle. Connections and DNS answers are cached
 * in the multi handle and shared by its transfers. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "handlers/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Easy handles kept for reuse when idle (each holds buffers). */
#define FREE_EASY_MAX 64
/* The longest one wait lasts when curl has no timer due sooner. */
#define WAIT_MS 1000
/* Socket events taken per wait. */
#define EVENTS 256

struct tk__http_reactor {
  pthread_mutex_t mu;
  CURLM *multi;
  int epfd;
  int wake_fd; /* an eventfd: a submission or a stop */
  pthread_t thread;
  int started; /* the thread runs (mu) */
  int stop;    /* (mu) */
  tk__http_transfer *incoming; /* submitted, not yet added (mu) */
  tk__http_transfer *active;   /* in the multi handle (reactor thread only) */
  int64_t timer_ns;            /* monotonic, when curl's timer is due; -1: none */
  CURL *free_easy[FREE_EASY_MAX]; /* mu */
  int nfree;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* libcurl's global state is the process's by libcurl's design, hence the
 * one static here: initialised once, never cleaned up (other code in the
 * process may use libcurl too). */
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void tk__http_global_init(void) { pthread_once(&global_once, global_init); }

/* curl's CURLMOPT_SOCKETFUNCTION: watch socket s for `what`, or stop. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *socketp) {
  (void)easy, (void)socketp;
  tk__http_reactor *r = ud;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, s, NULL);
    return 0;
  }
  struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                     (what & CURL_POLL_OUT ? EPOLLOUT : 0u)};
  ev.data.fd = s;
  if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT)
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev);
  return 0;
}

/* curl's CURLMOPT_TIMERFUNCTION: its next timer, in ms from now (-1:
 * none). Called on the reactor thread, inside curl's calls. */
static int on_timer(CURLM *multi, long ms, void *ud) {
  (void)multi;
  tk__http_reactor *r = ud;
  r->timer_ns = ms < 0 ? -1 : tk_monotonic_ns() + (int64_t)ms * 1000000;
  return 0;
}

tk__http_reactor *tk__http_reactor_new(void) {
  tk__http_global_init();
  tk__http_reactor *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->timer_ns = -1;
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  r->multi = curl_multi_init();
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.fd = r->wake_fd;
  if (r->epfd < 0 || r->wake_fd < 0 || r->multi == NULL ||
      epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->wake_fd, &ev) != 0) {
    if (r->epfd >= 0) close(r->epfd);
    if (r->wake_fd >= 0) close(r->wake_fd);
    if (r->multi) curl_multi_cleanup(r->multi);
    free(r);
    return NULL;
  }
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);
  pthread_mutex_init(&r->mu, NULL);
  return r;
}

CURL *tk__http_reactor_easy(tk__http_reactor *r) {
  CURL *e = NULL;
  pthread_mutex_lock(&r->mu);
  if (r->nfree > 0) e = r->free_easy[--r->nfree];
  pthread_mutex_unlock(&r->mu);
  return e ? e : curl_easy_init();
}

/* Take back an easy handle whose transfer ended: reset for the next, or
 * freed when enough are kept. */
static void recycle(tk__http_reactor *r, CURL *e) {
  curl_easy_reset(e);
  pthread_mutex_lock(&r->mu);
  int kept = r->nfree < FREE_EASY_MAX;
  if (kept) r->free_easy[r->nfree++] = e;
  pthread_mutex_unlock(&r->mu);
  if (!kept) curl_easy_cleanup(e);
}

static void unlink_active(tk__http_reactor *r, tk__http_transfer *t) {
  if (t->prev) t->prev->next = t->next;
  else r->active = t->next;
  if (t->next) t->next->prev = t->prev;
}

/* A transfer ended (or never began): out of the multi handle, finished,
 * its handle recycled. */
static void end(tk__http_reactor *r, tk__http_transfer *t, CURLcode code, int aborted,
                int added) {
  CURL *e = t->easy;
  if (added) {
    curl_multi_remove_handle(r->multi, e);
    unlink_active(r, t);
  }
  t->finish(t, code, aborted);
  recycle(r, e);
}

/* Add the transfers submitted since the last look (curl then sets a
 * timer of 0 to start them). */
static void add_incoming(tk__http_reactor *r) {
  pthread_mutex_lock(&r->mu);
  tk__http_transfer *list = r->incoming;
  r->incoming = NULL;
  pthread_mutex_unlock(&r->mu);
  while (list) {
    tk__http_transfer *t = list;
    list = t->next;
    if (curl_multi_add_handle(r->multi, t->easy) != CURLM_OK) {
      end(r, t, CURLE_OUT_OF_MEMORY, 0, 0);
      continue;
    }
    t->prev = NULL;
    t->next = r->active;
    if (r->active) r->active->prev = t;
    r->active = t;
  }
}

/* Finish the transfers curl says are done. */
static void reap(tk__http_reactor *r) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(r->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE) continue;
    char *priv = NULL;
    CURLcode code = m->data.result;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
    end(r, (tk__http_transfer *)(void *)priv, code, 0, 1);
  }
}

static void *reactor_main(void *arg) {
  tk__http_reactor *r = arg;
  struct epoll_event evs[EVENTS];
  int running;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    int stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    if (stop) break;
    add_incoming(r);
    int64_t now = tk_monotonic_ns();
    int wait = WAIT_MS;
    if (r->timer_ns >= 0)
      wait = r->timer_ns <= now ? 0
             : r->timer_ns - now < (int64_t)WAIT_MS * 1000000
                 ? (int)((r->timer_ns - now + 999999) / 1000000)
                 : WAIT_MS;
    int n = epoll_wait(r->epfd, evs, EVENTS, wait);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == r->wake_fd) {
        uint64_t v;
        ssize_t got = read(r->wake_fd, &v, sizeof v);
        (void)got;
        continue;
      }
      int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                  (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                  (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(r->multi, fd, flags, &running);
    }
    if (r->timer_ns >= 0 && tk_monotonic_ns() >= r->timer_ns) {
      r->timer_ns = -1;
      curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    reap(r);
  }
  /* Stopping: what is still in flight or submitted is abandoned. */
  add_incoming(r);
  while (r->active) end(r, r->active, CURLE_ABORTED_BY_CALLBACK, 1, 1);
  return NULL;
}

/* Wake the reactor's wait. */
static void wake(tk__http_reactor *r) {
  uint64_t one = 1;
  ssize_t put = write(r->wake_fd, &one, sizeof one);
  (void)put;
}

int tk__http_reactor_submit(tk__http_reactor *r, tk__http_transfer *t) {
  pthread_mutex_lock(&r->mu);
  if (!r->started) {
    if (pthread_create(&r->thread, NULL, reactor_main, r) != 0) {
      pthread_mutex_unlock(&r->mu);
      return TK_ENOMEM;
    }
    pthread_setname_np(r->thread, "tasker-http"); /* for top -H, perf, gdb */
    r->started = 1;
  }
  int was_empty = r->incoming == NULL;
  t->next = r->incoming;
  r->incoming = t;
  pthread_mutex_unlock(&r->mu);
  /* One wake-up per batch: the reactor takes the whole list at once. */
  if (was_empty) wake(r);
  return 0;
}

void tk__http_reactor_free(tk__http_reactor *r) {
  if (r == NULL) return;
  pthread_mutex_lock(&r->mu);
  r->stop = 1;
  int started = r->started;
  pthread_mutex_unlock(&r->mu);
  if (started) {
    wake(r);
    pthread_join(r->thread, NULL);
  }
  for (int i = 0; i < r->nfree; i++) curl_easy_cleanup(r->free_easy[i]);
  curl_multi_cleanup(r->multi);
  close(r->epfd);
  close(r->wake_fd);
  pthread_mutex_destroy(&r->mu);
  free(r);
}
