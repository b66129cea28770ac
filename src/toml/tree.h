/* The document tree behind the opaque types of <tasker/toml.h>, and the
 * table and array primitives the parser and the accessors share. */
#ifndef TK_TOML_TREE_H
#define TK_TOML_TREE_H

#include <stdint.h>

#include <tasker/toml.h>

#include "toml/arena.h"

/* How a table or array came to be; the TOML 1.0 definition rules are
 * decided from these (see tables.c). */
enum {
  TK__TOML_F_IMPLICIT = 1, /* table created as a parent by a [a.b] header */
  TK__TOML_F_DEFINED = 2,  /* table defined by its own [header] or [[header]] */
  TK__TOML_F_DOTTED = 4,   /* table created by a dotted key a.b = 1 */
  TK__TOML_F_INLINE = 8,   /* inline table: closed to later additions */
  TK__TOML_F_AOT = 16      /* array made by [[header]]: open to appending */
};

/* A hash index slot: the key's hash, so probes need not touch the entry,
 * and the entry number + 1 (0 = empty). Slot 0 of an index holds its mask
 * in `hash`; the slots proper start at 1. */
typedef struct tk__toml_slot {
  uint32_t hash;
  uint32_t entry;
} tk__toml_slot;

/* Tables with at least this many entries get a hash index. */
#define TK__TOML_INDEX_MIN 16

/* A date-time as stored: under half the public struct's size. */
typedef struct tk__toml_dt {
  int32_t nanosecond;
  int16_t year, offset_minutes;
  uint8_t month, day, hour, minute, second, frac_digits;
} tk__toml_dt;

struct tk__toml_entry;

/* 40 bytes: the tree of a document is several times the size of its text
 * and a big parse spends as much time faulting pages in as parsing, so
 * every byte here counts. */
struct tk_toml_value {
  uint8_t type;   /* tk_toml_type */
  uint8_t flags;  /* TK__TOML_F_* */
  uint16_t depth; /* containers between it and the root (root is 0) */
  tk_toml_pos pos;
  union {
    struct {
      char *ptr;
      size_t len;
    } s;
    int64_t i;
    double f;
    int b;
    tk__toml_dt dt;
    struct {
      tk_toml_value *items; /* stored inline, exactly len of them unless AOT */
      uint32_t len, cap;
    } a;
    struct {
      struct tk__toml_entry **entries; /* in document order */
      tk__toml_slot *index;            /* NULL for small tables */
      uint32_t len, cap;
    } t;
  } u;
};

/* A table entry, allocated once and never moved, so the value in it and
 * the tables the parser is filling keep their addresses. The public part
 * comes first: a pointer to the entry is a pointer to it. */
typedef struct tk__toml_entry {
  tk_toml_entry pub; /* pub.value points at val */
  tk_toml_value val;
} tk__toml_entry;

/* Where a document's memory comes from: entries and elements apart from
 * bytes (keys, strings, indexes, entry lists), so that what is being
 * filled is more often the latest allocation of its arena and grows in
 * place instead of leaving a copy behind. */
typedef struct tk__toml_mem {
  tk__toml_arena nodes;
  tk__toml_arena bytes;
} tk__toml_mem;

struct tk_toml_doc {
  tk__toml_mem mem;
  tk_toml_value root;
  const char *name;
};

/* The hash of a key as tables index it (FNV-1a: keys are short, so a
 * byte loop is as fast as anything). */
static inline uint32_t tk__toml_hash(const char *key, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)key[i];
    h *= 16777619u;
  }
  return h;
}

/* The entry of `t` (a table) with exactly this key, or NULL. `hash` must be
 * tk__toml_hash(key, len). */
tk__toml_entry *tk__toml_table_find(const tk_toml_value *t, const char *key, size_t len,
                                    uint32_t hash);

/* Append an entry for a key the caller knows is absent, copying the key
 * and *value in; NULL when out of memory. */
tk__toml_entry *tk__toml_table_add(tk__toml_mem *m, tk_toml_value *t, const char *key,
                                   size_t len, uint32_t hash, tk_toml_pos key_pos,
                                   const tk_toml_value *value);

/* A new zeroed element at the end of array `arr` (grown by doubling, for
 * arrays of tables, which stay open), or NULL when out of memory. The
 * pointer is valid until the next push onto the same array. */
tk_toml_value *tk__toml_array_push(tk__toml_mem *m, tk_toml_value *arr);

/* The value of an entry, writable for the parser that built it. */
static inline tk_toml_value *tk__toml_entry_value(tk__toml_entry *e) { return &e->val; }

/* Pack a public date-time into its stored form and back. */
void tk__toml_dt_pack(const tk_toml_datetime *in, tk__toml_dt *out);
void tk__toml_dt_unpack(const tk__toml_dt *in, tk_toml_datetime *out);

#endif
