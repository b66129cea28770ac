/* The engine's private state, shared by its files. */
#ifndef TASKER_ENGINE_INTERNAL_H
#define TASKER_ENGINE_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include <jansson.h>

#include <tasker/engine.h>
#include <tasker/events.h>
#include <tasker/rand.h>

#include "handlers/handler.h"
#include "store/store.h"

#define TK__MAX_OBSERVERS 8

/* Room for a step's name, an instance's index included. */
#define TK__STEP_NAME_MAX 160

/* The name of claim c's step into buf: its template step's, `name`, or
 * for an instance of a map "name[i]" (events, logs, {{task.step}}). */
const char *tk__claim_step_name(const tk__claimed *c, const char *name, char *buf, size_t cap);

/* What the engine needs of one template step at run time. */
typedef struct step_def {
  const char *name;
  const tk__handler_kind *kind; /* the handler's functions */
  void *prepared;   /* what kind->prepare returned for this engine */
  json_t *spec;     /* the handler table */
  char *spec_text;  /* the same, as JSON text for C handlers */
  int64_t timeout_ms;
  int64_t callback_ms; /* an http step that waits for a callback: its timeout; else 0 */
  json_t *batch;    /* the step's batch table, or NULL: not a batch step */
  const char *budget; /* the retry budget it names (its own or the
                         template's retry table), or NULL */
  const struct tk__flow *decision; /* a decision step: its template's flow; else NULL */
} step_def;

typedef struct template_entry {
  int64_t id;
  json_t *definition;
  step_def *steps;
  int nsteps;
  struct tk__flow *flow; /* its decisions and maps (store/flow.h), no edges */
} template_entry;

struct tk__batch_job;
struct tk__batch_queue;
struct tk__budgets;

/* What a retry budget did to one outcome, for its event and log line. */
typedef struct tk__deferral {
  const char *budget; /* the budget that deferred the retry; NULL: none did */
  const char *host;   /* the per-host state it used, or NULL */
  int64_t delay_ms;   /* the delay, source and run_at before the budget */
  tk_delay_source source;
  int64_t run_at;
} tk__deferral;

/* One claimed attempt on its way through a worker. */
typedef struct job {
  tk__claimed claim;
  const step_def *def;
  const char *name; /* the step's name: def's, or its instance's ("process[3]") */
  char instance_name[TK__STEP_NAME_MAX];
  char *input;
  int64_t next_heartbeat;
  int64_t started_at;  /* engine clock, when its handler was called */
  int64_t finished_at; /* engine clock, when it returned */
  int64_t run_ns;      /* how long the handler took (monotonic) */
  int64_t not_before; /* a retry: its run_at, before which no worker starts it; else 0 */
  tk_handler_result result;
  /* The handler's view of the attempt, kept in the job because an
   * asynchronous one (kind->start) reads them until it ends. */
  tk_handler_call call;
  tk__handler_step hstep;
  struct tk_engine *engine; /* for the asynchronous end (async_done) */
  int async;                /* started by kind->start: no worker waits for it */
  int64_t start_ns;         /* monotonic, when its handler was called */
  struct tk__batch_job *batch;          /* a batch step's items and results, or NULL */
  /* A step that waits for a callback (callbacks.c): this attempt's token
   * and URL (secrets, wiped with the job), and whether its outcome came
   * from the wait already (a callback or the timeout), not the request. */
  char *cb_token, *cb_url;
  int waited;
  struct job *next;                     /* pool queues */
  struct job *flight_prev, *flight_next; /* the engine's in-flight list */
} job;

struct tk_engine {
  tk_store *store;
  const tk_config *config;
  tk_clock clock;
  tk_rand rng;
  char id[TK__OWNER_MAX];
  int workers;
  int64_t lease_ms, heartbeat_ms;
  int claim_batch;
  /* Observers (tk_engine_observe), called in this order on the engine's
   * thread; `interest` is the union of their masks: an event whose bit is
   * not in it is never built. The options' on_event sink is observers[0],
   * the JSON-lines observer writing to `jsonl`. */
  struct {
    tk_observer obs;
    void *ud;
  } observers[TK__MAX_OBSERVERS];
  int nobservers;
  uint32_t interest;
  tk_jsonl_sink jsonl;
  int64_t events_built; /* events handed to observers (tests) */
  tk_log_sink on_log;
  void *log_ud;

  template_entry *templates;
  int ntemplates;
  /* The template steps of those whose handlers take no input, sorted
   * tk__step_key: a claim builds no input for them (claim requests'
   * no_input). */
  int64_t *no_input;
  int nno_input;
  tk__fn_table fns; /* in-process handlers (tk_engine_register) */

  int64_t reap_at;     /* earliest lease expiry known to this engine */
  /* After a reap whose outcomes the store refused in part (not fenced: a
   * rule they break), no reap before reap_retry_at, which backs off from
   * 1 s, doubling, to the lease: the refused lease stays expired, and
   * without it every pass would try it again at once. */
  int64_t reap_retry_at;
  int64_t reap_backoff_ms;
  int64_t clock_synced_ns; /* monotonic, when the store's clock was last measured */
  int64_t next_retry_at; /* earliest retry's run_at, as the last claim saw it */
  double ns_per_step;    /* what recording or claiming one step costs a pass */
  double ns_per_handler; /* how long a handler call takes (0: none seen yet) */
  int system_clock;      /* the clock is the system's: retries may be held */
  tk__claimed *claims; /* claim_batch slots */
  /* start_claimed's arrays, claim_batch slots each: the jobs made from
   * claims, and the steps whose inputs are read and those inputs. */
  struct job **starting;
  int64_t *input_ids;
  json_t **inputs;
  tk__expired *expired;
  /* tk__engine_finish's arrays, kept and grown to the largest group. */
  tk__outcome *fin_outcomes;
  tk__effects *fin_effects;
  tk_err *fin_errs;
  int *fin_exhausted;
  tk__deferral *fin_deferrals;
  char (*fin_why)[320]; /* a refused decision's message, per outcome */
  int fin_cap;
  int fin_unrecorded; /* outcomes of the last group the store refused, not fenced */
  struct tk__budgets *budgets; /* retry budgets' states (budgets.c), or NULL */
  struct tk__engine_sched *sched; /* schedules' state (schedules.c), or NULL */
  int store_changed; /* a wait ended because the store changed (schedules.c reads it) */
  /* Wait steps (DESIGN §18, waits.c): the earliest timeout of a waiting
   * step known to this engine (INT64_MIN: unknown, look), when this
   * engine last took waits, whether the store changed since (a signal
   * may have come), whether a signal came (drain_changes said so: taken
   * at once), and wait_take's slots (claim_batch of them). */
  int64_t wait_at, waits_looked_at;
  int waits_changed, wait_news;
  int64_t recheck_at; /* drain the store's changes again then (loop.c drain); INT64_MAX: no */
  tk__waited *waited;
  int64_t retention_at; /* when [retention] prunes next (retention.c); 0: now */
  /* Deadlines (deadlines.c): when to look next (INT64_MIN: at once), when
   * it last looked, whether this engine claimed a new task's first steps
   * since (its deadline may be the earliest), and deadline_apply's slots
   * (claim_batch of them). */
  int64_t deadline_at, deadlines_looked_at;
  int deadline_news;
  int64_t *deadline_tasks;

  /* The worker pool: jobs go in `todo`, come back in `done`. */
  pthread_t *threads;
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t have_todo;
  job *todo_head, *todo_tail;
  job *held_head, *held_tail; /* retries, earliest run_at first */
  int nheld;                  /* in the held list */
  job *done_head;
  job *running; /* in flight: claimed and not yet recorded (engine thread only) */
  job *unrecorded;  /* finished while the store could not be reached */
  tk_err disconnected; /* why, while unrecorded is not empty */
  int64_t heartbeat_due; /* no running job's heartbeat is due before (a lower bound) */
  atomic_int in_flight; /* atomic: tk_engine_stats_get reads it from any thread */
  /* Attempts started by kind->start (a request in flight): they hold no
   * worker, so they are counted apart, up to engine.max_async. */
  int max_async;
  int async_in_flight;
  double async_share; /* of recent claims, the fraction that started async */
  /* Each kind's engine-wide state (tk__handler_host.shared). */
  struct {
    const tk__handler_kind *kind;
    void *shared;
  } kind_state[TK__HANDLER_KINDS_MAX];
  int nkind_state;
  int held_seen; /* nheld when the engine thread last took results */
  int shutting_down;
  int abandon; /* stopping without running what is queued (tk_engine_free) */

  /* Wakes the engine's poll: workers, tk_engine_wake, tk_engine_stop. */
  int wake_pipe[2];
  atomic_int stop; /* set by tk_engine_stop from any thread or a signal handler */

  /* Batch item results that workers hand to the engine thread between
   * calls (batch.c); NULL until a batch step runs on workers. */
  struct tk__batch_queue *batchq;

  /* Counters: written by the engine's thread, read by tk_engine_stats_get
   * from any thread, hence atomic (each counter exact on its own; a read
   * is not one snapshot across counters). */
  struct {
    atomic_llong claimed, completed, retried, failed, exhausted, fenced, lease_expired,
        tasks_completed, tasks_failed, retries_deferred, retries_brought_earlier;
  } stats;
};

/* Log a formatted line to the log sink. */
void tk__engine_log(tk_engine *e, tk_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Whether any observer wants events of `type`: build one only then. */
static inline int tk__engine_wants(const tk_engine *e, tk_event_type type) {
  return (e->interest & TK_EV_BIT(type)) != 0;
}

/* Hand `ev` to the observers that want its type (engine thread); sets
 * ev->orchestrator. */
void tk__engine_emit(tk_engine *e, tk_event *ev);

/* The run-time view of a template, loaded once per engine
 * (template_cache.c); tk__engine_templates_free releases them all. */
const template_entry *tk__engine_template(tk_engine *e, int64_t id, tk_err *err);
void tk__engine_templates_free(tk_engine *e);

/* Expired leases a pass turns into failures at most (loop.c; the engine
 * keeps an array of this size). */
#define TK__REAP_BATCH 64

/* The reaper (loop.c): up to TK__REAP_BATCH leases expired by now become
 * lease_expired failures through tk__engine_finish. 0, or the store's
 * error (TK_EDISCONNECTED: nothing was recorded). */
int tk__engine_reap(tk_engine *e, int64_t now, tk_err *err);

/* The reaper when a lease known to this engine has run out by now (then
 * the earliest one is read again: reap_at), else nothing; and after a
 * claim of this engine at now, its leases' expiry known. loop.c */
int tk__engine_reap_due(tk_engine *e, int64_t now, tk_err *err);
void tk__engine_claimed_leases(tk_engine *e, int64_t now);

/* The backoff policy of profile `profile`; a profile no longer configured
 * falls back to "default" with a warning (engine thread: it may log). */
const tk_backoff_policy *tk__engine_policy(tk_engine *e, const char *profile);

/* How the reaper ends an expired lease (tk__finish.reaped): as a
 * lease_expired failure, or, when a wait had delivered its signal to the
 * claim and the claim's owner stopped before recording it, with the
 * signal's outcome. */
enum { TK__REAPED_NOT = 0, TK__REAPED_LEASE = 1, TK__REAPED_SIGNAL = 2 };

/* One finished attempt on its way to the store. */
typedef struct tk__finish {
  const tk__claimed *claim;
  const char *step_name;
  const char *owner;           /* the claim's owner */
  const char *attempt_outcome; /* success, failure, timeout, lease_expired */
  const tk_handler_result *result;
  const struct tk__batch_job *batch; /* a batch step's item results, or NULL */
  int64_t started_at;                 /* when the handler was called; 0: it was not */
  int64_t finished_at;                /* when it returned; 0: it was not called */
  /* The reaper's (TK__REAPED_*): refused if the lease was renewed after
   * it looked. */
  int reaped;
  int64_t run_ns; /* how long the handler ran (monotonic); 0 when it was not called */
  const char *budget; /* the retry budget the step names (step_def.budget), or NULL */
  const struct tk__flow *decision; /* step_def.decision: its success is checked */
} tk__finish;

/* Retry budgets (DESIGN §14, budgets.c). The name of the budget step
 * `step` of template `definition` names (borrowed from them), or NULL. */
const char *tk__step_budget(json_t *definition, json_t *step);
/* Before n decided outcomes are recorded: count each first attempt that
 * ran in its step's budget, and ask the budget for each retry (at the
 * time its attempt ended). A retry it defers past its computed run_at gets
 * the budget's time, its full delay and source budget; d[i] keeps what was
 * computed. Engine thread. */
void tk__budgets_apply(tk_engine *e, const tk__finish *items, tk__outcome *o, tk__deferral *d,
                       int n);
/* Each pass, before claiming: bring the deferred retries that the budgets
 * now have room for to now in the store (oldest first, per state), so the
 * claim takes them. Engine thread. */
void tk__budgets_bring_earlier(tk_engine *e, int64_t now);
void tk__budgets_free(tk_engine *e);

/* Schedules (DESIGN §16, schedules.c), engine thread: fire the slots due
 * at now (the first call writes the configured schedules into the store)
 * and return when the next one is due (INT64_MAX: none). */
int64_t tk__engine_schedules(tk_engine *e, int64_t now);
void tk__engine_schedules_free(tk_engine *e);

/* Retention (DESIGN §16, retention.c), engine thread: when due, prune one
 * batch of the finished tasks [retention] selects; return when it is due
 * next (INT64_MAX: retention is off). */
int64_t tk__engine_retention(tk_engine *e, int64_t now);

/* Decide each attempt's next state (DESIGN §5), taking retry delays from
 * the one backoff function, record them all in one store call (group
 * commit; each outcome fenced and atomic on its own), then emit the events
 * and log lines. With `next` (may be NULL) the same transaction claims the
 * next ready steps. Returns TK_EDISCONNECTED (why in *lost, required) when the
 * store's connection was lost and nothing was recorded or reported: the
 * caller keeps the items for after the reconnection; else 0. */
int tk__engine_finish(tk_engine *e, const tk__finish *items, int n, tk__claim_request *next,
                      tk_err *lost);
/* Sleep up to ms, until something writes the wake pipe (a worker's
 * result, wake, stop) or, with watch_store, until another process changes
 * the store (loop.c): whether one of them woke it. */
int tk__engine_wait(tk_engine *e, int64_t ms, int watch_store);

/* After TK_EDISCONNECTED: reconnect the store under the configured backoff
 * profile (engine.reconnect_backoff), logging what happened, until it
 * works (0), the engine is stopped, or engine.reconnect_give_up has
 * passed (TK_EDISCONNECTED with the last reason in err). Handlers keep
 * running meanwhile. reconnect.c */
int tk__engine_reconnect(tk_engine *e, tk_err *err);

/* Free the arrays tk__engine_finish keeps. */
void tk__engine_finish_free(tk_engine *e);

/* Run the handler of job j (on any thread): 0 when it has run; 1 when
 * it was started asynchronously (j->async), in which case j is handed to
 * the engine thread by its end (tk__pool_done) and may already be gone. */
int tk__engine_execute(tk_engine *e, job *j);

/* Wait steps (DESIGN §18, waits.c). Whether job j is a wait step's. */
int tk__engine_is_wait(const job *j);
/* The attempt's result that signal sig brings (its data: success; its
 * error: a failure, for good when final, with its retry_after), into *r:
 * 0, or -1 when memory ran out copying the data (r->results NULL). */
int tk__engine_signal_result(const tk__signal_rec *sig, tk_handler_result *r);
/* Park j, a wait step just claimed (store op step_wait), with its
 * timeout from now: 1 when a signal stored for it came with the claim
 * (j->result is its outcome: record j), 0 when it waits now or could not
 * be parked (logged: its lease expires and the reaper retries it); free
 * j then. */
int tk__engine_park(tk_engine *e, job *j, int64_t now);
/* tk__engine_park with the wait's end (timeout_at) and the move's reason. */
int tk__engine_park_until(tk_engine *e, job *j, int64_t now, int64_t timeout_at,
                          const char *reason);

/* Callbacks of http steps (DESIGN §18, callbacks.c). Give job j, just
 * claimed, its callback token (kept hashed in the store: callback_arm)
 * and URL: 0; -1 when it cannot run: j->result is then its failure (no
 * server.public_url: permanent), or j was dropped (logged, freed: its
 * lease expires and the reaper retries it) when *dropped. */
int tk__engine_callback_arm(tk_engine *e, job *j, int64_t now, int *dropped);
/* Of the finished jobs in list, park those whose request a callback
 * step's 2xx answered (they wait now, and are freed) unless a callback
 * came first; the list of those left to record. */
job *tk__engine_callbacks_park(tk_engine *e, job *list);
/* Wipe and free j's callback token and URL. */
void tk__engine_callback_wipe(job *j);

/* Child tasks (DESIGN §18, children.c). Whether job j is a task step's. */
int tk__engine_is_child(const job *j);
/* Start the child of j, a task step just claimed, and park j (store op
 * child_start) until the child ends or the step's timeout: 1 when the
 * child cannot be started (its template unknown, its context not
 * rendered: j->result is a permanent failure, record j), 0 when it waits
 * now or the store refused (logged: its lease expires and the reaper
 * retries it); free j then. */
int tk__engine_start_child(tk_engine *e, job *j, int64_t now);
/* When due (a timeout known to come by now, or the store changed since
 * the last look, at most every TK__WAIT_LOOK_MS), take the waits that a
 * signal or a timeout ended (wait_take) as jobs with their outcomes, in
 * *done (linked by next) for the caller to record; e->wait_at is then
 * when to look next. 0, or the store's error. */
#define TK__WAIT_LOOK_MS 10
int tk__engine_waits(tk_engine *e, int64_t now, job **done, tk_err *err);

/* Deadlines (deadlines.c). When due (e->deadline_at; or, after a change
 * of the store or a new task claimed, at a pass at most every
 * TK__WAIT_LOOK_MS), look at the deadlines that came (deadline_apply):
 * their tasks end in error, each with a task.failed event and a log line.
 * 0, or the store's error. */
int tk__engine_deadlines(tk_engine *e, int64_t now, tk_err *err);
/* Something may be due at `at` (next_due's ready time): look at the
 * deadlines then at the latest. */
void tk__engine_deadline_hint(tk_engine *e, int64_t at);

/* Jobs (jobs.c), on the engine thread. Start the n attempts claimed into
 * e->claims: hand them to the workers, or run them here when there are
 * none (returned in *inline_done, linked by next). */
void tk__engine_start_claimed(tk_engine *e, int n, int64_t now, int64_t claim_us,
                              job **inline_done);
/* Add j to, or take it off, the list of jobs in flight (e->running). */
void tk__flight_add(tk_engine *e, job *j);
void tk__flight_remove(tk_engine *e, job *j);
/* Free a job and what it holds. */
void tk__job_free(job *j);

/* Batch steps (batch.c, DESIGN §9). On the engine thread: load a claimed
 * batch step's settings and pending items into j->batch (a failure is
 * kept there and fails the attempt when it runs). On any thread: run the
 * attempt's calls through tk_batch_retry into j->result. */
void tk__batch_prepare(tk_engine *e, job *j);
void tk__batch_run(job *j, const tk_handler_call *call);
/* Before an outcome is recorded: add the item results to *o. When the
 * in-call budget ran out, chosen_delay gives the delay tk_batch_retry
 * already took from the policy (source in_call, or server for a handler's
 * hint) and returns 1, so decide() does not compute another. After the
 * outcome is committed: item.gave_up events and log lines. */
void tk__batch_decide(const struct tk__batch_job *b, tk__outcome *o);
int tk__batch_chosen_delay(const struct tk__batch_job *b, int64_t *delay_ms,
                           tk_delay_source *source);
void tk__batch_report(tk_engine *e, const struct tk__batch_job *b, int64_t now);
/* Engine thread: write the item results workers handed over between calls. */
void tk__batch_flush(tk_engine *e);
void tk__batch_free(struct tk__batch_job *b);
void tk__batch_engine_free(tk_engine *e);

/* Start and stop the worker threads. Stopping waits for the handlers
 * running; the queued attempts are run first unless e->abandon is set. */
int tk__pool_start(tk_engine *e, tk_err *err);
void tk__pool_stop(tk_engine *e);
/* Queue claimed attempts (a list linked by next) for the workers. */
void tk__pool_submit(tk_engine *e, job *list);
/* Hand a finished job to the engine thread and wake it (any thread). */
void tk__pool_done(tk_engine *e, job *j);
/* Take every finished job (engine thread); *held gets how many retries
 * wait for their run_at in the pool. */
job *tk__pool_take_done(tk_engine *e, int *held);

#endif
