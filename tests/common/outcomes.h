/* Outcomes of claimed steps as an orchestrator writes them, for tests that
 * drive the store's record op directly (the conformance suite and the
 * PostgreSQL recording tests): a success, a retryable failure due again at
 * run_at, a failure for good, and the reaper's lease_expired. */
#ifndef TASKER_TESTS_OUTCOMES_H
#define TASKER_TESTS_OUTCOMES_H

#include "store/store.h"

/* A success of claim c by owner at now, with results {"ok":true}. */
static inline tk__outcome success_of(const tk__claimed *c, const char *owner, int64_t now) {
  return (tk__outcome){.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                       .instance = c->item_index + 1, .template_id = c->template_id,
                       .idx = c->idx, .owner = owner, .attempt = c->attempt, .now = now,
                       .finished_at = now, .attempt_outcome = "success",
                       .next = TK__NEXT_COMPLETE, .results = "{\"ok\":true}"};
}

/* A failure for good ("it broke for good"). */
static inline tk__outcome error_of(const tk__claimed *c, const char *owner, int64_t now) {
  tk__outcome o = success_of(c, owner, now);
  o.attempt_outcome = "failure";
  o.next = TK__NEXT_ERROR;
  o.results = NULL;
  o.error = "it broke for good";
  return o;
}

/* A retryable failure ("it broke"), due again at run_at. */
static inline tk__outcome retry_of(const tk__claimed *c, const char *owner, int64_t now,
                                   int64_t run_at) {
  tk__outcome o = error_of(c, owner, now);
  o.next = TK__NEXT_RETRY;
  o.error = "it broke";
  o.delay_ms = run_at - now;
  o.source = TK_DELAY_COMPUTED;
  o.run_at = run_at;
  return o;
}

/* The reaper's outcome for claim c of owner whose lease ran out:
 * lease_expired, fenced on the lease still being expired, due at run_at. */
static inline tk__outcome reaped_of(const tk__claimed *c, const char *owner, int64_t now,
                                    int64_t run_at) {
  tk__outcome o = retry_of(c, owner, now, run_at);
  o.attempt_outcome = "lease_expired";
  o.error = "lease expired";
  o.fence_lease = 1;
  return o;
}

#endif
