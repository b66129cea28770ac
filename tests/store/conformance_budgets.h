/* Conformance cases of retry budgets kept in the store (DESIGN §14, ops
 * 13: budget_update): a state written through one connection is what
 * another reads next, a change that fails writes nothing, keys are
 * checked; two connections spending one budget (the library's own state,
 * tk_retry_budget_save/load) see each other's retries and deferrals; and
 * connections racing on one key lose no update, so together they spend
 * exactly what the budget allows; budget_list (ops 14) reads them all. Included by test_conformance.c; every
 * case runs on every backend. */
#ifndef TESTS_STORE_CONFORMANCE_BUDGETS_H
#define TESTS_STORE_CONFORMANCE_BUDGETS_H

#include <tasker/budget.h>

/* A change of raw bytes: what it read (as text) into seen, then appends
 * `add`; or fails with `fail` (a TK_E* code) writing nothing. */
typedef struct bytes_change {
  const char *add;
  int fail, calls;
  char seen[64];
} bytes_change;

static int change_bytes(void *arg, unsigned char *state, size_t *len, size_t cap) {
  bytes_change *c = arg;
  c->calls++;
  snprintf(c->seen, sizeof c->seen, "%.*s", (int)*len, (const char *)state);
  if (c->fail) return c->fail;
  size_t n = strlen(c->add);
  if (*len + n > cap) return TK_ERANGE;
  memcpy(state + *len, c->add, n);
  *len += n;
  return 0;
}

/* budget_update of key on s with change_bytes adding `add`: what the
 * change read. */
static const char *update_bytes(world *w, tk_store *s, const char *key, const char *add,
                                bytes_change *c) {
  unsigned char state[64];
  tk_err err;
  *c = (bytes_change){.add = add};
  must(s->ops->budget_update(s, key, state, sizeof state, change_bytes, c, w->clock.now_ms, &err),
       &err, "budget_update");
  assert_int_equal(c->calls, 1);
  return c->seen;
}

/* Each connection reads the state the other wrote last; a key is its own
 * state; a change that fails writes nothing and its code comes back; an
 * empty key or one over TK__BUDGET_KEY_MAX bytes is refused before any
 * change is called. */
static void budgets_shared_between_connections(world *w) {
  tk_store *a = w->s, *b = open_store(w, w->url);
  bytes_change c;
  assert_string_equal(update_bytes(w, a, "3:api", "a", &c), "");
  assert_string_equal(update_bytes(w, b, "3:api", "b", &c), "a");
  assert_string_equal(update_bytes(w, a, "3:api", "c", &c), "ab");
  assert_string_equal(update_bytes(w, b, "3:api@example.com", "x", &c), "");
  unsigned char state[64];
  tk_err err;
  c = (bytes_change){.add = "z", .fail = TK_EINVAL};
  assert_int_equal(
      a->ops->budget_update(a, "3:api", state, sizeof state, change_bytes, &c, T(0), &err),
      TK_EINVAL);
  assert_string_equal(update_bytes(w, b, "3:api", "", &c), "abc");
  char long_key[TK__BUDGET_KEY_MAX + 2];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = '\0';
  const char *bad[] = {"", long_key};
  for (int i = 0; i < 2; i++) {
    c = (bytes_change){.add = "z"};
    assert_int_equal(
        a->ops->budget_update(a, bad[i], state, sizeof state, change_bytes, &c, T(0), &err),
        TK_EINVAL);
    assert_int_equal(c.calls, 0);
  }
  long_key[TK__BUDGET_KEY_MAX] = '\0'; /* the longest allowed */
  assert_string_equal(update_bytes(w, a, long_key, "l", &c), "");
  assert_string_equal(update_bytes(w, b, long_key, "", &c), "l");
}

/* A budget of 3 retries per 1 s window (slots of 10 ms) and nothing for
 * first attempts, as tk_retry_budget_load reads it from what budget_update
 * holds. */
static const tk_retry_budget_config shared_budget = {0, 1000, 3};

enum { SPEND_TRY, SPEND_RESERVE };

/* One retry asked of the stored budget at `now`: allowed (1) or not, and
 * the time it gives. */
typedef struct spend {
  int how;
  int64_t now, at;
  int allowed;
  tk_retry_budget seen; /* the budget after the change */
} spend;

static int spend_one(void *arg, unsigned char *state, size_t *len, size_t cap) {
  spend *sp = arg;
  if (cap < TK_RETRY_BUDGET_STATE_SIZE) return TK_ERANGE;
  tk_retry_budget b;
  tk_retry_budget_load(&b, &shared_budget, state, *len);
  sp->allowed = sp->how == SPEND_TRY ? tk_retry_budget_try(&b, sp->now, &sp->at)
                                     : tk_retry_budget_reserve(&b, sp->now, &sp->at);
  tk_retry_budget_save(&b, state);
  *len = TK_RETRY_BUDGET_STATE_SIZE;
  sp->seen = b;
  return 0;
}

static spend spend_on(tk_store *s, int how, int64_t now) {
  unsigned char state[TK_RETRY_BUDGET_STATE_SIZE];
  spend sp = {.how = how, .now = now};
  tk_err err;
  must(s->ops->budget_update(s, "3:api", state, sizeof state, spend_one, &sp, now, &err), &err,
       "budget_update");
  return sp;
}

/* Connection A spends the window's 3 retries at T(0); B, a moment later,
 * is refused until the slot where they leave the window (T(0)'s slot +
 * 100), and reserves that time; then A is refused even where the window
 * has room, since B's reservation waits (first come, first served), and
 * A's own reservation goes behind B's. */
static void budgets_two_connections_spend_one_budget(world *w) {
  tk_store *a = w->s, *b = open_store(w, w->url);
  for (int i = 0; i < 3; i++) assert_int_equal(spend_on(a, SPEND_TRY, T(0)).allowed, 1);
  int64_t leave = (T(0) / 10 + 100) * 10;
  spend sp = spend_on(b, SPEND_TRY, T(5));
  assert_int_equal(sp.allowed, 0);
  assert_int_equal(sp.at, leave);
  sp = spend_on(b, SPEND_RESERVE, T(6));
  assert_int_equal(sp.allowed, 0);
  assert_int_equal(sp.at, leave);
  assert_int_equal(sp.seen.resv_live, 1);
  sp = spend_on(a, SPEND_TRY, leave - 10);
  assert_int_equal(sp.allowed, 0);
  assert_int_equal(sp.at, leave);
  sp = spend_on(a, SPEND_RESERVE, leave - 10);
  assert_int_equal(sp.at, leave); /* room for 3 there: B's and this one */
  assert_int_equal(sp.seen.resv_live, 2);
  assert_int_equal(sp.seen.total_retries, 5);
  assert_int_equal(sp.seen.total_deferred, 4);
}

#define RACERS 2
#define RACE_TRIES 40

typedef struct budget_racer {
  tk_store *s;
  pthread_barrier_t *go;
  int64_t now;
  int allowed;
  char error[TK_ERR_MSG_MAX + 32];
} budget_racer;

static void *race_budget(void *arg) {
  budget_racer *r = arg;
  pthread_barrier_wait(r->go);
  for (int i = 0; i < RACE_TRIES; i++) {
    unsigned char state[TK_RETRY_BUDGET_STATE_SIZE];
    spend sp = {.how = SPEND_TRY, .now = r->now + i};
    tk_err err;
    if (r->s->ops->budget_update(r->s, "3:api", state, sizeof state, spend_one, &sp, sp.now,
                                 &err) != 0) {
      snprintf(r->error, sizeof r->error, "budget_update: %s", err.msg);
      return NULL;
    }
    r->allowed += sp.allowed;
  }
  return NULL;
}

/* Two connections asking at once, 40 retries each within one window:
 * exactly the 3 the window allows go, and no update is lost (the state
 * counts every refusal). */
static void budgets_racing_connections_keep_the_bound(world *w) {
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, RACERS);
  budget_racer r[RACERS];
  pthread_t th[RACERS];
  for (int i = 0; i < RACERS; i++) {
    r[i] = (budget_racer){.s = i ? open_store(w, w->url) : w->s, .go = &go, .now = T(0)};
    pthread_create(&th[i], NULL, race_budget, &r[i]);
  }
  for (int i = 0; i < RACERS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  int allowed = 0;
  for (int i = 0; i < RACERS; i++) {
    if (r[i].error[0]) fail_msg("%s", r[i].error);
    allowed += r[i].allowed;
  }
  assert_int_equal(allowed, 3);
  spend sp = spend_on(w->s, SPEND_TRY, T(100));
  assert_int_equal(sp.allowed, 0);
  assert_int_equal(sp.seen.total_retries, 3);
  assert_int_equal(sp.seen.total_deferred, RACERS * RACE_TRIES - 3 + 1);
}

/* budget_list (ops 14): every state by key, with the bytes budget_update
 * wrote last and its time, through a connection that wrote none of them;
 * a change that failed shows nothing; an empty table lists nothing. */
static void budgets_listed_by_key(world *w) {
  tk_store *a = w->s, *b = open_store(w, w->url);
  tk__budget_rec *v = NULL;
  int n = -1;
  tk_err err;
  must(b->ops->budget_list(b, &v, &n, &err), &err, "budget_list");
  assert_int_equal(n, 0);
  tk__budget_recs_free(v, n);
  bytes_change c;
  w->clock.now_ms = T(10);
  update_bytes(w, a, "3:api@example.com", "h", &c);
  update_bytes(w, a, "3:api", "a", &c);
  w->clock.now_ms = T(20);
  update_bytes(w, a, "3:api", "b", &c);
  update_bytes(w, a, "2:db", "", &c);
  unsigned char state[64];
  c = (bytes_change){.add = "z", .fail = TK_EINVAL};
  assert_int_equal(
      a->ops->budget_update(a, "5:never", state, sizeof state, change_bytes, &c, T(30), &err),
      TK_EINVAL);
  must(b->ops->budget_list(b, &v, &n, &err), &err, "budget_list");
  struct {
    const char *key, *state;
    int64_t at;
  } want[] = {{"2:db", "", T(20)}, {"3:api", "ab", T(20)}, {"3:api@example.com", "h", T(10)}};
  assert_int_equal(n, 3);
  for (int i = 0; i < n; i++) {
    assert_string_equal(v[i].key, want[i].key);
    assert_int_equal(v[i].len, strlen(want[i].state));
    if (v[i].len) assert_memory_equal(v[i].state, want[i].state, v[i].len);
    assert_int_equal(v[i].updated_at, want[i].at);
  }
  tk__budget_recs_free(v, n);
}

#define BUDGET_CASES                                                                            \
  {"retry budgets: budget_update shares one state between connections",                       \
   budgets_shared_between_connections, 0},                                                      \
  {"retry budgets: two connections spend one budget; a deferred retry",                       \
   budgets_two_connections_spend_one_budget, 0},                                                \
  {"retry budgets: racing connections spend no more than the budget",                         \
   budgets_racing_connections_keep_the_bound, 0},                                                \
  {"retry budgets: budget_list reads every state by key", budgets_listed_by_key, 0},

#endif
