/* The engine's side of the worker protocol (remote.h): not yet built. */
#include "engine/remote.h"

#include <stdlib.h>

int tk__remote_claim(tk_engine *e, const char *queue, const char *worker, int max,
                     tk__remote_claimed *out, int *n, tk_err *err) {
  (void)e, (void)queue, (void)worker, (void)max, (void)out;
  *n = 0;
  return tk_err_set(err, TK_EUNSUPPORTED, "worker steps are not built yet");
}

void tk__remote_claims_free(tk__remote_claimed *c, int n) {
  for (int i = 0; i < n; i++) {
    free(c[i].step);
    json_decref(c[i].input);
    c[i].step = NULL;
    c[i].input = NULL;
  }
}

int tk__remote_heartbeat(tk_engine *e, const char *token, int64_t *lease_expires_at,
                         tk_err *err) {
  (void)e, (void)token, (void)lease_expires_at;
  return tk_err_set(err, TK_EUNSUPPORTED, "worker steps are not built yet");
}

int tk__remote_complete(tk_engine *e, const char *token, const char *results,
                        tk__remote_result *out, tk_err *err) {
  (void)e, (void)token, (void)results, (void)out;
  return tk_err_set(err, TK_EUNSUPPORTED, "worker steps are not built yet");
}

int tk__remote_fail(tk_engine *e, const char *token, const char *error, int retryable,
                    int64_t retry_after_ms, tk__remote_result *out, tk_err *err) {
  (void)e, (void)token, (void)error, (void)retryable, (void)retry_after_ms, (void)out;
  return tk_err_set(err, TK_EUNSUPPORTED, "worker steps are not built yet");
}

int tk__remote_wake_fd(tk_engine *e) {
  (void)e;
  return -1;
}

void tk__remote_drain(tk_engine *e) { (void)e; }
