/* An orchestrator's engine as its owner sees it: made from a store and a
 * configuration, given functions, stopped, woken, read for counters and
 * freed. The loop it runs is in loop.c, an attempt's way from claim to
 * handler in jobs.c, the templates it runs from in template_cache.c. */
#define _GNU_SOURCE /* pipe2, gethostname */
#include "engine/engine_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int tk_engine_new(const tk_engine_options *opts, tk_engine **out, tk_err *err) {
  *out = NULL;
  if (opts == NULL || opts->store == NULL || opts->config == NULL)
    return tk_err_set(err, TK_EINVAL, "engine: a store and a configuration are required");
  tk_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return tk_err_set(err, TK_ENOMEM, "engine: out of memory");
  const tk_engine_settings *s = tk_config_engine(opts->config);
  e->store = opts->store;
  e->config = opts->config;
  /* Time belongs to the store (DESIGN §2): a clock given here becomes the
   * store's, so that what the engine plans and what the store writes are
   * read from one clock. */
  if (opts->clock.now_ms) tk_store_set_clock(opts->store, opts->clock);
  e->clock = tk_store_clock(opts->store);
  e->system_clock = opts->clock.now_ms == NULL;
  tk_rand_seed(&e->rng, opts->seed ? opts->seed : tk_rand_entropy_seed());
  e->workers = opts->workers >= 0 ? opts->workers : (int)s->workers;
  e->lease_ms = s->lease_ms;
  e->heartbeat_ms = s->heartbeat_ms;
  e->claim_batch = (int)s->claim_batch;
  e->max_async = (int)s->max_async;
  if (opts->on_event) {
    e->jsonl = (tk_jsonl_sink){opts->on_event, opts->event_ud};
    tk_engine_observe(e, &tk_observer_jsonl, &e->jsonl, NULL);
  }
  e->on_log = opts->on_log;
  e->log_ud = opts->log_ud;
  if (opts->id) {
    snprintf(e->id, sizeof e->id, "%s", opts->id);
  } else {
    char host[40] = "host";
    gethostname(host, sizeof host - 1);
    tk_rand r;
    tk_rand_seed(&r, tk_rand_entropy_seed());
    snprintf(e->id, sizeof e->id, "%s-%d-%04x", host, (int)getpid(),
             (unsigned)(tk_rand_u64(&r) & 0xffff));
  }
  e->reap_at = INT64_MIN; /* nothing known yet: look at the first pass */
  e->reap_retry_at = INT64_MIN;
  e->clock_synced_ns = tk_monotonic_ns(); /* tk_store_open measured it */
  e->next_retry_at = INT64_MAX; /* none known: full passes until a claim says */
  e->ns_per_step = 20000; /* a first guess; passes measure it */
  e->claims = calloc((size_t)e->claim_batch, sizeof *e->claims);
  e->starting = calloc((size_t)e->claim_batch, sizeof *e->starting);
  e->input_ids = calloc((size_t)e->claim_batch, sizeof *e->input_ids);
  e->inputs = calloc((size_t)e->claim_batch, sizeof *e->inputs);
  e->expired = calloc(TK__REAP_BATCH, sizeof *e->expired);
  e->waited = calloc((size_t)e->claim_batch, sizeof *e->waited);
  e->wait_at = INT64_MIN; /* nothing known yet: look at the first pass */
  e->recheck_at = INT64_MAX;
  e->waits_looked_at = INT64_MIN;
  e->deadline_at = e->deadlines_looked_at = INT64_MIN; /* look at the first pass */
  e->deadline_tasks = calloc((size_t)e->claim_batch, sizeof *e->deadline_tasks);
  pthread_mutex_init(&e->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* held retries: pool.c */
  pthread_cond_init(&e->have_todo, &ca);
  pthread_condattr_destroy(&ca);
  if (e->claims == NULL || e->starting == NULL || e->input_ids == NULL || e->inputs == NULL ||
      e->expired == NULL || e->waited == NULL || e->deadline_tasks == NULL ||
      pipe2(e->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    e->wake_pipe[0] = e->wake_pipe[1] = -1;
    tk_engine_free(e);
    return tk_err_set(err, TK_ENOMEM, "engine: out of memory or file descriptors");
  }
  *out = e;
  return 0;
}

int tk_engine_register(tk_engine *e, const char *name, tk_handler_fn fn, void *ud, tk_err *err) {
  return tk__fn_register(&e->fns, name, fn, NULL, ud, err);
}

void tk_engine_free(tk_engine *e) {
  if (e == NULL) return;
  /* Driven by tk_engine_tick, workers may still be running or holding
   * attempts: stop them, and leave what did not finish to its lease. */
  e->abandon = 1;
  tk__pool_stop(e);
  /* Kinds stop what they started (abandoned like the queued attempts)
   * before the jobs and prepared steps those reference go. */
  for (int i = 0; i < e->nkind_state; i++)
    if (e->kind_state[i].kind->close && e->kind_state[i].shared)
      e->kind_state[i].kind->close(e->kind_state[i].shared);
  while (e->running) {
    job *j = e->running;
    tk__flight_remove(e, j);
    tk__job_free(j);
  }
  while (e->unrecorded) {
    job *j = e->unrecorded;
    e->unrecorded = j->next;
    tk__job_free(j);
  }
  tk__engine_templates_free(e);
  tk__fn_table_free(&e->fns);
  free(e->claims);
  free(e->starting);
  free(e->input_ids);
  free(e->inputs);
  free(e->expired);
  free(e->waited);
  free(e->deadline_tasks);
  tk__engine_finish_free(e);
  tk__batch_engine_free(e);
  tk__budgets_free(e);
  tk__engine_schedules_free(e);
  if (e->wake_pipe[0] >= 0) close(e->wake_pipe[0]);
  if (e->wake_pipe[1] >= 0) close(e->wake_pipe[1]);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->have_todo);
  free(e);
}

void tk_engine_stop(tk_engine *e) {
  e->stop = 1;
  char b = 's';
  ssize_t w = write(e->wake_pipe[1], &b, 1);
  (void)w;
}

void tk_engine_wake(tk_engine *e) {
  char b = 'w';
  ssize_t w = write(e->wake_pipe[1], &b, 1);
  (void)w;
}

tk_engine_stats tk_engine_stats_get(tk_engine *e) {
  tk_engine_stats s = {
#define LOAD(f) .f = atomic_load_explicit(&e->stats.f, memory_order_relaxed)
      LOAD(claimed), LOAD(completed), LOAD(retried), LOAD(failed), LOAD(exhausted),
      LOAD(fenced), LOAD(lease_expired), LOAD(tasks_completed), LOAD(tasks_failed),
      LOAD(retries_deferred), LOAD(retries_brought_earlier),
#undef LOAD
      .in_flight = atomic_load_explicit(&e->in_flight, memory_order_relaxed),
  };
  return s;
}
