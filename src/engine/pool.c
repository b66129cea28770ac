/* The worker pool: threads that run handlers and hand attempts back to
 * the engine thread, which alone talks to the store. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <unistd.h>

static void *worker_main(void *arg) {
  tk_engine *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (e->todo_head == NULL && !e->shutting_down) pthread_cond_wait(&e->have_todo, &e->mu);
    if (e->todo_head == NULL) break;
    job *j = e->todo_head;
    e->todo_head = j->next;
    if (e->todo_head == NULL) e->todo_tail = NULL;
    pthread_mutex_unlock(&e->mu);
    tk__engine_execute(e, j);
    pthread_mutex_lock(&e->mu);
    int was_empty = e->done_head == NULL;
    j->next = e->done_head;
    e->done_head = j;
    /* One wake byte per batch of results is enough. */
    if (was_empty) {
      char b = 'd';
      ssize_t w = write(e->wake_pipe[1], &b, 1);
      (void)w;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
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
  pthread_cond_broadcast(&e->have_todo);
  pthread_mutex_unlock(&e->mu);
  for (int i = 0; i < e->nthreads; i++) pthread_join(e->threads[i], NULL);
  free(e->threads);
  e->threads = NULL;
  e->nthreads = 0;
}

void tk__pool_submit(tk_engine *e, job *j) {
  j->next = NULL;
  pthread_mutex_lock(&e->mu);
  if (e->todo_tail) e->todo_tail->next = j;
  else e->todo_head = j;
  e->todo_tail = j;
  pthread_cond_signal(&e->have_todo);
  pthread_mutex_unlock(&e->mu);
}

job *tk__pool_take_done(tk_engine *e) {
  pthread_mutex_lock(&e->mu);
  job *j = e->done_head;
  e->done_head = NULL;
  pthread_mutex_unlock(&e->mu);
  return j;
}
