/* claim_timer URL [REPEATS]: time claims of 100 ready steps on a populated
 * store (any backend), each a transaction of its own, and print the best
 * and the median in ms ("best median"). bench_pg.sh runs it on PostgreSQL
 * stores of 10^4, 10^5 and 10^6 steps; the claim reads the store's clock,
 * which on PostgreSQL is the server's. */
#include <stdio.h>
#include <stdlib.h>

#include <tasker/clock.h>
#include <tasker/store.h>

#include "store/store.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: claim_timer URL [REPEATS]\n");
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 9;
  if (reps < 1 || reps > 100) reps = 9;
  tk_store *s;
  tk_err err;
  if (tk_store_open(argv[1], &s, &err) != 0) {
    fprintf(stderr, "claim_timer: %s\n", err.msg);
    return 1;
  }
  static tk__claimed out[100];
  double ms[100];
  for (int i = 0; i < reps; i++) {
    int n = 0;
    int64_t t0 = tk_monotonic_ns();
    int rc = tk__store_claim(s, "claim-timer", 3600000, 100, out, &n, &err);
    ms[i] = (double)(tk_monotonic_ns() - t0) / 1e6;
    if (rc != 0 || n != 100) {
      fprintf(stderr, "claim_timer: claimed %d of 100: %s\n", n, rc ? err.msg : "too few ready");
      tk_store_close(s);
      return 1;
    }
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  printf("%.3f %.3f\n", ms[0], ms[reps / 2]);
  tk_store_close(s);
  return 0;
}
