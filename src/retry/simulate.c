/* The contention simulator: N clients, one versioned slot, simulated time.
 *
 * Only the slot's side of the conversation needs events: what a client
 * does between two messages is fixed at the moment the earlier one is
 * handled. So an attempt is two events, the read and the write arriving at
 * the slot; the replies' travel and the client's sleep are folded into the
 * time of the next event. */
#include <tasker/simulate.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/backoff.h>
#include <tasker/duration.h>
#include <tasker/rand.h>

#include "event_heap.h"

enum { EV_READ, EV_WRITE };

#define LINEAR_MAX_ATTEMPTS 4 /* the naive client: one try and 3 retries */

static const char *const policy_names[TK_SIM_POLICY_COUNT] = {
    "none", "exponential", "full", "equal", "decorrelated", "proportional", "linear"};

const char *tk_sim_policy_name(tk_sim_policy p) {
  return p >= 0 && p < TK_SIM_POLICY_COUNT ? policy_names[p] : "unknown";
}

int tk_sim_policy_parse(const char *name, tk_sim_policy *out) {
  for (int i = 0; i < TK_SIM_POLICY_COUNT; i++)
    if (strcmp(name, policy_names[i]) == 0) {
      *out = (tk_sim_policy)i;
      return 0;
    }
  return TK_EINVAL;
}

void tk_sim_config_default(tk_sim_config *c) {
  c->clients = 100;
  c->trials = 100;
  c->max_attempts = 20;
  c->base_ms = 10;
  c->cap_ms = 1000;
  c->multiplier = 2.0;
  c->jitter_fraction = 0.1;
  c->latency_mean_ms = 10.0;
  c->latency_sd_ms = 2.0;
  c->seed = 1;
}

/* The policy a simulated client runs. Every mode is a tk_backoff_policy,
 * so every delay comes from tk_backoff_delay: NONE is a zero base; LINEAR,
 * the naive client that hand-rolls base * n without jitter, is the
 * schedule base, 2 base, 3 base (its budget allows no more retries). */
static void backoff_policy(const tk_sim_config *c, tk_sim_policy p, tk_backoff_policy *bp) {
  static const tk_jitter jitter_of[TK_SIM_POLICY_COUNT] = {
      [TK_SIM_EXPONENTIAL] = TK_JITTER_NONE,         [TK_SIM_FULL] = TK_JITTER_FULL,
      [TK_SIM_EQUAL] = TK_JITTER_EQUAL,              [TK_SIM_DECORRELATED] = TK_JITTER_DECORRELATED,
      [TK_SIM_PROPORTIONAL] = TK_JITTER_PROPORTIONAL};
  tk_backoff_policy_default(bp);
  bp->base_ms = p == TK_SIM_NONE ? 0 : c->base_ms;
  bp->multiplier = c->multiplier;
  bp->max_delay_ms = c->cap_ms;
  bp->min_delay_ms = 0;
  bp->jitter = jitter_of[p];
  bp->jitter_fraction = c->jitter_fraction;
  if (p == TK_SIM_LINEAR) {
    for (int n = 1; n < LINEAR_MAX_ATTEMPTS; n++) bp->schedule_ms[n - 1] = c->base_ms * n;
    bp->schedule_len = LINEAR_MAX_ATTEMPTS - 1;
    bp->max_delay_ms = c->base_ms * (LINEAR_MAX_ATTEMPTS - 1); /* uncapped by --cap */
  }
}

int tk_sim_config_validate(const tk_sim_config *c, tk_err *err) {
  if (c->clients < 1 || c->clients > 1000000)
    return tk_err_set(err, TK_ERANGE, "clients is %d: must be from 1 to 1000000", (int)c->clients);
  if (c->trials < 1)
    return tk_err_set(err, TK_ERANGE, "trials is %d: must be >= 1", (int)c->trials);
  /* With the caps below, 10^6 attempts keep simulated time within int64 us. */
  if (c->max_attempts < 1 || c->max_attempts > 1000000)
    return tk_err_set(err, TK_ERANGE,
                      "max_attempts is %d: it counts the first try, so from 1 to 1000000",
                      (int)c->max_attempts);
  /* Latencies become microsecond integers: keep them far from overflow. */
  if (!(c->latency_mean_ms >= 0 && c->latency_mean_ms <= 3.6e6))
    return tk_err_set(err, TK_ERANGE, "latency mean is %g ms: must be from 0 to 1 hour",
                      c->latency_mean_ms);
  if (!(c->latency_sd_ms >= 0 && c->latency_sd_ms <= 3.6e6))
    return tk_err_set(err, TK_ERANGE, "latency sd is %g ms: must be from 0 to 1 hour",
                      c->latency_sd_ms);
  if (c->cap_ms > 86400000)
    return tk_err_set(err, TK_ERANGE, "cap is %lld ms: must be at most 1 day",
                      (long long)c->cap_ms);
  if (c->base_ms > c->cap_ms)
    return tk_err_set(err, TK_ERANGE, "base (%lld ms) is above the cap (%lld ms)",
                      (long long)c->base_ms, (long long)c->cap_ms);
  tk_backoff_policy bp;
  backoff_policy(c, TK_SIM_FULL, &bp);
  tk_err perr;
  int rc = tk_backoff_policy_validate(&bp, &perr);
  if (rc != 0) return tk_err_set(err, rc, "invalid backoff policy: %s", perr.msg);
  return 0;
}

int32_t tk_sim_budget(const tk_sim_config *c, tk_sim_policy policy) {
  if (policy == TK_SIM_LINEAR && c->max_attempts > LINEAR_MAX_ATTEMPTS) return LINEAR_MAX_ATTEMPTS;
  return c->max_attempts;
}

/* Everything one run of trials needs, allocated once. */
typedef struct sim {
  const tk_sim_config *cfg;
  tk_sim_policy policy;
  tk_backoff_policy bp;
  int32_t budget;
  tk_rand net, jitter; /* separate streams: message latencies, backoff draws */
  double spare;        /* Box-Muller gives normals in pairs */
  int has_spare;
  int64_t slot_version;
  int64_t *read_version; /* per client: the version its last read saw */
  int64_t *prev_delay;   /* per client: its last backoff delay (ms) */
  int32_t *attempts;     /* per client: attempts started */
  tk__event_heap heap;
} sim;

/* A standard normal draw by Marsaglia's polar method, which gives two per
 * accepted pair and needs no trigonometry. */
static double std_normal(sim *s) {
  if (s->has_spare) {
    s->has_spare = 0;
    return s->spare;
  }
  double u, v, q;
  do {
    u = 2.0 * tk_rand_unit(&s->net) - 1.0;
    v = 2.0 * tk_rand_unit(&s->net) - 1.0;
    q = u * u + v * v;
  } while (q >= 1.0 || q == 0.0);
  double f = sqrt(-2.0 * log(q) / q);
  s->spare = v * f;
  s->has_spare = 1;
  return u * f;
}

/* One message's travel time: |Normal(mean, sd)| in microseconds. */
static int64_t latency_us(sim *s) {
  double ms = s->cfg->latency_mean_ms + s->cfg->latency_sd_ms * std_normal(s);
  return (int64_t)(fabs(ms) * 1000.0 + 0.5);
}

/* The sleep after a client's n-th failed write, in ms. */
static int64_t backoff_ms(sim *s, int32_t who, int32_t n) {
  int64_t d = tk_backoff_delay(&s->bp, n, s->prev_delay[who], -1, &s->jitter, NULL);
  s->prev_delay[who] = d;
  return d;
}

static void seed_trial(sim *s, int32_t trial) {
  /* Policy is left out on purpose: every policy meets the same seeds. */
  uint64_t h = s->cfg->seed ^ ((uint64_t)(uint32_t)s->cfg->clients * 0x9e3779b97f4a7c15ULL) ^
               ((uint64_t)(uint32_t)trial * 0xd1b54a32d192ed03ULL);
  tk_rand_seed(&s->net, h);
  tk_rand_seed(&s->jitter, h ^ 0x94d049bb133111ebULL);
  s->has_spare = 0;
}

typedef struct trial_result {
  int64_t calls;
  int64_t finish_us;
  int32_t succeeded;
} trial_result;

static void run_trial(sim *s, int32_t trial, trial_result *tr) {
  int32_t n = s->cfg->clients;
  seed_trial(s, trial);
  s->slot_version = 0;
  s->heap.len = 0;
  s->heap.next_seq = 0;
  *tr = (trial_result){0, 0, 0};
  for (int32_t c = 0; c < n; c++) {
    s->prev_delay[c] = 0;
    s->attempts[c] = 1;
    tk__heap_push(&s->heap, latency_us(s), c, EV_READ);
  }
  while (s->heap.len > 0) {
    tk__event e = s->heap.ev[0]; /* handled in place: most events schedule another */
    int32_t c = e.who;
    tr->calls++;
    if (e.kind == EV_READ) {
      s->read_version[c] = s->slot_version;
      /* The reply travels back, the write travels out. */
      tk__heap_replace_top(&s->heap, e.at_us + latency_us(s) + latency_us(s), c, EV_WRITE);
      continue;
    }
    int won = s->read_version[c] == s->slot_version;
    if (won) s->slot_version++;
    int64_t learned = e.at_us + latency_us(s); /* the client reads the reply */
    if (won || s->attempts[c] >= s->budget) {
      tr->succeeded += won;
      if (learned > tr->finish_us) tr->finish_us = learned;
      tk__heap_pop(&s->heap, &e);
      continue;
    }
    int64_t sleep_us = backoff_ms(s, c, s->attempts[c]) * 1000;
    s->attempts[c]++;
    tk__heap_replace_top(&s->heap, learned + sleep_us + latency_us(s), c, EV_READ);
  }
}

int tk_simulate(const tk_sim_config *c, tk_sim_policy policy, tk_sim_stats *out, tk_err *err) {
  int rc = tk_sim_config_validate(c, err);
  if (rc != 0) return rc;
  if (policy < 0 || policy >= TK_SIM_POLICY_COUNT)
    return tk_err_set(err, TK_EINVAL, "simulator policy %d is unknown", (int)policy);
  sim s;
  memset(&s, 0, sizeof s);
  s.cfg = c;
  s.policy = policy;
  s.budget = tk_sim_budget(c, policy);
  backoff_policy(c, policy, &s.bp);
  size_t n = (size_t)c->clients;
  s.read_version = malloc(n * sizeof *s.read_version);
  s.prev_delay = malloc(n * sizeof *s.prev_delay);
  s.attempts = malloc(n * sizeof *s.attempts);
  s.heap.ev = malloc(n * sizeof *s.heap.ev); /* one event in flight per client */
  s.heap.cap = n;
  if (s.read_version == NULL || s.prev_delay == NULL || s.attempts == NULL || s.heap.ev == NULL) {
    rc = tk_err_set(err, TK_ENOMEM, "no memory to simulate %d clients", (int)c->clients);
  } else {
    double calls = 0, finish_us = 0, succeeded = 0;
    for (int32_t t = 0; t < c->trials; t++) {
      trial_result tr;
      run_trial(&s, t, &tr);
      calls += (double)tr.calls;
      finish_us += (double)tr.finish_us;
      succeeded += tr.succeeded;
    }
    out->calls = calls / c->trials;
    out->completion_ms = finish_us / 1000.0 / c->trials;
    out->succeeded = succeeded / ((double)c->trials * (double)c->clients);
  }
  free(s.read_version);
  free(s.prev_delay);
  free(s.attempts);
  free(s.heap.ev);
  return rc;
}

/* ---- the outage scenario ------------------------------------------------
 *
 * Calls are answered at once, so a step is a chain of call times: each
 * failed call schedules the step's next call (its backoff delay later) in
 * the event heap, and with a budget a retry the budget refuses waits in a
 * first-in first-out queue whose head alone asks the budget again: at the
 * time the budget gave, or when a first attempt adds to it. Times are in
 * microseconds, so that arrivals at any rate keep their spacing; the budget
 * and the reported figures are in milliseconds. */

#define MAX_OUTAGE_STEPS 10000000.0
#define MAX_OUTAGE_ATTEMPTS 1000
#define MAX_RUN_SECONDS (30LL * 86400) /* of simulated time: bounds the series */

void tk_sim_outage_config_default(tk_sim_outage_config *c) {
  c->rate_per_s = 100;
  c->duration_ms = 1200000;
  c->outage_start_ms = 30000;
  c->outage_ms = 60000;
  c->max_attempts = 3;
  c->budget = (tk_retry_budget_config){.ratio = 0.05, .window_ms = 10000, .min_per_second = 2};
  c->seed = 1;
}

int tk_sim_outage_config_validate(const tk_sim_outage_config *c, tk_err *err) {
  if (!(c->rate_per_s > 0 && c->rate_per_s <= 1e6))
    return tk_err_set(err, TK_ERANGE, "rate is %g/s: must be above 0 and at most 1000000/s",
                      c->rate_per_s);
  if (c->duration_ms <= 0 || c->duration_ms > 86400000)
    return tk_err_set(err, TK_ERANGE, "duration is %lld ms: must be above 0 and at most 1 day",
                      (long long)c->duration_ms);
  if (c->outage_start_ms < 0)
    return tk_err_set(err, TK_ERANGE, "outage start is %lld ms: must be >= 0",
                      (long long)c->outage_start_ms);
  if (c->outage_ms <= 0)
    return tk_err_set(err, TK_ERANGE, "outage is %lld ms: must be above 0",
                      (long long)c->outage_ms);
  /* Without arrivals after the outage there is no "after" to measure. */
  if (c->outage_ms >= c->duration_ms || c->outage_start_ms >= c->duration_ms - c->outage_ms) {
    char len[32], at[32], dur[32];
    tk_duration_format(c->outage_ms, len, sizeof len);
    tk_duration_format(c->outage_start_ms, at, sizeof at);
    tk_duration_format(c->duration_ms, dur, sizeof dur);
    return tk_err_set(err, TK_ERANGE,
                      "the outage (%s from %s) must end before arrivals stop at %s", len, at, dur);
  }
  if (c->max_attempts < 1 || c->max_attempts > MAX_OUTAGE_ATTEMPTS)
    return tk_err_set(err, TK_ERANGE,
                      "max_attempts is %d: it counts the first try, so from 1 to %d",
                      (int)c->max_attempts, MAX_OUTAGE_ATTEMPTS);
  double steps = c->rate_per_s * (double)c->duration_ms / 1000.0;
  if (steps > MAX_OUTAGE_STEPS)
    return tk_err_set(err, TK_ERANGE, "rate x duration is %.0f first attempts: at most %.0f",
                      steps, MAX_OUTAGE_STEPS);
  tk_err berr;
  int rc = tk_retry_budget_config_validate(&c->budget, &berr);
  if (rc != 0) return tk_err_set(err, rc, "budget: %s", berr.msg);
  return 0;
}

/* When step i makes its first attempt, in microseconds. */
static int64_t arrival_us(const tk_sim_outage_config *c, int64_t i) {
  return (int64_t)floor((double)i * 1e6 / c->rate_per_s);
}

/* How many steps arrive before duration_ms. */
static int64_t arrivals(const tk_sim_outage_config *c) {
  int64_t end = c->duration_ms * 1000;
  int64_t n = (int64_t)ceil(c->rate_per_s * (double)c->duration_ms / 1000.0);
  while (n > 0 && arrival_us(c, n - 1) >= end) n--;
  while (arrival_us(c, n) < end) n++;
  return n;
}

typedef struct outage_sim {
  const tk_sim_outage_config *cfg;
  const tk_backoff_policy *policy;
  tk_sim_outage_stats *out;
  tk_err *err;
  tk_rand rng;
  int with_budget;
  tk_retry_budget budget;
  int64_t start_us, end_us;
  int32_t *attempts;   /* per step: calls made */
  int64_t *prev_delay; /* per step: its last backoff delay (ms) */
  tk__event_heap heap; /* retries coming due: at most one per step */
  /* Retries the budget deferred, oldest first: a ring of `nsteps` entries,
   * enough since a step has at most one retry waiting. */
  int32_t *queue_step;
  int64_t *queue_due; /* when each one came due */
  size_t qhead, qlen, nsteps;
  int64_t wake_us;       /* when the head may go; meaningful while qlen > 0 */
  int64_t last_retry_us; /* -1 before the first retry */
  size_t seconds_cap;    /* allocated length of out->per_second */
} outage_sim;

static tk_sim_phase *phase_at(outage_sim *s, int64_t t) {
  return t < s->start_us ? &s->out->before : t < s->end_us ? &s->out->during : &s->out->after;
}

/* One downstream call by `step` at t: count it, and on failure schedule the
 * step's next call or give it up. */
static int call(outage_sim *s, int32_t step, int64_t t) {
  int64_t sec = t / 1000000;
  if ((size_t)sec >= s->seconds_cap) {
    if (sec >= MAX_RUN_SECONDS)
      return tk_err_set(s->err, TK_ETOOBIG,
                        "the run lasts past %lld days of simulated time: retries are waiting "
                        "too long (raise the budget's floor or shorten the outage)",
                        MAX_RUN_SECONDS / 86400);
    size_t cap = s->seconds_cap * 2 > (size_t)sec + 1 ? s->seconds_cap * 2 : (size_t)sec + 1;
    int64_t *p = realloc(s->out->per_second, cap * sizeof *p);
    if (p == NULL) return tk_err_set(s->err, TK_ENOMEM, "no memory for %zu seconds of calls", cap);
    memset(p + s->seconds_cap, 0, (cap - s->seconds_cap) * sizeof *p);
    s->out->per_second = p;
    s->seconds_cap = cap;
  }
  if ((size_t)sec >= s->out->seconds) s->out->seconds = (size_t)sec + 1;
  s->out->per_second[sec]++;
  phase_at(s, t)->calls++;
  s->out->finish_ms = t / 1000;
  int32_t a = ++s->attempts[step];
  if (a > 1) {
    s->last_retry_us = t;
    /* Until proven otherwise, this retry is the one that ends the drain. */
    if (t >= s->end_us) s->out->draining = s->out->after;
  }
  if (t < s->start_us || t >= s->end_us) {
    s->out->succeeded++;
    return 0;
  }
  if (a >= s->cfg->max_attempts) {
    s->out->exhausted++;
    return 0;
  }
  int64_t d = tk_backoff_delay(s->policy, a, s->prev_delay[step], -1, &s->rng, NULL);
  s->prev_delay[step] = d;
  if (d > MAX_RUN_SECONDS * 1000) d = MAX_RUN_SECONDS * 1000; /* past it anyway; no overflow */
  tk__heap_push(&s->heap, t + d * 1000, step, 0); /* room: one pending retry per step */
  return 0;
}

/* Let deferred retries go, oldest first, while the budget allows them. */
static int drain_queue(outage_sim *s, int64_t t) {
  while (s->qlen > 0) {
    int64_t at_ms;
    if (!tk_retry_budget_try(&s->budget, t / 1000, &at_ms)) {
      s->wake_us = at_ms * 1000;
      return 0;
    }
    int32_t step = s->queue_step[s->qhead];
    int64_t waited_ms = (t - s->queue_due[s->qhead]) / 1000;
    s->qhead = s->qhead + 1 == s->nsteps ? 0 : s->qhead + 1;
    s->qlen--;
    if (waited_ms > s->out->max_wait_ms) s->out->max_wait_ms = waited_ms;
    int rc = call(s, step, t);
    if (rc != 0) return rc;
  }
  return 0;
}

/* A retry comes due. Behind others that wait it waits too (the budget would
 * refuse it as it refuses the head); alone, it asks the budget. */
static int retry_due(outage_sim *s, int32_t step, int64_t t) {
  if (!s->with_budget) return call(s, step, t);
  if (s->qlen == 0) {
    int64_t at_ms;
    if (tk_retry_budget_try(&s->budget, t / 1000, &at_ms)) return call(s, step, t);
    s->wake_us = at_ms * 1000;
  }
  size_t tail = (s->qhead + s->qlen) % s->nsteps;
  s->queue_step[tail] = step;
  s->queue_due[tail] = t;
  s->qlen++;
  s->out->deferred++;
  return 0;
}

static int arrive(outage_sim *s, int32_t step, int64_t t) {
  phase_at(s, t)->firsts++;
  if (s->with_budget) tk_retry_budget_first(&s->budget, t / 1000);
  int rc = call(s, step, t);
  /* The first attempt added to the budget: the head may go now. */
  if (rc == 0 && s->qlen > 0) rc = drain_queue(s, t);
  return rc;
}

static int run_outage(outage_sim *s) {
  int64_t i = 0, n = (int64_t)s->nsteps;
  for (;;) {
    int64_t ta = i < n ? arrival_us(s->cfg, i) : INT64_MAX;
    int64_t th = s->heap.len > 0 ? s->heap.ev[0].at_us : INT64_MAX;
    int64_t tw = s->qlen > 0 ? s->wake_us : INT64_MAX;
    int rc;
    if (ta == INT64_MAX && th == INT64_MAX && tw == INT64_MAX) return 0;
    if (ta <= th && ta <= tw) {
      rc = arrive(s, (int32_t)i++, ta);
    } else if (th <= tw) {
      tk__event e;
      tk__heap_pop(&s->heap, &e);
      rc = retry_due(s, e.who, e.at_us);
    } else {
      rc = drain_queue(s, tw);
    }
    if (rc != 0) return rc;
  }
}

static void finish_phase(tk_sim_phase *p) {
  p->amplification = p->firsts > 0 ? (double)p->calls / (double)p->firsts : NAN;
}

int tk_simulate_outage(const tk_sim_outage_config *c, const tk_backoff_policy *policy,
                       int with_budget, tk_sim_outage_stats *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  int rc = tk_sim_outage_config_validate(c, err);
  if (rc != 0) return rc;
  tk_err perr;
  if ((rc = tk_backoff_policy_validate(policy, &perr)) != 0)
    return tk_err_set(err, rc, "invalid backoff policy: %s", perr.msg);
  outage_sim s;
  memset(&s, 0, sizeof s);
  s.cfg = c;
  s.policy = policy;
  s.out = out;
  s.err = err;
  s.with_budget = with_budget;
  if (with_budget) tk_retry_budget_init(&s.budget, &c->budget, NULL); /* validated above */
  tk_rand_seed(&s.rng, c->seed);
  s.start_us = c->outage_start_ms * 1000;
  s.end_us = (c->outage_start_ms + c->outage_ms) * 1000;
  s.last_retry_us = -1;
  s.nsteps = (size_t)arrivals(c);
  out->steps = (int64_t)s.nsteps;
  s.attempts = calloc(s.nsteps, sizeof *s.attempts);
  s.prev_delay = calloc(s.nsteps, sizeof *s.prev_delay);
  s.heap.ev = malloc(s.nsteps * sizeof *s.heap.ev);
  s.heap.cap = s.nsteps;
  if (with_budget) {
    s.queue_step = malloc(s.nsteps * sizeof *s.queue_step);
    s.queue_due = malloc(s.nsteps * sizeof *s.queue_due);
  }
  if (s.attempts == NULL || s.prev_delay == NULL || s.heap.ev == NULL ||
      (with_budget && (s.queue_step == NULL || s.queue_due == NULL))) {
    rc = tk_err_set(err, TK_ENOMEM, "no memory to simulate %zu steps", s.nsteps);
  } else if ((rc = run_outage(&s)) == 0) {
    finish_phase(&out->before);
    finish_phase(&out->during);
    finish_phase(&out->draining);
    finish_phase(&out->after);
    out->drain_ms = s.last_retry_us > s.end_us ? (s.last_retry_us - s.end_us) / 1000 : 0;
    for (size_t k = 0; k < out->seconds; k++)
      if (out->per_second[k] > out->peak_per_s) out->peak_per_s = out->per_second[k];
  }
  free(s.attempts);
  free(s.prev_delay);
  free(s.heap.ev);
  free(s.queue_step);
  free(s.queue_due);
  return rc;
}

void tk_sim_outage_stats_free(tk_sim_outage_stats *s) {
  free(s->per_second);
  s->per_second = NULL;
  s->seconds = 0;
}
