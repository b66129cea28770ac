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
