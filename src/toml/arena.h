/* A bump allocator for one TOML document: the tree is freed all at once,
 * so values, keys and strings are carved out of a few large chunks
 * instead of being allocated one by one. */
#ifndef TK_TOML_ARENA_H
#define TK_TOML_ARENA_H

#include <stddef.h>

typedef struct tk__toml_chunk tk__toml_chunk;

typedef struct tk__toml_arena {
  tk__toml_chunk *head; /* chunk being carved, newest first */
  char *cur, *lim;      /* free space in head */
  char *last;           /* most recent allocation in head, for in-place growth */
  size_t next_size;     /* size of the next regular chunk */
} tk__toml_arena;

/* An empty arena; allocates nothing until first used. */
void tk__toml_arena_init(tk__toml_arena *a);

/* `n` uninitialised bytes aligned for any tree node, or NULL when out of
 * memory. */
void *tk__toml_alloc(tk__toml_arena *a, size_t n);

/* Resize `old` (an allocation of old_n bytes from this arena, or NULL) to
 * new_n >= old_n bytes, keeping its contents; grows in place when it is the
 * latest allocation and fits. NULL when out of memory (old stays valid). */
void *tk__toml_grow(tk__toml_arena *a, void *old, size_t old_n, size_t new_n);

/* A NUL-terminated copy of n bytes, or NULL when out of memory. */
char *tk__toml_strndup(tk__toml_arena *a, const char *s, size_t n);

/* Release every chunk; the arena is empty again afterwards. */
void tk__toml_arena_free(tk__toml_arena *a);

#endif
