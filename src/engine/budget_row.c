/* A retry budget's row in the store (budget_row.h). */
#include "engine/budget_row.h"

#include <string.h>

static void put64(unsigned char **p, uint64_t u) {
  for (int i = 0; i < 8; i++) (*p)[i] = (unsigned char)(u >> (8 * i));
  *p += 8;
}

static uint64_t get64(const unsigned char **p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u |= (uint64_t)(*p)[i] << (8 * i);
  *p += 8;
  return u;
}

void tk__budget_row_load(tk__budget_row *r, const tk_retry_budget_config *c,
                         const unsigned char *in, size_t len) {
  memset(r, 0, sizeof *r);
  int firsts = len == TK__BUDGET_ROW_SIZE;
  int read = (firsts || len == TK__BUDGET_ROW_SIZE_2) &&
             tk_retry_budget_load(&r->b, c, in, TK_RETRY_BUDGET_STATE_SIZE);
  if (!read) {
    tk_retry_budget_load(&r->b, c, NULL, 0);
    r->epoch = r->b.resv_epoch;
    return;
  }
  const unsigned char *p = in + TK_RETRY_BUDGET_STATE_SIZE;
  r->epoch = (int64_t)get64(&p);
  r->unowned = (int64_t)get64(&p);
  for (int i = 0; i < TK__BUDGET_OWNERS; i++) {
    r->owners[i].owner = get64(&p);
    r->owners[i].live = (int64_t)get64(&p);
  }
  for (int i = 0; firsts && i < TK__BUDGET_OWNERS; i++) r->owners[i].first = (int64_t)get64(&p);
  tk__budget_row_sync(r);
}

void tk__budget_row_save(const tk__budget_row *r, unsigned char *out) {
  tk_retry_budget_save(&r->b, out);
  unsigned char *p = out + TK_RETRY_BUDGET_STATE_SIZE;
  put64(&p, (uint64_t)r->epoch);
  put64(&p, (uint64_t)r->unowned);
  for (int i = 0; i < TK__BUDGET_OWNERS; i++) {
    put64(&p, r->owners[i].owner);
    put64(&p, (uint64_t)r->owners[i].live);
  }
  for (int i = 0; i < TK__BUDGET_OWNERS; i++) put64(&p, (uint64_t)r->owners[i].first);
}

void tk__budget_row_sync(tk__budget_row *r) {
  if (r->epoch == r->b.resv_epoch && r->b.resv_started) return;
  /* The books started over, or hold nothing: so do the owners'. */
  r->epoch = r->b.resv_epoch;
  r->unowned = 0;
  memset(r->owners, 0, sizeof r->owners);
}

void tk__budget_row_count(tk__budget_row *r, uint64_t owner, int delta, int64_t at_ms) {
  int free_at = -1;
  for (int i = 0; i < TK__BUDGET_OWNERS; i++) {
    if (r->owners[i].owner == owner) {
      if (delta > 0 && r->owners[i].live == 0) r->owners[i].first = at_ms;
      if ((r->owners[i].live += delta) <= 0) memset(&r->owners[i], 0, sizeof r->owners[i]);
      return;
    }
    if (r->owners[i].owner == 0 && free_at < 0) free_at = i;
  }
  if (delta > 0 && free_at >= 0) {
    r->owners[free_at].owner = owner;
    r->owners[free_at].live = delta;
    r->owners[free_at].first = at_ms;
  } else if ((r->unowned += delta) < 0) {
    r->unowned = 0;
  }
}

void tk__budget_row_first(tk__budget_row *r, uint64_t owner, int64_t at_ms) {
  for (int i = 0; i < TK__BUDGET_OWNERS; i++)
    if (r->owners[i].owner == owner && r->owners[i].live > 0) r->owners[i].first = at_ms;
}

int tk__budget_row_may_promote(const tk__budget_row *r, uint64_t owner, int64_t at_ms) {
  if (r->unowned > 0) return 0;
  int64_t others = r->b.resv_live;
  for (int i = 0; i < TK__BUDGET_OWNERS; i++) {
    if (r->owners[i].owner == 0) continue;
    if (r->owners[i].owner == owner) {
      others -= r->owners[i].live;
      continue;
    }
    others -= r->owners[i].live;
    if (r->owners[i].first == 0 || r->owners[i].first < at_ms) return 0;
  }
  return others <= 0; /* every live one is in the books */
}
