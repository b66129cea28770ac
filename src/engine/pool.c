/* The worker pool: threads that run handlers and hand attempts back to
 * the engine thread, which alone talks to the store. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* The next job for a worker, or NULL to wait: a retry whose run_at has
 * come, then the queue. *wake_at gets when the earliest retry held is due
 * (0: none held). Called with e->mu held. */
static job *next_job(tk_engine *e, int64_t *wake_at) {
  *wake_at = 0;
  job *j = e->held_head;
  if (j != NULL) {
    if (j->not_before <= tk_clock_now(&e->clock)) {
      e->held_head = j->next;
      if (e->held_head == NULL) e->held_tail = NULL;
      e->nheld--;
      return j;
    }
    *wake_at = j->not_before;
  }
  j = e->todo_head;
  if (j == NULL) return NULL;
  e->todo_head = j->next;
  if (e->todo_head == NULL) e->todo_tail = NULL;
  return j;
}

/* Put a finished job on the done list and wake the engine thread
 * (e->mu held). One wake byte per batch of results is enough. */
static void push_done(tk_engine *e, job *j) {
  int was_empty = e->done_head == NULL;
  j->next = e->done_head;
  e->done_head = j;
  if (was_empty) {
    char b = 'd';
    ssize_t w = write(e->wake_pipe[1], &b, 1);
    (void)w;
  }
}

static void *worker_main(void *arg) {
  tk_engine *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    int64_t wake_at;
    job *j = next_job(e, &wake_at);
    if (j == NULL) {
      if (e->shutting_down && wake_at == 0) break;
      if (wake_at == 0) {
        pthread_cond_wait(&e->have_todo, &e->mu);
      } else {
        /* Held retries are only taken with a real clock; the wait counts
         * on the monotonic clock (the condition variable's), so a step of
         * the machine's wall clock neither wakes it early nor late. */
        int64_t ns = (wake_at - tk_clock_now(&e->clock)) * 1000000 + tk_monotonic_ns();
        struct timespec until = {.tv_sec = (time_t)(ns / 1000000000),
                                 .tv_nsec = (long)(ns % 1000000000)};
        pthread_cond_timedwait(&e->have_todo, &e->mu, &until);
      }
      continue;
    }
    pthread_mutex_unlock(&e->mu);
    /* An attempt started asynchronously comes back through its own end
     * (tk__pool_done from the handler's thread), not through this one. */
    int started = tk__engine_execute(e, j);
    pthread_mutex_lock(&e->mu);
    if (!started) push_done(e, j);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

void tk__pool_done(tk_engine *e, job *j) {
  pthread_mutex_lock(&e->mu);
  push_done(e, j);
  pthread_mutex_unlock(&e->mu);
}

int tk__pool_start(tk_engine *e, tk_err *err) {
  if (e->workers <= 0) return 0;
  e->threads = calloc((size_t)e->workers, sizeof *e->threads);
  if (e->threads == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory for %d workers", e->workers);
  for (int i = 0; i < e->workers; i++) {
    if (pthread_create(&e->threads[i], NULL, worker_main, e) != 0) {
      tk__pool_stop(e);
      return tk_err_set(err, TK_ENOMEM, "cannot start worker thread %d of %d", i + 1, e->workers);
    }
    e->nthreads++;
  }
  return 0;
}

void tk__pool_stop(tk_engine *e) {
  pthread_mutex_lock(&e->mu);
  e->shutting_down = 1;
  if (e->abandon) { /* the queues' jobs stay on e->running for the caller */
    e->todo_head = e->todo_tail = e->held_head = e->held_tail = NULL;
    e->nheld = 0;
  }
  pthread_cond_broadcast(&e->have_todo);
  pthread_mutex_unlock(&e->mu);
  for (int i = 0; i < e->nthreads; i++) pthread_join(e->threads[i], NULL);
  free(e->threads);
  e->threads = NULL;
  e->nthreads = 0;
}

/* Queue one claimed attempt (e->mu held); 1 when waiting workers must
 * look again: new work, or a retry that became the earliest held. */
static int enqueue(tk_engine *e, job *j) {
  if (j->not_before == 0) {
    j->next = NULL;
    if (e->todo_tail) e->todo_tail->next = j;
    else e->todo_head = j;
    e->todo_tail = j;
    return 1;
  }
  /* Claims come in run_at order: appending is the common case. */
  job **at = e->held_tail && e->held_tail->not_before <= j->not_before ? &e->held_tail->next
                                                                       : &e->held_head;
  while (*at != NULL && (*at)->not_before <= j->not_before) at = &(*at)->next;
  j->next = *at;
  *at = j;
  e->nheld++;
  if (j->next == NULL) e->held_tail = j;
  return at == &e->held_head || j->not_before <= tk_clock_now(&e->clock);
}

/* Queue the claimed attempts `list` (linked by next) under one lock, with
 * one wake-up of the workers. Retries wait in run_at order until their
 * run_at (one claimed ahead of it is held until then) and go before
 * anything queued: a retry has a promised time, work claimed earlier does
 * not. */
void tk__pool_submit(tk_engine *e, job *list) {
  int wake = 0;
  pthread_mutex_lock(&e->mu);
  while (list != NULL) {
    job *j = list;
    list = j->next;
    wake |= enqueue(e, j);
  }
  if (wake) pthread_cond_broadcast(&e->have_todo);
  pthread_mutex_unlock(&e->mu);
}

job *tk__pool_take_done(tk_engine *e, int *held) {
  pthread_mutex_lock(&e->mu);
  job *j = e->done_head;
  e->done_head = NULL;
  *held = e->nheld;
  pthread_mutex_unlock(&e->mu);
  return j;
}
