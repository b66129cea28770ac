/* Benchmarks include this once to count heap allocations made by the code
 * under measurement: malloc and friends are interposed and forwarded to
 * glibc's own entry points. */
#ifndef BENCH_ALLOC_COUNT_H
#define BENCH_ALLOC_COUNT_H

#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static unsigned long long bench_allocs;

void *malloc(size_t n) { bench_allocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { bench_allocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { bench_allocs++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

#endif
