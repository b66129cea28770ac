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

/* A table entry: the public part first, so a pointer to it is a pointer to
 * the public entry. */
typedef struct tk__toml_entry {
  tk_toml_entry pub;
  uint32_t hash;
} tk__toml_entry;

/* Tables with at least this many entries get a hash index. */
#define TK__TOML_INDEX_MIN 8

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
    tk_toml_datetime dt;
    struct {
      tk_toml_value *items; /* stored inline: elements are never pointed to
                               while the array still grows */
      size_t len, cap;
    } a;
    struct {
      tk__toml_entry *entries;
      uint32_t *index; /* open addressing: entry number + 1, 0 = empty */
      size_t len, cap;
      size_t index_mask;
    } t;
  } u;
};

struct tk_toml_doc {
  tk__toml_arena arena;
  tk_toml_value root;
  const char *name;
};

/* The hash of a key as tables index it. */
uint32_t tk__toml_hash(const char *key, size_t len);

/* The entry of `t` (a table) with exactly this key, or NULL. `hash` must be
 * tk__toml_hash(key, len). */
tk__toml_entry *tk__toml_table_find(const tk_toml_value *t, const char *key, size_t len,
                                    uint32_t hash);

/* Append an entry for a key the caller knows is absent, copying the key
 * into the arena; NULL when out of memory. */
tk__toml_entry *tk__toml_table_add(tk__toml_arena *a, tk_toml_value *t, const char *key,
                                   size_t len, uint32_t hash, tk_toml_pos key_pos,
                                   tk_toml_value *value);

/* A new zeroed element at the end of array `arr`, or NULL when out of
 * memory. The pointer is valid until the next push onto the same array. */
tk_toml_value *tk__toml_array_push(tk__toml_arena *a, tk_toml_value *arr);

/* The value of an entry, writable for the parser that built it. */
static inline tk_toml_value *tk__toml_entry_value(tk__toml_entry *e) {
  return (tk_toml_value *)e->pub.value;
}

#endif
