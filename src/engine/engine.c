/* The engine: one orchestrator's loop of reap, record, claim and sleep. */
#define _GNU_SOURCE /* pipe2, gethostname */
#include "engine/engine_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REAP_BATCH 64
/* The fewest steps a pass claims when a retry is near (see fresh_budget). */
#define MIN_PASS 8
/* How often the store's clock is measured against its server again. */
#define CLOCK_SYNC_NS ((int64_t)30 * 1000000000)

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
  e->clock_synced_ns = tk_monotonic_ns(); /* tk_store_open measured it */
  e->next_retry_at = INT64_MAX; /* none known: full passes until a claim says */
  e->ns_per_step = 20000; /* a first guess; passes measure it */
  e->claims = calloc((size_t)e->claim_batch, sizeof *e->claims);
  e->starting = calloc((size_t)e->claim_batch, sizeof *e->starting);
  e->input_ids = calloc((size_t)e->claim_batch, sizeof *e->input_ids);
  e->inputs = calloc((size_t)e->claim_batch, sizeof *e->inputs);
  e->expired = calloc(REAP_BATCH, sizeof *e->expired);
  pthread_mutex_init(&e->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* held retries: pool.c */
  pthread_cond_init(&e->have_todo, &ca);
  pthread_condattr_destroy(&ca);
  if (e->claims == NULL || e->starting == NULL || e->input_ids == NULL || e->inputs == NULL ||
      e->expired == NULL || pipe2(e->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
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

/* The engine's slot for kind k's engine-wide state (tk__handler_host). */
static void **kind_slot(tk_engine *e, const tk__handler_kind *k) {
  for (int i = 0; i < e->nkind_state; i++)
    if (e->kind_state[i].kind == k) return &e->kind_state[i].shared;
  /* registry.c asserts that the kinds fit. */
  e->kind_state[e->nkind_state].kind = k;
  e->kind_state[e->nkind_state].shared = NULL;
  return &e->kind_state[e->nkind_state++].shared;
}

const template_entry *tk__engine_template(tk_engine *e, int64_t id, tk_err *err) {
  for (int i = 0; i < e->ntemplates; i++)
    if (e->templates[i].id == id) return &e->templates[i];
  tk__template_rec row;
  if (e->store->ops->template_get_by_id(e->store, id, &row, err) != 0) return NULL;
  json_t *definition = json_loads(row.definition, 0, NULL);
  tk__template_rec_free(&row);
  template_entry *t = definition ? realloc(e->templates, ((size_t)e->ntemplates + 1) * sizeof *t)
                                 : NULL;
  if (t == NULL) {
    json_decref(definition);
    tk_err_set(err, TK_ENOMEM, "out of memory loading template %lld", (long long)id);
    return NULL;
  }
  e->templates = t;
  template_entry *te = &t[e->ntemplates];
  te->id = id;
  te->definition = definition;
  json_t *steps = json_object_get(te->definition, "steps");
  te->nsteps = (int)json_array_size(steps);
  te->steps = calloc((size_t)te->nsteps + 1, sizeof *te->steps);
  if (te->steps == NULL) {
    json_decref(te->definition);
    tk_err_set(err, TK_ENOMEM, "out of memory loading template %lld", (long long)id);
    return NULL;
  }
  for (int k = 0; k < te->nsteps; k++) {
    json_t *st = json_array_get(steps, (size_t)k);
    step_def *d = &te->steps[k];
    d->name = json_string_value(json_object_get(st, "name"));
    d->spec = json_object_get(st, "handler");
    d->kind = tk__handler_kind_of(d->spec);
    tk__handler_host host = {&e->fns, kind_slot(e, d->kind)};
    d->prepared = d->kind->prepare ? d->kind->prepare(&host, d->spec) : NULL;
    d->spec_text = json_dumps(d->spec, JSON_COMPACT);
    json_t *t_ms = json_object_get(d->spec, "timeout_ms");
    d->timeout_ms = json_is_integer(t_ms) ? json_integer_value(t_ms) : 0;
    d->batch = json_object_get(st, "batch");
    d->budget = tk__step_budget(te->definition, st);
  }
  e->ntemplates++;
  return te;
}

/* The attempt ends when its handler returns (or, started asynchronously,
 * calls back), not when the engine thread gets round to recording it: a
 * retry's delay counts from then. */
static void attempt_ended(tk_engine *e, job *j) {
  j->run_ns = tk_monotonic_ns() - j->start_ns;
  j->finished_at = tk_clock_now(&e->clock);
}

/* An asynchronous attempt's end (tk__handler_done), on the handler's
 * thread: back to the engine thread as a worker's result would go. */
static void async_done(void *ud) {
  job *j = ud;
  tk_engine *e = j->engine;
  attempt_ended(e, j);
  tk__pool_done(e, j);
}

int tk__engine_execute(tk_engine *e, job *j) {
  memset(&j->result, 0, sizeof j->result);
  j->result.retry_after_ms = -1;
  j->start_ns = tk_monotonic_ns();
  int64_t now = tk_clock_now(&e->clock);
  j->started_at = now;
  j->call = (tk_handler_call){
      .task_id = j->claim.task_id,
      .step = j->def->name,
      .attempt = j->claim.attempt,
      .max_attempts = j->claim.max_attempts,
      .input = j->input,
      .spec = j->def->spec_text,
      .deadline_ms = j->def->timeout_ms > 0 ? now + j->def->timeout_ms : 0,
  };
  j->hstep = (tk__handler_step){j->def->spec, j->def->prepared, &e->clock};
  if (j->async) {
    j->def->kind->start(&j->hstep, &j->call, &j->result, async_done, j);
    return 1; /* j belongs to its end now */
  }
  if (j->def->batch != NULL) tk__batch_run(j, &j->call);
  else j->def->kind->run(&j->hstep, &j->call, &j->result);
  attempt_ended(e, j);
  return 0;
}

static void flight_add(tk_engine *e, job *j) {
  j->flight_prev = NULL;
  j->flight_next = e->running;
  if (e->running) e->running->flight_prev = j;
  e->running = j;
  e->in_flight++;
  e->async_in_flight += j->async;
  if (j->next_heartbeat < e->heartbeat_due) e->heartbeat_due = j->next_heartbeat;
}

static void flight_remove(tk_engine *e, job *j) {
  if (j->flight_prev) j->flight_prev->flight_next = j->flight_next;
  else e->running = j->flight_next;
  if (j->flight_next) j->flight_next->flight_prev = j->flight_prev;
  e->in_flight--;
  e->async_in_flight -= j->async;
}

static const char *job_outcome(const job *j) {
  return j->result.status == TK_HANDLER_SUCCESS ? "success"
         : j->result.timed_out                 ? "timeout"
                                               : "failure";
}

static void free_job(job *j) {
  tk__batch_free(j->batch);
  free(j->result.results);
  free(j->input);
  free(j);
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
    flight_remove(e, j);
    free_job(j);
  }
  while (e->unrecorded) {
    job *j = e->unrecorded;
    e->unrecorded = j->next;
    free_job(j);
  }
  for (int i = 0; i < e->ntemplates; i++) {
    for (int k = 0; k < e->templates[i].nsteps; k++) {
      step_def *d = &e->templates[i].steps[k];
      if (d->kind->release) d->kind->release(d->prepared);
      free(d->spec_text);
    }
    json_decref(e->templates[i].definition);
    free(e->templates[i].steps);
  }
  free(e->templates);
  tk__fn_table_free(&e->fns);
  free(e->claims);
  free(e->starting);
  free(e->input_ids);
  free(e->inputs);
  free(e->expired);
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

/* Record a list of finished jobs (linked by `next`) and free them; with
 * `next`, claim in the same transaction. Returns how many were recorded.
 * When the store's connection is lost, nothing is recorded: the jobs wait
 * in e->unrecorded for the reconnection, and e->disconnected says why. */
static int complete_jobs(tk_engine *e, job *list, tk__claim_request *next) {
  int n = 0, nsync = 0;
  double run_ns = 0;
  /* How long workers are held: an asynchronous attempt holds none. */
  for (job *j = list; j; j = j->next, n++)
    if (!j->async) run_ns += (double)j->run_ns, nsync++;
  if (next) next->n = 0;
  if (n == 0) return 0;
  if (nsync > 0) {
    run_ns /= nsync;
    e->ns_per_handler = e->ns_per_handler > 0 ? (7 * e->ns_per_handler + run_ns) / 8 : run_ns;
  }
  tk__finish *items = calloc((size_t)n, sizeof *items);
  int i = 0;
  for (job *j = list; j && items; j = j->next, i++)
    items[i] = (tk__finish){&j->claim,  j->def->name, e->id,        job_outcome(j),
                            &j->result, j->batch,     j->started_at, j->finished_at, 0,
                            j->run_ns,  j->def->budget};
  int rc = 0;
  if (items) rc = tk__engine_finish(e, items, n, next, &e->disconnected);
  else tk__engine_log(e, TK_LOG_ERROR, "out of memory recording %d outcomes", n);
  free(items);
  if (rc == TK_EDISCONNECTED) {
    job **end = &list;
    while (*end) end = &(*end)->next;
    *end = e->unrecorded;
    e->unrecorded = list;
    return 0;
  }
  while (list) {
    job *following = list->next;
    free_job(list);
    list = following;
  }
  return n;
}

/* The jobs the workers finished, off the in-flight list. Batch writes
 * that workers wait for between calls go first. */
static job *take_finished(tk_engine *e) {
  tk__batch_flush(e);
  /* Outcomes a lost connection kept from the store go first. */
  job *list = e->unrecorded;
  e->unrecorded = NULL;
  if (e->workers == 0) return list;
  job *done = tk__pool_take_done(e, &e->held_seen);
  for (job *j = done; j; j = j->next) flight_remove(e, j);
  if (list == NULL) return done;
  job *end = list;
  while (end->next) end = end->next;
  end->next = done;
  return list;
}

/* Turn expired leases into lease_expired failures (DESIGN §4). */
static int reap(tk_engine *e, int64_t now, tk_err *err) {
  int n = 0;
  int rc = e->store->ops->expired(e->store, now, REAP_BATCH, e->expired, &n, err);
  if (rc) return rc;
  tk_handler_result *results = calloc((size_t)n + 1, sizeof *results);
  tk__finish *items = calloc((size_t)n + 1, sizeof *items);
  if (!results || !items) {
    free(results);
    free(items);
    return tk_err_set(err, TK_ENOMEM, "out of memory reaping %d leases", n);
  }
  for (int i = 0; i < n; i++) {
    tk__expired *x = &e->expired[i];
    const template_entry *t = tk__engine_template(e, x->step.template_id, err);
    const step_def *d = t && x->step.idx < t->nsteps ? &t->steps[x->step.idx] : NULL;
    results[i] = (tk_handler_result){.status = TK_HANDLER_RETRY, .retry_after_ms = -1};
    snprintf(results[i].error, sizeof results[i].error,
             "lease held by %s expired (the orchestrator stopped or hung)", x->owner);
    items[i] = (tk__finish){&x->step, d ? d->name : "?", x->owner, "lease_expired",
                            &results[i], .reaped = 1, .budget = d ? d->budget : NULL};
  }
  tk_err lost;
  int frc = tk__engine_finish(e, items, n, NULL, &lost);
  free(results);
  free(items);
  if (frc && err) *err = lost;
  return frc;
}

/* Attempts queued or running at once: one per worker, and as many more
 * as the workers finish while the engine thread makes one pass (records
 * and claims), so that no worker waits for the engine. A claimed step that
 * waits holds its lease: other orchestrators cannot take it, and if this
 * process dies it costs an attempt although it never ran. So with slow
 * handlers hardly more than the workers are held; with quick ones up to two
 * batches wait, and passes record and claim full batches (about a tenth
 * less CPU per step with noop handlers than half-full ones). Before any
 * handler has been timed, two per worker. */
static int max_in_flight(const tk_engine *e) {
  if (e->workers == 0) return e->claim_batch;
  if (e->ns_per_handler <= 0) return e->workers * 2;
  /* Handler calls the workers finish during one full pass. */
  double during_pass = e->workers * (double)e->claim_batch * e->ns_per_step / e->ns_per_handler;
  double most = 2.0 * e->claim_batch;
  return e->workers + 1 + (during_pass >= most ? (int)most : (int)during_pass);
}

/* How many more attempts this engine takes on now. Retries claimed ahead
 * and waiting for their run_at hold no worker: up to as many again may
 * wait, or a burst of them coming due would fill every slot early and
 * leave the next ones to be claimed late.
 *
 * Attempts started asynchronously (kind->start: an HTTP request) hold no
 * worker either and have room of their own, engine.max_async. A claim
 * cannot choose its kinds, so it takes as many as the room of each allows
 * in the proportion recent claims had: L steps with a share s that start
 * async fill L(1-s) worker slots and Ls async ones. All-HTTP work thus
 * ramps up to max_async in flight, all-command work stays at the workers'
 * bound, and a mix moves between the two as it is seen. */
static int capacity(const tk_engine *e) {
  if (e->workers == 0) return e->claim_batch;
  int most = max_in_flight(e);
  int held = e->held_seen < most ? e->held_seen : most;
  int cap = most + held - (e->in_flight - e->async_in_flight);
  /* The bound moves with the handlers' measured time: more may be in
   * flight than it now allows, and then nothing more is taken. */
  if (cap < 0) cap = 0;
  double s = e->async_share;
  if (s > 0) {
    int room = e->max_async - e->async_in_flight;
    double by_async = room > 0 ? room / s : 0;
    double by_sync = s < 1 ? cap / (1 - s) : by_async;
    double both = by_async < by_sync ? by_async : by_sync;
    cap = both >= e->claim_batch ? e->claim_batch : (int)both;
  }
  return cap > e->claim_batch ? e->claim_batch : cap;
}

/* A job for claim c, or NULL (logged) when the step cannot start: a step
 * that cannot start is left to its lease, and the reaper retries it. */
static job *new_job(tk_engine *e, const tk__claimed *c, int64_t now) {
  tk_err err;
  const template_entry *t = tk__engine_template(e, c->template_id, &err);
  if (t == NULL || c->idx >= t->nsteps) {
    tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: %s", (long long)c->step_id,
                   t ? "its index is past the template's steps" : err.msg);
    return NULL;
  }
  job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: out of memory",
                   (long long)c->step_id);
    return NULL;
  }
  j->claim = *c;
  j->def = &t->steps[c->idx];
  j->engine = e;
  /* Inline (no workers) every attempt runs to its end on this thread. */
  j->async = e->workers > 0 && e->max_async > 0 && j->def->kind->start != NULL &&
             j->def->batch == NULL;
  j->next_heartbeat = now + e->heartbeat_ms;
  if (strcmp(c->prev_state, TK__STEP_WAITING) == 0) j->not_before = c->run_at;
  if (j->def->batch != NULL) tk__batch_prepare(e, j);
  return j;
}

/* Read the inputs of the jobs whose handlers take one (kind->takes_input)
 * in one store call; a job whose input cannot be read is freed and its
 * slot set to NULL: it is not started blind. */
static void read_inputs(tk_engine *e, job **jobs, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (jobs[i] && jobs[i]->def->kind->takes_input) e->input_ids[m++] = jobs[i]->claim.step_id;
  if (m == 0) return;
  tk_err err;
  int ok = e->store->ops->inputs(e->store, e->input_ids, m, e->inputs, &err) == 0;
  /* inputs[] is in the order of input_ids[], which is the order of jobs[]. */
  for (int k = 0, i = 0; i < n; i++) {
    job *j = jobs[i];
    if (j == NULL || !j->def->kind->takes_input) continue;
    json_t *input = ok ? e->inputs[k++] : NULL;
    if (input != NULL) j->input = json_dumps(input, JSON_COMPACT);
    json_decref(input);
    if (j->input == NULL) {
      tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: its input: %s",
                     (long long)j->claim.step_id, ok ? "out of memory" : err.msg);
      free_job(j);
      jobs[i] = NULL;
    }
  }
}

/* Start the n attempts claimed into e->claims: hand them to the workers,
 * or run them here when there are none (returned in *inline_done). */
static void start_claimed(tk_engine *e, int n, int64_t now, int64_t claim_us, job **inline_done) {
  job *queued = NULL, **queued_end = &queued; /* for the workers, in claim order */
  *inline_done = NULL;
  e->stats.claimed += n;
  job **jobs = e->starting;
  int nasync = 0;
  for (int i = 0; i < n; i++) {
    jobs[i] = new_job(e, &e->claims[i], now);
    nasync += jobs[i] && jobs[i]->async;
  }
  if (n > 0 && e->workers > 0)
    e->async_share = e->async_share / 2 + (double)nasync / n / 2;
  read_inputs(e, jobs, n);
  for (int i = 0; i < n; i++) {
    job *j = jobs[i];
    if (j == NULL) continue;
    const tk__claimed *c = &j->claim;
    if (tk__engine_wants(e, TK_EV_STEP_CLAIMED)) {
      tk_event ev = {.type = TK_EV_STEP_CLAIMED, .at = now, .task = c->task_id,
                     .step = j->def->name, .attempt = c->attempt, .has_late_ms = 1,
                     .late_ms = now - c->run_at};
      ev.u.claimed.max_attempts = c->max_attempts;
      ev.u.claimed.claim_us = claim_us;
      tk__engine_emit(e, &ev);
    }
    if (e->workers > 0) {
      flight_add(e, j);
      /* Started here, at once: it holds no worker. A retry claimed ahead
       * of its run_at waits among the workers' held ones, which start it
       * on time. */
      if (j->async && j->not_before <= now) {
        tk__engine_execute(e, j);
        continue;
      }
      j->next = NULL;
      *queued_end = j;
      queued_end = &j->next;
    } else {
      tk__engine_execute(e, j);
      j->next = *inline_done;
      *inline_done = j;
    }
  }
  if (queued != NULL) tk__pool_submit(e, queued);
}

/* Rounds of record-then-claim a pass of tk_engine_run makes when handlers
 * run inline, so that reaping and due times are looked at between bursts.
 * tk_engine_tick makes one, so tests can watch each claim. */
#define INLINE_ROUNDS 16

/* Steps a pass claims at most that are not retries. A pass holds up the
 * claim of a retry that comes due while it runs (the next pass takes it),
 * so when one is near, passes shrink to end before it: the retry starts on
 * time, and throughput is only given up while retries are due. The next
 * pass records what this one claims, hence the 2. */
static int fresh_budget(const tk_engine *e, int64_t now, int limit) {
  if (e->next_retry_at == INT64_MAX) return limit;
  double steps = ((double)e->next_retry_at - (double)now) * 1e6 / (2 * e->ns_per_step);
  if (steps >= limit) return limit;
  return steps < MIN_PASS ? MIN_PASS : (int)steps;
}

/* How far ahead of its run_at this engine claims a retry: about four full
 * passes, so that a retry that comes due while a pass runs is claimed
 * already and waits among the workers for its time (pool.c). Only with
 * workers, which do the waiting, and the system clock, which their timed
 * waits count in; never more than a quarter of the lease. */
static int64_t retry_ahead_ms(const tk_engine *e) {
  if (e->workers == 0 || !e->system_clock) return 0;
  int64_t ms = (int64_t)(8.0 * e->claim_batch * e->ns_per_step / 1e6) + 1;
  return ms < e->lease_ms / 4 ? ms : e->lease_ms / 4;
}

/* Record what finished and claim what is ready, in one transaction each
 * round: a finished step's released children start without another
 * commit. With workers, one round; inline, up to `rounds` while claims
 * find work. */
static int record_and_claim(tk_engine *e, int rounds, int *claimed, tk_err *err) {
  job *done = take_finished(e);
  *claimed = 0;
  for (int round = 0; round < rounds; round++) {
    int64_t now = tk_clock_now(&e->clock);
    int limit = capacity(e), recorded = 0;
    tk__claim_request next = {.owner = e->id, .lease_ms = e->lease_ms, .limit = limit,
                              .fresh_limit = fresh_budget(e, now, limit),
                              .retry_ahead_ms = retry_ahead_ms(e), .out = e->claims,
                              .next_retry_at = INT64_MIN};
    int64_t t0 = tk_monotonic_ns();
    if (done != NULL) {
      recorded = complete_jobs(e, done, &next);
      done = NULL; /* recorded and freed, or kept in e->unrecorded */
      if (e->unrecorded != NULL) break;
    } else if (limit > 0) {
      int rc = e->store->ops->record(e->store, NULL, 0, NULL, NULL, &next, err);
      if (rc) return rc;
    } else {
      break; /* nothing to record, no room to claim */
    }
    now = next.now;
    e->next_retry_at = next.next_retry_at;
    int64_t took = tk_monotonic_ns() - t0;
    if (recorded + next.n >= MIN_PASS)
      e->ns_per_step = (7 * e->ns_per_step + (double)took / (recorded + next.n)) / 8;
    *claimed += next.n;
    start_claimed(e, next.n, now, took / 1000, &done);
    if (done == NULL) break;
  }
  /* Inline work left over from the last round is recorded now. */
  complete_jobs(e, done, NULL);
  if (e->unrecorded != NULL) {
    if (err) *err = e->disconnected;
    return TK_EDISCONNECTED;
  }
  return 0;
}

/* Extend the leases of attempts still running. */
static void heartbeat(tk_engine *e, int64_t now, int64_t *next) {
  /* No lease is due before the earliest heartbeat known: skip the walk. */
  if (now < e->heartbeat_due) {
    if (e->heartbeat_due < *next) *next = e->heartbeat_due;
    return;
  }
  e->heartbeat_due = INT64_MAX;
  for (job *j = e->running; j; j = j->flight_next) {
    if (j->next_heartbeat <= now) {
      tk_err err;
      int rc = e->store->ops->heartbeat(e->store, j->claim.step_id, j->claim.claim_id,
                                        now + e->lease_ms, &err);
      if (rc) tk__engine_log(e, TK_LOG_WARN, "heartbeat: %s", err.msg);
      j->next_heartbeat = now + e->heartbeat_ms;
    }
    if (j->next_heartbeat < e->heartbeat_due) e->heartbeat_due = j->next_heartbeat;
  }
  if (e->heartbeat_due < *next) *next = e->heartbeat_due;
}

/* One pass of the engine (see tk_engine_tick) with up to `rounds` rounds
 * of record-and-claim. */
static int pass(tk_engine *e, int rounds, int64_t *next_due, tk_err *err) {
  if (e->workers > 0 && e->nthreads == 0) {
    int rc = tk__pool_start(e, err);
    if (rc) return rc;
  }
  int rc;
  /* A clock corrected to a server's drifts with this machine's oscillator
   * (parts per million): measure again now and then. */
  int64_t mono = tk_monotonic_ns();
  if (mono - e->clock_synced_ns > CLOCK_SYNC_NS) {
    tk_err serr;
    if (tk_store_clock_sync(e->store, &serr) != 0)
      tk__engine_log(e, TK_LOG_WARN, "clock: %s", serr.msg);
    e->clock_synced_ns = mono;
  }
  int64_t now = tk_clock_now(&e->clock);
  /* Slots fired now are claimed by this same pass. */
  int64_t schedule_at = tk__engine_schedules(e, now);
  /* Renew our own leases before looking for expired ones: an engine thread
   * that stalled past its leases (a frozen VM, a swapped-out process) must
   * not reap attempts its own workers are still running. */
  int64_t unused = INT64_MAX;
  heartbeat(e, now, &unused);
  /* Reap only when a known lease has run out; reaping refreshes what is
   * known. Our own claims below bring reap_at forward to their expiry, so
   * even a busy engine looks at every lease at least once a lease period. */
  if (now >= e->reap_at) {
    if ((rc = reap(e, now, err))) return rc;
    if ((rc = e->store->ops->next_due(e->store, NULL, &e->reap_at, err))) return rc;
  }
  tk__budgets_bring_earlier(e, now);
  int claimed = 0;
  if ((rc = record_and_claim(e, rounds, &claimed, err))) return rc;
  now = tk_clock_now(&e->clock);
  if (claimed > 0 && now + e->lease_ms < e->reap_at) e->reap_at = now + e->lease_ms;
  /* After the claims: pruning never holds up ready work. */
  int64_t retention_at = tk__engine_retention(e, now);
  if (next_due == NULL) return 0;
  int64_t due = now; /* a claim that found work may have left more behind */
  if (claimed == 0) {
    int64_t ready;
    if ((rc = e->store->ops->next_due(e->store, &ready, &e->reap_at, err))) return rc;
    due = ready < e->reap_at ? ready : e->reap_at;
  }
  heartbeat(e, tk_clock_now(&e->clock), &due);
  *next_due = due < schedule_at ? due : schedule_at;
  if (retention_at < *next_due) *next_due = retention_at;
  return 0;
}

int tk_engine_tick(tk_engine *e, int64_t *next_due, tk_err *err) {
  return pass(e, 1, next_due, err);
}

void tk__engine_wait(tk_engine *e, int64_t ms, int watch_store) {
  if (ms <= 0) return;
  struct pollfd p[2] = {{.fd = e->wake_pipe[0], .events = POLLIN},
                        {.fd = watch_store ? e->store->ops->change_fd(e->store) : -1,
                         .events = POLLIN}};
  int r = poll(p, p[1].fd >= 0 ? 2 : 1, ms > 3600000 ? 3600000 : (int)ms);
  if (r > 0 && p[1].fd >= 0 && p[1].revents) e->store_changed = 1;
  if (r > 0 && p[0].revents) {
    char buf[256];
    while (read(e->wake_pipe[0], buf, sizeof buf) > 0) {
    }
  }
}

/* Sleep until `due` (engine clock), until something writes the wake pipe
 * (a worker's result, wake, stop), or until another process changes the
 * store. */
static void wait_until(tk_engine *e, int64_t due) {
  tk__engine_wait(e, due - tk_clock_now(&e->clock), 1);
}

int tk_engine_run(tk_engine *e, int until_idle, tk_err *err) {
  int rc = 0;
  while (!e->stop) {
    int64_t due;
    /* Forget change notices before looking: what this pass reads covers
     * them, and only changes made after it should wake the sleep. */
    e->store->ops->drain_changes(e->store);
    rc = pass(e, INLINE_ROUNDS, &due, err);
    if (rc == 0 && until_idle && e->in_flight == 0 && e->unrecorded == NULL) {
      int work = 0;
      if ((rc = e->store->ops->has_work(e->store, &work, err)) == 0 && !work) break;
    }
    if (rc == TK_EDISCONNECTED) {
      /* Handlers go on running meanwhile; their outcomes wait. */
      if ((rc = tk__engine_reconnect(e, err)) != 0) break;
      continue;
    }
    if (rc) break;
    /* With every worker busy, new ready steps must wait for a result. */
    if (e->workers > 0 && capacity(e) <= 0) {
      int64_t hb = INT64_MAX;
      heartbeat(e, tk_clock_now(&e->clock), &hb);
      due = hb;
    }
    wait_until(e, due);
  }
  /* Finish what is running, so no attempt is left to the reaper (unless
   * the store cannot be reached: then the leases run out). */
  while (e->in_flight > 0 && rc != TK_EDISCONNECTED) {
    wait_until(e, tk_clock_now(&e->clock) + 1000);
    complete_jobs(e, take_finished(e), NULL);
    if (e->unrecorded != NULL && tk__engine_reconnect(e, NULL) != 0) break;
  }
  if (e->unrecorded != NULL) complete_jobs(e, take_finished(e), NULL);
  if (e->unrecorded != NULL)
    tk__engine_log(e, TK_LOG_ERROR, "stopping with outcomes not recorded: %s; their leases "
                                    "will expire and the steps be retried",
                   e->disconnected.msg);
  tk__pool_stop(e);
  return rc;
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
