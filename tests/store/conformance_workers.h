/* Conformance cases of steps run by outside workers (DESIGN §19, issue
 * 23): the store's claims by worker queue, and the engine's side of the
 * protocol (engine/remote.h) on top of them. Included by
 * test_conformance.c after its helpers; every case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_WORKERS_H
#define TESTS_STORE_CONFORMANCE_WORKERS_H

#include "core/claim_token.h"
#include "engine/remote.h"

#define WORKER(name, queue)                                                                    \
  "[[steps]]\nname = \"" name "\"\nhandler = { kind = \"worker\", queue = \"" queue "\" }\n"

/* plain (an orchestrator's), img (queue images) and mail (queue mail);
 * after img: thumb (an orchestrator's) and tag (images). */
static const char workers_toml[] =
    "name = \"workers\"\nversion = \"1\"\n" STEP("plain") WORKER("img", "images")
        WORKER("mail", "mail") AFTER("thumb", "img") WORKER("tag", "images")
    "depends_on = [\"img\"]\n";

/* A worker's claim of up to limit steps of `queue` on s, each with its
 * input and the hash of secret i (hash[i] = i + 1 repeated). */
static tk__claim_request claim_queue(tk_store *s, const char *queue, const char *owner,
                                     int limit, tk__claimed *out,
                                     unsigned char (*hashes)[TK__TOKEN_HASH_LEN]) {
  for (int i = 0; i < limit; i++) memset(hashes[i], i + 1, TK__TOKEN_HASH_LEN);
  tk__claim_request r = {.owner = owner, .lease_ms = LEASE_MS, .limit = limit,
                         .fresh_limit = limit, .out = out, .want_inputs = 1,
                         .worker_queue = queue,
                         .token_hashes = (const unsigned char(*)[TK__TOKEN_HASH_LEN])hashes};
  tk_err err;
  must(s->ops->record(s, NULL, 0, NULL, NULL, &r, &err), &err, "claim a queue");
  return r;
}

/* The claim's row as claim_get reads it. */
static tk__claim_rec claim_rec(world *w, int64_t claim_id) {
  tk__claim_rec rec;
  tk_err err;
  must(w->s->ops->claim_get(w->s, claim_id, &rec, &err), &err, "claim_get");
  return rec;
}

/* An orchestrator's claim never takes a worker step; a worker's claim
 * takes only its queue's, due retries first, with their inputs, and its
 * attempt rows keep the token hashes it was given. */
static void worker_steps_only_for_their_queue(world *w) {
  add_template(w, workers_toml);
  int existed;
  int64_t t = submit_on(w, w->s, "workers", "{\"n\": 1}", NULL, T(0), &existed);
  tk__claimed c[8];
  unsigned char h[8][TK__TOKEN_HASH_LEN];
  tk__claim_request r = claim_ahead(w->s, "A", 8, 8, 0, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].idx, 0); /* plain */
  tk__claimed plain = c[0];
  tk__claimed_inputs_free(c, r.n);
  /* Ready, but not for an orchestrator: it sleeps, knowing of no work. */
  int64_t ready_at = 0, lease_at = 0;
  tk_err err;
  must(w->s->ops->next_due(w->s, &ready_at, &lease_at, &err), &err, "next due");
  assert_true(ready_at == INT64_MAX);
  int yes = 0;
  must(w->s->ops->has_work(w->s, &yes, &err), &err, "has work");
  assert_true(yes);
  tk__status_report st;
  must(w->s->ops->status(w->s, w->clock.now_ms, &st, &err), &err, "status");
  assert_int_equal(st.ready_now, 2); /* img and mail */

  assert_int_equal(claim_queue(w->s, "nope", "w-1", 8, c, h).n, 0);
  r = claim_queue(w->s, "images", "w-1", 8, c, h);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].idx, 1); /* img */
  assert_int_equal(c[0].attempt, 1);
  assert_int_equal(c[0].token_index, 0);
  assert_non_null(c[0].input);
  expect_json(c[0].input, "{\"context\": {\"n\": 1}, \"parents\": {}}");
  tk__claimed img = c[0];
  tk__claimed_inputs_free(c, r.n);
  tk__claim_rec rec = claim_rec(w, img.claim_id);
  assert_true(rec.held);
  assert_true(rec.has_token);
  assert_memory_equal(rec.token_hash, h[0], TK__TOKEN_HASH_LEN);
  assert_string_equal(rec.owner, "w-1");
  assert_int_equal(rec.step.step_id, img.step_id);
  assert_int_equal(rec.step.attempt, 1);
  assert_int_equal(rec.lease_expires_at, T(0) + LEASE_MS);
  /* An orchestrator's claim row has no token. */
  assert_false(claim_rec(w, plain.claim_id).has_token);
  assert_int_equal(w->s->ops->claim_get(w->s, INT64_C(1) << 50, &rec, &err), TK_ENOENT);

  r = claim_queue(w->s, "mail", "w-2", 8, c, h);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].idx, 2);
  tk__claimed_inputs_free(c, r.n);

  /* img's success releases thumb (an orchestrator's) and tag (images'). */
  w->clock.now_ms = T(10);
  tk__outcome o = success_of(&img, "w-1", T(10));
  assert_int_equal(record_ok(w->s, &o).children_released, 2);
  r = claim_ahead(w->s, "A", 8, 8, 0, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].idx, 3); /* thumb */
  tk__claimed_inputs_free(c, r.n);
  r = claim_queue(w->s, "images", "w-1", 8, c, h);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].idx, 4); /* tag */
  expect_json(c[0].input, "{\"context\": {\"n\": 1}, \"parents\": {\"img\": {\"ok\": true}}}");
  tk__claimed tag = c[0];
  tk__claimed_inputs_free(c, r.n);
  assert_false(claim_rec(w, img.claim_id).held);

  /* tag's retry is the queue's, never an orchestrator's. */
  o = retry_of(&tag, "w-1", T(10), T(1000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(1000);
  r = claim_ahead(w->s, "A", 8, 8, 0, c);
  assert_int_equal(r.n, 0);
  assert_true(r.next_retry_at == INT64_MAX);
  must(w->s->ops->next_due(w->s, &ready_at, &lease_at, &err), &err, "next due");
  assert_true(ready_at == INT64_MAX);
  w->clock.now_ms = T(999);
  assert_int_equal(claim_queue(w->s, "images", "w-1", 8, c, h).n, 0);
  w->clock.now_ms = T(1000);
  r = claim_queue(w->s, "images", "w-3", 8, c, h);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].step_id, tag.step_id);
  assert_int_equal(c[0].attempt, 2);
  assert_string_equal(c[0].prev_state, TK__STEP_WAITING_FOR_RETRY);
  tk__claimed_inputs_free(c, r.n);
  tk__task_report rep;
  report_on(w->s, t, &rep);
  assert_string_equal(step_named(&rep, "tag")->state, TK__STEP_IN_PROGRESS);
  assert_string_equal(step_named(&rep, "tag")->lease_owner, "w-3");
  assert_string_equal(attempt_of(&rep, "tag", 2)->owner, "w-3");
  tk__task_report_free(&rep);
}

/* list -> process: a map of worker steps over list's files. */
static const char worker_map_toml[] =
    "name = \"wmap\"\nversion = \"1\"\n" STEP("list") WORKER("process", "images")
    "depends_on = [\"list\"]\nmap = { over = \"{{parents.list.files}}\" }\n";

/* A map's instances are its worker queue's, as the map step is. */
static void worker_map_instances_inherit_the_queue(world *w) {
  add_template(w, worker_map_toml);
  submit(w, "wmap");
  tk__claimed c[8];
  unsigned char h[8][TK__TOKEN_HASH_LEN];
  tk__claimed list = claim_one(w->s, "A");
  w->clock.now_ms = T(1);
  tk__outcome o = success_of(&list, "A", T(1));
  o.results = "{\"files\": [\"a.png\", \"b.png\"]}";
  record_ok(w->s, &o);
  tk__claim_request r = claim_ahead(w->s, "A", 8, 8, 0, c);
  assert_int_equal(r.n, 0);
  r = claim_queue(w->s, "images", "w-1", 8, c, h);
  assert_int_equal(r.n, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(c[i].idx, 1);
    assert_int_equal(c[i].item_index, i);
    assert_int_equal(c[i].token_index, i);
    assert_non_null(c[i].input);
  }
  expect_contains(c[0].input, "\"item\":\"a.png\"");
  expect_contains(c[1].input, "\"item\":\"b.png\"");
  assert_memory_equal(claim_rec(w, c[1].claim_id).token_hash, h[1], TK__TOKEN_HASH_LEN);
  tk__claimed_inputs_free(c, r.n);
}

/* An engine of the world's store that serves workers (tk__remote_*). */
static tk_engine *serving_engine(world *w) {
  tk_engine_options o = {.store = w->s, .config = w->cfg, .clock = tk_clock_manual(&w->clock),
                         .seed = 7, .id = "serve-1"};
  tk_engine *e;
  tk_err err;
  must(tk_engine_new(&o, &e, &err), &err, "engine");
  return e;
}

/* img (worker, images) -> thumb. */
static const char worker_chain_toml[] =
    "name = \"wchain\"\nversion = \"1\"\n" WORKER("img", "images") AFTER("thumb", "img");

/* Claim one step of queue images through e. */
static tk__remote_claimed remote_one(tk_engine *e) {
  tk__remote_claimed c;
  int n = 0;
  tk_err err;
  must(tk__remote_claim(e, "images", "w-1", 1, &c, &n, NULL, &err), &err, "remote claim");
  assert_int_equal(n, 1);
  return c;
}

/* A token that is not one, or not the claim's, is refused and changes
 * nothing; the holder's heartbeat extends the lease and its completion
 * records the results and releases the children; a token used again is
 * fenced out and counted. */
static void remote_claim_heartbeat_complete(world *w) {
  add_template(w, worker_chain_toml);
  int existed;
  int64_t t = submit_on(w, w->s, "wchain", "{\"n\": 2}", NULL, T(0), &existed);
  tk_engine *e = serving_engine(w);
  tk__remote_claimed c = remote_one(e);
  assert_string_equal(c.step, "img");
  assert_int_equal(c.task_id, t);
  assert_int_equal(c.attempt, 1);
  assert_int_equal(strlen(c.token), TK__CLAIM_TOKEN_LEN);
  assert_true(c.lease_expires_at > T(0));
  assert_true(c.heartbeat_ms > 0);
  char *input = json_dumps(c.input, JSON_SORT_KEYS);
  expect_json(input, "{\"context\": {\"n\": 2}, \"parents\": {}}");
  free(input);
  int64_t lease_ms = c.lease_expires_at - T(0);

  char *before = task_text(w, t);
  tk_err err;
  tk__remote_result res;
  int64_t until = 0;
  char forged[TK__CLAIM_TOKEN_MAX + 1];
  snprintf(forged, sizeof forged, "%s", c.token);
  forged[20] = forged[20] == 'A' ? 'B' : 'A'; /* the secret, not the claim id */
  assert_int_equal(tk__remote_complete(e, forged, "{}", &res, &err), TK_EINVAL);
  assert_int_equal(tk__remote_heartbeat(e, forged, &until, &err), TK_EINVAL);
  assert_int_equal(tk__remote_fail(e, "not-a-token", "x", 1, -1, &res, &err), TK_EINVAL);
  assert_int_equal(tk__remote_complete(e, c.token, "{oops", &res, &err), TK_EINVAL);
  expect_unchanged(w, t, before);

  w->clock.now_ms = T(500);
  must(tk__remote_heartbeat(e, c.token, &until, &err), &err, "heartbeat");
  assert_int_equal(until, T(500) + lease_ms);
  tk__task_report rep;
  report_on(w->s, t, &rep);
  assert_int_equal(step_named(&rep, "img")->lease_expires_at, T(500) + lease_ms);
  tk__task_report_free(&rep);

  w->clock.now_ms = T(600);
  must(tk__remote_complete(e, c.token, "{\"w\": 1}", &res, &err), &err, "complete");
  assert_string_equal(res.state, TK__STEP_COMPLETE);
  assert_int_equal(res.run_at, 0);
  report_on(w->s, t, &rep);
  expect_json(step_named(&rep, "img")->results, "{\"w\": 1}");
  assert_string_equal(attempt_of(&rep, "img", 1)->owner, "w-1");
  assert_string_equal(attempt_of(&rep, "img", 1)->outcome, "success");
  assert_string_equal(step_named(&rep, "thumb")->state, TK__STEP_PENDING);
  tk__task_report_free(&rep);
  tk__claimed thumb = claim_one(w->s, "A");
  assert_int_equal(thumb.idx, 1);

  before = task_text(w, t);
  int64_t fenced = counter(w, "fenced_writes");
  assert_int_equal(tk__remote_complete(e, c.token, "{}", &res, &err), TK_EFENCED);
  expect_contains(err.msg, "no longer holds step");
  expect_contains(err.msg, "the step is complete now");
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  assert_int_equal(tk__remote_heartbeat(e, c.token, &until, &err), TK_EFENCED);
  tk_engine_stats stats = tk_engine_stats_get(e);
  assert_int_equal(stats.fenced, 2);
  assert_int_equal(stats.claimed, 1);
  assert_int_equal(stats.completed, 1);
  expect_unchanged(w, t, before);
  tk__remote_claims_free(&c, 1);
  tk_engine_free(e);
}

/* A failure goes through the step's policy (a retry_after is the
 * server's hint, as an http step's Retry-After); a permanent one ends the
 * step; a token whose lease expired and was reaped is fenced out. */
static void remote_fail_and_lost_lease(world *w) {
  add_template(w, worker_chain_toml);
  int64_t t = submit(w, "wchain");
  tk_engine *e = serving_engine(w);
  tk__remote_claimed c = remote_one(e);
  tk_err err;
  tk__remote_result res;
  w->clock.now_ms = T(100);
  must(tk__remote_fail(e, c.token, "disk full", 1, 2500, &res, &err), &err, "fail");
  assert_string_equal(res.state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(res.run_at, T(100) + 2500);
  tk__task_report rep;
  report_on(w->s, t, &rep);
  const tk__attempt_rec *a = attempt_of(&rep, "img", 1);
  assert_string_equal(a->outcome, "failure");
  assert_string_equal(a->error, "disk full");
  assert_string_equal(a->delay_source, tk_delay_source_name(TK_DELAY_SERVER));
  assert_int_equal(a->delay_ms, 2500);
  tk__task_report_free(&rep);
  tk__remote_claims_free(&c, 1);

  /* Not before its run_at; then attempt 2, whose lease runs out. */
  w->clock.now_ms = T(2599);
  int n = 1;
  assert_int_equal(tk__remote_claim(e, "images", "w-1", 1, &c, &n, NULL, &err), 0);
  assert_int_equal(n, 0);
  w->clock.now_ms = T(2600);
  c = remote_one(e);
  assert_int_equal(c.attempt, 2);
  w->clock.now_ms = c.lease_expires_at;
  tk__expired x[4];
  assert_int_equal(expired_at(w->s, w->clock.now_ms, x, 4), 1);
  tk__outcome o = expired_of(&x[0], w->clock.now_ms, w->clock.now_ms + 1000);
  record_ok(w->s, &o);
  char *before = task_text(w, t);
  int64_t fenced = counter(w, "fenced_writes");
  int64_t until;
  assert_int_equal(tk__remote_heartbeat(e, c.token, &until, &err), TK_EFENCED);
  expect_contains(err.msg, "lease expired");
  assert_int_equal(tk__remote_complete(e, c.token, "{}", &res, &err), TK_EFENCED);
  expect_contains(err.msg, "lease expired");
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  expect_unchanged(w, t, before);
  tk__remote_claims_free(&c, 1);

  /* Attempt 3 fails for good: the step and its task end in error. */
  w->clock.now_ms += 1000;
  c = remote_one(e);
  assert_int_equal(c.attempt, 3);
  must(tk__remote_fail(e, c.token, "bad input", 0, -1, &res, &err), &err, "fail");
  assert_string_equal(res.state, TK__STEP_ERROR);
  expect_states(w, t, TK__TASK_ERROR, "img", TK__STEP_ERROR, "thumb", TK__STEP_PENDING, NULL);
  tk__remote_claims_free(&c, 1);
  tk_engine_free(e);
}

#define WORKER_CASES                                                                            \
  {"workers: an orchestrator never claims a worker step, a queue only its own",                \
   worker_steps_only_for_their_queue, 0},                                                       \
  {"workers: a map's instances are its worker queue's", worker_map_instances_inherit_the_queue, \
   0},                                                                                          \
  {"workers: token, heartbeat, complete, fenced again", remote_claim_heartbeat_complete, 0},   \
  {"workers: fail under the policy, a lost lease fenced", remote_fail_and_lost_lease, 0},

#endif
