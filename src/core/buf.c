/* The growable buffer of buf.h. */
#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; 0, or -1 (oom set) when memory ran out. */
static int reserve(tk__buf *b, size_t n) {
  if (b->oom) return -1;
  if (n > (size_t)-1 / 2 - b->len) {
    b->oom = 1;
    return -1;
  }
  if (b->len + n + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + n + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void tk__buf_add(tk__buf *b, const char *s, size_t n) {
  if (reserve(b, n) != 0) return;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void tk__buf_adds(tk__buf *b, const char *s) { tk__buf_add(b, s, strlen(s)); }

void tk__buf_addc(tk__buf *b, char c) { tk__buf_add(b, &c, 1); }

void tk__buf_addf(tk__buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    tk__buf_add(b, small, (size_t)n);
    return;
  }
  if (reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *tk__buf_take(tk__buf *b) {
  if (b->oom) {
    tk__buf_free(b);
    return NULL;
  }
  char *p = b->p ? b->p : calloc(1, 1);
  *b = (tk__buf){0};
  return p;
}

void tk__buf_free(tk__buf *b) {
  free(b->p);
  *b = (tk__buf){0};
}
