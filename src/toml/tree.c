/* Tables (entries in document order plus a hash index once they grow) and
 * arrays, both carved from the document arena. */
#include "toml/tree.h"

#include <string.h>

uint32_t tk__toml_hash(const char *key, size_t len) {
  /* FNV-1a: keys are short, so a simple byte loop is as fast as any. */
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)key[i];
    h *= 16777619u;
  }
  return h;
}

/* Whether entry e holds exactly this key. */
static int entry_is(const tk__toml_entry *e, const char *key, size_t len, uint32_t hash) {
  return e->hash == hash && e->pub.key_len == len && memcmp(e->pub.key, key, len) == 0;
}

tk__toml_entry *tk__toml_table_find(const tk_toml_value *t, const char *key, size_t len,
                                    uint32_t hash) {
  tk__toml_entry *entries = t->u.t.entries;
  if (t->u.t.index == NULL) {
    for (size_t i = 0; i < t->u.t.len; i++)
      if (entry_is(&entries[i], key, len, hash)) return &entries[i];
    return NULL;
  }
  size_t mask = t->u.t.index_mask;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    uint32_t n = t->u.t.index[slot];
    if (n == 0) return NULL;
    if (entry_is(&entries[n - 1], key, len, hash)) return &entries[n - 1];
  }
}

/* Rebuild the index of `t` with `slots` slots (a power of two at least
 * twice the entry count, so probes stay short). */
static int reindex(tk__toml_arena *a, tk_toml_value *t, size_t slots) {
  uint32_t *index = tk__toml_alloc(a, slots * sizeof *index);
  if (index == NULL) return -1;
  memset(index, 0, slots * sizeof *index);
  size_t mask = slots - 1;
  for (size_t i = 0; i < t->u.t.len; i++) {
    size_t slot = t->u.t.entries[i].hash & mask;
    while (index[slot] != 0) slot = (slot + 1) & mask;
    index[slot] = (uint32_t)(i + 1);
  }
  t->u.t.index = index;
  t->u.t.index_mask = mask;
  return 0;
}

tk__toml_entry *tk__toml_table_add(tk__toml_arena *a, tk_toml_value *t, const char *key,
                                   size_t len, uint32_t hash, tk_toml_pos key_pos,
                                   tk_toml_value *value) {
  if (t->u.t.len == t->u.t.cap) {
    size_t cap = t->u.t.cap ? t->u.t.cap * 2 : 4;
    tk__toml_entry *grown = tk__toml_grow(a, t->u.t.entries, t->u.t.len * sizeof *grown,
                                          cap * sizeof *grown);
    if (grown == NULL) return NULL;
    t->u.t.entries = grown;
    t->u.t.cap = cap;
  }
  char *copy = tk__toml_strndup(a, key, len);
  if (copy == NULL) return NULL;
  tk__toml_entry *e = &t->u.t.entries[t->u.t.len++];
  e->pub.key = copy;
  e->pub.key_len = len;
  e->pub.key_pos = key_pos;
  e->pub.value = value;
  e->hash = hash;
  size_t n = t->u.t.len;
  if (n >= TK__TOML_INDEX_MIN) {
    size_t slots = t->u.t.index ? t->u.t.index_mask + 1 : 2 * TK__TOML_INDEX_MIN;
    while (slots < 2 * n) slots *= 2;
    if (t->u.t.index == NULL || slots != t->u.t.index_mask + 1) {
      if (reindex(a, t, slots) != 0) {
        t->u.t.len--;
        return NULL;
      }
    } else {
      size_t mask = t->u.t.index_mask;
      size_t slot = hash & mask;
      while (t->u.t.index[slot] != 0) slot = (slot + 1) & mask;
      t->u.t.index[slot] = (uint32_t)n;
    }
  }
  return e;
}

tk_toml_value *tk__toml_array_push(tk__toml_arena *a, tk_toml_value *arr) {
  if (arr->u.a.len == arr->u.a.cap) {
    size_t cap = arr->u.a.cap ? arr->u.a.cap * 2 : 4;
    tk_toml_value *grown = tk__toml_grow(a, arr->u.a.items, arr->u.a.len * sizeof *grown,
                                         cap * sizeof *grown);
    if (grown == NULL) return NULL;
    arr->u.a.items = grown;
    arr->u.a.cap = cap;
  }
  tk_toml_value *v = &arr->u.a.items[arr->u.a.len++];
  memset(v, 0, sizeof *v);
  return v;
}
