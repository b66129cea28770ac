/* A growable byte buffer, always NUL-terminated, for text built piece by
 * piece (a request's URL, body and messages). An allocation failure is
 * remembered (`oom`) rather than returned by every append, so a builder
 * checks once at the end. */
#ifndef TASKER_CORE_BUF_H
#define TASKER_CORE_BUF_H

#include <stddef.h>

typedef struct tk__buf {
  char *p;    /* the bytes, NUL-terminated once anything was added; may be NULL */
  size_t len; /* bytes, without the NUL */
  size_t cap;
  int oom;    /* an append failed: the content is incomplete */
} tk__buf;

/* Append n bytes of s. */
void tk__buf_add(tk__buf *b, const char *s, size_t n);

/* Append a NUL-terminated string. */
void tk__buf_adds(tk__buf *b, const char *s);

/* Append one byte. */
void tk__buf_addc(tk__buf *b, char c);

/* Append printf-style text. */
void tk__buf_addf(tk__buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The content as a malloc'd string that the caller owns (the buffer is
 * left empty), or NULL when an append failed (everything is freed). */
char *tk__buf_take(tk__buf *b);

/* Free the content and empty the buffer. */
void tk__buf_free(tk__buf *b);

#endif
