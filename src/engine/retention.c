/* Retention of finished tasks (DESIGN §16): `tasker prune` and the
 * engine's background pruning, both in batches of one transaction each
 * through the store's prune op. */
#include "engine/engine_internal.h"

#include <string.h>

#include <tasker/retention.h>

#define DEFAULT_BATCH 500

/* A store request from public options: a cutoff of 0 keeps that state. */
static tk__prune_request request(const tk_prune_options *o) {
  tk__prune_request r = {
      .before = {o->complete_before ? o->complete_before : TK__NONE,
                 o->error_before ? o->error_before : TK__NONE,
                 o->cancelled_before ? o->cancelled_before : TK__NONE},
      .limit = o->batch > 0 ? o->batch : DEFAULT_BATCH,
      .dry_run = o->dry_run,
  };
  return r;
}

static void add(tk_prune_counts *sum, const tk__prune_counts *c) {
  sum->tasks += c->tasks;
  sum->steps += c->steps;
  sum->attempts += c->attempts;
  sum->transitions += c->transitions;
  sum->items += c->items;
}

int tk_prune(tk_store *s, const tk_prune_options *o, tk_prune_counts *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__prune_request r = request(o);
  tk__prune_counts c;
  int rc;
  /* A batch short of the limit was the last one. */
  do {
    if ((rc = s->ops->prune(s, &r, &c, err))) return rc;
    add(out, &c);
  } while (!r.dry_run && c.tasks == r.limit);
  return 0;
}

/* now minus a duration, or 0 (keep) for a duration of 0. */
static int64_t cutoff(int64_t after_ms, int64_t now) { return after_ms > 0 ? now - after_ms : 0; }

int tk_retention_options(const tk_retention_settings *r, int64_t now, tk_prune_options *o) {
  memset(o, 0, sizeof *o);
  int64_t all = r->finished_after_ms;
  o->complete_before = cutoff(r->complete_after_ms ? r->complete_after_ms : all, now);
  o->error_before = cutoff(r->error_after_ms ? r->error_after_ms : all, now);
  o->cancelled_before = cutoff(r->cancelled_after_ms ? r->cancelled_after_ms : all, now);
  o->batch = (int)r->batch;
  return o->complete_before || o->error_before || o->cancelled_before;
}

int tk_store_size(tk_store *s, int64_t *bytes, tk_err *err) { return s->ops->size(s, bytes, err); }

int64_t tk__engine_retention(tk_engine *e, int64_t now) {
  if (now < e->retention_at) return e->retention_at;
  const tk_retention_settings *rs = tk_config_retention(e->config);
  tk_prune_options o;
  if (!tk_retention_options(rs, now, &o)) return e->retention_at = INT64_MAX;
  tk__prune_request r = request(&o);
  tk__prune_counts c;
  tk_err err;
  if (e->store->ops->prune(e->store, &r, &c, &err) != 0) {
    tk__engine_log(e, TK_LOG_WARN, "retention: %s", err.msg);
    return e->retention_at = now + rs->interval_ms;
  }
  if (c.tasks > 0)
    tk__engine_log(e, TK_LOG_INFO,
                   "retention: removed %lld finished tasks (%lld steps, %lld attempts, %lld "
                   "transitions, %lld items)",
                   (long long)c.tasks, (long long)c.steps, (long long)c.attempts,
                   (long long)c.transitions, (long long)c.items);
  /* A full batch leaves more behind: the next pass goes on, after its
   * claims; otherwise look again after the interval. */
  return e->retention_at = c.tasks == r.limit ? now : now + rs->interval_ms;
}
