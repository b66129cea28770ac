/* tasker: the injected random source.
 *
 * A small seedable generator (xoshiro256**) held by value. The same seed
 * gives the same sequence on every platform, so jittered schedules are
 * reproducible. Not for cryptography.
 */
#ifndef TASKER_RAND_H
#define TASKER_RAND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_rand {
  uint64_t s[4];
} tk_rand;

/* Seed `r` from `seed`; any seed, including 0, gives a usable state. */
void tk_rand_seed(tk_rand *r, uint64_t seed);

/* A seed from the operating system's entropy (getrandom), falling back to
 * time and pid; for callers that asked for no particular seed. */
uint64_t tk_rand_entropy_seed(void);

/* The next 64 uniformly distributed bits. */
uint64_t tk_rand_u64(tk_rand *r);

/* A uniform integer in [lo, hi]; requires lo <= hi. Unbiased. */
int64_t tk_rand_range(tk_rand *r, int64_t lo, int64_t hi);

/* A uniform double in [0, 1). */
double tk_rand_unit(tk_rand *r);

#ifdef __cplusplus
}
#endif
#endif
