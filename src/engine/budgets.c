/* Retry budgets in the engine (DESIGN §14, docs/retry.md): the state of
 * each configured budget that this orchestrator's steps name, one for the
 * budget or, with per_host, one per destination host. Every state is in
 * this process's memory and owned by the engine thread: a budget bounds
 * the retries of one orchestrator, as gRPC's client-side throttling bounds
 * one client's.
 *
 * A first attempt counts when its outcome is recorded, at the time its
 * handler was called; a retry is asked for when its failure is recorded,
 * at the time the failed attempt ended (when its delay starts). A retry
 * the budget refuses is reserved at the time the budget gives it
 * (tk_retry_budget_reserve), so retries deferred one after another are
 * spread as the budget allows instead of all becoming due at once; and
 * kept, in that order, with the state, so that when first attempts
 * recorded since make room, every pass brings the oldest to now in the
 * store (retry_earlier): a long outage's queue drains at the rate the
 * budget has while it drains, not at the floor the reservations had. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <string.h>

/* A retry the state deferred, waiting in the store for its time. */
typedef struct waiting_retry {
  tk__retry_ref ref;
  int64_t at;         /* the time the budget reserved for it */
  int64_t not_before; /* its backoff policy's run_at: never brought before it */
} waiting_retry;

/* One state of a budget: the shared one, or one host's. */
typedef struct budget_state {
  char *host; /* malloc'd; NULL for the shared state and for free slots */
  tk_retry_budget b;
  /* Its deferred retries, oldest (and earliest) first: a ring. */
  waiting_retry *q;
  size_t qhead, qlen, qcap;
  int untracked; /* one could not be kept (out of memory): none is brought earlier */
} budget_state;

/* One budget that a step named. */
typedef struct budget_entry {
  char *name;
  const tk_budget_settings *s; /* NULL: not configured (warned once) */
  budget_state shared;         /* without per_host, or for attempts with no host */
  budget_state *hosts;         /* per_host: open addressing, hcap a power of 2 */
  size_t nhosts, hcap;
} budget_entry;

struct tk__budgets {
  budget_entry *v;
  size_t n, cap;
  struct in_order *order; /* tk__budgets_apply's order of a group */
  int order_cap;
  size_t waiting;     /* deferred retries kept, in every state */
  tk__retry_ref *due; /* tk__budgets_bring_earlier's batch */
  int *moved;
  int due_cap;
};

const char *tk__step_budget(json_t *definition, json_t *step) {
  json_t *v = json_object_get(json_object_get(step, "retry"), "budget");
  if (v == NULL) v = json_object_get(json_object_get(definition, "retry"), "budget");
  return json_string_value(v);
}

/* The entry of budget `name`, added (and its settings looked up) the first
 * time; NULL when out of memory. */
static budget_entry *entry_of(tk_engine *e, const char *name) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL && (bs = e->budgets = calloc(1, sizeof *bs)) == NULL) return NULL;
  for (size_t i = 0; i < bs->n; i++)
    if (strcmp(bs->v[i].name, name) == 0) return &bs->v[i];
  if (bs->n == bs->cap) {
    size_t cap = bs->cap ? 2 * bs->cap : 4;
    budget_entry *grown = realloc(bs->v, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    bs->v = grown;
    bs->cap = cap;
  }
  budget_entry *be = &bs->v[bs->n];
  memset(be, 0, sizeof *be);
  if ((be->name = strdup(name)) == NULL) return NULL;
  be->s = tk_config_budget(e->config, name);
  if (be->s != NULL && tk_retry_budget_init(&be->shared.b, &be->s->budget, NULL) != 0)
    be->s = NULL; /* not reached: the configuration validated it */
  if (be->s == NULL)
    tk__engine_log(e, TK_LOG_WARN,
                   "retry budget \"%s\" is not configured; the retries of steps naming it "
                   "are not limited",
                   name);
  bs->n++;
  return be;
}

static uint64_t hash_of(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  return h;
}

/* The slot of `host` in a table of cap entries: its own, or the free one
 * where it would go. */
static budget_state *probe(budget_state *t, size_t cap, const char *host) {
  size_t i = (size_t)hash_of(host) & (cap - 1);
  while (t[i].host != NULL && strcmp(t[i].host, host) != 0) i = (i + 1) & (cap - 1);
  return &t[i];
}

/* A state whose window holds nothing at now_ms (no count, no reservation)
 * answers as a new one would: it may go, and come back fresh. */
static int idle(const tk_retry_budget *b, int64_t now_ms) {
  if (!b->started) return 1;
  int64_t last = b->resv_started && b->resv_last > b->cur ? b->resv_last : b->cur;
  return now_ms / b->slot_ms - last >= TK_RETRY_BUDGET_SLOTS;
}

/* Forget a state's deferred retries (it is dropped, or the engine ends). */
static void forget_waiting(struct tk__budgets *bs, budget_state *st) {
  bs->waiting -= st->qlen;
  free(st->q);
  st->q = NULL;
  st->qhead = st->qlen = st->qcap = 0;
}

/* Keep a deferred retry at the end of st's queue. Out of memory, it is not
 * kept: it runs at its reserved time, and since its reservation will never
 * be settled, the state brings none earlier from then on (promote would
 * not count it). */
static void keep_waiting(struct tk__budgets *bs, budget_state *st, tk__retry_ref ref, int64_t at,
                         int64_t not_before) {
  if (st->qlen == st->qcap) {
    size_t cap = st->qcap ? 2 * st->qcap : 16;
    waiting_retry *q = malloc(cap * sizeof *q);
    if (q == NULL) {
      st->untracked = 1;
      return;
    }
    for (size_t i = 0; i < st->qlen; i++) q[i] = st->q[(st->qhead + i) % st->qcap];
    free(st->q);
    st->q = q;
    st->qhead = 0;
    st->qcap = cap;
  }
  st->q[(st->qhead + st->qlen++) % st->qcap] = (waiting_retry){ref, at, not_before};
  bs->waiting++;
}

/* The oldest deferred retry of st leaves its queue. */
static void pop_waiting(struct tk__budgets *bs, budget_state *st) {
  st->qhead = (st->qhead + 1) % st->qcap;
  st->qlen--;
  bs->waiting--;
}

/* Make room for one more host: a table twice the live states (at least
 * 16), without the idle ones. 0, or TK_ENOMEM with the table unchanged. */
static int regrow(struct tk__budgets *bs, budget_entry *be, int64_t now_ms) {
  size_t live = 0;
  for (size_t i = 0; i < be->hcap; i++)
    if (be->hosts[i].host != NULL && !idle(&be->hosts[i].b, now_ms)) live++;
  size_t cap = 16;
  while (cap < 4 * (live + 1)) cap *= 2;
  budget_state *t = calloc(cap, sizeof *t);
  if (t == NULL) return TK_ENOMEM;
  for (size_t i = 0; i < be->hcap; i++) {
    budget_state *old = &be->hosts[i];
    if (old->host == NULL) continue;
    if (idle(&old->b, now_ms)) {
      free(old->host);
      forget_waiting(bs, old);
    } else {
      *probe(t, cap, old->host) = *old;
    }
  }
  free(be->hosts);
  be->hosts = t;
  be->hcap = cap;
  be->nhosts = live;
  return 0;
}

/* The state of budget `name` for `host` ("" or NULL: the shared one), or
 * NULL when the budget is not configured or memory ran out. */
static budget_state *state_of(tk_engine *e, const char *name, const char *host, int64_t now_ms,
                              const char **used_host) {
  budget_entry *be = entry_of(e, name);
  *used_host = NULL;
  if (be == NULL || be->s == NULL) return NULL;
  if (!be->s->per_host || host == NULL || host[0] == '\0') return &be->shared;
  if (be->hcap > 0) {
    budget_state *st = probe(be->hosts, be->hcap, host);
    if (st->host != NULL) {
      *used_host = st->host;
      return st;
    }
  }
  if (2 * (be->nhosts + 1) > be->hcap && regrow(e->budgets, be, now_ms) != 0) {
    tk__engine_log(e, TK_LOG_ERROR, "retry budget \"%s\": out of memory for host %s", name,
                   host);
    return NULL;
  }
  budget_state *st = probe(be->hosts, be->hcap, host);
  if ((st->host = strdup(host)) == NULL) return NULL;
  tk_retry_budget_init(&st->b, &be->s->budget, NULL); /* validated with the config */
  be->nhosts++;
  *used_host = st->host;
  return st;
}

/* One outcome of a group in the order tk__budgets_apply takes them: by a
 * time, then by claim id (claims are numbered in the order made). */
typedef struct in_order {
  int64_t at, claim;
  int i;
} in_order;

static int by_time(const void *a, const void *b) {
  const in_order *x = a, *y = b;
  if (x->at != y->at) return x->at < y->at ? -1 : 1;
  return (x->claim > y->claim) - (x->claim < y->claim);
}

/* Room for n outcomes in order; NULL when out of memory. */
static in_order *room(tk_engine *e, int n) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL && (bs = e->budgets = calloc(1, sizeof *bs)) == NULL) return NULL;
  if (n > bs->order_cap) {
    in_order *grown = realloc(bs->order, (size_t)n * sizeof *grown);
    if (grown == NULL) return NULL;
    bs->order = grown;
    bs->order_cap = n;
  }
  return bs->order;
}

void tk__budgets_apply(tk_engine *e, const tk__finish *items, tk__outcome *o, tk__deferral *d,
                       int n) {
  memset(d, 0, (size_t)n * sizeof *d);
  int any = 0;
  for (int i = 0; i < n && !any; i++) any = items[i].budget != NULL;
  if (!any) return;
  /* First attempts before retries: what the group's first attempts add is
   * there for its retries. An attempt that never ran (the reaper's) is no
   * first attempt here. Each in the order of its time (handlers run inline
   * come back last first), so that the budget sees time go forward and
   * serves the retry that failed first first; out of memory, as they come. */
  in_order *ord = room(e, n);
  for (int i = 0; ord && i < n; i++)
    ord[i] = (in_order){items[i].started_at, items[i].claim->claim_id, i};
  if (ord) qsort(ord, (size_t)n, sizeof *ord, by_time);
  for (int k = 0; k < n; k++) {
    const tk__finish *f = &items[ord ? ord[k].i : k];
    if (f->claim->attempt != 1 || f->started_at <= 0) continue;
    const char *name = f->budget, *host;
    budget_state *st = name ? state_of(e, name, f->result->downstream, f->started_at, &host) : NULL;
    if (st) tk_retry_budget_first(&st->b, f->started_at);
  }
  for (int i = 0; ord && i < n; i++)
    ord[i] = (in_order){o[i].finished_at, items[i].claim->claim_id, i};
  if (ord) qsort(ord, (size_t)n, sizeof *ord, by_time);
  for (int k = 0; k < n; k++) {
    int i = ord ? ord[k].i : k;
    if (o[i].next != TK__NEXT_RETRY) continue;
    const char *name = items[i].budget, *host;
    budget_state *st =
        name ? state_of(e, name, items[i].result->downstream, o[i].finished_at, &host) : NULL;
    int64_t at;
    if (st == NULL || tk_retry_budget_reserve(&st->b, o[i].finished_at, &at)) continue;
    /* Kept even when the policy's run_at is as late (which then holds
     * it there), so that the reservation settles when its time comes and
     * the ones after it stay in order behind it. */
    keep_waiting(e->budgets, st, (tk__retry_ref){o[i].step_id, o[i].claim_id}, at,
                 o[i].run_at);
    if (at <= o[i].run_at) continue;
    /* The result's copy of the host lives until the outcome is reported;
     * the table's may go with an idle state. */
    d[i] = (tk__deferral){name, host ? items[i].result->downstream : NULL, o[i].delay_ms,
                          o[i].source, o[i].run_at};
    o[i].run_at = at;
    o[i].delay_ms = at - o[i].finished_at;
    o[i].source = TK_DELAY_BUDGET;
  }
}

/* Settle st's deferred retries that came due, then take the oldest that
 * the budget now has room for into bs->due (to be brought to now). One
 * whose backoff has not run out yet stops the taking: the queue is served
 * in order, and a budget never brings a retry before its policy's time. */
static void take_room(struct tk__budgets *bs, budget_state *st, int64_t now, int *n) {
  while (st->qlen > 0 && st->q[st->qhead].at <= now) {
    tk_retry_budget_settle(&st->b, now, st->q[st->qhead].at);
    pop_waiting(bs, st);
  }
  while (st->qlen > 0 && !st->untracked && st->q[st->qhead].not_before <= now) {
    if (*n == bs->due_cap &&
        tk__grow((void **)&bs->due, &bs->due_cap, *n + 1, sizeof *bs->due) != 0)
      return;
    if (!tk_retry_budget_promote(&st->b, now, st->q[st->qhead].at)) return;
    bs->due[(*n)++] = st->q[st->qhead].ref;
    pop_waiting(bs, st);
  }
}

void tk__budgets_bring_earlier(tk_engine *e, int64_t now) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL || bs->waiting == 0 || e->store->ops->retry_earlier == NULL) return;
  int n = 0;
  for (size_t i = 0; i < bs->n; i++) {
    budget_entry *be = &bs->v[i];
    take_room(bs, &be->shared, now, &n);
    for (size_t k = 0; k < be->hcap; k++)
      if (be->hosts[k].host != NULL) take_room(bs, &be->hosts[k], now, &n);
  }
  if (n == 0) return;
  int *moved = realloc(bs->moved, (size_t)bs->due_cap * sizeof *moved);
  if (moved == NULL) return; /* they run at their reserved times */
  bs->moved = moved;
  tk_err err;
  /* A failure leaves them at their reserved times (rare: the store is
   * failing), while the budget counts them now: for one window it may
   * see a few retries fewer than run. */
  if (e->store->ops->retry_earlier(e->store, bs->due, n, now, moved, &err) != 0) {
    tk__engine_log(e, TK_LOG_WARN, "retry budgets: could not bring %d deferred retries earlier: %s",
                   n, err.msg);
    return;
  }
  int64_t m = 0;
  for (int i = 0; i < n; i++) m += moved[i];
  e->stats.retries_brought_earlier += m;
  tk__engine_log(e, TK_LOG_DEBUG, "retry budgets: brought %lld deferred retries earlier",
                 (long long)m);
}

void tk__budgets_free(tk_engine *e) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL) return;
  for (size_t i = 0; i < bs->n; i++) {
    for (size_t k = 0; k < bs->v[i].hcap; k++) {
      free(bs->v[i].hosts[k].host);
      free(bs->v[i].hosts[k].q);
    }
    free(bs->v[i].shared.q);
    free(bs->v[i].hosts);
    free(bs->v[i].name);
  }
  free(bs->v);
  free(bs->order);
  free(bs->due);
  free(bs->moved);
  free(bs);
  e->budgets = NULL;
}
