/* Retry budgets in the engine (DESIGN §14, docs/retry.md): the state of
 * each configured budget that steps name, one for the budget or, with
 * per_host, one per destination host. Each state is kept in the store
 * (budget_update, a row per budget and host: engine/budget_row.h), so the
 * bound holds across every orchestrator sharing it: each group of
 * outcomes applies its first attempts and retries to the stored state in
 * one transaction per state it touches, and two orchestrators together
 * spend what one would. This process keeps, per state, the retries it
 * deferred and the state as it last saw it (to know when a per-host state
 * is idle).
 *
 * A first attempt counts when its outcome is recorded, at the time its
 * handler was called; a retry is asked for when its failure is recorded,
 * at the time the failed attempt ended (when its delay starts). A retry
 * the budget refuses is reserved at the time the budget gives it
 * (tk_retry_budget_reserve), so retries deferred one after another, by
 * any orchestrator, are spread as the budget allows instead of all
 * becoming due at once; and kept, in that order, by the orchestrator that
 * deferred it, so that when first attempts recorded since make room, a
 * pass brings the oldest to now in the store (retry_earlier): a long
 * outage's queue drains at the rate the budget has while it drains, not at
 * the floor the reservations had. An orchestrator brings its oldest
 * earlier only while no other holds an earlier live reservation of the
 * state (budget_row.h: the owners' books, with each one's earliest): the
 * budget's queue is served first come first served across the fleet, and
 * bringing a later one earlier would pass over another's earlier
 * reservation, breaking the bound at that one's time. */
#include "engine/budget_row.h"
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A retry the state deferred, waiting in the store for its time. */
typedef struct waiting_retry {
  tk__retry_ref ref;
  int64_t at;         /* the time the budget reserved for it */
  int64_t not_before; /* its backoff policy's run_at: never brought before it */
  int64_t epoch;      /* the books it was reserved in (tk_retry_budget.resv_epoch) */
} waiting_retry;

/* One state of a budget: the shared one, or one host's. */
typedef struct budget_state {
  char *host; /* malloc'd; NULL for the shared state and for free slots */
  tk_retry_budget b; /* as this process last read it from the store */
  /* Its deferred retries, oldest (and earliest) first: a ring. */
  waiting_retry *q;
  size_t qhead, qlen, qcap;
  int untracked; /* one could not be kept (out of memory): none is brought earlier */
  const char *name;  /* the budget's (its entry's copy) */
  const tk_retry_budget_config *cfg; /* the configuration's */
  int64_t next_look; /* bring-earlier looks at the stored state again from then on */
  int fresh;         /* first attempts of this process counted since the last look */
  uint64_t group;    /* the last group of outcomes that touched it */
  uint64_t pinned;   /* the last group that resolved it: kept while that group is applied */
} budget_state;

/* One budget that a step named. Entries and host states are each
 * allocated on their own and the tables hold pointers, so a state's
 * address holds while tables grow: a group resolves each outcome's state
 * once. */
typedef struct budget_entry {
  char *name;
  const tk_budget_settings *s; /* NULL: not configured (warned once) */
  budget_state shared;         /* without per_host, or for attempts with no host */
  budget_state **hosts;        /* per_host: open addressing (NULL: free), hcap a power of 2 */
  size_t nhosts, hcap;
} budget_entry;

struct tk__budgets {
  budget_entry **v;
  size_t n, cap;
  uint64_t me;           /* this orchestrator in the stored owners' books */
  uint64_t groups;       /* groups of outcomes applied */
  struct in_order *order; /* tk__budgets_apply's orders of a group: firsts, then retries */
  budget_state **state_of; /* per outcome of a group: its state, or NULL */
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

/* The engine's budgets, made the first time; NULL when out of memory. */
static struct tk__budgets *budgets_of(tk_engine *e) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL && (bs = e->budgets = calloc(1, sizeof *bs)) != NULL)
    bs->me = tk_rand_u64(&e->rng) | 1; /* 0 marks a free entry of the owners' books */
  return bs;
}

/* The entry of budget `name`, added (and its settings looked up) the first
 * time; NULL when out of memory. */
static budget_entry *entry_of(tk_engine *e, const char *name) {
  struct tk__budgets *bs = budgets_of(e);
  if (bs == NULL) return NULL;
  for (size_t i = 0; i < bs->n; i++)
    if (strcmp(bs->v[i]->name, name) == 0) return bs->v[i];
  if (bs->n == bs->cap) {
    size_t cap = bs->cap ? 2 * bs->cap : 4;
    budget_entry **grown = realloc(bs->v, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    bs->v = grown;
    bs->cap = cap;
  }
  budget_entry *be = calloc(1, sizeof *be);
  if (be == NULL) return NULL;
  if ((be->name = strdup(name)) == NULL) {
    free(be);
    return NULL;
  }
  bs->v[bs->n] = be;
  be->s = tk_config_budget(e->config, name);
  if (be->s != NULL && tk_retry_budget_init(&be->shared.b, &be->s->budget, NULL) != 0)
    be->s = NULL; /* not reached: the configuration validated it */
  be->shared.name = be->name;
  be->shared.cfg = be->s ? &be->s->budget : NULL;
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
 * (NULL) where it would go. */
static budget_state **probe(budget_state **t, size_t cap, const char *host) {
  size_t i = (size_t)hash_of(host) & (cap - 1);
  while (t[i] != NULL && strcmp(t[i]->host, host) != 0) i = (i + 1) & (cap - 1);
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
                         int64_t not_before, int64_t epoch) {
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
  st->q[(st->qhead + st->qlen++) % st->qcap] = (waiting_retry){ref, at, not_before, epoch};
  bs->waiting++;
}

/* The oldest deferred retry of st leaves its queue. */
static void pop_waiting(struct tk__budgets *bs, budget_state *st) {
  st->qhead = (st->qhead + 1) % st->qcap;
  st->qlen--;
  bs->waiting--;
}

/* Whether a host's state may be dropped: idle, and not resolved by the
 * group being applied (whose outcomes point at it). */
static int droppable(const struct tk__budgets *bs, const budget_state *st, int64_t now_ms) {
  return st->pinned != bs->groups + 1 && idle(&st->b, now_ms);
}

/* Make room for one more host: a table twice the states kept (at least
 * 16), without the droppable ones, which are freed. The states kept do
 * not move. 0, or TK_ENOMEM with the table unchanged. */
static int regrow(struct tk__budgets *bs, budget_entry *be, int64_t now_ms) {
  size_t live = 0;
  for (size_t i = 0; i < be->hcap; i++)
    if (be->hosts[i] != NULL && !droppable(bs, be->hosts[i], now_ms)) live++;
  size_t cap = 16;
  while (cap < 4 * (live + 1)) cap *= 2;
  budget_state **t = calloc(cap, sizeof *t);
  if (t == NULL) return TK_ENOMEM;
  for (size_t i = 0; i < be->hcap; i++) {
    budget_state *old = be->hosts[i];
    if (old == NULL) continue;
    if (droppable(bs, old, now_ms)) {
      free(old->host);
      forget_waiting(bs, old);
      free(old);
    } else {
      *probe(t, cap, old->host) = old;
    }
  }
  free(be->hosts);
  be->hosts = t;
  be->hcap = cap;
  be->nhosts = live;
  return 0;
}

/* The state of budget `name` for `host` ("" or NULL: the shared one), or
 * NULL when the budget is not configured or memory ran out. Its address
 * holds until it is dropped (idle, by a later group's regrow) or the
 * engine ends. */
static budget_state *state_of(tk_engine *e, const char *name, const char *host, int64_t now_ms) {
  budget_entry *be = entry_of(e, name);
  if (be == NULL || be->s == NULL) return NULL;
  if (!be->s->per_host || host == NULL || host[0] == '\0') return &be->shared;
  if (be->hcap > 0) {
    budget_state *st = *probe(be->hosts, be->hcap, host);
    if (st != NULL) return st;
  }
  budget_state *st = NULL;
  if ((2 * (be->nhosts + 1) <= be->hcap || regrow(e->budgets, be, now_ms) == 0) &&
      (st = calloc(1, sizeof *st)) != NULL && (st->host = strdup(host)) == NULL) {
    free(st);
    st = NULL;
  }
  if (st == NULL) {
    tk__engine_log(e, TK_LOG_ERROR, "retry budget \"%s\": out of memory for host %s", name,
                   host);
    return NULL;
  }
  tk_retry_budget_init(&st->b, &be->s->budget, NULL); /* validated with the config */
  st->name = be->name;
  st->cfg = &be->s->budget;
  *probe(be->hosts, be->hcap, host) = st;
  be->nhosts++;
  return st;
}

/* ---- the stored state ----------------------------------------------------- */

/* The key of st's row: the budget's name after its length, so that no
 * name and host can make another's key; a host's state adds "@host". */
static int key_of(const budget_state *st, char *key, size_t cap) {
  int n = st->host ? snprintf(key, cap, "%zu:%s@%s", strlen(st->name), st->name, st->host)
                   : snprintf(key, cap, "%zu:%s", strlen(st->name), st->name);
  return n > 0 && (size_t)n < cap ? 0 : TK_EINVAL;
}

/* What one budget_update does, through `change` on the loaded row. */
typedef struct row_call {
  tk_engine *e;
  budget_state *st;
  void (*change)(struct row_call *c, tk__budget_row *r);
  /* apply_group's */
  const tk__finish *items;
  tk__outcome *o;
  int n;
  int64_t *at, *epoch; /* per outcome: its reserved time (0: allowed now) and books */
  /* take_room's */
  int64_t now;
  size_t settled, promoted; /* from the head of st's queue */
} row_call;

static int row_change(void *arg, unsigned char *state, size_t *len, size_t cap) {
  row_call *c = arg;
  if (cap < TK__BUDGET_ROW_SIZE) return TK_ENOMEM; /* not reached: budgets.c gives the room */
  tk__budget_row *r = malloc(sizeof *r);
  if (r == NULL) return TK_ENOMEM;
  tk__budget_row_load(r, c->st->cfg, state, *len);
  c->change(c, r);
  tk__budget_row_save(r, state);
  *len = TK__BUDGET_ROW_SIZE;
  c->st->b = r->b;
  free(r);
  return 0;
}

/* Apply c->change to st's stored state in one transaction; 0, or the
 * store's error (logged: the changes are then not counted). */
static int update_row(row_call *c) {
  char key[TK__BUDGET_KEY_MAX + 1];
  unsigned char state[TK__BUDGET_ROW_SIZE];
  tk_err err;
  int rc = key_of(c->st, key, sizeof key);
  if (rc) tk_err_set(&err, rc, "its name and host are longer than %d bytes", TK__BUDGET_KEY_MAX);
  tk_store *s = c->e->store;
  if (rc == 0)
    rc = s->ops->budget_update(s, key, state, sizeof state, row_change, c,
                               tk_clock_now(&c->e->clock), &err);
  if (rc)
    tk__engine_log(c->e, TK_LOG_WARN, "retry budget \"%s\"%s%s: %s", c->st->name,
                   c->st->host ? " for host " : "", c->st->host ? c->st->host : "", err.msg);
  return rc;
}

/* ---- a group of outcomes ---------------------------------------------------- */

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

/* Room for the orders and states of n outcomes (order: 2n); 0 or TK_ENOMEM. */
static int room(struct tk__budgets *bs, int n) {
  if (n <= bs->order_cap) return 0;
  in_order *ord = realloc(bs->order, 2 * (size_t)n * sizeof *ord);
  if (ord == NULL) return TK_ENOMEM;
  bs->order = ord;
  budget_state **sts = realloc(bs->state_of, (size_t)n * sizeof *sts);
  if (sts == NULL) return TK_ENOMEM;
  bs->state_of = sts;
  bs->order_cap = n;
  return 0;
}

/* The group's first attempts and retries of c->st, in their orders: first
 * attempts before retries, so that what the group's first attempts add is
 * there for its retries. */
static void apply_group(row_call *c, tk__budget_row *r) {
  struct tk__budgets *bs = c->e->budgets;
  const in_order *firsts = bs->order, *retries = bs->order + c->n;
  for (int k = 0; k < c->n; k++) {
    int i = firsts[k].i;
    if (bs->state_of[i] == c->st && c->items[i].claim->attempt == 1 &&
        c->items[i].started_at > 0) {
      tk_retry_budget_first(&r->b, c->items[i].started_at);
      c->st->fresh = 1;
    }
  }
  for (int k = 0; k < c->n; k++) {
    int i = retries[k].i;
    if (bs->state_of[i] != c->st || c->o[i].next != TK__NEXT_RETRY) continue;
    int64_t at;
    c->at[i] = 0;
    if (tk_retry_budget_reserve(&r->b, c->o[i].finished_at, &at)) continue;
    tk__budget_row_sync(r);
    tk__budget_row_count(r, bs->me, +1, at);
    c->at[i] = at;
    c->epoch[i] = r->b.resv_epoch;
  }
}

/* Each outcome's state, once: states do not move, and one resolved here
 * is pinned (kept by any regrow) until the group has been applied. */
static void resolve_states(tk_engine *e, const tk__finish *items, const tk__outcome *o, int n) {
  struct tk__budgets *bs = e->budgets;
  for (int i = 0; i < n; i++) {
    const char *name = items[i].budget;
    int used = name && ((items[i].claim->attempt == 1 && items[i].started_at > 0) ||
                        o[i].next == TK__NEXT_RETRY);
    int64_t at = o[i].next == TK__NEXT_RETRY ? o[i].finished_at : items[i].started_at;
    budget_state *st = used ? state_of(e, name, items[i].result->downstream, at) : NULL;
    if (st != NULL) st->pinned = bs->groups + 1;
    bs->state_of[i] = st;
  }
}

void tk__budgets_apply(tk_engine *e, const tk__finish *items, tk__outcome *o, tk__deferral *d,
                       int n) {
  memset(d, 0, (size_t)n * sizeof *d);
  int any = 0;
  for (int i = 0; i < n && !any; i++) any = items[i].budget != NULL;
  if (!any) return;
  struct tk__budgets *bs = budgets_of(e);
  int64_t *at = calloc(2 * (size_t)n, sizeof *at);
  if (bs == NULL || at == NULL || room(bs, n) != 0) {
    tk__engine_log(e, TK_LOG_ERROR, "retry budgets: out of memory for %d outcomes", n);
    free(at);
    return;
  }
  /* Each in the order of its time (handlers run inline come back last
   * first), so that the budget sees time go forward and serves the retry
   * that failed first first. An attempt that never ran (the reaper's) is
   * no first attempt here. */
  in_order *firsts = bs->order, *retries = bs->order + n;
  for (int i = 0; i < n; i++) {
    firsts[i] = (in_order){items[i].started_at, items[i].claim->claim_id, i};
    retries[i] = (in_order){o[i].finished_at, items[i].claim->claim_id, i};
  }
  qsort(firsts, (size_t)n, sizeof *firsts, by_time);
  qsort(retries, (size_t)n, sizeof *retries, by_time);
  resolve_states(e, items, o, n);
  /* One transaction per state the group touches. */
  uint64_t group = ++bs->groups;
  for (int i = 0; i < n; i++) {
    budget_state *st = bs->state_of[i];
    if (st == NULL || st->group == group) continue;
    st->group = group;
    row_call c = {.e = e, .st = st, .change = apply_group, .items = items, .o = o, .n = n,
                  .at = at, .epoch = at + n};
    if (update_row(&c) != 0) continue; /* nothing counted: its retries go at their times */
    for (int k = 0; k < n; k++) {
      int j = retries[k].i;
      if (bs->state_of[j] != st || o[j].next != TK__NEXT_RETRY || at[j] == 0) continue;
      /* Kept even when the policy's run_at is as late (which then holds
       * it there), so that the reservation settles when its time comes
       * and the ones after it stay in order behind it. */
      keep_waiting(bs, st, (tk__retry_ref){o[j].step_id, o[j].claim_id}, at[j], o[j].run_at,
                   at[n + j]);
      if (at[j] <= o[j].run_at) continue;
      /* The result's copy of the host lives until the outcome is
       * reported; the table's may go with an idle state. */
      d[j] = (tk__deferral){st->name, st->host ? items[j].result->downstream : NULL,
                            o[j].delay_ms, o[j].source, o[j].run_at};
      o[j].run_at = at[j];
      o[j].delay_ms = at[j] - o[j].finished_at;
      o[j].source = TK_DELAY_BUDGET;
    }
  }
  free(at);
}

/* ---- bringing deferred retries earlier ------------------------------------ */

/* Settle st's deferred retries that came due (those of books that started
 * over are gone from them), then take the oldest that the budget now has
 * room for (to be brought to now) while no other orchestrator holds an
 * earlier live reservation (budget_row.h: the owners' books). One whose
 * backoff has not run out yet stops the taking: the queue is served in
 * order, and a budget never brings a retry before its policy's time.
 * Tells the books this orchestrator's earliest live reservation left.
 * Counts them in c->settled and c->promoted; the queue itself changes
 * after the commit. */
static void take_room(row_call *c, tk__budget_row *r) {
  budget_state *st = c->st;
  uint64_t me = c->e->budgets->me;
  size_t k = 0;
  c->settled = c->promoted = 0;
  for (; k < st->qlen; k++) {
    const waiting_retry *w = &st->q[(st->qhead + k) % st->qcap];
    if (w->at > c->now) break;
    if (w->epoch == r->b.resv_epoch && r->b.resv_started) {
      tk_retry_budget_settle(&r->b, c->now, w->at);
      tk__budget_row_sync(r);
      tk__budget_row_count(r, me, -1, 0);
    }
    c->settled++;
  }
  for (; k < st->qlen && !st->untracked; k++) {
    const waiting_retry *w = &st->q[(st->qhead + k) % st->qcap];
    if (w->not_before > c->now || w->epoch != r->b.resv_epoch ||
        !tk__budget_row_may_promote(r, me, w->at) || !tk_retry_budget_promote(&r->b, c->now, w->at))
      break;
    tk__budget_row_sync(r);
    tk__budget_row_count(r, me, -1, 0);
    c->promoted++;
  }
  /* One not kept (out of memory) may be earlier than any kept: not known. */
  int64_t first = 0;
  for (; k < st->qlen && !st->untracked && first == 0; k++) {
    const waiting_retry *w = &st->q[(st->qhead + k) % st->qcap];
    if (w->epoch == r->b.resv_epoch) first = w->at;
  }
  tk__budget_row_first(r, me, first);
}

void tk__budgets_bring_earlier(tk_engine *e, int64_t now) {
  struct tk__budgets *bs = e->budgets;
  if (bs == NULL || bs->waiting == 0 || e->store->ops->retry_earlier == NULL) return;
  int n = 0;
  for (size_t i = 0; i < bs->n; i++) {
    budget_entry *be = bs->v[i];
    for (size_t k = 0; k <= be->hcap; k++) {
      budget_state *st = k < be->hcap ? be->hosts[k] : &be->shared;
      if (st == NULL || st->qlen == 0 ||
          (now < st->next_look && !st->fresh))
        continue;
      /* Room comes as slots leave the window or first attempts are
       * recorded: a look each slot sees both, whichever orchestrator
       * recorded them, and one after this process recorded some sees
       * those at once. */
      st->next_look = (now / st->b.slot_ms + 1) * st->b.slot_ms;
      st->fresh = 0;
      if (tk__grow((void **)&bs->due, &bs->due_cap, n + (int)st->qlen, sizeof *bs->due) != 0)
        continue;
      row_call c = {.e = e, .st = st, .change = take_room, .now = now};
      if (update_row(&c) != 0) continue;
      for (size_t j = 0; j < c.settled; j++) pop_waiting(bs, st);
      for (size_t j = 0; j < c.promoted; j++) {
        bs->due[n++] = st->q[st->qhead].ref;
        pop_waiting(bs, st);
      }
    }
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
    budget_entry *be = bs->v[i];
    for (size_t k = 0; k < be->hcap; k++) {
      if (be->hosts[k] == NULL) continue;
      free(be->hosts[k]->host);
      free(be->hosts[k]->q);
      free(be->hosts[k]);
    }
    free(be->shared.q);
    free(be->hosts);
    free(be->name);
    free(be);
  }
  free(bs->v);
  free(bs->order);
  free(bs->state_of);
  free(bs->due);
  free(bs->moved);
  free(bs);
  e->budgets = NULL;
}
