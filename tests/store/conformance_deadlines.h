/* Conformance cases of deadlines (DESIGN §3, ops 16: deadline_apply;
 * issue 24 part 4): at a task's deadline every unfinished step, whatever
 * its state (pending, in progress, waiting for a retry, waiting), is
 * cancelled and the task ends in error with the reason "deadline", in one
 * transaction; an outcome of an attempt that was in progress is refused
 * after it as a lost lease's; two takers apply each deadline once; a task
 * that finished first is untouched; the claims that start a task carry
 * its deadline; a submit's deadline overrides its
 * template's and a bad one stores nothing. Included by test_conformance.c;
 * every case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_DEADLINES_H
#define TESTS_STORE_CONFORMANCE_DEADLINES_H

#define DEADLINE_MS 10000 /* the templates' deadline = "10s" */

/* done (completes), busy (in progress at the deadline), flaky (waiting
 * for a retry), approve (a wait step, waiting), then (after busy:
 * pending). */
static const char deadline_toml[] =
    "name = \"deadlined\"\nversion = \"1\"\ndeadline = \"10s\"\n" STEP("done") STEP("busy")
    STEP("flaky") "retry = { max_attempts = 3 }\n"
    "[[steps]]\nname = \"approve\"\n" WAIT_HANDLER AFTER("then", "busy");

/* One step "s" under a deadline of 10 s. */
static const char one_deadline_toml[] =
    "name = \"one_deadline\"\nversion = \"1\"\ndeadline = \"10s\"\n" STEP("s");

/* Submit a task of `name` now with a submit's deadline of ms (0: the
 * template's); its id. */
static int64_t submit_deadline(world *w, const char *name, int64_t ms) {
  tk_submit_request req = {.template_name = name, .deadline_ms = ms};
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  must(tk_task_submit(w->s, w->cfg, &req, w->clock.now_ms, &id, &existed, &err), &err,
       "submit");
  return id;
}

/* deadline_apply on s at the clock's now, up to max into out: how many
 * tasks it ended; *next_at (may be NULL). */
static int apply_deadlines(world *w, tk_store *s, int max, int64_t *out, int64_t *next_at) {
  int n = -1;
  int64_t next = 0;
  tk_err err;
  must(s->ops->deadline_apply(s, w->clock.now_ms, max, out, &n, &next, &err), &err,
       "deadline_apply");
  if (next_at) *next_at = next;
  return n;
}

/* The claim of step `name` among c[0..n). */
static const tk__claimed *claim_named(world *w, int64_t task, const tk__claimed *c, int n,
                                      const char *name) {
  tk__task_report r;
  report_on(w->s, task, &r);
  int64_t id = step_named(&r, name)->id;
  tk__task_report_free(&r);
  for (int i = 0; i < n; i++)
    if (c[i].step_id == id) return &c[i];
  fail_msg("step %s was not claimed", name);
  return NULL;
}

/* Steps in every state at the deadline: nothing happens before it (and
 * next_due says when it comes), then one deadline_apply cancels each
 * unfinished step with its transition, leaves the complete one, ends the
 * task in error (reason "deadline", finished at the deadline), and never
 * looks at that deadline again. The in-progress attempt's late outcome is
 * refused (fenced out, the task otherwise unchanged); no claim, no wait
 * taker finds anything of it. */
static void deadline_with_steps_in_every_state(world *w) {
  add_template(w, deadline_toml);
  int64_t task = submit_deadline(w, "deadlined", 0);
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "orch", 4, c), 4);
  /* The claims that start the task carry its deadline (the engine's
   * wake-up for it: no look at the deadlines for every new task). */
  for (int i = 0; i < 4; i++) {
    assert_true(c[i].task_was_pending);
    assert_true(c[i].task_deadline_at == T(DEADLINE_MS));
  }
  w->clock.now_ms = T(100);
  tk__outcome o = success_of(claim_named(w, task, c, 4, "done"), "orch", T(100));
  record_ok(w->s, &o);
  o = retry_of(claim_named(w, task, c, 4, "flaky"), "orch", T(100), T(60000));
  record_ok(w->s, &o);
  park(w, w->s, claim_named(w, task, c, 4, "approve"));
  expect_states(w, task, TK__TASK_IN_PROGRESS, "done", TK__STEP_COMPLETE, "busy",
                TK__STEP_IN_PROGRESS, "flaky", TK__STEP_WAITING_FOR_RETRY, "approve",
                TK__STEP_WAITING, "then", TK__STEP_PENDING, NULL);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_true(r.deadline_at == T(DEADLINE_MS));
  tk__task_report_free(&r);

  /* Before it: nothing, and it is the next thing due. */
  w->clock.now_ms = T(DEADLINE_MS - 1);
  int64_t ended[4], next_at = 0, ready_at = 0;
  char *before = task_text(w, task);
  assert_int_equal(apply_deadlines(w, w->s, 4, ended, &next_at), 0);
  assert_true(next_at == T(DEADLINE_MS));
  expect_unchanged(w, task, before);
  tk_err err;
  must(w->s->ops->next_due(w->s, &ready_at, NULL, &err), &err, "next due");
  assert_true(ready_at <= T(DEADLINE_MS));

  w->clock.now_ms = T(DEADLINE_MS);
  assert_int_equal(apply_deadlines(w, w->s, 4, ended, &next_at), 1);
  assert_true(ended[0] == task);
  assert_true(next_at == INT64_MAX);
  expect_states(w, task, TK__TASK_ERROR, "done", TK__STEP_COMPLETE, "busy", TK__STEP_CANCELLED,
                "flaky", TK__STEP_CANCELLED, "approve", TK__STEP_CANCELLED, "then",
                TK__STEP_CANCELLED, NULL);
  report_on(w->s, task, &r);
  assert_true(r.finished_at == T(DEADLINE_MS));
  assert_int_equal(transitions(&r, NULL, TK__TASK_IN_PROGRESS, TK__TASK_ERROR,
                               TK__REASON_DEADLINE), 1);
  const struct {
    const char *step, *from;
  } moved[] = {{"busy", TK__STEP_IN_PROGRESS},
               {"flaky", TK__STEP_WAITING_FOR_RETRY},
               {"approve", TK__STEP_WAITING},
               {"then", TK__STEP_PENDING}};
  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    assert_int_equal(transitions(&r, moved[i].step, moved[i].from, TK__STEP_CANCELLED,
                                 TK__REASON_STEP_DEADLINE), 1);
  assert_int_equal(transitions(&r, "done", NULL, TK__STEP_CANCELLED, NULL), 0);
  assert_null(step_named(&r, "busy")->lease_owner);
  int64_t busy_id = step_named(&r, "busy")->id;
  char *after = report_text(&r, busy_id, 1);
  tk__task_report_free(&r);

  /* Looked at once. */
  assert_int_equal(apply_deadlines(w, w->s, 4, ended, &next_at), 0);
  assert_true(next_at == INT64_MAX);

  /* The late outcome of busy's attempt: refused, counted, nothing else. */
  int64_t fenced = counter(w, "fenced_writes");
  w->clock.now_ms = T(DEADLINE_MS + 50);
  o = success_of(claim_named(w, task, c, 4, "busy"), "orch", T(DEADLINE_MS + 50));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_fenced(&err, &o);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  report_on(w->s, task, &r);
  char *now_text = report_text(&r, busy_id, 1);
  assert_string_equal(after, now_text);
  assert_string_equal(attempt_of(&r, "busy", 1)->outcome, "fenced_out");
  tk__task_report_free(&r);
  free(after);
  free(now_text);
  tk__claimed none[2];
  assert_int_equal(claim(w->s, "orch", 2, none), 0);
  w->clock.now_ms = T(DEADLINE_MS + WAIT_MS);
  tk__waited x[2];
  assert_int_equal(take_waits(w, w->s, 2, x, NULL), 0);
}

/* A late outcome after the deadline, in the simplest task: a submit's
 * deadline (over the template's 10 s), the step in progress, the deadline
 * applied; the outcome (a failure here) and a heartbeat are refused. */
static void late_outcome_after_deadline_refused(world *w) {
  add_template(w, one_deadline_toml);
  int64_t task = submit_deadline(w, "one_deadline", 500);
  tk__task_report r;
  report_on(w->s, task, &r);
  assert_true(r.deadline_at == T(500));
  tk__task_report_free(&r);
  tk__claimed c = claim_one(w->s, "A");
  w->clock.now_ms = T(500);
  int64_t ended[2];
  assert_int_equal(apply_deadlines(w, w->s, 2, ended, NULL), 1);
  expect_states(w, task, TK__TASK_ERROR, "s", TK__STEP_CANCELLED, NULL);
  tk_err err;
  assert_int_equal(w->s->ops->heartbeat(w->s, c.step_id, c.claim_id, T(20000), &err),
                   TK_EFENCED);
  char *before = task_text(w, task);
  w->clock.now_ms = T(600);
  tk__outcome o = retry_of(&c, "A", T(600), T(700));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  /* Only the attempt row closes (fenced_out): the rest reads as before. */
  report_on(w->s, task, &r);
  assert_string_equal(attempt_of(&r, "s", 1)->outcome, "fenced_out");
  assert_string_equal(step_named(&r, "s")->state, TK__STEP_CANCELLED);
  assert_string_equal(r.state, TK__TASK_ERROR);
  tk__task_report_free(&r);
  free(before);
  /* The lease it had runs out: nothing for a reaper. */
  tk__expired xs[2];
  assert_int_equal(expired_at(w->s, T(60000), xs, 2), 0);
}

/* Two takers on two connections: each deadline applied by one of them,
 * every task ended once. Half the tasks come by a bulk submit (a
 * deadline of its own for one, the template's for the other two). */
static void two_takers_apply_each_deadline_once(world *w) {
  add_template(w, one_deadline_toml);
  enum { N = 6 };
  int64_t tasks[N];
  for (int i = 0; i < N / 2; i++) tasks[i] = submit_deadline(w, "one_deadline", 0);
  tk_submit_request reqs[N / 2] = {{.template_name = "one_deadline", .deadline_ms = 3000},
                                   {.template_name = "one_deadline"},
                                   {.template_name = "one_deadline"}};
  tk_err err;
  must(tk_task_submit_many(w->s, w->cfg, reqs, N / 2, w->clock.now_ms, tasks + N / 2, NULL,
                           NULL, &err),
       &err, "submit many");
  tk__task_report r;
  report_on(w->s, tasks[N / 2], &r);
  assert_true(r.deadline_at == T(3000));
  tk__task_report_free(&r);
  tk_store *b = open_store(w, w->url);
  w->clock.now_ms = T(DEADLINE_MS + 1);
  int64_t ea[N], eb[N];
  int na = apply_deadlines(w, w->s, 4, ea, NULL);
  int nb = apply_deadlines(w, b, N, eb, NULL);
  assert_int_equal(na, 4);
  assert_int_equal(nb, N - 4);
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++) assert_true(ea[i] != eb[j]);
  assert_int_equal(apply_deadlines(w, w->s, N, ea, NULL), 0);
  assert_int_equal(apply_deadlines(w, b, N, eb, NULL), 0);
  for (int i = 0; i < N; i++) {
    report_on(w->s, tasks[i], &r);
    char *all = report_text(&r, 0, 0);
    if (transitions(&r, NULL, TK__TASK_PENDING, TK__TASK_ERROR, TK__REASON_DEADLINE) != 1)
      fail_msg("task %lld did not end once by its deadline:\n%s", (long long)tasks[i], all);
    free(all);
    tk__task_report_free(&r);
  }
}

/* A task that finished before its deadline (complete, in error, or
 * cancelled) is untouched by it, and its deadline is not looked at again;
 * bad deadlines store nothing. */
static void finished_task_untouched(world *w) {
  add_template(w, one_deadline_toml);
  int64_t done = submit_deadline(w, "one_deadline", 0);
  int64_t failed = submit_deadline(w, "one_deadline", 0);
  int64_t gone = submit_deadline(w, "one_deadline", 0);
  tk__claimed c[2];
  assert_int_equal(claim(w->s, "A", 2, c), 2);
  w->clock.now_ms = T(100);
  tk__outcome o = success_of(c[0].task_id == done ? &c[0] : &c[1], "A", T(100));
  record_ok(w->s, &o);
  o = error_of(c[0].task_id == failed ? &c[0] : &c[1], "A", T(100));
  record_ok(w->s, &o);
  const char *ts;
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, gone, NULL, T(100), &ts, &err), &err, "cancel");
  expect_states(w, done, TK__TASK_COMPLETE, NULL);
  expect_states(w, failed, TK__TASK_ERROR, NULL);
  char *texts[3] = {task_text(w, done), task_text(w, failed), task_text(w, gone)};
  w->clock.now_ms = T(DEADLINE_MS);
  int64_t ended[4], next_at = 0;
  assert_int_equal(apply_deadlines(w, w->s, 4, ended, &next_at), 0);
  assert_true(next_at == INT64_MAX);
  expect_unchanged(w, done, texts[0]);
  expect_unchanged(w, failed, texts[1]);
  expect_unchanged(w, gone, texts[2]);

  /* Bad deadlines: a submit's out of range, a template's of 0. */
  int64_t before = tasks_in(w, TK__TASK_PENDING);
  tk_submit_request req = {.template_name = "one_deadline", .deadline_ms = -5};
  int64_t id;
  int existed;
  assert_int_equal(tk_task_submit(w->s, w->cfg, &req, w->clock.now_ms, &id, &existed, &err),
                   TK_EINVAL);
  expect_contains(err.msg, "deadline");
  req.deadline_ms = TK_DEADLINE_MAX_MS + 1;
  assert_int_equal(tk_task_submit(w->s, w->cfg, &req, w->clock.now_ms, &id, &existed, &err),
                   TK_EINVAL);
  assert_int_equal(tasks_in(w, TK__TASK_PENDING), before);
  char path[512];
  efx_write(w->dir, "bad_deadline.toml",
            "name = \"bad\"\nversion = \"1\"\ndeadline = \"0s\"\n" STEP("s"), path, sizeof path);
  tk_template_info info;
  assert_int_not_equal(tk_template_add_file(w->s, w->cfg, path, w->clock.now_ms, &info, &err), 0);
  expect_contains(err.msg, "deadline");
  expect_contains(err.msg, "bad_deadline.toml:3:");
}

#define DEADLINE_CASES                                                                        \
  {"deadlines: steps in every state at the deadline", deadline_with_steps_in_every_state, 0}, \
  {"deadlines: a late outcome is refused", late_outcome_after_deadline_refused, 0},           \
  {"deadlines: two takers apply each once", two_takers_apply_each_deadline_once, 0},          \
  {"deadlines: a finished task is untouched; bad deadlines", finished_task_untouched, 0},

#endif
