/* The cache of parsed expressions (cron_cache.h): open addressing on the
 * text "cron\nzone", doubled at half full, rebuilt by each sweep. */
#include "schedule/cron_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char *key; /* "cron\nzone"; NULL: an empty slot */
  tk_cron *cron;
  int used; /* got since the last sweep */
} entry;

struct tk__cron_cache {
  entry *slots;
  int cap, n; /* cap a power of two */
};

static uint64_t hash(const char *s) {
  uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return h;
}

tk__cron_cache *tk__cron_cache_new(void) {
  tk__cron_cache *k = calloc(1, sizeof *k);
  if (k && (k->slots = calloc(16, sizeof *k->slots)) == NULL) {
    free(k);
    return NULL;
  }
  if (k) k->cap = 16;
  return k;
}

void tk__cron_cache_free(tk__cron_cache *k) {
  if (k == NULL) return;
  for (int i = 0; i < k->cap; i++) {
    free(k->slots[i].key);
    tk_cron_free(k->slots[i].cron);
  }
  free(k->slots);
  free(k);
}

/* The slot of key in slots[cap]: its entry, or the empty slot it goes in. */
static entry *slot_of(entry *slots, int cap, const char *key) {
  size_t i = (size_t)hash(key) & (size_t)(cap - 1);
  while (slots[i].key && strcmp(slots[i].key, key) != 0) i = (i + 1) & (size_t)(cap - 1);
  return &slots[i];
}

/* Move k's entries into a table of cap slots: all of them (growing), or
 * (a sweep) those in use, unmarked for the next round, the others freed.
 * 0, or -1 out of memory (k unchanged). */
static int rebuild(tk__cron_cache *k, int cap, int used_only) {
  entry *slots = calloc((size_t)cap, sizeof *slots);
  if (slots == NULL) return -1;
  int n = 0;
  for (int i = 0; i < k->cap; i++) {
    entry *e = &k->slots[i];
    if (e->key == NULL) continue;
    if (used_only && !e->used) {
      free(e->key);
      tk_cron_free(e->cron);
      continue;
    }
    entry *to = slot_of(slots, cap, e->key);
    *to = *e;
    to->used = used_only ? 0 : e->used; /* a sweep starts the next round */
    n++;
  }
  free(k->slots);
  k->slots = slots;
  k->cap = cap;
  k->n = n;
  return 0;
}

int tk__cron_cache_get(tk__cron_cache *k, const char *cron, const char *zone,
                       const tk_cron **out, tk_err *err) {
  *out = NULL;
  size_t len = strlen(cron) + (zone ? strlen(zone) : 0) + 2;
  char *key = malloc(len);
  if (key == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  snprintf(key, len, "%s\n%s", cron, zone ? zone : "");
  entry *e = slot_of(k->slots, k->cap, key);
  if (e->key) {
    free(key);
    e->used = 1;
    *out = e->cron;
    return 0;
  }
  tk_cron *c;
  int rc = tk_cron_parse(cron, zone, &c, err);
  if (rc) {
    free(key);
    return rc;
  }
  if (2 * (k->n + 1) > k->cap) {
    if (rebuild(k, 2 * k->cap, 0) != 0) {
      free(key);
      tk_cron_free(c);
      return tk_err_set(err, TK_ENOMEM, "out of memory");
    }
    e = slot_of(k->slots, k->cap, key);
  }
  *e = (entry){key, c, 1};
  k->n++;
  *out = c;
  return 0;
}

void tk__cron_cache_sweep(tk__cron_cache *k) {
  /* Out of memory the old table stays: it is only bigger than needed. */
  int cap = 16;
  int in_use = 0;
  for (int i = 0; i < k->cap; i++) in_use += k->slots[i].key && k->slots[i].used;
  while (cap < 2 * (in_use + 1)) cap *= 2;
  if (rebuild(k, cap, 1) != 0) {
    for (int i = 0; i < k->cap; i++) k->slots[i].used = 0;
  }
}

int tk__cron_cache_size(const tk__cron_cache *k) { return k->n; }
