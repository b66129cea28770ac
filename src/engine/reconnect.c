/* A lost store connection (a database restart, a network cut): the
 * orchestrator keeps its running handlers and their finished outcomes,
 * tries the store again under the configured backoff profile, and gives up
 * only after engine.reconnect_give_up. Once connected, the outcomes are
 * recorded if their claims still hold (fenced out if another orchestrator
 * took the steps meanwhile). */
#include "engine/engine_internal.h"

#include <tasker/duration.h>

int tk__engine_reconnect(tk_engine *e, tk_err *err) {
  const tk_engine_settings *set = tk_config_engine(e->config);
  tk_err why = e->disconnected.code ? e->disconnected : (err ? *err : (tk_err){0});
  if (e->store->ops->reconnect == NULL) {
    if (err) *err = why;
    return TK_EDISCONNECTED;
  }
  const tk_backoff_policy *policy = tk__engine_policy(e, set->reconnect_backoff);
  char give_up[48];
  tk_duration_format(set->reconnect_give_up_ms, give_up, sizeof give_up);
  tk__engine_log(e, TK_LOG_WARN,
                 "lost the store: %s; reconnecting (backoff profile \"%s\", giving up after %s), "
                 "%d handler(s) still running",
                 why.msg, set->reconnect_backoff, give_up, e->in_flight);
  int64_t start_ns = tk_monotonic_ns(), prev_delay = 0;
  for (int32_t n = 1; !e->stop; n++) {
    int64_t elapsed_ms = (tk_monotonic_ns() - start_ns) / 1000000;
    if (elapsed_ms >= set->reconnect_give_up_ms) {
      tk__engine_log(e, TK_LOG_ERROR, "gave up reconnecting to the store after %s (%d tries)",
                     give_up, n - 1);
      return tk_err_set(err, TK_EDISCONNECTED,
                        "gave up reconnecting to the store after %s (%d tries): %s", give_up,
                        n - 1, why.msg);
    }
    int64_t delay = tk_backoff_delay(policy, n, prev_delay, -1, &e->rng, NULL);
    prev_delay = delay;
    if (delay > set->reconnect_give_up_ms - elapsed_ms)
      delay = set->reconnect_give_up_ms - elapsed_ms;
    /* Counted on the monotonic clock. Worker results that wake the sleep
     * wait in the pool until the store is back; the store's change
     * notices are not watched (a lost connection's socket stays readable). */
    int64_t until_ns = tk_monotonic_ns() + delay * 1000000;
    while (!e->stop && tk_monotonic_ns() < until_ns)
      tk__engine_wait(e, (until_ns - tk_monotonic_ns()) / 1000000 + 1, 0);
    if (e->stop) break;
    if (e->store->ops->reconnect(e->store, &why) == 0) {
      tk_err clock_err;
      if (tk_store_clock_sync(e->store, &clock_err) != 0)
        tk__engine_log(e, TK_LOG_WARN, "clock: %s", clock_err.msg);
      tk__engine_log(e, TK_LOG_INFO, "reconnected to the store after %.1f s (%d tries)",
                     (double)(tk_monotonic_ns() - start_ns) / 1e9, n);
      e->reap_at = INT64_MIN; /* leases may have run out meanwhile: look */
      tk_err_clear(&e->disconnected);
      return 0;
    }
    tk__engine_log(e, TK_LOG_WARN, "reconnect try %d failed: %s", n, why.msg);
  }
  return tk_err_set(err, TK_EDISCONNECTED, "stopped while reconnecting to the store: %s",
                    why.msg);
}
