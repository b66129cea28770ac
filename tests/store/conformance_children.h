/* Conformance cases of child tasks (DESIGN §18, ops 17: child_start,
 * task_family; issue 24 part 3): a child completing completes its
 * parent's step with the results of its leaf steps, a child failing fails
 * the attempt and the retry starts a second child, a repeated child_start
 * for the same claim starts none, and a family reads both ways. The
 * parent's outcome comes as the engine records it: wait_take delivers the
 * signal the child's end stored, and `record` applies it, fenced by the
 * claim that started the child. Included by test_conformance.c; every
 * case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_CHILDREN_H
#define TESTS_STORE_CONFORMANCE_CHILDREN_H

#include "workflow/submit.h"

/* make (a task step: a child of "kid") -> after */
static const char parent_toml[] =
    "name = \"parent\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"make\"\n"
    "handler = { kind = \"task\", template = \"kid\", context = { n = \"{{context.n}}\" } }\n"
    "retry = { max_attempts = 2 }\n" AFTER("after", "make");
/* a -> b, and c alone: the leaves are b and c. */
static const char kid_toml[] =
    "name = \"kid\"\nversion = \"1\"\n[retry]\nmax_attempts = 1\n" STEP("a") AFTER("b", "a")
        STEP("c");

/* Start the child of claim c (of parent step "make") as the engine does:
 * its code, the child in *child (0: none), *existed. */
static int start_child(world *w, const tk__claimed *c, int64_t *child, int *existed,
                       tk_err *err) {
  char ident[96];
  tk_submit_request req = {.template_name = "kid", .context_json = "{\"n\": 7}",
                           .identity = tk__child_identity(c->task_id, c->step_id, c->claim_id,
                                                          ident, sizeof ident)};
  tk__built_task b;
  must(tk__task_build(w->s, w->cfg, &req, w->clock.now_ms, &b, err), err, "build child");
  tk__child_req r = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                     .attempt = c->attempt, .task = &b.t, .timeout_at = INT64_MAX,
                     .now = w->clock.now_ms};
  int rc = w->s->ops->child_start(w->s, &r, err);
  tk__built_task_free(&b);
  *child = rc ? 0 : r.child_id;
  *existed = r.existed;
  return rc;
}

/* The family of task on w's store (children: tk__child_recs_free). */
static tk__child_rec *family(world *w, int64_t task, tk__child_rec *parent, int *n) {
  tk__child_rec *kids;
  tk_err err;
  must(w->s->ops->task_family(w->s, task, parent, &kids, n, &err), &err, "task_family");
  return kids;
}

/* Run every step of child task `kid` to success (results {"ok":true}),
 * but fail step `failing` for good (NULL: none). */
static void run_child(world *w, int64_t kid, const char *failing) {
  tk__claimed c[4];
  int n;
  while ((n = claim(w->s, "kid-orch", 4, c)) > 0) {
    for (int i = 0; i < n; i++) {
      assert_true(c[i].task_id == kid);
      tk__task_report r;
      report_on(w->s, kid, &r);
      const char *name = step_name_of(&r, c[i].step_id);
      int fail = failing != NULL && strcmp(name, failing) == 0;
      tk__task_report_free(&r);
      tk__outcome o = fail ? error_of(&c[i], "kid-orch", w->clock.now_ms)
                           : success_of(&c[i], "kid-orch", w->clock.now_ms);
      record_ok(w->s, &o);
    }
  }
}

/* A parent task whose step "make" was claimed (*c) and started its
 * child (its id returned): the start of every case. */
static int64_t parent_with_child(world *w, int64_t *task, tk__claimed *c) {
  add_template(w, kid_toml);
  add_template(w, parent_toml);
  *task = submit(w, "parent");
  *c = claim_one(w->s, "orch");
  int64_t kid;
  int existed;
  tk_err err;
  must(start_child(w, c, &kid, &existed, &err), &err, "child_start");
  assert_int_equal(existed, 0);
  return kid;
}

/* A child completing: child_start makes the child (linked both ways) and
 * parks the parent's step waiting, its attempt open; the child's steps
 * run; its end stores the signal that wait_take delivers to the parent's
 * claim with the leaf steps' results by name; the parent's step
 * completes with them and releases its child step. */
static void child_completes(world *w) {
  int64_t task;
  tk__claimed c;
  int64_t kid = parent_with_child(w, &task, &c);
  assert_true(kid > task);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "make", TK__STEP_WAITING, "after",
                TK__STEP_PENDING, NULL);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_true(step_named(&r, "make")->lease_expires_at == TK__NONE);
  assert_int_equal(transitions(&r, "make", TK__STEP_IN_PROGRESS, TK__STEP_WAITING,
                               TK__REASON_CHILD_WAITING), 1);
  tk__task_report_free(&r);
  report_on(w->s, kid, &r);
  expect_json(r.context, "{\"n\":7}");
  assert_string_equal(r.template_.name, "kid");
  tk__task_report_free(&r);
  tk__child_rec up;
  int n;
  tk__child_rec *kids = family(w, task, &up, &n);
  assert_true(up.task_id == 0);
  assert_int_equal(n, 1);
  assert_true(kids[0].task_id == kid);
  assert_true(kids[0].parent_task_id == task);
  assert_string_equal(kids[0].parent_step, "make");
  assert_int_equal(kids[0].attempt, 1);
  tk__child_recs_free(kids, n);
  kids = family(w, kid, &up, &n);
  assert_int_equal(n, 0);
  assert_true(up.task_id == kid && up.parent_task_id == task);
  assert_string_equal(up.parent_step, "make");
  free(up.parent_step);

  /* Nothing to take while the child runs. */
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  w->clock.now_ms = T(100);
  run_child(w, kid, NULL);
  expect_states(w, kid, TK__TASK_COMPLETE, NULL);
  w->clock.now_ms = T(200);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_true(x[0].step.claim_id == c.claim_id);
  assert_int_equal(x[0].timed_out, 0);
  expect_json(x[0].sig.data, "{\"b\":{\"ok\":true},\"c\":{\"ok\":true}}");
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, 0);
  tk__effects fx = record_ok(w->s, &o);
  assert_int_equal(fx.children_released, 1);
  tk__signal_rec_free(&x[0].sig);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  report_on(w->s, task, &r);
  assert_string_equal(step_named(&r, "make")->state, TK__STEP_COMPLETE);
  expect_json(step_named(&r, "make")->results, "{\"b\":{\"ok\":true},\"c\":{\"ok\":true}}");
  tk__task_report_free(&r);
}

/* A child failing fails the attempt (a retryable failure naming the
 * child and its failed step); the retry's claim starts a second child,
 * whose completion completes the step. The first child's signal is never
 * delivered to the second attempt. */
static void child_fails_then_retry_starts_another(world *w) {
  int64_t task, kid2;
  tk__claimed c;
  int64_t kid1 = parent_with_child(w, &task, &c);
  int existed;
  tk_err err;
  w->clock.now_ms = T(100);
  run_child(w, kid1, "a");
  expect_states(w, kid1, TK__TASK_ERROR, "a", TK__STEP_ERROR, NULL);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_null(x[0].sig.data);
  char want[128];
  snprintf(want, sizeof want, "child task %lld ended in error: step a: it broke for good",
           (long long)kid1);
  assert_string_equal(x[0].sig.error, want);
  tk__outcome o = wait_outcome(w, &x[0], &x[0].sig, T(1000));
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "make", TK__STEP_WAITING_FOR_RETRY, NULL);
  w->clock.now_ms = T(1000);
  tk__claimed c2 = claim_one(w->s, "orch");
  assert_true(c2.step_id == c.step_id && c2.claim_id != c.claim_id);
  assert_int_equal(c2.attempt, 2);
  must(start_child(w, &c2, &kid2, &existed, &err), &err, "child_start again");
  assert_int_equal(existed, 0);
  assert_true(kid2 != kid1);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
  tk__child_rec up;
  int n;
  tk__child_rec *kids = family(w, task, &up, &n);
  assert_int_equal(n, 2);
  assert_true(kids[0].task_id == kid1 && kids[1].task_id == kid2);
  assert_string_equal(kids[0].state, TK__TASK_ERROR);
  assert_int_equal(kids[1].attempt, 2);
  tk__child_recs_free(kids, n);
  w->clock.now_ms = T(1100);
  run_child(w, kid2, NULL);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  assert_true(x[0].step.claim_id == c2.claim_id);
  assert_non_null(x[0].sig.data);
  o = wait_outcome(w, &x[0], &x[0].sig, 0);
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, task, TK__TASK_IN_PROGRESS, "make", TK__STEP_COMPLETE, NULL);
}

/* A repeated child_start for the same claim (a crash's retry, another
 * orchestrator) is fenced out: no second child, nothing changes; so is
 * one for a claim that no longer holds the step. */
static void repeated_child_start_starts_none(world *w) {
  int64_t task, again;
  tk__claimed c;
  parent_with_child(w, &task, &c);
  int existed;
  tk_err err;
  char *before = task_text(w, task);
  assert_int_equal(start_child(w, &c, &again, &existed, &err), TK_EFENCED);
  assert_true(again == 0);
  expect_unchanged(w, task, before);
  tk__child_rec up;
  int n;
  tk__child_rec *kids = family(w, task, &up, &n);
  assert_int_equal(n, 1);
  tk__child_recs_free(kids, n);
  assert_int_equal(tasks_in(w, TK__TASK_PENDING) + tasks_in(w, TK__TASK_IN_PROGRESS), 2);
}

/* Cancelling the parent cancels its unfinished child in the same
 * transaction (its steps with the reason "parent task ended"); the
 * child's step in progress then has its outcome fenced out. A child
 * cancelled alone fails its parent's attempt, saying so. */
static void cancel_cascades_and_a_cancelled_child_fails(world *w) {
  int64_t task;
  tk__claimed c;
  int64_t kid = parent_with_child(w, &task, &c);
  int existed;
  tk_err err;
  tk__claimed k[4];
  assert_int_equal(claim(w->s, "kid-orch", 4, k), 2); /* a and c */
  w->clock.now_ms = T(50);
  const char *ts = NULL;
  must(tk_task_operate(w->s, TK_OP_CANCEL, task, NULL, T(50), &ts, &err), &err, "cancel");
  expect_states(w, task, TK__TASK_CANCELLED, "make", TK__STEP_CANCELLED, NULL);
  expect_states(w, kid, TK__TASK_CANCELLED, "a", TK__STEP_CANCELLED, "b", TK__STEP_CANCELLED,
                "c", TK__STEP_CANCELLED, NULL);
  tk__task_report r;
  report_on(w->s, kid, &r);
  assert_int_equal(transitions(&r, "b", TK__STEP_PENDING, TK__STEP_CANCELLED,
                               TK__REASON_PARENT_ENDED), 1);
  assert_int_equal(transitions(&r, NULL, TK__TASK_IN_PROGRESS, TK__TASK_CANCELLED,
                               TK__REASON_PARENT_ENDED), 1);
  assert_true(r.finished_at == T(50));
  tk__task_report_free(&r);
  tk__outcome o = success_of(&k[0], "kid-orch", T(60));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);

  /* A child cancelled alone: its parent's attempt fails. */
  int64_t task2 = submit(w, "parent");
  tk__claimed c2 = claim_one(w->s, "orch");
  assert_true(c2.task_id == task2);
  int64_t kid2;
  must(start_child(w, &c2, &kid2, &existed, &err), &err, "child_start 2");
  w->clock.now_ms = T(100);
  must(tk_task_operate(w->s, TK_OP_CANCEL, kid2, NULL, T(100), &ts, &err), &err, "cancel kid");
  expect_states(w, task2, TK__TASK_IN_PROGRESS, "make", TK__STEP_WAITING, NULL);
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 1);
  char want[64];
  snprintf(want, sizeof want, "child task %lld was cancelled", (long long)kid2);
  assert_string_equal(x[0].sig.error, want);
  o = wait_outcome(w, &x[0], &x[0].sig, T(1000));
  record_ok(w->s, &o);
  tk__signal_rec_free(&x[0].sig);
  expect_states(w, task2, TK__TASK_IN_PROGRESS, "make", TK__STEP_WAITING_FOR_RETRY, NULL);
}

/* The parent's deadline cancels its unfinished child in the transaction
 * that ends the parent in error. */
static void deadline_cascades(world *w) {
  add_template(w, kid_toml);
  add_template(w, parent_toml);
  int64_t task = submit_deadline(w, "parent", 1000);
  tk__claimed c = claim_one(w->s, "orch");
  int64_t kid;
  int existed;
  tk_err err;
  must(start_child(w, &c, &kid, &existed, &err), &err, "child_start");
  w->clock.now_ms = T(1000);
  int64_t ended[4];
  assert_int_equal(apply_deadlines(w, w->s, 4, ended, NULL), 1);
  assert_true(ended[0] == task);
  expect_states(w, task, TK__TASK_ERROR, "make", TK__STEP_CANCELLED, NULL);
  expect_states(w, kid, TK__TASK_CANCELLED, "a", TK__STEP_CANCELLED, "c", TK__STEP_CANCELLED,
                NULL);
}

#define CHILD_CASES                                                                         \
  {"children: a child completing completes the step", child_completes, 0},                 \
  {"children: a failing child fails the attempt; the retry starts another",                \
   child_fails_then_retry_starts_another, 0},                                               \
  {"children: a repeated child_start starts none", repeated_child_start_starts_none, 0},    \
  {"children: a cancel cascades; a child cancelled alone fails the attempt",                 \
   cancel_cascades_and_a_cancelled_child_fails, 0},                                        \
  {"children: the parent's deadline cancels its child", deadline_cascades, 0},

#endif
