/* Batch steps in the engine (DESIGN §9, docs/batch.md).
 *
 * At claim time, on the engine thread, the step's settings and pending
 * items are loaded. On the worker, tk_batch_retry runs the attempt's
 * calls: only pending items are offered, each delivery counts in the
 * item's attempts, an item gives up at max_item_attempts, and between
 * calls it sleeps the step's backoff delay on the engine's clock. Item
 * results are written fenced by the claim: the ones of the last call with
 * the step's outcome (one transaction), the ones of earlier calls before
 * the next call starts, so a crash between calls never re-sends an acked
 * item. Workers may not touch the store, so they hand those writes to the
 * engine thread and wait; the write overlaps the backoff sleep.
 */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Item writes that workers hand to the engine thread. */
struct tk__batch_queue {
  pthread_mutex_t mu;
  pthread_cond_t written; /* some handed-over write finished */
  struct tk__batch_job *head;
};

/* Where a between-calls write is. */
enum { WRITE_NONE, WRITE_HANDED_OVER, WRITE_DONE };

struct tk__batch_job {
  tk_engine *e;
  const job *job;       /* the attempt: claim, step, handler */
  tk__batch_load load;  /* settings, counts by state, pending items */
  tk_err load_err;      /* code != 0: loading failed; the attempt fails */
  const tk_backoff_policy *policy;
  tk_rand rng;          /* in-call jitter: the engine's is the engine thread's */
  tk_clock clock;       /* the engine's clock; sleeping hands over results first */
  const tk_handler_call *call;
  int calls;
  /* Per pending item, by its index in load.items. */
  tk_item_state *states;
  int32_t *attempts;    /* deliveries so far */
  int32_t *written;     /* deliveries as stored */
  char **reasons;       /* last rejection's reason not yet stored, or NULL */
  tk_batch_item *offer; /* the items of one call */
  /* The results of one write: between calls, then with the outcome. */
  tk__item_result *results;
  int nresults;
  int write;            /* WRITE_*; under the queue's lock with workers */
  int write_rc;
  tk_err write_err;
  struct tk__batch_job *next; /* in the queue */
  /* How the attempt ended. */
  tk_handler_status failed; /* a whole-call failure, or SUCCESS */
  int64_t failed_hint;
  int budget_spent;         /* items remained after the in-call budget: */
  int64_t next_delay_ms;    /* the delay tk_batch_retry chose, and */
  tk_delay_source next_source; /* its source (in_call or server) */
  char first_gave_up[320];  /* for fail_if_any_gave_up's message */
};

/* An item state as the store spells it. */
static const char *state_name(tk_item_state s) {
  return s == TK_ITEM_ACKED ? TK__ITEM_ACKED : s == TK_ITEM_GAVE_UP ? TK__ITEM_GAVE_UP
                                                                     : TK__ITEM_PENDING;
}

/* ---- claim time (engine thread) --------------------------------------- */

/* The per-item arrays for the loaded pending items; each item starts with
 * its stored attempts. 0, or TK_ENOMEM kept in b->load_err. */
static int alloc_items(struct tk__batch_job *b) {
  size_t n = (size_t)b->load.npending + 1; /* + 1: never a zero-size malloc */
  b->states = calloc(n, sizeof *b->states);
  b->attempts = calloc(n, sizeof *b->attempts);
  b->written = calloc(n, sizeof *b->written);
  b->reasons = calloc(n, sizeof *b->reasons);
  b->offer = calloc(n, sizeof *b->offer);
  b->results = calloc(n, sizeof *b->results);
  if (!b->states || !b->attempts || !b->written || !b->reasons || !b->offer || !b->results)
    return tk_err_set(&b->load_err, TK_ENOMEM, "out of memory for %lld items",
                      (long long)b->load.npending);
  for (int64_t i = 0; i < b->load.npending; i++)
    b->attempts[i] = b->written[i] = b->load.items[i].attempts;
  return 0;
}

/* The engine's hand-over queue; 0 or TK_ENOMEM. */
static int make_queue(tk_engine *e) {
  struct tk__batch_queue *q = calloc(1, sizeof *q);
  if (q == NULL) return TK_ENOMEM;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->written, NULL);
  e->batchq = q;
  return 0;
}

void tk__batch_prepare(tk_engine *e, job *j) {
  struct tk__batch_job *b = calloc(1, sizeof *b);
  j->batch = b;
  if (b == NULL) return; /* tk__batch_run fails the attempt */
  b->e = e;
  b->job = j;
  tk_rand_seed(&b->rng, tk_rand_u64(&e->rng));
  b->policy = tk__engine_policy(e, j->claim.backoff);
  if (e->store->ops->items_load(e->store, j->claim.step_id, &b->load, &b->load_err) != 0) return;
  if (alloc_items(b) != 0) return;
  /* Made here, before any worker can need it, so workers never race. */
  if (e->workers > 0 && e->batchq == NULL && make_queue(e) != 0)
    tk_err_set(&b->load_err, TK_ENOMEM, "out of memory");
}

void tk__batch_free(struct tk__batch_job *b) {
  if (b == NULL) return;
  for (int64_t i = 0; b->reasons && i < b->load.npending; i++) free(b->reasons[i]);
  tk__batch_load_free(&b->load);
  free(b->states);
  free(b->attempts);
  free(b->written);
  free(b->reasons);
  free(b->offer);
  free(b->results);
  free(b);
}

void tk__batch_engine_free(tk_engine *e) {
  if (e->batchq == NULL) return;
  pthread_mutex_destroy(&e->batchq->mu);
  pthread_cond_destroy(&e->batchq->written);
  free(e->batchq);
  e->batchq = NULL;
}

/* ---- item writes -------------------------------------------------------- */

/* The changes since the last write into b->results, in item order (so the
 * store can update runs of neighbours at once). */
static void collect(struct tk__batch_job *b) {
  int n = 0;
  for (int64_t i = 0; i < b->load.npending; i++) {
    if (b->attempts[i] == b->written[i]) continue;
    const tk__pending_item *it = &b->load.items[i];
    b->results[n++] = (tk__item_result){it->seq, state_name(b->states[i]),
                                        b->attempts[i] - b->written[i], b->reasons[i], it->key,
                                        b->attempts[i]};
  }
  b->nresults = n;
}

/* After a write committed: what it held is now stored. */
static void mark_written(struct tk__batch_job *b) {
  for (int64_t i = 0; i < b->load.npending; i++) {
    b->written[i] = b->attempts[i];
    free(b->reasons[i]);
    b->reasons[i] = NULL;
  }
  b->nresults = 0;
}

/* An item.gave_up event and an error log line per item that gave up in
 * results that are now committed (engine thread). */
static void gave_up_events(tk_engine *e, const struct tk__batch_job *b, int64_t now) {
  const tk__claimed *c = &b->job->claim;
  for (int i = 0; i < b->nresults; i++) {
    const tk__item_result *r = &b->results[i];
    if (strcmp(r->state, TK__ITEM_GAVE_UP) != 0) continue;
    const char *why = r->error ? r->error : "rejected";
    if (tk__engine_wants(e, TK_EV_ITEM_GAVE_UP)) {
      tk_event ev = {.type = TK_EV_ITEM_GAVE_UP, .at = now, .task = c->task_id,
                     .step = b->job->name, .attempt = c->attempt};
      ev.u.item.item = r->key;
      ev.u.item.item_attempts = (int)r->attempts;
      ev.u.item.error = why;
      tk__engine_emit(e, &ev);
    }
    tk__engine_log(e, TK_LOG_ERROR, "task %lld step %s: item \"%s\" gave up after %d attempts: %s",
                   (long long)c->task_id, b->job->name, r->key, (int)r->attempts, why);
  }
}

/* Write b->results fenced by the claim, then name the items that gave up
 * (engine thread). */
static int write_between_calls(tk_engine *e, const struct tk__batch_job *b, tk_err *err) {
  int rc = e->store->ops->items_checkpoint(e->store, b->job->claim.step_id,
                                           b->job->claim.claim_id, b->results, b->nresults, err);
  if (rc == 0) gave_up_events(e, b, tk_clock_now(&e->clock));
  return rc;
}

/* Start writing what the last call changed. Inline, this is the engine
 * thread and writes at once; a worker hands it over and wakes the
 * engine. */
static void hand_over(struct tk__batch_job *b) {
  collect(b);
  if (b->nresults == 0) return;
  tk_engine *e = b->e;
  if (e->workers == 0) {
    b->write_rc = write_between_calls(e, b, &b->write_err);
    b->write = WRITE_DONE;
    return;
  }
  pthread_mutex_lock(&e->batchq->mu);
  b->write = WRITE_HANDED_OVER;
  b->next = e->batchq->head;
  e->batchq->head = b;
  pthread_mutex_unlock(&e->batchq->mu);
  tk_engine_wake(e);
}

/* Wait until the handed-over write is committed; its error, if any. */
static int wait_written(struct tk__batch_job *b, tk_err *err) {
  tk_engine *e = b->e;
  int state;
  if (e->workers > 0) {
    pthread_mutex_lock(&e->batchq->mu);
    while (b->write == WRITE_HANDED_OVER) pthread_cond_wait(&e->batchq->written, &e->batchq->mu);
    state = b->write;
    pthread_mutex_unlock(&e->batchq->mu);
  } else {
    state = b->write;
  }
  if (state == WRITE_NONE) return 0;
  b->write = WRITE_NONE;
  if (b->write_rc != 0) {
    if (err) *err = b->write_err;
    return b->write_rc;
  }
  mark_written(b);
  return 0;
}

void tk__batch_flush(tk_engine *e) {
  struct tk__batch_queue *q = e->batchq;
  if (q == NULL) return;
  pthread_mutex_lock(&q->mu);
  struct tk__batch_job *list = q->head;
  q->head = NULL;
  pthread_mutex_unlock(&q->mu);
  if (list == NULL) return;
  while (list) {
    struct tk__batch_job *b = list, *next = b->next;
    tk_err err;
    tk_err_clear(&err);
    int rc = write_between_calls(e, b, &err);
    /* Once WRITE_DONE is seen the worker owns b again: read next first. */
    pthread_mutex_lock(&q->mu);
    b->write_rc = rc;
    b->write_err = err;
    b->write = WRITE_DONE;
    pthread_mutex_unlock(&q->mu);
    list = next;
  }
  pthread_cond_broadcast(&q->written);
}

/* ---- the calls (worker) ------------------------------------------------- */

/* The clock tk_batch_retry reads: the engine's. */
static int64_t batch_now(void *ud) {
  struct tk__batch_job *b = ud;
  return tk_clock_now(&b->e->clock);
}

/* tk_batch_retry sleeps only between two calls: the moment to make the
 * last call's results durable. The write runs during the sleep; the next
 * call waits for it. */
static void batch_sleep(void *ud, int64_t ms) {
  struct tk__batch_job *b = ud;
  hand_over(b);
  tk_clock_sleep(&b->e->clock, ms);
}

/* tk_batch_ops.call: offer the items at idx[0..n-1] to the step's handler
 * (its kind's run_batch). A whole-call failure is kept
 * in b->failed and returned as TK_EHANDLER with the handler's message. */
static int do_call(void *ud, const size_t *idx, size_t n, tk_item_report *reports,
                   int64_t *hint_ms, tk_err *err) {
  struct tk__batch_job *b = ud;
  /* What the previous call acked must be stored before anything is sent
   * again: then a crash can only re-send what was not acked. */
  int rc = wait_written(b, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    const tk__pending_item *it = &b->load.items[idx[i]];
    b->offer[i] = (tk_batch_item){it->key, it->data, it->seq, b->attempts[idx[i]] + 1};
  }
  tk_batch_call bc = {b->call, b->offer, n, ++b->calls};
  tk_handler_result out = {.status = TK_HANDLER_SUCCESS, .retry_after_ms = -1};
  const step_def *d = b->job->def;
  tk__handler_step step = {d->spec, d->prepared, &b->e->clock, NULL, NULL};
  d->kind->run_batch(&step, &bc, reports, &out);
  free(out.results); /* not used: the step's results are the counts */
  if (out.status != TK_HANDLER_SUCCESS) {
    b->failed = out.status;
    b->failed_hint = out.retry_after_ms;
    return tk_err_set(err, TK_EHANDLER, "%s", out.error[0] ? out.error : "batch call failed");
  }
  *hint_ms = out.retry_after_ms;
  return 0;
}

/* tk_batch_ops.rejected: count the delivery and keep the reason for the
 * next write. */
static int on_rejected(void *ud, size_t item, const char *reason, int32_t *attempts,
                       tk_err *err) {
  struct tk__batch_job *b = ud;
  char *copy = strdup(reason ? reason : "rejected");
  if (copy == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory recording a rejection");
  free(b->reasons[item]);
  b->reasons[item] = copy;
  /* A pending item's deliveries were all rejections, so this is also the
   * count tk_batch_retry compares with max_item_attempts. */
  *attempts = ++b->attempts[item];
  return 0;
}

/* tk_batch_ops.acked: count the delivery. */
static int on_acked(void *ud, size_t item, tk_err *err) {
  (void)err;
  struct tk__batch_job *b = ud;
  b->attempts[item]++;
  return 0;
}

/* tk_batch_ops.gave_up: remember the first for fail_if_any_gave_up's
 * message (the event waits for the write to commit). */
static int on_gave_up(void *ud, size_t item, int32_t attempts, const char *reason, tk_err *err) {
  (void)err;
  struct tk__batch_job *b = ud;
  if (b->first_gave_up[0] == '\0')
    snprintf(b->first_gave_up, sizeof b->first_gave_up, "; first \"%s\" after %d attempts: %s",
             b->load.items[item].key, (int)attempts, reason ? reason : "rejected");
  return 0;
}

/* The attempt's result from how the run ended. */
static void conclude(struct tk__batch_job *b, int rc, const tk_batch_result *run,
                     const tk_err *err, tk_handler_result *r) {
  const tk__batch_load *l = &b->load;
  long long acked = (long long)(l->acked + (int64_t)run->acked);
  long long gave_up = (long long)(l->gave_up + (int64_t)run->gave_up);
  if (rc == 0 && gave_up > 0 && l->fail_if_any_gave_up) {
    tk__handler_fail(r, TK_HANDLER_PERMANENT, "%lld of %lld items gave up (fail_if_any_gave_up)%s",
                     gave_up, (long long)l->total, b->first_gave_up);
  } else if (rc == 0) {
    char text[128];
    snprintf(text, sizeof text, "{\"items\":%lld,\"acked\":%lld,\"gave_up\":%lld}",
             (long long)l->total, acked, gave_up);
    r->results = strdup(text);
  } else if (rc == TK_RETRY_AGAIN) {
    tk__handler_fail(r, TK_HANDLER_RETRY,
                     "%zu of %lld items still pending after %lld call%s (max_in_call_retries %d)",
                     run->pending, (long long)l->total, (long long)run->calls,
                     run->calls == 1 ? "" : "s", l->max_in_call_retries);
    /* The delay after the last call, which tk_batch_retry took from the
     * policy (or the handler's hint): decide() uses it as it is. */
    b->budget_spent = 1;
    b->next_delay_ms = run->next_delay_ms;
    b->next_source = run->next_source;
  } else if (b->failed != TK_HANDLER_SUCCESS) {
    tk__handler_fail(r, b->failed, "%s", err->msg);
    r->retry_after_ms = b->failed_hint;
  } else {
    /* Fenced between calls, a store error, a report without a verdict:
     * worth another attempt (which the fence may refuse anyway). */
    tk__handler_fail(r, TK_HANDLER_RETRY, "%s", err->msg);
  }
}

void tk__batch_run(job *j, const tk_handler_call *call) {
  struct tk__batch_job *b = j->batch;
  tk_handler_result *r = &j->result;
  if (b == NULL) {
    tk__handler_fail(r, TK_HANDLER_RETRY, "out of memory preparing a batch step");
    return;
  }
  if (b->load_err.code != 0) {
    tk__handler_fail(r, TK_HANDLER_RETRY, "cannot load the step's items: %s", b->load_err.msg);
    return;
  }
  if (j->def->kind->run_batch == NULL) { /* templates refuse it; a stored spec may not */
    tk__handler_fail(r, TK_HANDLER_PERMANENT, "a %s handler does not take batches",
                     j->def->kind->name);
    return;
  }
  b->call = call;
  b->clock = (tk_clock){batch_now, batch_sleep, b};
  tk_batch_limits limits = {b->load.max_in_call_retries, b->load.max_item_attempts};
  tk_batch_ops ops = {do_call, on_rejected, on_gave_up, on_acked};
  tk_batch_result run;
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_batch_retry(b->policy, &limits, &ops, b, b->states, (size_t)b->load.npending,
                          &b->clock, &b->rng, &run, &err);
  /* Always waited for by the next call; this only settles the bookkeeping
   * if a run ever ends right after handing over. */
  tk_err werr;
  if (wait_written(b, &werr) != 0 && rc == 0) {
    rc = werr.code;
    err = werr;
  }
  collect(b); /* the rest goes in with the outcome */
  conclude(b, rc, &run, &err, r);
}

/* ---- the outcome (engine thread) ----------------------------------------- */

void tk__batch_decide(const struct tk__batch_job *b, tk__outcome *o) {
  o->items = b->results;
  o->nitems = b->nresults;
}

int tk__batch_chosen_delay(const struct tk__batch_job *b, int64_t *delay_ms,
                           tk_delay_source *source) {
  if (!b->budget_spent) return 0;
  *delay_ms = b->next_delay_ms;
  *source = b->next_source;
  return 1;
}

void tk__batch_report(tk_engine *e, const struct tk__batch_job *b, int64_t now) {
  gave_up_events(e, b, now);
}

/* ---- registration --------------------------------------------------------- */

int tk_engine_register_batch(tk_engine *e, const char *name, tk_batch_fn fn, void *ud,
                             tk_err *err) {
  if (fn == NULL) return tk_err_set(err, TK_EINVAL, "batch handler \"%s\": no function", name);
  /* The same table as plain handlers, so one name means one handler. */
  return tk__fn_register(&e->fns, name, NULL, fn, ud, err);
}
