/* The clock of a store whose time is a database server's (DESIGN §2).
 *
 * Why an offset and not server-side times: the store interface takes and
 * returns explicit times, so one conformance suite drives every backend with
 * a manual clock, and the engine plans its sleeps, leases and held retries
 * in the same times it stores. The clock is this machine's monotonic clock
 * plus the offset to the server, measured as in Cristian's algorithm (the
 * server's reading against the midpoint of the round trip, the fastest of a
 * few tries): a step of the machine's wall clock (NTP, an operator) does
 * not move it, and its error is at most half a round trip. */
#include <stdatomic.h>
#include <stdlib.h>

#include "store/store.h"

struct tk__store_clock {
  _Atomic int64_t offset_us; /* server time - monotonic time; read by workers */
};

static int64_t monotonic_us(void) { return tk_monotonic_ns() / 1000; }

static int64_t server_now(void *ud) {
  struct tk__store_clock *c = ud;
  return (monotonic_us() + atomic_load_explicit(&c->offset_us, memory_order_relaxed)) / 1000;
}

/* Samples per measurement: the fastest round trip wins. */
#define SAMPLES 3

int tk_store_clock_sync(tk_store *s, tk_err *err) {
  if (s->server == NULL) return 0;
  int64_t best_rtt = INT64_MAX, best_offset = 0;
  for (int i = 0; i < SAMPLES; i++) {
    int64_t t0 = monotonic_us(), server_us;
    int rc = s->ops->server_time(s, &server_us, err);
    if (rc) return rc;
    int64_t t1 = monotonic_us();
    if (t1 - t0 < best_rtt) {
      best_rtt = t1 - t0;
      best_offset = server_us - (t0 + (t1 - t0) / 2);
    }
  }
  atomic_store(&s->server->offset_us, best_offset);
  return 0;
}

/* Called by tk_store_open for a backend with server_time: measure, and make
 * the corrected clock the store's. */
int tk__store_clock_init(tk_store *s, tk_err *err) {
  s->server = calloc(1, sizeof *s->server);
  if (s->server == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  int rc = tk_store_clock_sync(s, err);
  if (rc) {
    free(s->server);
    s->server = NULL;
    return rc;
  }
  /* Sleeping is the machine's (it ignores its ud). */
  s->clock = (tk_clock){server_now, tk_clock_system().sleep_ms, s->server};
  return 0;
}

void tk__store_clock_free(tk_store *s) {
  free(s->server);
  s->server = NULL;
}
