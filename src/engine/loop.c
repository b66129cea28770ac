/* The engine's loop: each pass reaps expired leases, records what
 * finished and claims what is ready in one transaction, renews leases,
 * and sleeps until the next due time or a change. */
#include "engine/engine_internal.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The fewest steps a pass claims when a retry is near (see fresh_budget). */
#define MIN_PASS 8
/* How often the store's clock is measured against its server again. */
#define CLOCK_SYNC_NS ((int64_t)30 * 1000000000)

static const char *job_outcome(const job *j) {
  return j->result.status == TK_HANDLER_SUCCESS ? "success"
         : j->result.timed_out                 ? "timeout"
                                               : "failure";
}

/* Record a list of finished jobs (linked by `next`) and free them; with
 * `next`, claim in the same transaction. Returns how many were recorded.
 * When the store's connection is lost, nothing is recorded: the jobs wait
 * in e->unrecorded for the reconnection, and e->disconnected says why. */
static int complete_jobs(tk_engine *e, job *list, tk__claim_request *next) {
  int n = 0, nsync = 0;
  list = tk__engine_callbacks_park(e, list);
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
    items[i] = (tk__finish){&j->claim,  j->name,      e->id,        job_outcome(j),
                            &j->result, j->batch,     j->started_at, j->finished_at, 0,
                            j->run_ns,  j->def->budget, j->def->decision};
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
    tk__job_free(list);
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
  for (job *j = done; j; j = j->next) tk__flight_remove(e, j);
  if (list == NULL) return done;
  job *end = list;
  while (end->next) end = end->next;
  end->next = done;
  return list;
}

/* Reap only when a known lease has run out; reaping refreshes what is
 * known. The engine's own claims bring reap_at forward to their expiry
 * (tk__engine_claimed_leases), so even a busy engine looks at every lease
 * at least once a lease period. */
int tk__engine_reap_due(tk_engine *e, int64_t now, tk_err *err) {
  if (now < e->reap_at || now < e->reap_retry_at) return 0;
  int rc = tk__engine_reap(e, now, err);
  if (rc) return rc;
  if (e->fin_unrecorded > 0) {
    int64_t b = e->reap_backoff_ms > 0 ? 2 * e->reap_backoff_ms : 1000;
    e->reap_backoff_ms = b < e->lease_ms ? b : e->lease_ms;
    e->reap_retry_at = now + e->reap_backoff_ms;
  } else {
    e->reap_backoff_ms = 0;
  }
  return e->store->ops->next_due(e->store, NULL, &e->reap_at, err);
}

/* When the reaper looks next: at the earliest known expiry, but not
 * before a backoff after a refused reap. */
static int64_t next_reap(const tk_engine *e) {
  return e->reap_at > e->reap_retry_at ? e->reap_at : e->reap_retry_at;
}

void tk__engine_claimed_leases(tk_engine *e, int64_t now) {
  if (now + e->lease_ms < e->reap_at) e->reap_at = now + e->lease_ms;
}

/* Turn expired leases into lease_expired failures (DESIGN §4); an
 * expired claim that a wait had delivered its signal to (its owner took
 * the wait and stopped before recording) ends with the signal's outcome
 * instead, so that a callback or a child's end is applied, once, and
 * never costs a retry that would start the work again. */
int tk__engine_reap(tk_engine *e, int64_t now, tk_err *err) {
  int n = 0;
  int rc = e->store->ops->expired(e->store, now, TK__REAP_BATCH, e->expired, &n, err);
  if (rc) return rc;
  tk_handler_result *results = calloc((size_t)n + 1, sizeof *results);
  tk__finish *items = calloc((size_t)n + 1, sizeof *items);
  char(*names)[TK__STEP_NAME_MAX] = calloc((size_t)n + 1, sizeof *names);
  if (!results || !items || !names) {
    free(results);
    free(items);
    free(names);
    tk__expired_free_signals(e->expired, n);
    return tk_err_set(err, TK_ENOMEM, "out of memory reaping %d leases", n);
  }
  for (int i = 0; i < n; i++) {
    tk__expired *x = &e->expired[i];
    const template_entry *t = tk__engine_template(e, x->step.template_id, err);
    const step_def *d = t && x->step.idx < t->nsteps ? &t->steps[x->step.idx] : NULL;
    const char *name = tk__claim_step_name(&x->step, d ? d->name : "?", names[i], sizeof names[i]);
    if (x->sig.id > 0 && tk__engine_signal_result(&x->sig, &results[i]) == 0) {
      items[i] = (tk__finish){&x->step, name, x->owner,
                              results[i].status == TK_HANDLER_SUCCESS ? "success" : "failure",
                              &results[i], .reaped = TK__REAPED_SIGNAL,
                              .budget = d ? d->budget : NULL, .decision = d ? d->decision : NULL};
      tk__engine_log(e, TK_LOG_INFO, "task %lld step %s attempt %d: %s stopped before recording "
                     "the %s its wait took; recorded for it",
                     (long long)x->step.task_id, name, x->step.attempt, x->owner,
                     x->sig.callback ? "callback" : x->sig.child_end ? "child task's end" : "signal");
      continue;
    }
    /* Memory ran out copying a signal's data: the lease's failure. */
    results[i] = (tk_handler_result){.status = TK_HANDLER_RETRY, .retry_after_ms = -1};
    snprintf(results[i].error, sizeof results[i].error,
             "lease held by %s expired (its holder stopped or hung)", x->owner);
    items[i] = (tk__finish){&x->step, name, x->owner, "lease_expired",
                            &results[i], .reaped = TK__REAPED_LEASE, .budget = d ? d->budget : NULL};
  }
  tk_err lost;
  int frc = tk__engine_finish(e, items, n, NULL, &lost);
  for (int i = 0; i < n; i++) free(results[i].results);
  tk__expired_free_signals(e->expired, n);
  free(results);
  free(items);
  free(names);
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
                              .next_retry_at = INT64_MIN, .want_inputs = 1,
                              .no_input = e->no_input, .nno_input = e->nno_input};
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
    tk__engine_start_claimed(e, next.n, now, took / 1000, &done);
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
      /* A lease another claim holds now never comes back: said once, not
       * renewed again while the handler runs on (its outcome is refused). */
      j->next_heartbeat = rc == TK_EFENCED ? INT64_MAX : now + e->heartbeat_ms;
    }
    if (j->next_heartbeat < e->heartbeat_due) e->heartbeat_due = j->next_heartbeat;
  }
  if (e->heartbeat_due < *next) *next = e->heartbeat_due;
}

/* One pass of the engine (see tk_engine_tick) with up to `rounds` rounds
 * of record-and-claim; *claimed (may be NULL): how many steps it claimed,
 * or with none, -1 when the store's next_due said steps an orchestrator
 * runs are ready (a claim's SKIP LOCKED passed them over, or they became
 * ready after it). */
static int pass(tk_engine *e, int rounds, int64_t *next_due, int *claimed_out, tk_err *err) {
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
  if ((rc = tk__engine_reap_due(e, now, err))) return rc;
  /* Waits that a signal or their timeout ended, recorded before the
   * claim (a retry of one is then claimed by it). */
  job *waited = NULL;
  if ((rc = tk__engine_deadlines(e, now, err))) return rc;
  if ((rc = tk__engine_waits(e, now, &waited, err))) return rc;
  complete_jobs(e, waited, NULL);
  tk__budgets_bring_earlier(e, now);
  int claimed = 0;
  if ((rc = record_and_claim(e, rounds, &claimed, err))) return rc;
  if (claimed_out) *claimed_out = claimed;
  now = tk_clock_now(&e->clock);
  if (claimed > 0) tk__engine_claimed_leases(e, now);
  /* After the claims: pruning never holds up ready work. */
  int64_t retention_at = tk__engine_retention(e, now);
  if (next_due == NULL) return 0;
  int64_t due = now; /* a claim that found work may have left more behind */
  if (claimed == 0) {
    int64_t ready;
    if ((rc = e->store->ops->next_due(e->store, &ready, &e->reap_at, err))) return rc;
    due = ready < next_reap(e) ? ready : next_reap(e);
    /* ready may be a deadline's (next_due counts them). */
    tk__engine_deadline_hint(e, ready);
    if (claimed_out && ready <= now) *claimed_out = -1;
  }
  heartbeat(e, tk_clock_now(&e->clock), &due);
  *next_due = due < schedule_at ? due : schedule_at;
  if (retention_at < *next_due) *next_due = retention_at;
  if (e->wait_at < *next_due) *next_due = e->wait_at < now ? now : e->wait_at;
  if (e->deadline_at < *next_due) *next_due = e->deadline_at < now ? now : e->deadline_at;
  return 0;
}

int tk_engine_tick(tk_engine *e, int64_t *next_due, tk_err *err) {
  return pass(e, 1, next_due, NULL, err);
}

int tk__engine_wait(tk_engine *e, int64_t ms, int watch_store) {
  if (ms <= 0) return 0;
  struct pollfd p[2] = {{.fd = e->wake_pipe[0], .events = POLLIN},
                        {.fd = watch_store ? e->store->ops->change_fd(e->store) : -1,
                         .events = POLLIN}};
  int r = poll(p, p[1].fd >= 0 ? 2 : 1, ms > 3600000 ? 3600000 : (int)ms);
  if (r > 0 && p[1].fd >= 0 && p[1].revents) e->store_changed = e->waits_changed = 1;
  if (r > 0 && p[0].revents) {
    char buf[256];
    while (read(e->wake_pipe[0], buf, sizeof buf) > 0) {
    }
  }
  return r > 0;
}

/* Sleep until `due` (engine clock), until something writes the wake pipe
 * (a worker's result, wake, stop), or until another process changes the
 * store. */
static void wait_until(tk_engine *e, int64_t due) {
  tk__engine_wait(e, due - tk_clock_now(&e->clock), 1);
}

static int drain(tk_engine *e);

/* wait_until due, draining the store's changes again at each recheck_at
 * on the way (drain): a pass follows only when something woke the sleep,
 * due came, or the drain found a signal. */
static void wait_rechecking(tk_engine *e, int64_t due) {
  while (e->recheck_at < due) {
    if (tk__engine_wait(e, e->recheck_at - tk_clock_now(&e->clock), 1)) return;
    if (drain(e) & TK__CHANGED_WAITS) {
      e->wait_news = 1;
      return;
    }
  }
  wait_until(e, due);
}

/* Whether the store's steps in progress are all in worker queues, which
 * hold worker_busy of them: only then the store's count is read (status
 * counts every step by state; a case of outside workers at work). */
static int busy_only_workers(tk_engine *e, int64_t worker_busy, int *yes, tk_err *err) {
  *yes = 0;
  if (e->reap_at == INT64_MAX) { /* next_due saw no lease: none in progress */
    *yes = 1;
    return 0;
  }
  if (worker_busy == 0 || e->reap_at == INT64_MIN) return 0;
  tk__status_report st;
  int rc = e->store->ops->status(e->store, tk_clock_now(&e->clock), &st, err);
  if (rc) return rc;
  int64_t busy = 0;
  for (int i = 0; i < st.nsteps; i++)
    if (strcmp(st.steps[i].state, TK__STEP_IN_PROGRESS) == 0) busy = st.steps[i].n;
  *yes = busy <= worker_busy;
  return 0;
}

/* The store's change notices drained (drain_changes); when it is unsure
 * whether a commit it saw begin stored a signal, the engine's sleep ends
 * TK__CHANGED_RECHECK_MS later to drain again (recheck_at). */
static int drain(tk_engine *e) {
  int ch = e->store->ops->drain_changes(e->store);
  e->recheck_at = ch & TK__CHANGED_UNSURE ? tk_clock_now(&e->clock) + TK__CHANGED_RECHECK_MS
                                          : INT64_MAX;
  return ch;
}

/* Whether `run --until-idle` is done, after a pass that claimed `claimed`
 * steps with nothing of this engine's running or unrecorded: no step an
 * orchestrator runs is ready, in progress or waiting for a retry. Steps
 * of worker queues (handler kind "worker", run by outside workers through
 * tasker serve) are work no orchestrator can do, and do not hold it: with
 * no worker attached it would wait for them forever. The store's has_work
 * counts both kinds; when it says work is left, that work is the
 * orchestrators' if this pass claimed some or saw some ready (claimed -1,
 * pass), if its claim saw a retry of
 * theirs waiting (next_retry_at, INT64_MIN: unknown), if a queue no worker
 * step names has steps ready (held back by its limits) or in progress, or
 * if steps other than the worker queues' are in progress (another
 * orchestrator's). A queue named by both kinds of step counts as a worker
 * queue. Delayed starts are not waited for, as before (has_work). */
static int idle_now(tk_engine *e, int claimed, int *idle, tk_err *err) {
  int work = 0, rc;
  *idle = 0;
  /* Deadlines that came are work too: a full batch applied leaves more. */
  if (e->deadline_at <= tk_clock_now(&e->clock)) return 0;
  /* A wait's news that came with this pass's own writes (a child task's
   * end recorded here stores its parent's signal): the next pass takes it. */
  if (drain(e) & TK__CHANGED_WAITS) {
    e->wait_news = 1;
    return 0;
  }
  if ((rc = e->store->ops->has_work(e->store, &work, err)) || !work) {
    *idle = rc == 0;
    return rc;
  }
  if (claimed != 0 || e->next_retry_at != INT64_MAX) return 0;
  tk__queue_rec *q = NULL;
  int n = 0, own = 0;
  if ((rc = e->store->ops->queue_list(e->store, tk_clock_now(&e->clock), &q, &n, err)))
    return rc;
  int64_t worker_busy = 0;
  for (int i = 0; i < n; i++) {
    if (q[i].worker) worker_busy += q[i].in_progress;
    else if (q[i].ready > 0 || q[i].in_progress > 0) own = 1;
  }
  free(q);
  if (own) return 0;
  return busy_only_workers(e, worker_busy, idle, err);
}

/* Whether another process changed the store since the last look, noted
 * (store_changed, waits_changed) before the notices are dropped: a pass
 * that claimed work sleeps for no time, so its poll never sees them, and
 * a signal committed during a busy pass would wait for the next change. */
static void note_changes(tk_engine *e) {
  int fd = e->store->ops->change_fd ? e->store->ops->change_fd(e->store) : -1;
  if (fd < 0) return;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) > 0 && p.revents) e->store_changed = e->waits_changed = 1;
}

int tk_engine_run(tk_engine *e, int until_idle, tk_err *err) {
  int rc = 0;
  /* The store's change signal armed before the first pass (SQLite's watch
   * is made on first use): made at the first sleep, it would miss a change
   * committed between that pass and the sleep, which could then last until
   * the next due time (seen: a submit from another connection, unseen). */
  if (e->store->ops->change_fd) (void)e->store->ops->change_fd(e->store);
  while (!e->stop) {
    int64_t due;
    int claimed = 0;
    /* Forget change notices before looking: what this pass reads covers
     * them, and only changes made after it should wake the sleep. */
    note_changes(e);
    if (drain(e) & TK__CHANGED_WAITS) e->wait_news = 1;
    rc = pass(e, INLINE_ROUNDS, &due, &claimed, err);
    if (rc == 0 && until_idle && e->in_flight == 0 && e->unrecorded == NULL) {
      int idle = 0;
      if ((rc = idle_now(e, claimed, &idle, err)) == 0 && idle) break;
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
    wait_rechecking(e, due);
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
