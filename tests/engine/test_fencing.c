/* Fencing (DESIGN §4-5): an outcome is written only where the step is
 * still in progress under the same claim. A writer that lost its lease, a
 * stale attempt of the same owner, an unknown claim or a second write is refused
 * and counted; an expired lease is reaped at its expiry and retried through
 * the backoff path, spending the attempt budget. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "store/store.h"

static const char *const sets[] = {"engine.lease=10s", "engine.heartbeat=2s",
                                   "backoff.jitter=none", "backoff.profiles.x.schedule=[\"3s\"]",
                                   NULL};

static int setup(void **state) {
  *state = efx_new(sets, "orch-A");
  return 0;
}

/* Template "one": step "s" running `handler` under profile x. */
static void one_step(efx *f, const char *handler, int max_attempts) {
  char retry[64];
  snprintf(retry, sizeof retry, "{ max_attempts = %d, backoff = \"x\" }", max_attempts);
  efx_one_step(f, "one", handler, retry);
}

/* A task of "one" whose step an orchestrator "ghost" claimed (lease 10s at
 * EFX_T0) before it died; *c is the claim. Returns the task id. */
static int64_t ghost_claimed(efx *f, int max_attempts, tk__claimed *c) {
  one_step(f, "{ kind = \"builtin\", name = \"noop\" }", max_attempts);
  int64_t id = efx_submit(f, "one", NULL);
  tk_err err;
  int n;
  assert_int_equal(efx_claim_at(f->store, "ghost", EFX_T0, 10000, 1, c, &n, &err), 0);
  assert_int_equal(n, 1);
  return id;
}

static int64_t fenced_counter(efx *f) {
  return efx_sql_int(f->db, "SELECT value FROM counters WHERE name = 'fenced_writes'");
}

/* Orchestrator A's handler hangs past its lease; meanwhile orchestrator B
 * (another connection) reaps the lease and runs the retry to completion. */
typedef struct race {
  efx *f;
  tk_engine *b;
} race;

static void b_work(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call, (void)ud;
  out->results = strdup("{\"by\": \"B\"}");
}

static void a_hangs(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  race *r = ud;
  tk_err err;
  int64_t due;
  r->f->clock.now_ms += 10000; /* the lease runs out */
  if (tk_engine_tick(r->b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  assert_int_equal(due, r->f->clock.now_ms + 3000); /* the retry, after the backoff */
  r->f->clock.now_ms = due;
  if (tk_engine_tick(r->b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  out->results = strdup("{\"by\": \"A\"}");
}

static void stale_lease_outcome_is_refused_and_counted(void **state) {
  efx *f = *state;
  tk_store *second;
  tk_err err;
  assert_int_equal(tk_store_open(f->url, &second, &err), 0);
  race r = {f, efx_engine_on(f, second, "orch-B")};
  assert_int_equal(tk_engine_register(f->engine, "work", a_hangs, &r, NULL), 0);
  assert_int_equal(tk_engine_register(r.b, "work", b_work, NULL, NULL), 0);
  one_step(f, "{ kind = \"function\", name = \"work\" }", 3);
  int64_t id = efx_submit(f, "one", NULL);
  efx_tick(f);

  tk_engine_stats a = tk_engine_stats_get(f->engine), b = tk_engine_stats_get(r.b);
  assert_int_equal(a.claimed, 1);
  assert_int_equal(a.fenced, 1);
  assert_int_equal(a.completed, 0);
  assert_int_equal(b.lease_expired, 1);
  assert_int_equal(b.retried, 1);
  assert_int_equal(b.claimed, 1);
  assert_int_equal(b.completed, 1);
  assert_int_equal(fenced_counter(f), 1);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  json_t *t = efx_task(f, id);
  json_t *results = json_object_get(efx_step(t, "s"), "results");
  assert_string_equal(json_string_value(json_object_get(results, "by")), "B");
  json_decref(t);
  /* The expired attempt went through the backoff path; the late write of
   * A left it as the reaper recorded it. */
  efx_sql_expect(f->db, "1|orch-A|lease_expired|0|10000|3000|computed|13000\n"
                 "2|orch-B|success|13000|13000|NULL|NULL|NULL",
                 "SELECT attempt, owner, outcome, started_at - %1$lld,"
                 " finished_at - %1$lld, delay_ms, delay_source,"
                 " next_run_at - %1$lld FROM attempts ORDER BY id",
                 (long long)EFX_T0);
  assert_int_equal(efx_sql_int(f->db, "SELECT COUNT(*) FROM transitions WHERE to_state ="
                                      " 'complete'"),
                   2); /* the step and the task, once each */
  assert_int_equal(efx_events(f, "step.completed", NULL), 1);
  assert_int_equal(efx_events(f, "step.lease_expired", "s"), 1);
  assert_int_equal(efx_events(f, "step.fenced_out", "s"), 1);
  assert_int_equal(efx_events(f, "task.completed", NULL), 1);
  size_t i;
  json_t *e;
  json_array_foreach(f->events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "type")), "step.fenced_out") == 0) {
      assert_string_equal(json_string_value(json_object_get(e, "orchestrator")), "orch-A");
      assert_string_equal(json_string_value(json_object_get(e, "outcome")), "success");
    }
  }
  char *status = NULL;
  assert_int_equal(tk_engine_status_json(f->store, f->clock.now_ms, &status, &err), 0);
  json_t *st = json_loads(status, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "counters"),
                                                      "fenced_writes")),
                   1);
  json_decref(st);
  free(status);
  tk_engine_free(r.b);
  tk_store_close(second);
}

static tk__outcome outcome(const tk__claimed *c, const char *owner, int64_t now,
                           tk__next_state next) {
  tk__outcome o = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                   .instance = c->item_index + 1,
                   .template_id = c->template_id, .idx = c->idx, .owner = owner,
                   .attempt = c->attempt, .now = now, .finished_at = now,
                   .attempt_outcome = next == TK__NEXT_COMPLETE ? "success" : "lease_expired",
                   .next = next, .run_at = now, .fence_lease = next != TK__NEXT_COMPLETE};
  if (next != TK__NEXT_COMPLETE) o.error = "lease expired";
  else o.results = "{}";
  return o;
}

/* Record one outcome: its own result code, or the transaction's. */
static int record1(tk_store *s, const tk__outcome *o, tk__effects *fx, tk_err *err) {
  tk_err one;
  int rc = s->ops->record(s, o, 1, fx, &one, NULL, err);
  if (rc == 0 && one.code != 0) *err = one;
  return rc ? rc : one.code;
}

/* A group whose outcomes fail in different ways falls back to one
 * transaction each, and each outcome gets its own error: one that breaks
 * in the store (its task id names no task, so its child is not found),
 * one fenced out, one recorded. */
static void each_outcome_of_a_group_gets_its_own_error(void **state) {
  efx *f = *state;
  tk_store *s = f->store;
  efx_template(f, "name = \"pair\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
                  EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP);
  int64_t t1 = efx_submit(f, "pair", NULL), t2 = efx_submit(f, "pair", NULL);
  tk__claimed c[2];
  tk_err err;
  int n;
  assert_int_equal(efx_claim_at(s, "A", EFX_T0, 10000, 2, c, &n, &err), 0);
  assert_int_equal(n, 2);
  tk__outcome o[3] = {outcome(&c[0], "A", EFX_T0 + 1000, TK__NEXT_COMPLETE),
                      outcome(&c[1], "A", EFX_T0 + 1000, TK__NEXT_COMPLETE),
                      outcome(&c[1], "A", EFX_T0 + 1000, TK__NEXT_COMPLETE)};
  o[0].task_id = c[1].task_id + 1000;
  o[1].claim_id = c[1].claim_id + 1000;
  tk__effects fx[3];
  tk_err errs[3];
  assert_int_equal(s->ops->record(s, o, 3, fx, errs, NULL, &err), 0);
  assert_int_equal(errs[0].code, TK_ESTORE);
  expect_contains(errs[0].msg, "does not wait for a parent");
  assert_int_equal(errs[1].code, TK_EFENCED);
  expect_contains(errs[1].msg, "refused");
  assert_int_equal(errs[2].code, 0);
  efx_expect(f, t1, "in_progress", "a", "in_progress", NULL);
  efx_expect(f, t2, "in_progress", "a", "complete", "b", "pending", NULL);
}

static void stale_claim_unknown_claim_and_second_write_are_refused(void **state) {
  efx *f = *state;
  tk_store *s = f->store;
  one_step(f, "{ kind = \"builtin\", name = \"noop\" }", 5);
  int64_t id = efx_submit(f, "one", NULL);
  tk__claimed first, c;
  tk__effects fx;
  tk_err err;
  int n;
  assert_int_equal(efx_claim_at(s, "A", EFX_T0, 10000, 4, &first, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(first.attempt, 1);
  tk__outcome o = outcome(&first, "A", EFX_T0 + 20000, TK__NEXT_RETRY);
  assert_int_equal(record1(s, &o, &fx, &err), 0);
  /* The same owner claims the retry: attempt 2, a new claim. */
  assert_int_equal(efx_claim_at(s, "A", EFX_T0 + 20000, 10000, 4, &c, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(c.attempt, 2);
  assert_true(c.claim_id != first.claim_id);

  char *before = efx_sql_text(f->db, "SELECT * FROM steps");
  o = outcome(&first, "A", EFX_T0 + 21000, TK__NEXT_COMPLETE);
  assert_int_equal(record1(s, &o, &fx, &err), TK_EFENCED);
  expect_contains(err.msg, "attempt 1");
  assert_int_equal(s->ops->heartbeat(s, c.step_id, first.claim_id, EFX_T0 + 99000, &err),
                   TK_EFENCED);
  tk__claimed forged = c;
  forged.claim_id = c.claim_id + 1000;
  o = outcome(&forged, "B", EFX_T0 + 21000, TK__NEXT_COMPLETE);
  assert_int_equal(record1(s, &o, &fx, &err), TK_EFENCED);
  assert_int_equal(s->ops->heartbeat(s, c.step_id, forged.claim_id, EFX_T0 + 99000, &err),
                   TK_EFENCED);
  char *after = efx_sql_text(f->db, "SELECT * FROM steps");
  assert_string_equal(before, after); /* refused writes change no step */
  free(before);
  free(after);
  assert_int_equal(fenced_counter(f), 2);
  /* Attempt 1 keeps the outcome it had; attempt 2 is still open. */
  efx_sql_expect(f->db, "1|A|lease_expired\n2|A|NULL",
                 "SELECT attempt, owner, outcome FROM attempts ORDER BY id");

  assert_int_equal(s->ops->heartbeat(s, c.step_id, c.claim_id, EFX_T0 + 31000, &err), 0);
  assert_int_equal(efx_sql_int(f->db, "SELECT lease_expires_at FROM steps"), EFX_T0 + 31000);
  o = outcome(&c, "A", EFX_T0 + 22000, TK__NEXT_COMPLETE);
  assert_int_equal(record1(s, &o, &fx, &err), 0);
  assert_string_equal(fx.task_state, "complete");
  /* Nothing completes twice. */
  assert_int_equal(record1(s, &o, &fx, &err), TK_EFENCED);
  assert_int_equal(fenced_counter(f), 3);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  json_t *t = efx_task(f, id);
  assert_int_equal(json_integer_value(json_object_get(t, "steps_done")), 1);
  json_decref(t);
}

/* The reaper reads expired leases and records them in a later transaction;
 * an owner whose heartbeat renewed the lease in between keeps the step. */
static void a_lease_renewed_after_the_reapers_look_is_not_expired(void **state) {
  efx *f = *state;
  tk_store *s = f->store;
  one_step(f, "{ kind = \"builtin\", name = \"noop\" }", 5);
  int64_t id = efx_submit(f, "one", NULL);
  tk__claimed c;
  tk__expired x[4];
  tk__effects fx;
  tk_err err;
  int n;
  assert_int_equal(efx_claim_at(s, "A", EFX_T0, 10000, 1, &c, &n, &err), 0);
  assert_int_equal(s->ops->expired(s, EFX_T0 + 9999, 4, x, &n, &err), 0);
  assert_int_equal(n, 0);
  assert_int_equal(s->ops->expired(s, EFX_T0 + 10000, 4, x, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(x[0].step.claim_id, c.claim_id);
  assert_string_equal(x[0].owner, "A");
  assert_int_equal(s->ops->heartbeat(s, c.step_id, c.claim_id, EFX_T0 + 20000, &err), 0);
  tk__outcome o = outcome(&x[0].step, "A", EFX_T0 + 10000, TK__NEXT_RETRY);
  assert_int_equal(record1(s, &o, &fx, &err), TK_EFENCED);
  efx_expect(f, id, "in_progress", "s", "in_progress", NULL);
  o = outcome(&c, "A", EFX_T0 + 12000, TK__NEXT_COMPLETE);
  assert_int_equal(record1(s, &o, &fx, &err), 0);
  efx_expect(f, id, "complete", "s", "complete", NULL);
}

/* Cancels its own task while it runs. */
static void cancel_me(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)out;
  efx *f = ud;
  tk__effects fx;
  tk_err err;
  if (f->store->ops->operator(f->store, TK__OP_CANCEL, call->task_id, NULL, f->clock.now_ms, &fx,
                              &err) != 0)
    fail_msg("cancel: %s", err.msg);
}

static void an_outcome_after_cancel_is_fenced_out(void **state) {
  efx *f = *state;
  assert_int_equal(tk_engine_register(f->engine, "cancel_me", cancel_me, f, NULL), 0);
  one_step(f, "{ kind = \"function\", name = \"cancel_me\" }", 3);
  int64_t id = efx_submit(f, "one", NULL);
  assert_int_equal(efx_drive(f, 5), 2);
  efx_expect(f, id, "cancelled", "s", "cancelled", NULL);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.fenced, 1);
  assert_int_equal(st.completed, 0);
  assert_int_equal(fenced_counter(f), 1);
  assert_int_equal(efx_events(f, "step.completed", NULL), 0);
  assert_int_equal(efx_events(f, "step.fenced_out", "s"), 1);
  /* The claim is accounted for: its attempt row says it was fenced out. */
  efx_sql_expect(f->db, "1|orch-A|fenced_out|0",
                 "SELECT attempt, owner, outcome, finished_at - %lld FROM attempts",
                 (long long)EFX_T0);
}

static void an_expired_lease_is_reaped_at_its_expiry_and_retried_after_the_backoff(void **state) {
  efx *f = *state;
  tk_store *s = f->store;
  tk__claimed c;
  tk_err err;
  int64_t id = ghost_claimed(f, 3, &c);
  assert_int_equal(efx_tick(f), EFX_T0 + 10000); /* the engine wakes at the expiry */
  f->clock.now_ms = EFX_T0 + 9999;
  efx_tick(f);
  assert_int_equal(tk_engine_stats_get(f->engine).lease_expired, 0);
  f->clock.now_ms = EFX_T0 + 10000;
  assert_int_equal(efx_tick(f), EFX_T0 + 13000);
  assert_int_equal(tk_engine_stats_get(f->engine).lease_expired, 1);
  efx_expect(f, id, "in_progress", "s", "waiting_for_retry", NULL);
  json_t *t = efx_task(f, id);
  assert_string_equal(json_string_value(json_object_get(efx_step(t, "s"), "last_error")),
                      "lease held by ghost expired (its holder stopped or hung)");
  json_decref(t);
  efx_drive(f, 5);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  efx_sql_expect(f->db, "1|ghost|lease_expired|0|3000|computed\n"
                 "2|orch-A|success|13000|NULL|NULL",
                 "SELECT attempt, owner, outcome, started_at - %1$lld,"
                 " delay_ms, delay_source FROM attempts ORDER BY id",
                 (long long)EFX_T0);
  /* The ghost comes back and reports: refused. */
  tk__effects fx;
  tk__outcome o = outcome(&c, "ghost", f->clock.now_ms, TK__NEXT_COMPLETE);
  assert_int_equal(record1(s, &o, &fx, &err), TK_EFENCED);
  assert_int_equal(fenced_counter(f), 1);
}

/* The store's expired-leases query, patched to let the ghost's heartbeat
 * renew the lease right after the reaper looked: the race the reaper's
 * fence is for, which another process could win at any time. */
static const tk__store_ops *real_ops;
static tk__claimed renewed_claim;

static int expired_then_renewed(tk_store *s, int64_t now, int limit, tk__expired *out, int *n,
                                tk_err *err) {
  int rc = real_ops->expired(s, now, limit, out, n, err);
  if (rc == 0 && *n > 0)
    rc = real_ops->heartbeat(s, renewed_claim.step_id, renewed_claim.claim_id, now + 10000, err);
  return rc;
}

static void a_lease_renewed_as_the_reaper_looks_is_not_counted_as_expired(void **state) {
  efx *f = *state;
  int64_t id = ghost_claimed(f, 3, &renewed_claim);
  tk__store_ops patched = *f->store->ops;
  real_ops = f->store->ops;
  patched.expired = expired_then_renewed;
  f->store->ops = &patched;
  f->clock.now_ms = EFX_T0 + 10000;
  efx_tick(f);
  f->store->ops = real_ops;
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.lease_expired, 0);
  assert_int_equal(st.fenced, 1);
  assert_int_equal(st.retried, 0);
  assert_int_equal(efx_events(f, "step.lease_expired", NULL), 0);
  assert_int_equal(efx_events(f, "step.retry_scheduled", NULL), 0);
  assert_int_equal(efx_events(f, "step.fenced_out", "s"), 1);
  efx_expect(f, id, "in_progress", "s", "in_progress", NULL);
  /* The ghost holds its renewed lease, and its attempt is still open. */
  efx_sql_expect(f->db, "ghost|20000|1|NULL",
                 "SELECT s.lease_owner, s.lease_expires_at - %lld, a.attempt, a.outcome"
                 " FROM steps s JOIN attempts a ON a.id = s.claim_id",
                 (long long)EFX_T0);
}

/* A handler that waits at a gate until the test opens it. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, open;
} gate;

static void wait_at_gate(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call, (void)out;
  gate *g = ud;
  pthread_mutex_lock(&g->mu);
  g->started = 1;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

/* One pass of engine ud; true once it has recorded an attempt complete. */
static int tick_until_completed(void *ud) {
  tk_engine *e = ud;
  int64_t due;
  tk_err err;
  if (tk_engine_tick(e, &due, &err) != 0) fail_msg("tick: %s", err.msg);
  return tk_engine_stats_get(e).completed > 0;
}

/* The engine thread stalls past its own lease (the manual clock jumps 15 s,
 * 5 s past the 10 s lease, while a worker runs the step): its next pass renews the lease before it
 * looks for expired ones, so it does not reap its own running attempt. */
static void a_stalled_engine_renews_its_leases_before_reaping(void **state) {
  efx *f = *state;
  gate g = {.started = 0, .open = 0};
  pthread_mutex_init(&g.mu, NULL);
  pthread_cond_init(&g.cv, NULL);
  tk_engine_options o = {.store = f->store, .config = f->cfg, .clock = tk_clock_manual(&f->clock),
                         .seed = 42, .id = "orch-A", .workers = 1, .on_event = efx_on_event,
                         .event_ud = f};
  tk_engine *e;
  tk_err err;
  if (tk_engine_new(&o, &e, &err) != 0) fail_msg("engine: %s", err.msg);
  assert_int_equal(tk_engine_register(e, "gate", wait_at_gate, &g, NULL), 0);
  one_step(f, "{ kind = \"function\", name = \"gate\" }", 3);
  int64_t id = efx_submit(f, "one", NULL);
  int64_t due;
  if (tk_engine_tick(e, &due, &err) != 0) fail_msg("tick: %s", err.msg);
  pthread_mutex_lock(&g.mu);
  while (!g.started) pthread_cond_wait(&g.cv, &g.mu);
  pthread_mutex_unlock(&g.mu);
  f->clock.now_ms = EFX_T0 + 15000;
  if (tk_engine_tick(e, &due, &err) != 0) fail_msg("tick: %s", err.msg);
  assert_int_equal(tk_engine_stats_get(e).lease_expired, 0);
  assert_int_equal(efx_sql_int(f->db, "SELECT lease_expires_at FROM steps") - EFX_T0, 25000);
  pthread_mutex_lock(&g.mu);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  /* The worker's result is recorded by a later pass: pass until it is,
   * however long the worker takes on a busy machine. */
  if (!efx_wait_for(tick_until_completed, e, 60000))
    fail_msg("the attempt was not recorded within 60 s of the handler's release");
  tk_engine_free(e);
  efx_expect(f, id, "complete", "s", "complete", NULL);
  efx_sql_expect(f->db, "1|orch-A|success", "SELECT attempt, owner, outcome FROM attempts");
  pthread_mutex_destroy(&g.mu);
  pthread_cond_destroy(&g.cv);
}

static void an_expired_lease_spends_the_attempt_budget(void **state) {
  efx *f = *state;
  tk__claimed c;
  int64_t id = ghost_claimed(f, 1, &c);
  efx_drive(f, 5);
  efx_expect(f, id, "error", "s", "error", NULL);
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.lease_expired, 1);
  assert_int_equal(st.exhausted, 1);
  assert_int_equal(st.claimed, 0);
  assert_int_equal(efx_events(f, "step.exhausted", "s"), 1);
  assert_int_equal(efx_events(f, "task.failed", NULL), 1);
}

/* A lease whose expiry the store refuses to record (here a test's
 * trigger; in life, a rule the outcome breaks) stays expired: the reaper
 * looks at it again after 1 s, 2 s, 4 s, ... up to the lease (10 s), not
 * at every pass, as it did, logging each time. Once the store takes it,
 * the next look reaps it. */
static void a_lease_the_store_will_not_reap_is_looked_at_again_after_a_backoff(void **state) {
  efx *f = *state;
  tk__claimed c;
  int64_t id = ghost_claimed(f, 3, &c);
  efx_exec(f->db, "CREATE TRIGGER no_reap BEFORE UPDATE OF state ON steps"
                  " WHEN NEW.state = 'waiting_for_retry'"
                  " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
  /* 20 s of passes 50 ms apart from the expiry: looks at 0, 1, 3, 7, 15 s. */
  for (int64_t t = EFX_T0 + 10000; t < EFX_T0 + 30000; t += 50) {
    f->clock.now_ms = t;
    efx_tick(f);
  }
  assert_int_equal(efx_logs(f, "cannot record outcome"), 5);
  assert_int_equal(efx_logs(f, "refused by the test"), 5);
  assert_int_equal(tk_engine_stats_get(f->engine).lease_expired, 0);
  efx_expect(f, id, "in_progress", "s", "in_progress", NULL);
  efx_exec(f->db, "DROP TRIGGER no_reap");
  f->clock.now_ms = EFX_T0 + 30000;
  assert_int_equal(efx_tick(f), EFX_T0 + 35000); /* 10 s after the last look */
  f->clock.now_ms = EFX_T0 + 35000;
  efx_tick(f);
  assert_int_equal(tk_engine_stats_get(f->engine).lease_expired, 1);
  efx_expect(f, id, "in_progress", "s", "waiting_for_retry", NULL);
  assert_int_equal(efx_logs(f, "cannot record outcome"), 5);
}

/* Each test gets a fresh store and engine. */
#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, efx_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(stale_lease_outcome_is_refused_and_counted),
      TEST(a_lease_renewed_as_the_reaper_looks_is_not_counted_as_expired),
      TEST(each_outcome_of_a_group_gets_its_own_error),
      TEST(a_stalled_engine_renews_its_leases_before_reaping),
      TEST(stale_claim_unknown_claim_and_second_write_are_refused),
      TEST(a_lease_renewed_after_the_reapers_look_is_not_expired),
      TEST(an_outcome_after_cancel_is_fenced_out),
      TEST(an_expired_lease_is_reaped_at_its_expiry_and_retried_after_the_backoff),
      TEST(an_expired_lease_spends_the_attempt_budget),
      TEST(a_lease_the_store_will_not_reap_is_looked_at_again_after_a_backoff),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
