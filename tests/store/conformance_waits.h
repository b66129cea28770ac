/* Conformance cases of wait steps and signals (DESIGN §18, ops 15:
 * signal_put, step_wait, wait_take; issue 24): a signal sent after the
 * step waits and one sent before, a repeated key answered once, a signal
 * to a finished step refused saying when it finished, a timeout that
 * fails the attempt and a retry that waits again and completes, a failing
 * signal, two takers never taking one wait twice, bad signals changing
 * nothing, a cancel of a task that waits, and the news of a signal that
 * another connection's drain_changes gives. Outcomes are recorded
 * through `record`, fenced by the claim that parked the step, as the
 * engine records them (engine/waits.c). Included by test_conformance.c;
 * every case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_WAITS_H
#define TESTS_STORE_CONFORMANCE_WAITS_H

#define WAIT_HANDLER "handler = { kind = \"wait\", timeout = \"1h\" }\n"
/* approve (a wait step) -> ship */
static const char approval_toml[] =
    "name = \"approval\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"approve\"\n" WAIT_HANDLER
    "retry = { max_attempts = 3 }\n" AFTER("ship", "approve");

#define WAIT_MS 60000 /* the timeout the cases give step_wait */

/* Park claim c on s at now with the case's timeout: the signal it took
 * (id 0: none, the step waits now). */
static tk__signal_rec park(world *w, tk_store *s, const tk__claimed *c) {
  tk__wait_req r = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                    .timeout_at = w->clock.now_ms + WAIT_MS, .now = w->clock.now_ms};
  tk__signal_rec sig;
  tk_err err;
  must(s->ops->step_wait(s, &r, &sig, &err), &err, "step_wait");
  return sig;
}

/* Send a signal through the library (tk_step_signal); its code, the
 * answer in *out and the message in *err. */
static int send_signal(world *w, int64_t task, const char *step, const char *data,
                       const char *error, const char *key, tk_signal_result *out, tk_err *err) {
  tk_signal_request r = {.task_id = task, .step = step, .data_json = data, .error = error,
                         .key = key};
  return tk_step_signal(w->s, &r, w->clock.now_ms, out, err);
}

/* A signal that must be stored (or answered as a duplicate). */
static tk_signal_result signal_ok(world *w, int64_t task, const char *step, const char *data,
                                  const char *error, const char *key) {
  tk_signal_result res;
  tk_err err;
  must(send_signal(w, task, step, data, error, key, &res, &err), &err, "signal");
  return res;
}

/* wait_take on s at now, up to max into out: how many; *next_at. */
static int take_waits(world *w, tk_store *s, int max, tk__waited *out, int64_t *next_at) {
  int n = 0;
  int64_t next = 0;
  tk_err err;
  must(s->ops->wait_take(s, w->clock.now_ms, "taker", LEASE_MS, max, out, &n, &next, &err), &err,
       "wait_take");
  if (next_at) *next_at = next;
  return n;
}

/* The outcome the engine records for wait x taken by "taker": its
 * signal's data complete it, its error or its timeout fail the attempt,
 * retried at run_at while attempts are left (run_at 0: for good). */
static tk__outcome wait_outcome(world *w, const tk__waited *x, const tk__signal_rec *sig,
                                int64_t run_at) {
  tk__outcome o = success_of(&x->step, "taker", w->clock.now_ms);
  if (sig != NULL && sig->data != NULL) {
    o.results = sig->data;
    return o;
  }
  o = run_at ? retry_of(&x->step, "taker", w->clock.now_ms, run_at)
             : error_of(&x->step, "taker", w->clock.now_ms);
  o.attempt_outcome = sig == NULL ? "timeout" : "failure";
  o.error = sig == NULL ? TK__WAIT_TIMEOUT_ERROR : sig->error;
  return o;
}

/* A signal after the step waits: the claim parks it (no lease, run_at its
 * timeout, the attempt open), a claim finds nothing, the signal is stored
 * undelivered, wait_take hands it back in progress under the taker's
 * lease, and its outcome completes it with the data and releases ship. */
static void signal_after_waiting(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  tk__signal_rec sig = park(w, w->s, &c);
  assert_int_equal(sig.id, 0);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_WAITING, "ship",
                TK__STEP_PENDING, NULL);
  tk__task_report r;
  report_on(w->s, task, &r);
  const tk__step_rec *a = step_named(&r, "approve");
  assert_true(a->lease_expires_at == TK__NONE);
  assert_true(a->run_at == w->clock.now_ms + WAIT_MS);
  assert_int_equal(attempts_with(&r, "approve", NULL), 1);
  assert_int_equal(transitions(&r, "approve", TK__STEP_IN_PROGRESS, TK__STEP_WAITING,
                               TK__REASON_WAITING), 1);
  tk__task_report_free(&r);
  tk__claimed none[2];
  assert_int_equal(claim(w->s, "orch", 2, none), 0);
  tk__waited x[4];
  int64_t next_at;
  assert_int_equal(take_waits(w, w->s, 4, x, &next_at), 0);
  assert_true(next_at == w->clock.now_ms + WAIT_MS);

  w->clock.now_ms = T(1000);
  tk_signal_result res = signal_ok(w, task, "approve", "{\"by\": \"ann\"}", NULL, NULL);
  assert_int_equal(res.duplicate, 0);
  assert_int_equal(res.delivered, 0);
  assert_string_equal(res.step_state, TK__STEP_WAITING);
  assert_int_equal(take_waits(w, w->s, 4, x, NULL), 1);
  assert_int_equal(x[0].timed_out, 0);
  assert_true(x[0].step.claim_id == c.claim_id);
  assert_int_equal(x[0].step.attempt, 1);
  expect_json(x[0].sig.data, "{\"by\":\"ann\"}");
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_IN_PROGRESS, NULL);
  /* Taken once: another look finds nothing. */
  tk__waited again[2];
  assert_int_equal(take_waits(w, w->s, 2, again, NULL), 0);
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, 0);
  tk__effects fx = record_ok(w->s, &o);
  assert_int_equal(fx.children_released, 1);
  tk__signal_rec_free(&x[0].sig);
  report_on(w->s, task, &r);
  expect_json(step_named(&r, "approve")->results, "{\"by\":\"ann\"}");
  assert_string_equal(step_named(&r, "approve")->state, TK__STEP_COMPLETE);
  assert_int_equal(attempts_with(&r, "approve", "success"), 1);
  assert_int_equal(transitions(&r, "approve", TK__STEP_WAITING, TK__STEP_IN_PROGRESS,
                               TK__REASON_SIGNAL), 1);
  tk__task_report_free(&r);
  tk__claimed ship = claim_one(w->s, "orch");
  o = success_of(&ship, "orch", w->clock.now_ms);
  record_ok(w->s, &o);
  expect_states(w, task, TK__TASK_COMPLETE, "approve", TK__STEP_COMPLETE, "ship",
                TK__STEP_COMPLETE, NULL);
}

/* A wait taken by an orchestrator that stopped before recording it: the
 * lease wait_take gave it expires, and `expired` hands the reaper the
 * signal delivered to that claim, which it records as the attempt's
 * outcome (fenced by the lease, as a lease_expired is): the step
 * completes with the signal's data, not counted as an expired lease, and
 * no retry runs the wait again. The same signal is never delivered twice. */
static void a_taken_wait_outlives_its_taker(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  tk__signal_rec sig = park(w, w->s, &c);
  assert_int_equal(sig.id, 0);
  tk_signal_result res = signal_ok(w, task, "approve", "{\"by\": \"bo\"}", NULL, NULL);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  tk__signal_rec_free(&x[0].sig);
  /* The taker stops here. Its lease runs out. */
  tk__expired ex[2];
  assert_int_equal(expired_at(w->s, w->clock.now_ms + LEASE_MS - 1, ex, 2), 0);
  w->clock.now_ms += LEASE_MS;
  assert_int_equal(expired_at(w->s, w->clock.now_ms, ex, 2), 1);
  assert_true(ex[0].step.claim_id == c.claim_id);
  assert_string_equal(ex[0].owner, "taker");
  assert_true(ex[0].sig.id == res.signal_id);
  expect_json(ex[0].sig.data, "{\"by\":\"bo\"}");
  assert_null(ex[0].sig.error);
  tk__outcome o = success_of(&ex[0].step, ex[0].owner, w->clock.now_ms);
  o.results = ex[0].sig.data;
  o.fence_lease = 1;
  int64_t expired_before = counter(w, "lease_expired");
  tk__effects fx = record_ok(w->s, &o);
  tk__expired_free_signals(ex, 1);
  assert_int_equal(fx.children_released, 1);
  assert_int_equal(counter(w, "lease_expired"), expired_before);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_string_equal(step_named(&r, "approve")->state, TK__STEP_COMPLETE);
  expect_json(step_named(&r, "approve")->results, "{\"by\":\"bo\"}");
  assert_int_equal(attempts_with(&r, "approve", NULL), 0); /* none left open */
  assert_int_equal(attempts_with(&r, "approve", "success"), 1);
  tk__task_report_free(&r);
  /* A lease without a taken signal still comes back empty-handed. */
  tk__claimed ship = claim_one(w->s, "orch");
  w->clock.now_ms += LEASE_MS;
  assert_int_equal(expired_at(w->s, w->clock.now_ms, ex, 2), 1);
  assert_true(ex[0].step.step_id == ship.step_id);
  assert_int_equal(ex[0].sig.id, 0);
  assert_null(ex[0].sig.data);
}

/* A signal before the step waits is kept (the step pending), and the
 * claim's step_wait takes it: the step stays in progress under its claim
 * and its outcome is recorded at once; nothing is left to take. */
static void signal_before_waiting(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk_signal_result res = signal_ok(w, task, "approve", "[1, 2]", NULL, "k1");
  assert_string_equal(res.step_state, TK__STEP_PENDING);
  assert_int_equal(res.delivered, 0);
  w->clock.now_ms = T(500);
  tk__claimed c = claim_one(w->s, "orch");
  tk__signal_rec sig = park(w, w->s, &c);
  assert_true(sig.id == res.signal_id);
  expect_json(sig.data, "[1,2]");
  assert_string_equal(sig.key, "k1");
  assert_true(sig.created_at == T(0));
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_IN_PROGRESS, NULL);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  tk__outcome o = success_of(&c, "orch", w->clock.now_ms);
  o.results = sig.data;
  record_ok(w->s, &o);
  tk__signal_rec_free(&sig);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_COMPLETE, "ship",
                TK__STEP_PENDING, NULL);
  /* The same key again, after it was applied: answered as the first. */
  res = signal_ok(w, task, "approve", "{\"other\": 1}", NULL, "k1");
  assert_int_equal(res.duplicate, 1);
  assert_int_equal(res.delivered, 1);
  assert_true(res.sent_at == T(0));
}

/* The same key twice while the step waits: one signal, the second call
 * answered as the first, applied once; another signal (another key, or
 * none) while one is undelivered is refused, naming when that one was
 * sent; after the step finished a new signal is refused saying so and
 * when, and the store does not change. */
static void duplicate_and_finished_signals(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  tk__signal_rec sig = park(w, w->s, &c);
  assert_int_equal(sig.id, 0);
  w->clock.now_ms = T(100);
  tk_signal_result first = signal_ok(w, task, "approve", "{\"n\": 1}", NULL, "same");
  w->clock.now_ms = T(200);
  tk_signal_result second = signal_ok(w, task, "approve", "{\"n\": 2}", NULL, "same");
  assert_int_equal(first.duplicate, 0);
  assert_int_equal(second.duplicate, 1);
  assert_true(second.signal_id == first.signal_id);
  assert_true(second.sent_at == T(100));
  tk_signal_result res;
  tk_err err;
  assert_int_equal(send_signal(w, task, "approve", "{}", NULL, "other", &res, &err), TK_ESTATE);
  expect_contains(err.msg, "not delivered yet");
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  expect_json(x[0].sig.data, "{\"n\":1}");
  w->clock.now_ms = T(300);
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);

  w->clock.now_ms = T(5000);
  char *before = task_text(w, task);
  assert_int_equal(send_signal(w, task, "approve", "{}", NULL, NULL, &res, &err), TK_ESTATE);
  expect_contains(err.msg, "already finished");
  expect_contains(err.msg, "complete since");
  assert_int_equal(send_signal(w, task, "approve", NULL, "too late", "new", &res, &err),
                   TK_ESTATE);
  /* The first key still answers as it did. */
  res = signal_ok(w, task, "approve", "{\"n\": 3}", NULL, "same");
  assert_int_equal(res.duplicate, 1);
  assert_true(res.signal_id == first.signal_id);
  expect_unchanged(w, task, before);
}

/* At its timeout a waiting step is taken as timed out (not before); its
 * attempt fails as a timeout and is retried; the retry is claimed and
 * parked again (attempt 2), and a signal then completes it. */
static void timeout_then_retry_then_signal(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  park(w, w->s, &c);
  tk__waited x[2];
  int64_t next_at;
  w->clock.now_ms = T(WAIT_MS - 1);
  assert_int_equal(take_waits(w, w->s, 2, x, &next_at), 0);
  assert_true(next_at == T(WAIT_MS));
  w->clock.now_ms = T(WAIT_MS);
  assert_int_equal(take_waits(w, w->s, 2, x, &next_at), 1);
  assert_true(next_at == INT64_MAX);
  assert_int_equal(x[0].timed_out, 1);
  assert_int_equal(x[0].sig.id, 0);
  tk__outcome o = wait_outcome(w, &x[0], NULL, T(WAIT_MS + 1000));
  record_ok(w->s, &o);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_WAITING_FOR_RETRY, NULL);

  w->clock.now_ms = T(WAIT_MS + 1000);
  tk__claimed retry = claim_one(w->s, "orch");
  assert_int_equal(retry.attempt, 2);
  tk__signal_rec sig = park(w, w->s, &retry);
  assert_int_equal(sig.id, 0);
  w->clock.now_ms = T(WAIT_MS + 2000);
  signal_ok(w, task, "approve", "{\"ok\": true}", NULL, NULL);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_int_equal(x[0].step.attempt, 2);
  o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_string_equal(step_named(&r, "approve")->state, TK__STEP_COMPLETE);
  assert_int_equal(attempts_with(&r, "approve", "timeout"), 1);
  assert_int_equal(attempts_with(&r, "approve", "success"), 1);
  const tk__attempt_rec *a1 = attempt_of(&r, "approve", 1);
  assert_string_equal(a1->error, TK__WAIT_TIMEOUT_ERROR);
  assert_int_equal(transitions(&r, "approve", TK__STEP_WAITING, TK__STEP_IN_PROGRESS,
                               TK__REASON_WAIT_TIMEOUT), 1);
  assert_int_equal(transitions(&r, "approve", TK__STEP_IN_PROGRESS, TK__STEP_WAITING, NULL), 2);
  tk__task_report_free(&r);
}

/* A failing signal fails the attempt with its message: retried while
 * attempts are left (the retry waits again and takes the next signal),
 * for good at the last; the task then ends in error. */
static void failing_signal(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  park(w, w->s, &c);
  signal_ok(w, task, "approve", NULL, "rejected by ann", NULL);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_string_equal(x[0].sig.error, "rejected by ann");
  assert_null(x[0].sig.data);
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, T(10));
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  /* Sent while the step waits for its retry: kept for its next wait. */
  signal_ok(w, task, "approve", NULL, "rejected again", NULL);
  w->clock.now_ms = T(10);
  tk__claimed retry = claim_one(w->s, "orch");
  tk__signal_rec sig = park(w, w->s, &retry);
  assert_string_equal(sig.error, "rejected again");
  o = error_of(&retry, "orch", w->clock.now_ms);
  o.error = sig.error;
  record_ok(w->s, &o);
  tk__signal_rec_free(&sig);
  expect_states(w, task, TK__TASK_ERROR, "approve", TK__STEP_ERROR, "ship", TK__STEP_PENDING,
                NULL);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_string_equal(step_named(&r, "approve")->last_error, "rejected again");
  assert_string_equal(attempt_of(&r, "approve", 1)->error, "rejected by ann");
  tk__task_report_free(&r);
  tk_signal_result res;
  tk_err err;
  assert_int_equal(send_signal(w, task, "approve", "{}", NULL, NULL, &res, &err), TK_ESTATE);
  expect_contains(err.msg, "error since");
}

/* Two connections taking waits at once take each step once; a wait whose
 * claim was taken elsewhere is fenced for step_wait. */
static void two_takers_take_each_wait_once(world *w) {
  add_template(w, approval_toml);
  enum { N = 6 };
  for (int i = 0; i < N; i++) submit(w, "approval");
  tk__claimed c[N];
  assert_int_equal(claim(w->s, "orch", N, c), N);
  for (int i = 0; i < N; i++) park(w, w->s, &c[i]);
  /* Parking twice: the claim no longer holds a step in progress. */
  tk__wait_req again = {.step_id = c[0].step_id, .claim_id = c[0].claim_id,
                        .task_id = c[0].task_id, .timeout_at = T(1), .now = T(0)};
  tk__signal_rec sig;
  tk_err err;
  assert_int_equal(w->s->ops->step_wait(w->s, &again, &sig, &err), TK_EFENCED);
  tk_store *b = open_store(w, w->url);
  w->clock.now_ms = T(WAIT_MS);
  tk__waited xa[N], xb[N];
  int na = take_waits(w, w->s, 4, xa, NULL);
  int nb = take_waits(w, b, N, xb, NULL);
  assert_int_equal(na, 4);
  assert_int_equal(nb, N - 4);
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++) assert_true(xa[i].step.step_id != xb[j].step.step_id);
  assert_int_equal(take_waits(w, b, N, xb, NULL), 0);
}

/* Bad signals change nothing: an unknown task or step (TK_ENOENT), a step
 * that is not a wait step, data that is not JSON, both data and an error
 * or neither (TK_EINVAL). A cancel of a task that waits cancels the
 * waiting step, which no taker takes then. */
static void bad_signals_and_cancel(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  park(w, w->s, &c);
  char *before = task_text(w, task);
  tk_signal_result res;
  tk_err err;
  assert_int_equal(send_signal(w, task + 100, "approve", "{}", NULL, NULL, &res, &err),
                   TK_ENOENT);
  assert_int_equal(send_signal(w, task, "nope", "{}", NULL, NULL, &res, &err), TK_ENOENT);
  expect_contains(err.msg, "no step \"nope\"");
  assert_int_equal(send_signal(w, task, "ship", "{}", NULL, NULL, &res, &err), TK_EINVAL);
  expect_contains(err.msg, "not a wait step");
  assert_int_equal(send_signal(w, task, "approve", "{nope", NULL, NULL, &res, &err), TK_EINVAL);
  expect_contains(err.msg, "not JSON");
  assert_int_equal(send_signal(w, task, "approve", "{}", "x", NULL, &res, &err), TK_EINVAL);
  assert_int_equal(send_signal(w, task, "approve", NULL, NULL, NULL, &res, &err), TK_EINVAL);
  assert_int_equal(send_signal(w, task, "approve", NULL, "", NULL, &res, &err), TK_EINVAL);
  expect_unchanged(w, task, before);

  must(tk_task_operate(w->s, TK_OP_CANCEL, task, NULL, w->clock.now_ms, NULL, &err), &err,
       "cancel");
  expect_states(w, task, TK__TASK_CANCELLED, "approve", TK__STEP_CANCELLED, NULL);
  w->clock.now_ms = T(WAIT_MS);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  assert_int_equal(send_signal(w, task, "approve", "{}", NULL, NULL, &res, &err), TK_ESTATE);
  expect_contains(err.msg, "cancelled since");
}

/* approve (a wait step) beside check, independent of it */
static const char beside_toml[] = "name = \"beside\"\nversion = \"1\"\n"
                                  "[[steps]]\nname = \"approve\"\n" WAIT_HANDLER STEP("check");

/* A waiting step can still progress: a sibling that ends in error leaves
 * the task in progress while the wait goes on (the task would otherwise
 * end in error with a step still waiting), and the task ends in error
 * once the signal has completed the wait and nothing else can run. */
static void a_wait_keeps_its_task_going(world *w) {
  add_template(w, beside_toml);
  int64_t task = submit(w, "beside");
  tk__claimed c[2];
  assert_int_equal(claim(w->s, "orch", 2, c), 2);
  /* Template order: approve (idx 0) then check (idx 1), whichever came first. */
  int wi = c[0].idx == 0 ? 0 : 1;
  park(w, w->s, &c[wi]);
  tk__outcome o = error_of(&c[1 - wi], "orch", w->clock.now_ms);
  record_ok(w->s, &o);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_WAITING, "check",
                TK__STEP_ERROR, NULL);
  w->clock.now_ms = T(1000);
  signal_ok(w, task, "approve", "{\"ok\": true}", NULL, NULL);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, task, TK__TASK_ERROR, "approve", TK__STEP_COMPLETE, "check", TK__STEP_ERROR,
                NULL);
}

/* What another connection's drain_changes on b says once its change fd
 * became readable (within 10 s: a notice may come a moment after the
 * commit), or -1 when it never did. */
static int drained_after_change(tk_store *b) {
  int fd = b->ops->change_fd(b);
  assert_true(fd >= 0);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (int i = 0; i < 100; i++)
    if (poll(&p, 1, 100) > 0) return b->ops->drain_changes(b);
  return -1;
}

/* Another connection's drain_changes tells a signal stored (the engine
 * takes it at once) from any other change (a submit), and says it once. */
static void drain_tells_a_signal_stored(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c;
  assert_int_equal(claim(w->s, "orch", 1, &c), 1);
  assert_int_equal(park(w, w->s, &c).id, 0);
  tk_store *b = open_store(w, w->url);
  (void)b->ops->change_fd(b);
  (void)b->ops->drain_changes(b);
  submit(w, "approval");
  int ch = drained_after_change(b);
  assert_true(ch >= 0);
  assert_int_equal(ch & TK__CHANGED_WAITS, 0);
  /* A backend unsure whether the commit it saw begin has ended (SQLite)
   * asks to be drained again, a few times, then says nothing more. */
  for (int i = 0; i < 8 && (ch & TK__CHANGED_UNSURE); i++) ch = b->ops->drain_changes(b);
  assert_int_equal(ch, 0);
  signal_ok(w, task, "approve", "{}", NULL, NULL);
  assert_int_equal(drained_after_change(b), TK__CHANGED_WAITS);
  assert_int_equal(b->ops->drain_changes(b), 0);
}

#define WAIT_CASES                                                                            \
  {"waits: a signal after the step waits", signal_after_waiting, 0},                          \
  {"waits: a signal before the step waits", signal_before_waiting, 0},                        \
  {"waits: a taken wait outlives its taker", a_taken_wait_outlives_its_taker, 0},            \
  {"waits: a repeated key once; a finished step refuses", duplicate_and_finished_signals, 0}, \
  {"waits: timeout, retry, then a signal", timeout_then_retry_then_signal, 0},                \
  {"waits: a failing signal", failing_signal, 0},                                             \
  {"waits: two takers take each wait once", two_takers_take_each_wait_once, 0},               \
  {"waits: bad signals change nothing; cancel", bad_signals_and_cancel, 0},                   \
  {"waits: a waiting step keeps its task going", a_wait_keeps_its_task_going, 0},           \
  {"waits: another connection's drain tells a signal stored", drain_tells_a_signal_stored, 0},

#endif
