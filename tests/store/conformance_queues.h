/* Conformance cases of queues and priority (DESIGN §4 and §19, issue 23):
 * what submit stores, the claim's limits (concurrency held across
 * connections and kinds of claim, rate by a token bucket on the manual
 * clock), priority order, next_due_at, and the ops queue_put, queue_list
 * and worker_seen. Tasks are created through the store's own op, with
 * queues and priorities set directly (the configuration's side is above
 * the store). Included by test_conformance.c after conformance_workers.h;
 * every case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_QUEUES_H
#define TESTS_STORE_CONFORMANCE_QUEUES_H

/* A step of a new task: no batch, five attempts. */
#define QSTEP(name_, parents_, queue_, wq_)                                                    \
  {.name = (name_), .nparents = (parents_), .max_attempts = 5, .retryable = 1,                \
   .backoff = "default", .queue = (queue_), .worker_queue = (wq_)}

/* Create a task of template tid with steps st[0..n) on s, now, starting
 * at start_at (0: at once), of priority `priority`; its id. */
static int64_t create_task(world *w, tk_store *s, int64_t tid, const tk__new_step *st, int n,
                           int priority, int64_t start_at) {
  tk__new_task t = {.template_id = tid, .context = "{}", .steps = st, .nsteps = n,
                    .now = w->clock.now_ms, .start_at = start_at, .priority = priority};
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  must(s->ops->task_create(s, &t, &id, &existed, &err), &err, "task_create");
  assert_int_equal(existed, 0);
  return id;
}

/* A task of one_toml's one step "s", in queue (NULL: none), run by a
 * worker of worker_queue (NULL: an orchestrator). */
static int64_t one_task(world *w, int64_t tid, const char *queue, const char *worker_queue,
                        int priority) {
  tk__new_step st = QSTEP("s", 0, queue, worker_queue);
  return create_task(w, w->s, tid, &st, 1, priority, 0);
}

static void put_queues(world *w, const tk__queue_def *d, int n) {
  tk_err err;
  must(w->s->ops->queue_put(w->s, d, n, &err), &err, "queue_put");
}

/* Queue `name` as queue_list shows it at the clock's now (must be there). */
static tk__queue_rec queue_rec(world *w, const char *name) {
  tk__queue_rec *v = NULL, found;
  int n = 0, at = -1;
  tk_err err;
  must(w->s->ops->queue_list(w->s, w->clock.now_ms, &v, &n, &err), &err, "queue_list");
  for (int i = 0; i < n; i++) {
    if (i > 0) assert_true(strcmp(v[i - 1].name, v[i].name) < 0); /* by name */
    if (strcmp(v[i].name, name) == 0) at = i;
  }
  if (at < 0) fail_msg("queue %s not listed (%d queues)", name, n);
  found = v[at];
  free(v);
  return found;
}

/* An orchestrator's claim of up to limit steps on s. */
static tk__claim_request orch_claim(tk_store *s, const char *owner, int limit, tk__claimed *out) {
  return claim_ahead(s, owner, limit, limit, 0, out);
}

/* Which of ids[0..n) task_id is; -1 if none. */
static int which(const int64_t *ids, int n, int64_t task_id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == task_id) return i;
  return -1;
}

/* Submit stores priority (task and steps) and queues: the report and the
 * list give the priority, queue_list every queue named (a worker's
 * flagged), bulk submit the same; fresh steps go by priority, higher
 * first, then oldest task; a due retry keeps its place before them. */
static void queues_priority_order(world *w) {
  int64_t tid = add_template(w, one_toml);
  int64_t t0 = one_task(w, tid, NULL, NULL, 0), t5 = one_task(w, tid, NULL, NULL, 5);
  int64_t t1 = one_task(w, tid, NULL, NULL, 1), tm = one_task(w, tid, NULL, NULL, -2);
  tk__task_report rep;
  report_on(w->s, t5, &rep);
  assert_int_equal(rep.priority, 5);
  tk__task_report_free(&rep);
  tk__task_query q = {.limit = 10};
  tk__task_row *rows;
  int nrows = 0;
  tk_err err;
  must(w->s->ops->task_list(w->s, &q, &rows, &nrows, &err), &err, "task_list");
  assert_int_equal(nrows, 4);
  for (int i = 0; i < nrows; i++)
    assert_int_equal(rows[i].priority, rows[i].id == t5 ? 5 : rows[i].id == t1 ? 1
                                       : rows[i].id == tm ? -2 : 0);
  tk__task_rows_free(rows, nrows);

  tk__claimed c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, t5);
  tk__outcome o = retry_of(&c, "A", T(0), T(1));
  record_ok(w->s, &o);
  int64_t t9 = one_task(w, tid, NULL, NULL, 9);
  w->clock.now_ms = T(1);
  int64_t order[] = {t5, t9, t1, t0, tm};
  for (int i = 0; i < 5; i++) assert_int_equal(claim_one(w->s, "A").task_id, order[i]);

  /* Bulk submit: priorities and queues as one by one. */
  tk__new_step st = QSTEP("s", 0, "bulkq", NULL), wst = QSTEP("s", 0, NULL, "wq");
  tk__new_task many[3] = {
      {.template_id = tid, .context = "{}", .steps = &st, .nsteps = 1, .now = T(1),
       .priority = 3},
      {.template_id = tid, .context = "{}", .steps = &st, .nsteps = 1, .now = T(1),
       .priority = 7},
      {.template_id = tid, .context = "{}", .steps = &wst, .nsteps = 1, .now = T(1)}};
  int64_t ids[3];
  int existed[3];
  must(w->s->ops->submit_many(w->s, many, 3, ids, existed, &err), &err, "submit_many");
  report_on(w->s, ids[1], &rep);
  assert_int_equal(rep.priority, 7);
  tk__task_report_free(&rep);
  tk__queue_rec b = queue_rec(w, "bulkq"), wq = queue_rec(w, "wq");
  assert_int_equal(b.ready, 2);
  assert_int_equal(b.worker, 0);
  assert_int_equal(b.concurrency, 0);
  assert_true(b.rate == 0);
  assert_int_equal(wq.ready, 1); /* a worker step's queue is its worker queue */
  assert_int_equal(wq.worker, 1);
  /* The orchestrator takes the queue's steps (it has no limits), higher
   * priority first; the worker step is left to a worker. */
  tk__claimed two[4];
  tk__claim_request r = orch_claim(w->s, "A", 4, two);
  assert_int_equal(r.n, 2);
  assert_int_equal(two[0].task_id, ids[1]);
  assert_int_equal(two[1].task_id, ids[0]);
}

/* concurrency = 2 holds for orchestrator and worker claims together, on
 * two connections: the queue's third step waits for an outcome of either
 * kind, and a claim that finds the queue full sleeps (next_due_at none)
 * until that outcome; the steps of no queue are not held up. */
static void queues_concurrency_across_claims(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__queue_def d = {.name = "q", .concurrency = 2};
  put_queues(w, &d, 1);
  int64_t orch[3], work[2];
  for (int i = 0; i < 3; i++) orch[i] = one_task(w, tid, "q", NULL, 0);
  for (int i = 0; i < 2; i++) work[i] = one_task(w, tid, NULL, "q", 0);
  int64_t plain[2] = {one_task(w, tid, NULL, NULL, 0), one_task(w, tid, NULL, NULL, 0)};
  tk_store *b = open_store(w, w->url);
  tk__claimed c[8], held[2];
  unsigned char h[8][TK__TOKEN_HASH_LEN];
  int nheld = 0, nplain = 0;
  tk__claim_request r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 4);
  for (int i = 0; i < r.n; i++) {
    if (which(plain, 2, c[i].task_id) >= 0) nplain++;
    else if (which(orch, 3, c[i].task_id) >= 0) held[nheld++] = c[i];
    else fail_msg("claimed task %lld", (long long)c[i].task_id);
  }
  assert_int_equal(nplain, 2);
  assert_int_equal(nheld, 2);
  assert_true(r.next_due_at == INT64_MAX); /* full: only an outcome makes room */
  r = claim_queue(b, "q", "w-1", 8, c, h);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == INT64_MAX);
  assert_int_equal(orch_claim(b, "B", 8, c).n, 0);
  tk__queue_rec q = queue_rec(w, "q");
  assert_int_equal(q.in_progress, 2);
  assert_int_equal(q.ready, 3);
  assert_int_equal(q.concurrency, 2);
  /* One of the queue's steps finishes: one more may start, a worker's. */
  tk__outcome o = success_of(&held[0], "A", T(0));
  record_ok(w->s, &o);
  r = claim_queue(b, "q", "w-1", 8, c, h);
  assert_int_equal(r.n, 1);
  assert_true(which(work, 2, c[0].task_id) >= 0);
  tk__claimed by_worker = c[0];
  tk__claimed_inputs_free(c, r.n);
  assert_true(r.next_due_at == INT64_MAX);
  assert_int_equal(orch_claim(w->s, "A", 8, c).n, 0);
  assert_int_equal(claim_queue(b, "q", "w-2", 8, c, h).n, 0);
  /* The worker's step fails for a retry: its slot goes to the next. */
  o = retry_of(&by_worker, "w-1", T(0), T(60000));
  record_ok(b, &o);
  r = orch_claim(b, "B", 8, c);
  assert_int_equal(r.n, 1);
  assert_true(which(orch, 3, c[0].task_id) >= 0);
  q = queue_rec(w, "q");
  assert_int_equal(q.in_progress, 2);
  assert_int_equal(q.ready, 1);     /* the second worker step */
  assert_int_equal(q.scheduled, 1); /* the retry */
}

/* rate = 2/s, burst 2: a full bucket at first, then a token each 500 ms;
 * a claim that finds none says when the next comes (next_due_at), and a
 * long pause refills only up to the burst. */
static void queues_rate_token_bucket(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__queue_def d = {.name = "r", .rate = 2, .burst = 2};
  put_queues(w, &d, 1);
  for (int i = 0; i < 6; i++) one_task(w, tid, "r", NULL, 0);
  tk__claimed c[8];
  tk__claim_request r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 2);
  assert_true(r.next_due_at == T(500));
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == T(500));
  w->clock.now_ms = T(499);
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == T(500));
  w->clock.now_ms = T(500);
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 1);
  assert_true(r.next_due_at == T(1000));
  tk__queue_rec q = queue_rec(w, "r");
  assert_true(q.rate == 2);
  assert_int_equal(q.burst, 2);
  assert_true(q.tokens < 0.001);
  w->clock.now_ms = T(60000);
  assert_true(queue_rec(w, "r").tokens == 2); /* refilled to the burst, no more */
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 2);
  assert_true(r.next_due_at == T(60500));
  w->clock.now_ms = T(61000);
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 1); /* the last step: a token was left */
  assert_true(r.next_due_at == INT64_MAX);
  /* A worker queue's bucket is the same. */
  tk__queue_def wd = {.name = "wr", .rate = 1};
  put_queues(w, &wd, 1); /* r's limits go: not in the new set */
  assert_true(queue_rec(w, "r").rate == 0);
  one_task(w, tid, NULL, "wr", 0);
  one_task(w, tid, NULL, "wr", 0);
  unsigned char h[8][TK__TOKEN_HASH_LEN];
  r = claim_queue(w->s, "wr", "w-1", 8, c, h);
  assert_int_equal(r.n, 1);
  tk__claimed_inputs_free(c, r.n);
  assert_true(r.next_due_at == T(62000));
}

/* next_due_at of worker and orchestrator claims: none at first; a retry
 * not due yet and a delayed start, each of the claim's own steps (a
 * worker's of its queue; an orchestrator's of the steps no worker runs). */
static void queues_next_due_at(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__claimed c[8];
  unsigned char h[8][TK__TOKEN_HASH_LEN];
  tk__claim_request r = claim_queue(w->s, "w", "w-1", 8, c, h);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == INT64_MAX);
  assert_true(orch_claim(w->s, "A", 8, c).next_due_at == INT64_MAX);
  one_task(w, tid, NULL, "w", 0);
  r = claim_queue(w->s, "w", "w-1", 8, c, h);
  assert_int_equal(r.n, 1);
  tk__claimed wc = c[0];
  tk__claimed_inputs_free(c, r.n);
  tk__outcome o = retry_of(&wc, "w-1", T(0), T(5000));
  record_ok(w->s, &o);
  r = claim_queue(w->s, "w", "w-1", 8, c, h);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == T(5000));
  r = orch_claim(w->s, "A", 8, c);
  assert_true(r.next_due_at == INT64_MAX); /* not an orchestrator's retry */
  one_task(w, tid, NULL, NULL, 0);
  tk__claimed pc = claim_one(w->s, "A");
  o = retry_of(&pc, "A", T(0), T(3000));
  record_ok(w->s, &o);
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == T(3000));
  assert_true(r.next_retry_at == T(3000));
  assert_true(claim_queue(w->s, "w", "w-1", 8, c, h).next_due_at == T(5000));
  /* Delayed starts: an orchestrator's at 2 s, a worker's at 4 s. */
  tk__new_step st = QSTEP("s", 0, NULL, NULL), wst = QSTEP("s", 0, NULL, "w");
  create_task(w, w->s, tid, &st, 1, 0, T(2000));
  create_task(w, w->s, tid, &wst, 1, 0, T(4000));
  assert_true(orch_claim(w->s, "A", 8, c).next_due_at == T(2000));
  assert_true(claim_queue(w->s, "w", "w-1", 8, c, h).next_due_at == T(4000));
  w->clock.now_ms = T(4000);
  r = claim_queue(w->s, "w", "w-1", 8, c, h);
  assert_int_equal(r.n, 1); /* the delayed start, due */
  tk__claimed_inputs_free(c, r.n);
  assert_true(r.next_due_at == T(5000));
  r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 2); /* the retry due at 3 s, the start due at 2 s */
  assert_true(r.next_due_at == INT64_MAX);
}

/* queue_put makes its definitions the whole set: other queues' limits go;
 * a bucket keeps its tokens, cut to a smaller burst; a new one starts
 * full; a bad definition is refused naming the queue and the value, and
 * changes nothing. */
static void queues_put_replaces_limits(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__queue_def d1[] = {{.name = "a", .concurrency = 1}, {.name = "b", .rate = 1.5}};
  put_queues(w, d1, 2);
  tk__queue_rec a = queue_rec(w, "a"), b = queue_rec(w, "b");
  assert_int_equal(a.concurrency, 1);
  assert_true(a.rate == 0);
  assert_int_equal(a.burst, 0);
  assert_true(b.rate == 1.5);
  assert_int_equal(b.burst, 2); /* ceil(rate) */
  assert_true(b.tokens == 2);
  assert_int_equal(b.worker, 0);
  tk__queue_def d2[] = {{.name = "b", .concurrency = 3}, {.name = "c", .rate = 10, .burst = 10}};
  put_queues(w, d2, 2);
  a = queue_rec(w, "a");
  b = queue_rec(w, "b");
  assert_int_equal(a.concurrency, 0);
  assert_int_equal(b.concurrency, 3);
  assert_true(b.rate == 0 && b.tokens == 0 && b.burst == 0);
  assert_true(queue_rec(w, "c").tokens == 10);
  for (int i = 0; i < 4; i++) one_task(w, tid, "c", NULL, 0);
  tk__claimed c[8];
  assert_int_equal(orch_claim(w->s, "A", 8, c).n, 4);
  assert_true(queue_rec(w, "c").tokens == 6);
  tk__queue_def d3[] = {{.name = "c", .rate = 10, .burst = 5}};
  put_queues(w, d3, 1);
  assert_true(queue_rec(w, "c").tokens == 5);
  assert_int_equal(queue_rec(w, "c").burst, 5);
  assert_int_equal(queue_rec(w, "b").concurrency, 0);
  tk__queue_def bad[][2] = {{{.name = "c", .concurrency = -1}},
                            {{.name = "Bad Name", .concurrency = 1}},
                            {{.name = "c", .rate = -2}},
                            {{.name = "d", .concurrency = 1}, {.name = "d", .concurrency = 2}}};
  const char *says[] = {"concurrency -1", "Bad Name", "rate -2", "defined twice"};
  for (int i = 0; i < 4; i++) {
    tk_err err;
    int rc = w->s->ops->queue_put(w->s, bad[i], bad[i][1].name ? 2 : 1, &err);
    assert_int_equal(rc, TK_EINVAL);
    expect_contains(err.msg, says[i]);
  }
  tk__queue_rec cc = queue_rec(w, "c");
  assert_true(cc.rate == 10);
  assert_int_equal(cc.burst, 5);
  tk__queue_rec *v = NULL;
  int n = 0;
  tk_err err;
  must(w->s->ops->queue_list(w->s, w->clock.now_ms, &v, &n, &err), &err, "queue_list");
  assert_int_equal(n, 3); /* a, b, c: no d */
  free(v);
}

/* queue_list's counts at now: ready (fresh, due retries, due delayed
 * starts), scheduled (retries and delayed starts not due), in progress,
 * the oldest ready, the workers seen in the last minute, the worker flag. */
static void queues_list_counts(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__queue_def d = {.name = "q", .concurrency = 5};
  put_queues(w, &d, 1);
  one_task(w, tid, "q", NULL, 0);
  w->clock.now_ms = T(10);
  one_task(w, tid, "q", NULL, 0);
  w->clock.now_ms = T(20);
  one_task(w, tid, "q", NULL, 0);
  one_task(w, tid, NULL, "q", 0);
  tk__new_step st = QSTEP("s", 0, "q", NULL);
  create_task(w, w->s, tid, &st, 1, 0, T(20000));
  tk__claimed c[2];
  tk__claim_request r = orch_claim(w->s, "A", 2, c);
  assert_int_equal(r.n, 2);
  tk__outcome o = retry_of(&c[0], "A", T(20), T(9000));
  record_ok(w->s, &o);
  tk_err err;
  must(w->s->ops->worker_seen(w->s, "q", "w1", T(20), &err), &err, "worker_seen");
  must(w->s->ops->worker_seen(w->s, "q", "w1", T(5), &err), &err, "worker_seen");
  must(w->s->ops->worker_seen(w->s, "q", "w2", T(20) - 70000, &err), &err, "worker_seen");
  must(w->s->ops->worker_seen(w->s, "q", "w3", T(20), &err), &err, "worker_seen");
  tk__queue_rec q = queue_rec(w, "q");
  assert_int_equal(q.ready, 2); /* the third orchestrator step, the worker step */
  assert_int_equal(q.scheduled, 2); /* the retry at 9 s, the start at 20 s */
  assert_int_equal(q.in_progress, 1);
  assert_true(q.oldest_ready_at == T(20));
  assert_int_equal(q.workers_seen, 2); /* w1 (newest kept) and w3 */
  assert_int_equal(q.worker, 1);
  w->clock.now_ms = T(9000); /* the retry is due: ready, and the oldest */
  q = queue_rec(w, "q");
  assert_int_equal(q.ready, 3);
  assert_int_equal(q.scheduled, 1);
  assert_true(q.oldest_ready_at == T(20));
  assert_int_equal(q.workers_seen, 2);
  w->clock.now_ms = T(90000); /* the delayed start too; the workers a minute gone */
  q = queue_rec(w, "q");
  assert_int_equal(q.ready, 4);
  assert_int_equal(q.scheduled, 0);
  assert_int_equal(q.workers_seen, 0);
}

/* map: list -> process (an instance per element of list's files). */
static const char qmap_toml[] =
    "name = \"qmap\"\nversion = \"1\"\n" STEP("list") AFTER("process", "list")
    "map = { over = \"{{parents.list.files}}\" }\n";

/* A map's instances are in its step's queue, under its limits, with its
 * task's priority. */
static void queues_map_instances_inherit(world *w) {
  int64_t tid = add_template(w, qmap_toml);
  tk__queue_def d = {.name = "mq", .concurrency = 1};
  put_queues(w, &d, 1);
  tk__new_step st[2] = {QSTEP("list", 0, NULL, NULL), QSTEP("process", 1, "mq", NULL)};
  int64_t low = create_task(w, w->s, tid, st, 2, 0, 0);
  int64_t high = create_task(w, w->s, tid, st, 2, 4, 0);
  tk__claimed c[8];
  assert_int_equal(orch_claim(w->s, "A", 8, c).n, 2); /* both lists */
  w->clock.now_ms = T(1);
  for (int i = 0; i < 2; i++) {
    tk__outcome o = success_of(&c[i], "A", T(1));
    o.results = "{\"files\": [\"a\", \"b\"]}";
    record_ok(w->s, &o);
  }
  tk__claim_request r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 1); /* concurrency 1 */
  assert_int_equal(c[0].task_id, high); /* its priority, 4 */
  assert_int_equal(c[0].idx, 1);
  assert_int_equal(c[0].item_index, 0);
  tk__queue_rec q = queue_rec(w, "mq");
  assert_int_equal(q.in_progress, 1);
  assert_int_equal(q.ready, 3);
  tk__outcome o = success_of(&c[0], "A", T(1));
  record_ok(w->s, &o);
  assert_int_equal(orch_claim(w->s, "A", 8, c).n, 1);
  assert_int_equal(c[0].task_id, high);
  (void)low;
}

/* An orchestrator's claims divide their limit between the steps of no
 * queue and the queues': a claim of one step at a time takes each side in
 * turn while both have ready steps, and takes only the one that has
 * some once the other is empty. */
static void queues_no_starvation(world *w) {
  int64_t tid = add_template(w, one_toml);
  int64_t plain[3], queued[3];
  for (int i = 0; i < 3; i++) {
    plain[i] = one_task(w, tid, NULL, NULL, 0);
    queued[i] = one_task(w, tid, "u", NULL, 0);
  }
  int nplain = 0, nqueued = 0;
  for (int i = 0; i < 4; i++) {
    int64_t t = claim_one(w->s, "A").task_id;
    if (which(plain, 3, t) >= 0) nplain++;
    if (which(queued, 3, t) >= 0) nqueued++;
    if (i % 2 == 1) assert_int_equal(nplain, nqueued);
  }
  tk__claimed c[8];
  tk__claim_request r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 2);
  int64_t q1 = one_task(w, tid, "u", NULL, 0);
  for (int i = 0; i < 3; i++) one_task(w, tid, NULL, NULL, 0);
  r = orch_claim(w->s, "A", 2, c);
  assert_int_equal(r.n, 2);
  assert_true(c[0].task_id == q1 || c[1].task_id == q1); /* half of the limit */
}

/* A claimant that saw no queue named by an orchestrator's step may skip
 * the queues (PostgreSQL: the connection's no_lanes; SQLite reads them at
 * every claim): a queue that another connection's
 * submit names is taken from by its next claim at the latest, within its
 * limits, and a claim that left it says to look again soon (next_due_at
 * unknown). */
static void queues_named_meanwhile(world *w) {
  int64_t tid = add_template(w, one_toml);
  tk__queue_def d = {.name = "late", .concurrency = 1};
  put_queues(w, &d, 1);
  tk__claimed c[8];
  tk__claim_request r = orch_claim(w->s, "A", 8, c);
  assert_int_equal(r.n, 0);
  assert_true(r.next_due_at == INT64_MAX);
  tk_store *b = open_store(w, w->url);
  tk__new_step st = QSTEP("s", 0, "late", NULL);
  int64_t late[2] = {create_task(w, b, tid, &st, 1, 0, 0), create_task(w, b, tid, &st, 1, 0, 0)};
  int64_t plain = one_task(w, tid, NULL, NULL, 0);
  int nlate = 0, nplain = 0;
  for (int k = 0; k < 3; k++) {
    r = orch_claim(w->s, "A", 8, c);
    int took_late = 0;
    for (int i = 0; i < r.n; i++) {
      if (c[i].task_id == plain) nplain++;
      else if (which(late, 2, c[i].task_id) >= 0) took_late++;
      else fail_msg("claimed task %lld", (long long)c[i].task_id);
    }
    if (k == 0 && took_late == 0) assert_true(r.next_due_at == INT64_MIN);
    if (k == 1) assert_int_equal(nlate + took_late, 1); /* by the second claim */
    nlate += took_late;
  }
  assert_int_equal(nplain, 1);
  assert_int_equal(nlate, 1); /* concurrency 1 */
  assert_int_equal(queue_rec(w, "late").in_progress, 1);
}

#define QUEUE_CASES                                                                             \
  {"queues: submit stores priority and queues; priority orders fresh steps",                  \
   queues_priority_order, 0},                                                                   \
  {"queues: concurrency across connections and kinds of claim",                               \
   queues_concurrency_across_claims, 0},                                                        \
  {"queues: rate by a token bucket, next_due_at its next token", queues_rate_token_bucket, 0},   \
  {"queues: next_due_at of worker and orchestrator claims", queues_next_due_at, 0},             \
  {"queues: queue_put replaces the set; buckets kept, cut, new ones full",                     \
   queues_put_replaces_limits, 0},                                                              \
  {"queues: queue_list counts and workers seen", queues_list_counts, 0},                        \
  {"queues: a map's instances keep its queue and priority", queues_map_instances_inherit, 0},    \
  {"queues: an orchestrator's claims divide their limit", queues_no_starvation, 0},          \
  {"queues: a queue named meanwhile by another connection", queues_named_meanwhile, 0},

#endif
