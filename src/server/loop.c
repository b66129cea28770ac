/* The server's one thread: libmicrohttpd run from our own poll() (the
 * daemon has no thread of its own), so that the same thread also watches
 * what long-polling claims wait for, without a thread per request and
 * without a polling interval:
 * - the store's wake-up descriptor (tk__remote_wake_fd: PostgreSQL's
 *   LISTEN socket, SQLite's change signal), and the changes this server
 *   makes itself (PostgreSQL does not echo a session's own NOTIFY back to
 *   it): when either fires, the oldest
 *   claim waiting on each queue is resumed and claims again (a claim that
 *   got all it asked for wakes the next one of its queue, tk__loop_more);
 * - each waiting claim's deadline, and its socket, whose hang-up ends the
 *   wait (a suspended connection is not read by libmicrohttpd, which
 *   would otherwise claim steps for a worker that is gone);
 * - time: when each waiting queue's claim may find more without a signal
 *   (the store's next_due_at: its next retry or delayed start, a lease
 *   that runs out, a rate limit's next token) and the retries this
 *   server scheduled; no polling interval (RECHECK_MS only when the store
 *   cannot say, POLL_FALLBACK_MS when it has no signal at all);
 * - the engine's next lease expiry, to reap the leases of workers that
 *   died even with no orchestrator and no claim coming (tk__remote_reap);
 * - the completes and fails read in a pass of the daemon: recorded after
 *   it as one group (api_workers.c), then answered;
 * - an eventfd that stops the loop.
 * Every request, and so every use of the store and the engine, happens on
 * this thread. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/server_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <microhttpd.h>

#include "engine/remote.h"

/* A queue's waiting claims claim again after this when the store could
 * not say when more may come due (next_due_at unknown), or said a time
 * already past though its claim found nothing (so a failing reaper does
 * not spin the loop). Without a wake-up descriptor, every POLL_FALLBACK_MS:
 * nothing else would tell. */
#define RECHECK_MS 1000
#define PAST_DUE_MS 50
#define POLL_FALLBACK_MS 100

void tk__loop_resume(tk_server *s, tk__waiter *w) {
  MHD_resume_connection(w->conn);
  s->resumed = 1;
}

static void resume(tk_server *s, tk__waiter *w, tk__wake why) {
  tk__loop_unlink(s, w);
  w->woken = why;
  tk__loop_resume(s, w);
}

void tk__loop_wait(tk_server *s, tk__waiter *w) {
  tk__waiter **head = w->outcome ? &s->outcomes : &s->waiters;
  tk__waiter **tail = w->outcome ? &s->outcomes_tail : &s->waiters_tail;
  w->woken = TK__WAKE_NONE;
  w->prev = *tail;
  w->next = NULL;
  if (*tail) (*tail)->next = w;
  else *head = w;
  *tail = w;
  w->linked = 1;
  if (w->outcome) s->noutcomes++;
  else s->nwaiters++;
}

void tk__loop_unlink(tk_server *s, tk__waiter *w) {
  if (!w->linked) return;
  tk__waiter **head = w->outcome ? &s->outcomes : &s->waiters;
  tk__waiter **tail = w->outcome ? &s->outcomes_tail : &s->waiters_tail;
  if (w->prev) w->prev->next = w->next;
  else *head = w->next;
  if (w->next) w->next->prev = w->prev;
  else *tail = w->prev;
  w->prev = w->next = NULL;
  w->linked = 0;
  if (w->outcome) s->noutcomes--;
  else s->nwaiters--;
}

void tk__loop_queue_due(tk_server *s, const char *queue, tk__waiter *w, int64_t next_due_at) {
  int64_t now = tk_monotonic_ns(), at;
  if (next_due_at == INT64_MAX) {
    at = INT64_MAX;
  } else if (next_due_at == INT64_MIN || tk__remote_wake_fd(s->engine) < 0) {
    at = now + (int64_t)(tk__remote_wake_fd(s->engine) < 0 ? POLL_FALLBACK_MS : RECHECK_MS) *
                   1000000;
    if (next_due_at != INT64_MIN) {
      int64_t in_ms = next_due_at - tk_clock_now(&s->clock);
      if (in_ms * 1000000 < at - now) at = now + (in_ms > 0 ? in_ms : 0) * 1000000;
    }
  } else {
    int64_t in_ms = next_due_at - tk_clock_now(&s->clock);
    at = now + (in_ms > 0 ? in_ms : PAST_DUE_MS) * 1000000;
  }
  tk__wake why = next_due_at == INT64_MIN ? TK__WAKE_RECHECK : TK__WAKE_DUE;
  if (w) {
    w->due_ns = at;
    w->due_why = why;
  }
  for (tk__waiter *o = s->waiters; o; o = o->next)
    if (strcmp(o->queue, queue) == 0) {
      o->due_ns = at;
      o->due_why = why;
    }
}

void tk__loop_due(tk_server *s, int64_t at_ns) {
  if (at_ns < s->due_ns) s->due_ns = at_ns;
}

const char *const tk__wake_names[TK__WAKE_N] = {
    [TK__WAKE_NONE] = "at_once",      [TK__WAKE_SIGNAL] = "store_signal",
    [TK__WAKE_LOCAL] = "this_server",
    [TK__WAKE_DUE] = "retry_due",     [TK__WAKE_RECHECK] = "recheck",
    [TK__WAKE_MORE] = "more",         [TK__WAKE_TIMEOUT] = "wait_over",
    [TK__WAKE_GONE] = "hang_up",      [TK__WAKE_STOP] = "stop"};

void tk__loop_more(tk_server *s, const char *queue) {
  for (tk__waiter *w = s->waiters; w; w = w->next)
    if (strcmp(w->queue, queue) == 0) {
      resume(s, w, TK__WAKE_MORE);
      return;
    }
}

/* Steps may have become ready: the oldest waiting claim of each queue
 * claims again (the others of its queue would find what it found). */
static void wake_queues(tk_server *s, tk__wake why) {
  const char *woken[TK__SERVER_CONNECTION_LIMIT];
  int n = 0;
  for (tk__waiter *w = s->waiters, *next; w; w = next) {
    next = w->next;
    int first = 1;
    for (int i = 0; i < n && first; i++) first = strcmp(woken[i], w->queue) != 0;
    if (!first || n == TK__SERVER_CONNECTION_LIMIT) continue;
    woken[n++] = w->queue; /* the request, and so its queue, outlives this pass */
    resume(s, w, why);
  }
}

/* The claims whose queue's due time came: the oldest of each such queue
 * claims again (the others of its queue get the due time it finds). */
static void wake_due(tk_server *s, int64_t now) {
  for (tk__waiter *w = s->waiters, *next; w; w = next) {
    next = w->next;
    if (w->due_ns > now) continue;
    for (tk__waiter *o = next; o; o = o->next)
      if (strcmp(o->queue, w->queue) == 0) o->due_ns = INT64_MAX;
    next = w->next; /* resume unlinks w only */
    resume(s, w, w->due_why);
  }
}

/* When (monotonic ns) the engine's next lease expiry comes, for the
 * server to reap its workers' expired leases on time: no orchestrator may
 * be running, and on PostgreSQL a worker's claim wakes none. Not before
 * retry_ns (a reap that failed is tried again RECHECK_MS later). */
static int64_t reap_due_ns(tk_server *s, int64_t now_ns, int64_t retry_ns) {
  if (s->engine == NULL) return INT64_MAX;
  int64_t at = tk__remote_reap_at(s->engine);
  if (at == INT64_MAX) return INT64_MAX;
  int64_t in_ms = at == INT64_MIN ? 0 : at - tk_clock_now(&s->clock); /* MIN: not known yet */
  if (in_ms > 3600000) in_ms = 3600000;
  int64_t ns = in_ms > 0 ? now_ns + in_ms * 1000000 : now_ns;
  return ns < retry_ns ? retry_ns : ns;
}

/* Milliseconds from now_ns to at_ns, rounded up, capped for poll(). */
static int ms_until(int64_t at_ns, int64_t now_ns) {
  if (at_ns <= now_ns) return 0;
  int64_t ms = (at_ns - now_ns + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void *run(void *arg) {
  tk_server *s = arg;
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
  int epoll_fd = info ? info->epoll_fd : -1;
  /* The daemon, the stop eventfd, the wake-up descriptor and each waiting
   * connection (no more than the daemon's connection limit). */
  enum { FIXED = 3 };
  struct pollfd p[FIXED + TK__SERVER_CONNECTION_LIMIT];
  tk__waiter *watched[TK__SERVER_CONNECTION_LIMIT];
  int64_t reap_retry_ns = 0;
  for (;;) {
    /* Asked each time round: PostgreSQL's notices can arrive while the
     * connection reads a query's results, and are then flagged here; a
     * SQLite store's signal appears with its -wal file. */
    int wake_fd = s->engine ? tk__remote_wake_fd(s->engine) : -1;
    int n = 0, nw = 0;
    p[n++] = (struct pollfd){.fd = epoll_fd, .events = POLLIN};
    p[n++] = (struct pollfd){.fd = s->stop_fd, .events = POLLIN};
    p[n++] = (struct pollfd){.fd = wake_fd, .events = POLLIN}; /* -1: ignored by poll */
    for (tk__waiter *w = s->waiters; w && nw < TK__SERVER_CONNECTION_LIMIT; w = w->next) {
      watched[nw++] = w;
      p[n++] = (struct pollfd){.fd = w->fd, .events = POLLRDHUP};
    }
    int64_t now = tk_monotonic_ns();
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    int timeout = MHD_get_timeout(s->daemon, &mhd_ms) == MHD_YES
                      ? (mhd_ms > INT_MAX ? INT_MAX : (int)mhd_ms)
                      : -1;
    for (tk__waiter *w = s->waiters; w; w = w->next) {
      int64_t at = w->deadline_ns < w->due_ns ? w->deadline_ns : w->due_ns;
      int t = ms_until(at, now);
      if (timeout < 0 || t < timeout) timeout = t;
    }
    if (s->waiters && s->due_ns != INT64_MAX) {
      int t = ms_until(s->due_ns, now);
      if (timeout < 0 || t < timeout) timeout = t;
    }
    int64_t reap_ns = reap_due_ns(s, now, reap_retry_ns);
    if (reap_ns != INT64_MAX) {
      int t = ms_until(reap_ns, now);
      if (timeout < 0 || t < timeout) timeout = t;
    }
    /* Resumed connections leave the daemon's suspended list only in
     * MHD_run, and their resumption does not make its descriptor readable:
     * the next pass comes at once. */
    if (s->resumed) timeout = 0;
    s->resumed = 0;
    if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR) {
      tk__server_log(s, TK_LOG_ERROR, "server: poll: %s", strerror(errno));
      break;
    }
    if (p[1].revents) break;
    /* Hang-ups first: a claim whose worker is gone is answered as such,
     * not woken for work in the same pass (and its queue's wake-up goes to
     * a claim that is still there). */
    for (int i = 0; i < nw; i++)
      if (watched[i]->linked && p[FIXED + i].revents) resume(s, watched[i], TK__WAKE_GONE);
    now = tk_monotonic_ns();
    tk__wake why = TK__WAKE_NONE;
    if (wake_fd >= 0 && p[2].revents) {
      tk__remote_drain(s->engine);
      why = TK__WAKE_SIGNAL;
    }
    if (now >= s->due_ns) {
      s->due_ns = INT64_MAX;
      if (why == TK__WAKE_NONE) why = TK__WAKE_DUE;
    }
    if (now >= reap_due_ns(s, now, reap_retry_ns)) {
      /* A reaped step waits for its retry or is ready: the waiting claims
       * look again (and learn its due time). */
      int reaped = tk__remote_reap(s->engine);
      int64_t at = tk__remote_reap_at(s->engine);
      if (at == INT64_MIN || at <= tk_clock_now(&s->clock))
        reap_retry_ns = now + (int64_t)RECHECK_MS * 1000000;
      if (reaped > 0 && why == TK__WAKE_NONE) why = TK__WAKE_DUE;
    }
    if (why != TK__WAKE_NONE) wake_queues(s, why);
    wake_due(s, now);
    for (tk__waiter *w = s->waiters, *next; w; w = next) {
      next = w->next;
      if (w->deadline_ns <= now) resume(s, w, TK__WAKE_TIMEOUT);
    }
    MHD_run(s->daemon);
    /* The completes and fails of this pass, as one group; their
     * connections are answered at the next pass, at once. */
    tk__api_outcomes_record(s);
    if (s->changed) {
      /* Submits, actions and outcomes made here may have made steps ready;
       * the resumed claims run at the next pass, at once (s->resumed). */
      s->changed = 0;
      wake_queues(s, TK__WAKE_LOCAL);
    }
  }
  /* Stopping: outcomes read are recorded and every waiting claim is
   * answered with what it has, so that no connection is left suspended
   * when the daemon stops; a request read meanwhile is answered at once
   * (s->stopping), never suspended. The resumed connections leave the
   * daemon's suspended list at its next pass. */
  s->stopping = 1;
  tk__api_outcomes_record(s);
  while (s->waiters) resume(s, s->waiters, TK__WAKE_STOP);
  MHD_run(s->daemon);
  MHD_run(s->daemon);
  return NULL;
}

int tk__loop_start(tk_server *s, tk_err *err) {
  s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->stop_fd < 0)
    return tk_err_set(err, TK_EIO, "cannot start the server: eventfd: %s", strerror(errno));
  int rc = pthread_create(&s->thread, NULL, run, s);
  if (rc != 0)
    return tk_err_set(err, TK_EIO, "cannot start the server's thread: %s", strerror(rc));
  s->thread_started = 1;
  return 0;
}

void tk__loop_stop(tk_server *s) {
  if (s->thread_started) {
    uint64_t one = 1;
    while (write(s->stop_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_join(s->thread, NULL);
    s->thread_started = 0;
  }
  if (s->stop_fd >= 0) close(s->stop_fd);
  s->stop_fd = -1;
}
