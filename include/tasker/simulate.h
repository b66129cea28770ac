/* tasker: the simulators behind `tasker simulate` (DESIGN §10, §14): client
 * contention for one slot, and retries against a downstream in an outage.
 *
 * Contention: N clients each need one successful conditional write to a
 * single versioned slot. An attempt is a read (the slot's version) followed by a
 * write that succeeds only if the version is still the one read; each of
 * the four messages of an attempt (read request and reply, write request
 * and reply) takes |Normal(latency_mean, latency_sd)|. All clients start
 * at time 0. After a failed write a client sleeps its policy's delay and
 * tries again, until it succeeds or has made max_attempts attempts.
 *
 * Time is simulated (an event queue in microseconds), so a trial costs
 * only CPU. Randomness comes from tk_rand seeded from (seed, clients,
 * trial): the same configuration gives the same numbers, and every policy
 * meets the same seeds.
 */
#ifndef TASKER_SIMULATE_H
#define TASKER_SIMULATE_H

#include <stdint.h>

#include <tasker/backoff.h>
#include <tasker/budget.h>
#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a client does after a failed write. Every mode is a tasker policy
 * whose delays come from tk_backoff_delay: base, multiplier, cap and the
 * named jitter; EXPONENTIAL is the one without jitter, NONE has base 0 and
 * LINEAR is the explicit schedule base, 2 base, 3 base. */
typedef enum tk_sim_policy {
  TK_SIM_NONE = 0,      /* retry at once, no sleep */
  TK_SIM_EXPONENTIAL,   /* base * multiplier^(n-1), capped, no jitter */
  TK_SIM_FULL,
  TK_SIM_EQUAL,
  TK_SIM_DECORRELATED,
  TK_SIM_PROPORTIONAL,
  TK_SIM_LINEAR,        /* a naive client: base * n, at most 3 retries */
  TK_SIM_POLICY_COUNT
} tk_sim_policy;

typedef struct tk_sim_config {
  int32_t clients;        /* 1..1000000 */
  int32_t trials;         /* >= 1 */
  int32_t max_attempts;   /* per client, first try included; 1..1000000 */
  int64_t base_ms;        /* first delay; >= 0 */
  int64_t cap_ms;         /* max_delay of the tasker policies; base..1 day */
  double multiplier;      /* >= 1 */
  double jitter_fraction; /* for PROPORTIONAL, in [0, 1] */
  double latency_mean_ms; /* per message; 0..1 hour */
  double latency_sd_ms;   /* 0..1 hour */
  uint64_t seed;
} tk_sim_config;

/* Means over the trials. */
typedef struct tk_sim_stats {
  double calls;         /* messages the slot served (reads + writes) per trial */
  double completion_ms; /* until the last client succeeded or gave up */
  double succeeded;     /* share of clients that succeeded, in [0, 1] */
} tk_sim_stats;

/* Defaults: 100 clients, 100 trials, 20 attempts, base 10 ms, cap 1 s,
 * multiplier 2, jitter fraction 0.1, latency 10 ms +- 2 ms, seed 1. */
void tk_sim_config_default(tk_sim_config *c);

/* Check the ranges stated on the fields; 0 or TK_ERANGE naming the field. */
int tk_sim_config_validate(const tk_sim_config *c, tk_err *err);

/* The attempt budget a policy actually gets: max_attempts, but at most 4
 * for LINEAR (one try and 3 retries). */
int32_t tk_sim_budget(const tk_sim_config *c, tk_sim_policy policy);

/* Run c->trials trials under `policy` and fill *out with the means.
 * Returns 0, TK_ERANGE / TK_EINVAL for a bad configuration or policy, or
 * TK_ENOMEM. Deterministic for a given (config, policy). */
int tk_simulate(const tk_sim_config *c, tk_sim_policy policy, tk_sim_stats *out, tk_err *err);

/* "none", "exponential", "full", "equal", "decorrelated", "proportional",
 * "linear", and back (TK_EINVAL for an unknown name). */
const char *tk_sim_policy_name(tk_sim_policy p);
int tk_sim_policy_parse(const char *name, tk_sim_policy *out);

/* ---- the outage scenario ----------------------------------------------
 *
 * Work arrives at a steady rate: step i makes its first attempt at
 * floor(i * 1000000 / rate_per_s) microseconds, for i from 0 while that is
 * before duration_ms. Every call is answered at once; the downstream fails
 * every call in [outage_start_ms, outage_start_ms + outage_ms) and none
 * outside it. After a failed call a step waits its policy's delay
 * (tk_backoff_delay, jitter drawn from one tk_rand seeded with `seed`) and
 * retries, until it succeeds or has made max_attempts calls (exhausted).
 *
 * With a budget (tk_retry_budget, <tasker/budget.h>) every first attempt is
 * recorded in it and every retry must be allowed by it. A refused retry is
 * deferred, not failed: it waits in arrival order and goes when the budget
 * allows (at the time tk_retry_budget_try gave, or earlier when first
 * attempts add to the budget), as the engine moves its run_at. Events at
 * the same time go in this order: first attempts, retries coming due,
 * deferred retries. The run ends when no step is left waiting.
 */
typedef struct tk_sim_outage_config {
  double rate_per_s;       /* first attempts per second; > 0, at most 1000000 */
  int64_t duration_ms;     /* arrivals stop here; > 0, at most 1 day */
  int64_t outage_start_ms; /* >= 0 */
  int64_t outage_ms;       /* > 0; the outage ends before duration_ms */
  int32_t max_attempts;    /* per step, the first included; 1..1000 */
  tk_retry_budget_config budget; /* used when a run asks for a budget */
  uint64_t seed;
} tk_sim_outage_config;

/* Calls and first attempts made in one period of the run. */
typedef struct tk_sim_phase {
  int64_t firsts, calls;
  double amplification; /* calls / firsts: downstream load per first
                           attempt; NaN when no first attempt fell in it */
} tk_sim_phase;

typedef struct tk_sim_outage_stats {
  tk_sim_phase before; /* [0, outage start) */
  tk_sim_phase during; /* [outage start, outage end) */
  tk_sim_phase draining; /* [outage end, outage end + drain_ms]: while the
                            retries held up by the outage go out */
  tk_sim_phase after;  /* [outage end, the last call] */
  int64_t steps, succeeded, exhausted; /* succeeded + exhausted == steps */
  int64_t deferred;    /* retries the budget made wait (each counted once) */
  int64_t max_wait_ms; /* the longest such wait */
  int64_t drain_ms;    /* from the outage's end until no retry is waiting
                          (the last retry's call); 0 if none was */
  int64_t finish_ms;   /* the last call */
  int64_t peak_per_s;  /* calls in the busiest second */
  int64_t *per_second; /* calls in second i of the run, i < seconds; owned
                          (tk_sim_outage_stats_free) */
  size_t seconds;
} tk_sim_outage_stats;

/* Defaults: 100 first attempts/s for 20 minutes, an outage of 60 s from
 * 30 s, 3 attempts, budget ratio 0.05 over 10 s plus 2/s, seed 1. Over a
 * long outage a budget holds the load near 1 + ratio + min_per_second /
 * rate (1.07 here), the SRE book's "at most 1.1x". */
void tk_sim_outage_config_default(tk_sim_outage_config *c);

/* Check the ranges stated on the fields (the budget's too); 0, or
 * TK_ERANGE naming the field and what is allowed. */
int tk_sim_outage_config_validate(const tk_sim_outage_config *c, tk_err *err);

/* Run the scenario once under `policy`, with c->budget when with_budget is
 * non-zero, and fill *out (free it with tk_sim_outage_stats_free, also
 * after an error). Returns 0, TK_ERANGE for a bad configuration or policy,
 * TK_ETOOBIG when the run would outlast 30 days of simulated time, or
 * TK_ENOMEM. Deterministic for a given (config, policy, with_budget). */
int tk_simulate_outage(const tk_sim_outage_config *c, const tk_backoff_policy *policy,
                       int with_budget, tk_sim_outage_stats *out, tk_err *err);

void tk_sim_outage_stats_free(tk_sim_outage_stats *s);

#ifdef __cplusplus
}
#endif
#endif
