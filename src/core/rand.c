/* xoshiro256** seeded through splitmix64 (public-domain algorithms by
 * Blackman and Vigna, written here from their published description). */
#define _GNU_SOURCE /* getrandom */
#include <tasker/rand.h>

#include <tasker/error.h>

#include "core/claim_token.h"

#include <assert.h>
#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void tk_rand_seed(tk_rand *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t tk_rand_entropy_seed(void) {
  uint64_t seed;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
    return seed;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
  return splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tk_rand_u64(tk_rand *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

int64_t tk_rand_range(tk_rand *r, int64_t lo, int64_t hi) {
  assert(lo <= hi);
  /* Span as unsigned so hi - lo cannot overflow. */
  uint64_t span = (uint64_t)hi - (uint64_t)lo;
  if (span == UINT64_MAX) return (int64_t)tk_rand_u64(r);
  uint64_t n = span + 1;
  /* Reject the low values that would bias the modulo. */
  uint64_t threshold = (0 - n) % n;
  uint64_t x;
  do {
    x = tk_rand_u64(r);
  } while (x < threshold);
  return (int64_t)((uint64_t)lo + x % n);
}

double tk_rand_unit(tk_rand *r) {
  return (double)(tk_rand_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Secrets (core/claim_token.h): the kernel's random bytes, blocking until
 * it has them at boot, and no fallback. */
int tk__entropy(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return TK_EIO;
    p += got;
    n -= (size_t)got;
  }
  return 0;
}
