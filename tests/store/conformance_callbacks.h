/* Conformance cases of callbacks of http steps (DESIGN §18, ops 17:
 * callback_arm, callback_put, callback_extend; issue 24 part 2): a
 * callback before and after the step waits completes it with its results,
 * a failure with retryable and retry_after reaches the taker, an earlier
 * attempt's token is refused (and an unknown one) changing nothing, a
 * second callback for one attempt is refused, a heartbeat extends the
 * wait up to its limit, and a timeout is retried under a new token. The
 * store does not read the handler's kind: the cases use the wait
 * template of conformance_waits.h. Included by test_conformance.c; every
 * case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_CALLBACKS_H
#define TESTS_STORE_CONFORMANCE_CALLBACKS_H

#define CB_TIMEOUT_MS 60000
#define CB_LIMIT_MS 600000 /* the step's timeout: no heartbeat passes it */

/* The token hash of claim c in the cases: its claim id and a salt, as
 * bytes (the store compares them, never reads them otherwise). */
static void cb_hash(const tk__claimed *c, int salt, unsigned char h[TK__TOKEN_HASH_LEN]) {
  for (int i = 0; i < TK__TOKEN_HASH_LEN; i++)
    h[i] = (unsigned char)(c->claim_id * 31 + salt * 7 + i);
}

/* Arm claim c's token (salt 0) at now. */
static void cb_arm(world *w, const tk__claimed *c) {
  tk__callback_arm a = {.step_id = c->step_id, .claim_id = c->claim_id,
                        .timeout_ms = CB_TIMEOUT_MS, .limit_at = w->clock.now_ms + CB_LIMIT_MS,
                        .now = w->clock.now_ms};
  cb_hash(c, 0, a.token_hash);
  tk_err err;
  must(w->s->ops->callback_arm(w->s, &a, &err), &err, "callback_arm");
}

/* A callback with c's token (salt), data or an error: the code, *out. */
static int cb_put(world *w, const tk__claimed *c, int salt, const char *data,
                  const char *error, int final, int64_t retry_after_ms, tk__callback_ans *out,
                  tk_err *err) {
  tk__callback_req r = {.claim_id = c->claim_id, .data = data, .error = error, .final = final,
                        .retry_after_ms = retry_after_ms, .now = w->clock.now_ms};
  cb_hash(c, salt, r.token_hash);
  return w->s->ops->callback_put(w->s, &r, out, err);
}

/* Park claim c as a callback step (timeout CB_TIMEOUT_MS from now). */
static tk__signal_rec cb_park(world *w, const tk__claimed *c) {
  tk__wait_req r = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                    .timeout_at = w->clock.now_ms + CB_TIMEOUT_MS, .now = w->clock.now_ms,
                    .reason = TK__REASON_CALLBACK_WAITING};
  tk__signal_rec sig;
  tk_err err;
  must(w->s->ops->step_wait(w->s, &r, &sig, &err), &err, "step_wait");
  return sig;
}

/* A callback before the wait (its request not answered yet) is taken by
 * the park; one after it by wait_take; either completes the step with its
 * results, and the answer names the task, step and attempt. */
static void callback_success(world *w) {
  add_template(w, approval_toml);
  int64_t t1 = submit(w, "approval"), t2 = submit(w, "approval");
  tk__claimed c[2];
  assert_int_equal(claim(w->s, "orch", 2, c), 2);
  cb_arm(w, &c[0]);
  cb_arm(w, &c[1]);
  tk__callback_ans ans;
  tk_err err;
  must(cb_put(w, &c[0], 0, "{\"rows\": 3}", NULL, 0, -1, &ans, &err), &err, "callback");
  assert_true(ans.task_id == c[0].task_id);
  assert_string_equal(ans.step, "approve");
  assert_int_equal(ans.attempt, 1);
  assert_string_equal(ans.step_state, TK__STEP_IN_PROGRESS);
  tk__signal_rec sig = cb_park(w, &c[0]);
  assert_true(sig.id == ans.signal_id);
  expect_json(sig.data, "{\"rows\":3}");
  tk__outcome o = success_of(&c[0], "orch", w->clock.now_ms);
  o.results = sig.data;
  record_ok(w->s, &o);
  tk__signal_rec_free(&sig);

  sig = cb_park(w, &c[1]);
  assert_int_equal(sig.id, 0);
  tk__task_report r;
  report_on(w->s, c[1].task_id, &r);
  assert_int_equal(transitions(&r, "approve", TK__STEP_IN_PROGRESS, TK__STEP_WAITING,
                               TK__REASON_CALLBACK_WAITING), 1);
  tk__task_report_free(&r);
  w->clock.now_ms = T(100);
  must(cb_put(w, &c[1], 0, "{\"rows\": 4}", NULL, 0, -1, &ans, &err), &err, "callback");
  assert_string_equal(ans.step_state, TK__STEP_WAITING);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_true(x[0].step.claim_id == c[1].claim_id);
  assert_int_equal(x[0].timed_out, 0);
  assert_int_equal(x[0].sig.callback, 1);
  expect_json(x[0].sig.data, "{\"rows\":4}");
  o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, t1, TK__TASK_IN_PROGRESS, "approve", TK__STEP_COMPLETE, NULL);
  expect_states(w, t2, TK__TASK_IN_PROGRESS, "approve", TK__STEP_COMPLETE, NULL);
  report_on(w->s, t2, &r);
  expect_json(step_named(&r, "approve")->results, "{\"rows\":4}");
  assert_int_equal(transitions(&r, "approve", TK__STEP_WAITING, TK__STEP_IN_PROGRESS,
                               TK__REASON_CALLBACK), 1);
  tk__task_report_free(&r);
  /* Applied: the same callback again is refused, saying it came. */
  char *before = task_text(w, t2);
  assert_int_equal(cb_put(w, &c[1], 0, "{\"rows\": 4}", NULL, 0, -1, &ans, &err), TK_ESTATE);
  expect_contains(err.msg, "came already");
  expect_unchanged(w, t2, before);
}

/* A failure carries its error, whether it is final and its retry_after to
 * the taker; a second callback for the attempt is refused meanwhile. */
static void callback_failure_retry_after(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  cb_arm(w, &c);
  cb_park(w, &c);
  tk__callback_ans ans;
  tk_err err;
  must(cb_put(w, &c, 0, NULL, "export failed", 0, 30000, &ans, &err), &err, "callback");
  assert_int_equal(cb_put(w, &c, 0, "{}", NULL, 0, -1, &ans, &err), TK_ESTATE);
  expect_contains(err.msg, "came already");
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_string_equal(x[0].sig.error, "export failed");
  assert_null(x[0].sig.data);
  assert_int_equal(x[0].sig.final, 0);
  assert_true(x[0].sig.retry_after_ms == 30000);
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, T(30000));
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "approve", TK__STEP_WAITING_FOR_RETRY, NULL);
  /* The retry's attempt: a final failure, no delay asked. */
  w->clock.now_ms = T(30000);
  tk__claimed retry = claim_one(w->s, "orch");
  cb_arm(w, &retry);
  cb_park(w, &retry);
  must(cb_put(w, &retry, 0, NULL, "bad input", 1, -1, &ans, &err), &err, "callback");
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_int_equal(x[0].sig.final, 1);
  assert_true(x[0].sig.retry_after_ms == -1);
  tk__signal_rec_free(&x[0].sig);
}

/* Attempt 1 times out (no callback) and is retried; its retry waits under
 * a new token. Attempt 1's token is then refused (409: TK_ESTATE), an
 * unknown token or a wrong secret too (404: TK_ENOENT), each changing
 * nothing; attempt 2's token completes the step. A token armed for a
 * claim that does not hold its step is fenced. */
static void stale_token_then_new_token(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  cb_arm(w, &c);
  cb_park(w, &c);
  w->clock.now_ms = T(CB_TIMEOUT_MS);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_int_equal(x[0].timed_out, 1);
  tk__outcome o = wait_outcome(w, &x[0], NULL, T(CB_TIMEOUT_MS + 1000));
  o.error = TK__CALLBACK_TIMEOUT_ERROR;
  record_ok(w->s, &o);
  tk__callback_ans ans;
  tk_err err;
  char *before = task_text(w, task);
  assert_int_equal(cb_put(w, &c, 0, "{}", NULL, 0, -1, &ans, &err), TK_ESTATE);
  expect_contains(err.msg, "attempt 1 of step \"approve\"");
  expect_contains(err.msg, "is over");
  expect_unchanged(w, task, before);

  w->clock.now_ms = T(CB_TIMEOUT_MS + 1000);
  tk__claimed retry = claim_one(w->s, "orch");
  assert_int_equal(retry.attempt, 2);
  cb_arm(w, &retry);
  assert_int_equal(cb_park(w, &retry).id, 0);
  before = task_text(w, task);
  assert_int_equal(cb_put(w, &c, 0, "{}", NULL, 0, -1, &ans, &err), TK_ESTATE);
  assert_int_equal(cb_put(w, &retry, 1, "{}", NULL, 0, -1, &ans, &err), TK_ENOENT);
  tk__claimed unknown = retry;
  unknown.claim_id += 1000;
  assert_int_equal(cb_put(w, &unknown, 0, "{}", NULL, 0, -1, &ans, &err), TK_ENOENT);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  expect_unchanged(w, task, before);
  tk__callback_arm a = {.step_id = c.step_id, .claim_id = c.claim_id, .timeout_ms = 1,
                        .limit_at = T(1), .now = w->clock.now_ms};
  assert_int_equal(w->s->ops->callback_arm(w->s, &a, &err), TK_EFENCED);

  must(cb_put(w, &retry, 0, "{\"ok\": 2}", NULL, 0, -1, &ans, &err), &err, "callback");
  assert_int_equal(ans.attempt, 2);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_true(x[0].step.claim_id == retry.claim_id);
  o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_string_equal(step_named(&r, "approve")->state, TK__STEP_COMPLETE);
  assert_string_equal(attempt_of(&r, "approve", 1)->error, TK__CALLBACK_TIMEOUT_ERROR);
  tk__task_report_free(&r);
}

/* A heartbeat moves the wait's timeout to now + what it asks (or the
 * armed timeout), never past the limit; the old timeout then takes
 * nothing. Before the wait (in progress) it changes nothing; after the
 * attempt it is refused. */
static void heartbeat_extends(world *w) {
  add_template(w, approval_toml);
  int64_t task = submit(w, "approval");
  tk__claimed c = claim_one(w->s, "orch");
  cb_arm(w, &c);
  tk__callback_req hb = {.claim_id = c.claim_id, .now = T(0)};
  cb_hash(&c, 0, hb.token_hash);
  tk__callback_ans ans;
  tk_err err;
  must(w->s->ops->callback_extend(w->s, &hb, 0, &ans, &err), &err, "extend in progress");
  assert_true(ans.until == TK__NONE);
  cb_park(w, &c);
  w->clock.now_ms = hb.now = T(50000);
  must(w->s->ops->callback_extend(w->s, &hb, 0, &ans, &err), &err, "extend");
  assert_true(ans.until == T(50000 + CB_TIMEOUT_MS));
  w->clock.now_ms = hb.now = T(100000);
  must(w->s->ops->callback_extend(w->s, &hb, 300000, &ans, &err), &err, "extend 300 s");
  assert_true(ans.until == T(400000));
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_true(step_named(&r, "approve")->run_at == T(400000));
  tk__task_report_free(&r);
  tk__waited x[2];
  int64_t next_at;
  w->clock.now_ms = T(CB_TIMEOUT_MS);
  assert_int_equal(take_waits(w, w->s, 2, x, &next_at), 0);
  assert_true(next_at == T(400000));
  hb.now = T(200000);
  must(w->s->ops->callback_extend(w->s, &hb, 10 * CB_LIMIT_MS, &ans, &err), &err, "capped");
  assert_true(ans.until == T(CB_LIMIT_MS));
  hb.token_hash[0] ^= 1;
  assert_int_equal(w->s->ops->callback_extend(w->s, &hb, 0, &ans, &err), TK_ENOENT);
  hb.token_hash[0] ^= 1;
  w->clock.now_ms = T(CB_LIMIT_MS);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_int_equal(x[0].timed_out, 1);
  tk__outcome o = wait_outcome(w, &x[0], NULL, 0);
  record_ok(w->s, &o);
  assert_int_equal(w->s->ops->callback_extend(w->s, &hb, 0, &ans, &err), TK_ESTATE);
}

#define CALLBACK_CASES                                                                      \
  {"callbacks: before and after the wait, each once", callback_success, 0},                 \
  {"callbacks: a failure's retryable and retry_after", callback_failure_retry_after, 0},    \
  {"callbacks: an earlier attempt's token changes nothing", stale_token_then_new_token, 0}, \
  {"callbacks: a heartbeat extends the wait", heartbeat_extends, 0},

#endif
