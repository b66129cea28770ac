/* The document arena: chunks that double in size up to a cap, with large
 * requests in chunks of their own so they do not waste the current one. */
#include "toml/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 8
#define ARENA_FIRST ((size_t)8 << 10)
#define ARENA_MAX ((size_t)4 << 20)

struct tk__toml_chunk {
  tk__toml_chunk *next;
  size_t pad; /* keeps the data 16-byte aligned on 64-bit hosts */
};

/* n rounded up to the arena alignment (0 when that overflows). */
static size_t round_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

void tk__toml_arena_init(tk__toml_arena *a) { memset(a, 0, sizeof *a); }

/* A new chunk with `size` usable bytes: made the head (its free space the
 * arena's) or, when `aside`, linked behind the head, which keeps its free
 * space, and handed out whole. */
static char *new_chunk(tk__toml_arena *a, size_t size, int aside) {
  if (size > SIZE_MAX - sizeof(tk__toml_chunk)) return NULL;
  tk__toml_chunk *c = malloc(sizeof *c + size);
  if (c == NULL) return NULL;
  char *data = (char *)(c + 1);
  if (aside) {
    c->next = a->head->next;
    a->head->next = c;
  } else {
    c->next = a->head;
    a->head = c;
    a->cur = data;
    a->lim = data + size;
  }
  return data;
}

void *tk__toml_alloc(tk__toml_arena *a, size_t n) {
  n = round_up(n == 0 ? 1 : n);
  if (n == 0) return NULL; /* rounding overflowed */
  if ((size_t)(a->lim - a->cur) < n) {
    if (a->next_size == 0) a->next_size = ARENA_FIRST;
    if (a->head != NULL && n > a->next_size / 4) return new_chunk(a, n, 1);
    if (new_chunk(a, n > a->next_size ? n : a->next_size, 0) == NULL) return NULL;
    if (a->next_size < ARENA_MAX) a->next_size *= 2;
  }
  char *p = a->cur;
  a->cur += n;
  a->last = p;
  return p;
}

void *tk__toml_grow(tk__toml_arena *a, void *old, size_t old_n, size_t new_n) {
  if (old != NULL && old == a->last) {
    size_t want = round_up(new_n);
    if (want >= new_n && (size_t)(a->lim - a->last) >= want) {
      a->cur = a->last + want;
      return old;
    }
  }
  void *p = tk__toml_alloc(a, new_n);
  if (p != NULL && old_n > 0) memcpy(p, old, old_n);
  return p;
}

char *tk__toml_strndup(tk__toml_arena *a, const char *s, size_t n) {
  if (n == SIZE_MAX) return NULL;
  char *p = tk__toml_alloc(a, n + 1);
  if (p == NULL) return NULL;
  if (n > 0) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void tk__toml_arena_free(tk__toml_arena *a) {
  tk__toml_chunk *c = a->head;
  while (c != NULL) {
    tk__toml_chunk *next = c->next;
    free(c);
    c = next;
  }
  memset(a, 0, sizeof *a);
}
