/* N threads propose to one compare-and-swap slot, retrying under tasker's
 * in-process retry helper (tk_retry_call) with full jitter: base 10 ms,
 * cap 1 s. Each proposal reads the slot's version, waits a round trip
 * (2 ms, as a proposer talking to a replica would) and then tries to move
 * the version on by one; it fails when another thread got there first.
 * Prints each thread's attempts and backoff.
 *
 * Build and run from the top of the tree, after `make`:
 *
 *   cc -Iinclude examples/cas_contention.c build/lib/libtasker.a -lm -lpthread -o cas_contention
 *   ./cas_contention [THREADS [MAX_ATTEMPTS [SEED]]]      # defaults 16, 50, fresh
 *
 * `tasker simulate` runs the same contest on simulated time for many sizes
 * and policies at once (docs/retry.md).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tasker/backoff.h>
#include <tasker/clock.h>
#include <tasker/rand.h>
#include <tasker/retry.h>

#define MAX_THREADS 256
#define ROUND_TRIP_MS 2

static atomic_long slot_version;

typedef struct proposer {
  int id;
  int32_t max_attempts;
  const tk_backoff_policy *policy;
  tk_rand rng;
  pthread_barrier_t *start;
  /* results */
  int32_t attempts;
  int64_t slept_ms;
  long won_version; /* the version this proposer wrote, or -1 */
  int rc;
  tk_err err;
} proposer;

/* One proposal: read, wait a round trip, compare-and-swap. */
static int propose(void *ctx, int32_t attempt, int64_t *hint_ms, tk_err *err) {
  (void)hint_ms;
  proposer *p = ctx;
  p->attempts = attempt;
  long read = atomic_load(&slot_version);
  struct timespec rt = {0, ROUND_TRIP_MS * 1000000L};
  nanosleep(&rt, NULL);
  long current = read; /* a failed exchange leaves the slot's value here */
  if (atomic_compare_exchange_strong(&slot_version, &current, read + 1)) {
    p->won_version = read + 1;
    return 0;
  }
  tk_err_set(err, TK_EEXIST, "read version %ld, but the slot had moved on to %ld", read, current);
  return TK_RETRY_AGAIN;
}

/* The real clock, with each thread's sleeps added up for the report:
 * the helper takes any clock, which is also how tests make it instant. */
typedef struct counting_clock {
  tk_clock real;
  int64_t *slept_ms;
} counting_clock;

static int64_t counting_now(void *ud) { return tk_clock_now(&((counting_clock *)ud)->real); }
static void counting_sleep(void *ud, int64_t ms) {
  counting_clock *c = ud;
  *c->slept_ms += ms;
  tk_clock_sleep(&c->real, ms);
}

static void *run(void *arg) {
  proposer *p = arg;
  counting_clock cc = {tk_clock_system(), &p->slept_ms};
  tk_clock clock = {counting_now, counting_sleep, &cc};
  pthread_barrier_wait(p->start); /* everyone proposes at the same moment */
  p->rc = tk_retry_call(p->policy, p->max_attempts, propose, p, &clock, &p->rng, &p->err);
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 16;
  int32_t max_attempts = argc > 2 ? (int32_t)atoi(argv[2]) : 50;
  uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : tk_rand_entropy_seed();
  if (n < 1 || n > MAX_THREADS || max_attempts < 1) {
    fprintf(stderr, "usage: cas_contention [THREADS (1..%d) [MAX_ATTEMPTS (>= 1) [SEED]]]\n",
            MAX_THREADS);
    return 2;
  }

  /* Every field set here on purpose: the policy under test, nothing implied. */
  tk_backoff_policy policy;
  memset(&policy, 0, sizeof policy);
  policy.base_ms = 10;
  policy.multiplier = 2.0;
  policy.max_delay_ms = 1000;
  policy.jitter = TK_JITTER_FULL;
  policy.max_server_delay_ms = 1000;

  static proposer ps[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  int64_t t0 = tk_monotonic_ns();
  for (int i = 0; i < n; i++) {
    ps[i] = (proposer){.id = i, .max_attempts = max_attempts, .policy = &policy,
                       .start = &start, .won_version = -1};
    tk_rand_seed(&ps[i].rng, seed + (uint64_t)i);
    if (pthread_create(&th[i], NULL, run, &ps[i]) != 0) {
      fprintf(stderr, "cas_contention: cannot start thread %d\n", i);
      return 1;
    }
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  double elapsed = (double)(tk_monotonic_ns() - t0) / 1e9;
  pthread_barrier_destroy(&start);

  printf("%d threads, one compare-and-swap slot: full jitter, base 10ms, cap 1s, "
         "at most %d attempts, seed %llu\n",
         n, (int)max_attempts, (unsigned long long)seed);
  printf("%6s %9s %10s  %s\n", "thread", "attempts", "backoff", "result");
  long total = 0;
  int failed = 0;
  for (int i = 0; i < n; i++) {
    total += ps[i].attempts;
    printf("%6d %9d %8.3fs  ", i, (int)ps[i].attempts, (double)ps[i].slept_ms / 1000.0);
    if (ps[i].rc == 0) {
      printf("wrote version %ld\n", ps[i].won_version);
    } else {
      failed++;
      printf("%s\n", ps[i].err.msg);
    }
  }
  printf("%ld attempts for %d proposals (%.2f each), %d gave up, %.2f s elapsed; slot at "
         "version %ld\n",
         total, n, (double)total / n, failed, elapsed, atomic_load(&slot_version));
  return failed ? 1 : 0;
}
