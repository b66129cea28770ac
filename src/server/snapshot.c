/* The store-wide figures of /metrics and /api/v1/status, counted on a
 * thread of their own. Counting steps by state reads every step row (a
 * million rows take far longer than a scrape should), so a second store
 * connection, used by this thread alone, counts every interval and the
 * server's thread serves the last count: a scrape costs a copy, and the
 * figures are at most one interval old (status says when: as_of). A count
 * that takes long (a second or two with 10^6 steps) stretches the wait
 * after it to four times its length, so counting never takes more than a
 * fifth of a core. */
#include "server/server_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include <tasker/metrics.h>

#include "store/store.h"

struct tk__snapshot {
  tk_store *store; /* this thread's own connection */
  int64_t interval_ms;
  int64_t last_count_ms; /* how long the last count took */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled to stop */
  int stop;
  char *status, *metrics; /* the last successful count, or NULL */
  tk_err last_err;        /* why the last count failed */
};

int tk__store_figures(tk_store *s, int64_t now, char **status, char **metrics, tk_err *err) {
  char *st = NULL, *m = NULL;
  *status = *metrics = NULL;
  int rc = tk_engine_status_json(s, now, &st, err);
  json_t *j = rc == 0 ? json_loads(st, 0, NULL) : NULL;
  free(st);
  st = NULL;
  if (rc == 0 && j == NULL) rc = tk_err_set(err, TK_ENOMEM, "out of memory reading the status");
  if (rc == 0) {
    json_object_set_new(j, "backend", json_string(strcmp(s->ops->scheme, "sqlite") == 0
                                                      ? "sqlite"
                                                      : "postgresql"));
    json_object_set_new(j, "as_of", json_integer(now));
    st = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (st == NULL) rc = tk_err_set(err, TK_ENOMEM, "out of memory writing the status");
  }
  json_decref(j);
  if (rc == 0) rc = tk_metrics_render_store(s, now, &m, NULL, err);
  if (rc != 0) {
    free(st);
    return rc;
  }
  *status = st;
  *metrics = m;
  return 0;
}

/* One count, kept when it succeeded. */
static void refresh(tk__snapshot *sn) {
  char *status, *metrics;
  tk_err err;
  int64_t t0 = tk_monotonic_ns();
  int rc = tk__store_figures(sn->store, tk__store_now(sn->store), &status, &metrics, &err);
  if (rc == TK_EDISCONNECTED && sn->store->ops->reconnect &&
      sn->store->ops->reconnect(sn->store, &err) == 0)
    rc = tk__store_figures(sn->store, tk__store_now(sn->store), &status, &metrics, &err);
  pthread_mutex_lock(&sn->mu);
  sn->last_count_ms = (tk_monotonic_ns() - t0) / 1000000;
  if (rc == 0) {
    free(sn->status);
    free(sn->metrics);
    sn->status = status;
    sn->metrics = metrics;
  } else {
    sn->last_err = err;
  }
  pthread_mutex_unlock(&sn->mu);
}

/* The thread: count, wait the interval (or until stopped), again. */
static void *run(void *arg) {
  tk__snapshot *sn = arg;
  pthread_mutex_lock(&sn->mu);
  while (!sn->stop) {
    int64_t wait_ms = sn->interval_ms > 4 * sn->last_count_ms ? sn->interval_ms : 4 * sn->last_count_ms;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    while (!sn->stop && pthread_cond_timedwait(&sn->cv, &sn->mu, &until) != ETIMEDOUT) {
    }
    if (sn->stop) break;
    pthread_mutex_unlock(&sn->mu);
    refresh(sn);
    pthread_mutex_lock(&sn->mu);
  }
  pthread_mutex_unlock(&sn->mu);
  return NULL;
}

int tk__snapshot_start(const char *url, tk_clock clock, int64_t interval_ms,
                       tk__snapshot **out, tk_err *err) {
  *out = NULL;
  tk__snapshot *sn = calloc(1, sizeof *sn);
  if (sn == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory starting the snapshot");
  pthread_mutex_init(&sn->mu, NULL);
  pthread_cond_init(&sn->cv, NULL);
  sn->interval_ms = interval_ms;
  int rc = tk_store_open(url, &sn->store, err);
  if (rc == 0 && clock.now_ms) tk_store_set_clock(sn->store, clock);
  if (rc == 0) {
    refresh(sn); /* the first count before the first request */
    if (sn->status == NULL) rc = tk_err_set(err, sn->last_err.code, "%s", sn->last_err.msg);
  }
  if (rc == 0 && pthread_create(&sn->thread, NULL, run, sn) != 0)
    rc = tk_err_set(err, TK_ENOMEM, "cannot start the snapshot thread");
  if (rc != 0) {
    tk__snapshot_stop(sn);
    return rc;
  }
  sn->thread_started = 1;
  *out = sn;
  return 0;
}

int tk__snapshot_get(tk__snapshot *sn, char **status, char **metrics, tk_err *err) {
  int rc = 0;
  pthread_mutex_lock(&sn->mu);
  if (status && (*status = strdup(sn->status)) == NULL) rc = TK_ENOMEM;
  if (metrics && (*metrics = strdup(sn->metrics)) == NULL) rc = TK_ENOMEM;
  pthread_mutex_unlock(&sn->mu);
  if (rc) {
    if (status) free(*status);
    if (metrics) free(*metrics);
    return tk_err_set(err, rc, "out of memory copying the snapshot");
  }
  return 0;
}

void tk__snapshot_stop(tk__snapshot *sn) {
  if (sn == NULL) return;
  if (sn->thread_started) {
    pthread_mutex_lock(&sn->mu);
    sn->stop = 1;
    pthread_cond_signal(&sn->cv);
    pthread_mutex_unlock(&sn->mu);
    pthread_join(sn->thread, NULL);
  }
  tk_store_close(sn->store);
  free(sn->status);
  free(sn->metrics);
  pthread_cond_destroy(&sn->cv);
  pthread_mutex_destroy(&sn->mu);
  free(sn);
}
