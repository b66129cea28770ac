/* A queue's concurrency under load on PostgreSQL (DESIGN §19, issue 23):
 * six store connections, each on a thread of its own, claim and complete
 * the steps of a `concurrency = 5` queue at once, three as orchestrators
 * (their claims also take the steps of no queue) and three as outside
 * workers of the same queue; a seventh connection samples how many of the
 * queue's steps are in progress (queue_list) as fast as it can. The most
 * ever seen in progress must be at most 5, and at the end every step is
 * complete after exactly one attempt: none was done twice, none lost.
 * Real time, real connections; the bound on the run's length is generous
 * and fails with a clear message. Skipped as requiring pg without a
 * cluster. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tasker/store.h>

#include "common/engine_fixture.h"
#include "common/outcomes.h"
#include "store/rules.h"
#include "store/store.h"

#define LIMIT 5
#define CLAIMERS 6
#define QUEUED 60  /* an orchestrator's steps of queue q */
#define WORKERS 40 /* worker steps of queue q */
#define PLAIN 20   /* steps of no queue */
#define TOTAL (QUEUED + WORKERS + PLAIN)
#define LEASE_MS 600000
#define RUN_LIMIT_MS 300000

static int setup(void **state) {
  *state = efx_new_pg("tk_pg_qlim");
  return 0;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the threads share. */
typedef struct shared {
  const char *url;
  pthread_mutex_t mu;
  int done;      /* steps completed */
  int failures;  /* store errors seen by the threads */
  char error[1024];
  int stop;      /* the sampler's signal */
  int64_t most;  /* the most of q's steps seen in progress */
  int samples;
} shared;

typedef struct claimer {
  shared *sh;
  int index;
} claimer;

static void fail_shared(shared *sh, const char *what, const tk_err *err) {
  pthread_mutex_lock(&sh->mu);
  if (sh->failures++ == 0) snprintf(sh->error, sizeof sh->error, "%s: %s", what, err->msg);
  pthread_mutex_unlock(&sh->mu);
}

static int done_count(shared *sh) {
  pthread_mutex_lock(&sh->mu);
  int d = sh->done + (sh->failures ? TOTAL : 0);
  pthread_mutex_unlock(&sh->mu);
  return d;
}

/* Claim (as an orchestrator for an even index, a worker of q for an odd
 * one), hold each step a moment, complete it; until every step is done. */
static void *claim_loop(void *arg) {
  claimer *c = arg;
  shared *sh = c->sh;
  tk_store *s;
  tk_err err;
  if (tk_store_open(sh->url, &s, &err) != 0) {
    fail_shared(sh, "open", &err);
    return NULL;
  }
  char owner[32];
  snprintf(owner, sizeof owner, "%s-%d", c->index % 2 ? "worker" : "orch", c->index);
  unsigned char hashes[3][TK__TOKEN_HASH_LEN];
  memset(hashes, c->index, sizeof hashes);
  int64_t deadline = now_ms() + RUN_LIMIT_MS;
  while (done_count(sh) < TOTAL && now_ms() < deadline) {
    tk__claimed out[3];
    tk__claim_request r = {.owner = owner, .lease_ms = LEASE_MS, .limit = 3, .fresh_limit = 3,
                           .out = out};
    if (c->index % 2) {
      r.worker_queue = "q";
      r.token_hashes = (const unsigned char(*)[TK__TOKEN_HASH_LEN])hashes;
    }
    if (s->ops->record(s, NULL, 0, NULL, NULL, &r, &err) != 0) {
      fail_shared(sh, "claim", &err);
      break;
    }
    if (r.n == 0) {
      struct timespec pause = {0, 2000000};
      nanosleep(&pause, NULL);
      continue;
    }
    struct timespec hold = {0, 1000000 + 500000 * (c->index % 3)};
    nanosleep(&hold, NULL);
    tk__outcome o[3];
    tk__effects fx[3];
    tk_err errs[3];
    for (int i = 0; i < r.n; i++) o[i] = success_of(&out[i], owner, now_ms());
    if (s->ops->record(s, o, r.n, fx, errs, NULL, &err) != 0) {
      fail_shared(sh, "record", &err);
      break;
    }
    int ok = 0;
    for (int i = 0; i < r.n; i++) {
      if (errs[i].code == 0) ok++;
      else fail_shared(sh, "an outcome", &errs[i]);
    }
    pthread_mutex_lock(&sh->mu);
    sh->done += ok;
    pthread_mutex_unlock(&sh->mu);
  }
  tk_store_close(s);
  return NULL;
}

/* Read q's steps in progress (queue_list) until told to stop. */
static void *sample_loop(void *arg) {
  shared *sh = arg;
  tk_store *s;
  tk_err err;
  if (tk_store_open(sh->url, &s, &err) != 0) {
    fail_shared(sh, "open", &err);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&sh->mu);
    int stop = sh->stop;
    pthread_mutex_unlock(&sh->mu);
    if (stop) break;
    tk__queue_rec *v = NULL;
    int n = 0;
    if (s->ops->queue_list(s, now_ms(), &v, &n, &err) != 0) {
      fail_shared(sh, "queue_list", &err);
      break;
    }
    for (int i = 0; i < n; i++)
      if (strcmp(v[i].name, "q") == 0) {
        pthread_mutex_lock(&sh->mu);
        if (v[i].in_progress > sh->most) sh->most = v[i].in_progress;
        sh->samples++;
        pthread_mutex_unlock(&sh->mu);
      }
    free(v);
  }
  tk_store_close(s);
  return NULL;
}

static const char one_toml[] = "name = \"one\"\nversion = \"1\"\n" EFX_STEP("s") EFX_NOOP;

static void concurrency_holds_under_load(void **state) {
  efx *f = *state;
  int64_t tid = efx_template(f, one_toml);
  tk_err err;
  tk__queue_def d = {.name = "q", .concurrency = LIMIT};
  efx_must(f->store->ops->queue_put(f->store, &d, 1, &err), &err, "queue_put");
  for (int i = 0; i < TOTAL; i++) {
    tk__new_step st = {.name = "s", .max_attempts = 5, .retryable = 1, .backoff = "default",
                       .queue = i < QUEUED ? "q" : NULL,
                       .worker_queue = i >= QUEUED && i < QUEUED + WORKERS ? "q" : NULL};
    tk__new_task t = {.template_id = tid, .context = "{}", .steps = &st, .nsteps = 1,
                      .now = now_ms()};
    int64_t id;
    int existed;
    efx_must(f->store->ops->task_create(f->store, &t, &id, &existed, &err), &err, "task_create");
  }
  shared sh = {.url = f->url};
  pthread_mutex_init(&sh.mu, NULL);
  pthread_t sampler, threads[CLAIMERS];
  claimer cl[CLAIMERS];
  assert_int_equal(pthread_create(&sampler, NULL, sample_loop, &sh), 0);
  for (int i = 0; i < CLAIMERS; i++) {
    cl[i] = (claimer){&sh, i};
    assert_int_equal(pthread_create(&threads[i], NULL, claim_loop, &cl[i]), 0);
  }
  for (int i = 0; i < CLAIMERS; i++) pthread_join(threads[i], NULL);
  pthread_mutex_lock(&sh.mu);
  sh.stop = 1;
  pthread_mutex_unlock(&sh.mu);
  pthread_join(sampler, NULL);
  pthread_mutex_destroy(&sh.mu);
  if (sh.failures) fail_msg("%d failures, the first: %s", sh.failures, sh.error);
  if (sh.done < TOTAL)
    fail_msg("only %d of %d steps done in %d s", sh.done, TOTAL, RUN_LIMIT_MS / 1000);
  printf("# most of q in progress at once: %lld (limit %d), %d samples\n", (long long)sh.most,
         LIMIT, sh.samples);
  assert_true(sh.samples > 0);
  assert_true(sh.most <= LIMIT);
  assert_int_equal(sh.done, TOTAL);
  /* Every step complete after exactly one attempt: nothing done twice. */
  efx_pg_expect(f->url, "120|120|0", "%s",
                "SELECT (SELECT count(*) FROM steps WHERE state = 'complete'),"
                 " (SELECT count(DISTINCT step_id) FROM attempts WHERE outcome = 'success'),"
                 " (SELECT count(*) FROM attempts WHERE outcome IS DISTINCT FROM 'success')");
  tk__queue_rec *v = NULL;
  int n = 0;
  efx_must(f->store->ops->queue_list(f->store, now_ms(), &v, &n, &err), &err, "queue_list");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].in_progress, 0);
  assert_int_equal(v[0].ready, 0);
  assert_int_equal(v[0].worker, 1);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(concurrency_holds_under_load, setup, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
