/* tasker: the contention simulator behind `tasker simulate` (DESIGN §10).
 *
 * N clients each need one successful conditional write to a single
 * versioned slot. An attempt is a read (the slot's version) followed by a
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

#ifdef __cplusplus
}
#endif
#endif
