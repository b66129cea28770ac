/* Tables (entries in document order plus a hash index once they grow) and
 * arrays of tables, carved from the document's arenas. */
#include "toml/tree.h"

#include <string.h>

/* Whether entry e holds exactly this key. */
static int entry_is(const tk__toml_entry *e, const char *key, size_t len) {
  return e->pub.key_len == len && memcmp(e->pub.key, key, len) == 0;
}

tk__toml_entry *tk__toml_table_find(const tk_toml_value *t, const char *key, size_t len,
                                    uint32_t hash) {
  tk__toml_entry **entries = t->u.t.entries;
  const tk__toml_slot *index = t->u.t.index;
  if (index == NULL) {
    for (uint32_t i = 0; i < t->u.t.len; i++)
      if (entry_is(entries[i], key, len)) return entries[i];
    return NULL;
  }
  uint32_t mask = index[0].hash;
  for (uint32_t i = hash & mask;; i = (i + 1) & mask) {
    const tk__toml_slot *slot = &index[i + 1];
    if (slot->entry == 0) return NULL;
    if (slot->hash == hash && entry_is(entries[slot->entry - 1], key, len))
      return entries[slot->entry - 1];
  }
}

/* Put entry number n (1-based) with `hash` into the first free slot. */
static void place(tk__toml_slot *index, uint32_t hash, uint32_t n) {
  uint32_t mask = index[0].hash, i = hash & mask;
  while (index[i + 1].entry != 0) i = (i + 1) & mask;
  index[i + 1].hash = hash;
  index[i + 1].entry = n;
}

/* Rebuild the index of `t` with `slots` slots (a power of two at least
 * twice the entry count, so probes stay short), moving the hashes over
 * from the old index or, for the first one, hashing the keys. */
static int reindex(tk__toml_arena *a, tk_toml_value *t, uint32_t slots) {
  tk__toml_slot *old = t->u.t.index;
  tk__toml_slot *index = tk__toml_alloc(a, ((size_t)slots + 1) * sizeof *index);
  if (index == NULL) return -1;
  memset(index, 0, ((size_t)slots + 1) * sizeof *index);
  index[0].hash = slots - 1;
  if (old != NULL) {
    for (uint32_t i = 1; i <= old[0].hash + 1; i++)
      if (old[i].entry != 0) place(index, old[i].hash, old[i].entry);
  } else {
    for (uint32_t i = 0; i < t->u.t.len; i++) {
      const tk_toml_entry *e = &t->u.t.entries[i]->pub;
      place(index, tk__toml_hash(e->key, e->key_len), i + 1);
    }
  }
  t->u.t.index = index;
  return 0;
}

tk__toml_entry *tk__toml_table_add(tk__toml_mem *m, tk_toml_value *t, const char *key,
                                   size_t len, uint32_t hash, tk_toml_pos key_pos,
                                   const tk_toml_value *value) {
  if (t->u.t.len >= UINT32_MAX / 4) return NULL;
  if (t->u.t.len == t->u.t.cap) {
    uint32_t cap = t->u.t.cap ? t->u.t.cap * 2 : 4;
    tk__toml_entry **grown = tk__toml_grow(&m->bytes, t->u.t.entries,
                                           t->u.t.len * sizeof *grown, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    t->u.t.entries = grown;
    t->u.t.cap = cap;
  }
  tk__toml_entry *e = tk__toml_alloc(&m->nodes, sizeof *e);
  char *copy = tk__toml_strndup(&m->bytes, key, len);
  if (e == NULL || copy == NULL) return NULL;
  e->pub.key = copy;
  e->pub.key_len = len;
  e->pub.key_pos = key_pos;
  e->pub.value = &e->val;
  e->val = *value;
  uint32_t n = t->u.t.len + 1;
  if (n >= TK__TOML_INDEX_MIN) {
    uint32_t slots = t->u.t.index ? t->u.t.index[0].hash + 1 : 2 * TK__TOML_INDEX_MIN;
    if (t->u.t.index == NULL || slots < 2 * n) {
      while (slots < 2 * n) slots *= 2;
      if (reindex(&m->bytes, t, slots) != 0) return NULL;
    }
  }
  t->u.t.entries[t->u.t.len++] = e;
  if (t->u.t.index != NULL) place(t->u.t.index, hash, n);
  return e;
}

tk_toml_value *tk__toml_array_push(tk__toml_mem *m, tk_toml_value *arr) {
  if (arr->u.a.len == UINT32_MAX - 1) return NULL;
  if (arr->u.a.len == arr->u.a.cap) {
    uint32_t cap = arr->u.a.cap ? arr->u.a.cap * 2 : 4;
    tk_toml_value *grown = tk__toml_grow(&m->nodes, arr->u.a.items,
                                         arr->u.a.len * sizeof *grown, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    arr->u.a.items = grown;
    arr->u.a.cap = cap;
  }
  tk_toml_value *v = &arr->u.a.items[arr->u.a.len++];
  memset(v, 0, sizeof *v);
  return v;
}

void tk__toml_dt_pack(const tk_toml_datetime *in, tk__toml_dt *out) {
  out->nanosecond = in->nanosecond;
  out->year = (int16_t)in->year;
  out->offset_minutes = (int16_t)in->offset_minutes;
  out->month = (uint8_t)in->month;
  out->day = (uint8_t)in->day;
  out->hour = (uint8_t)in->hour;
  out->minute = (uint8_t)in->minute;
  out->second = (uint8_t)in->second;
  out->frac_digits = (uint8_t)in->frac_digits;
}

void tk__toml_dt_unpack(const tk__toml_dt *in, tk_toml_datetime *out) {
  out->year = in->year;
  out->month = in->month;
  out->day = in->day;
  out->hour = in->hour;
  out->minute = in->minute;
  out->second = in->second;
  out->nanosecond = in->nanosecond;
  out->frac_digits = in->frac_digits;
  out->offset_minutes = in->offset_minutes;
}
