/* TOML parse throughput: a generated ~10 MB document with a realistic mix
 * (many tables, every value type, arrays, inline tables, arrays of tables,
 * strings with escapes), and one flat table of 200k keys. Each is parsed
 * several times; the table gives size, best and median time, MB/s and
 * heap allocations per parse. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/toml.h>

#include "alloc_count.h"

#define RUNS 9

typedef struct text {
  char *buf;
  size_t len, cap;
} text;

/* Append formatted text, growing the buffer. */
__attribute__((format(printf, 2, 3))) static void add(text *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    t->cap = t->cap ? t->cap * 2 : 1 << 20;
    t->buf = realloc(t->buf, t->cap);
  }
}

/* One service block (about 900 bytes) of the mixed document. */
static void service(text *t, int i) {
  add(t, "[service-%d]\n", i);
  add(t, "name = \"service %d \\\"primary\\\"\\tzone-\\u00e9\"\n", i);
  add(t, "host = 'srv%d.example.internal'\n", i);
  add(t, "port = %d\n", 8000 + i % 1000);
  add(t, "ratio = %d.%03d\n", i % 7, i % 1000);
  add(t, "weight = 1.5e%d\n", i % 12);
  add(t, "enabled = %s\n", i % 3 ? "true" : "false");
  add(t, "mask = 0xDEAD_%04X\n", i & 0xFFFF);
  add(t, "created = 1979-05-27T07:32:%02d.123-08:00\n", i % 60);
  add(t, "day = 2024-%02d-%02d\n", i % 12 + 1, i % 28 + 1);
  add(t, "at = 07:%02d:00\n", i % 60);
  add(t, "tags = [\"alpha\", \"beta\", \"gamma-%d\", 'C:\\path\\%d']\n", i, i);
  add(t, "ports = [ 8001, 8002, 8003, %d ]  # listeners\n", i);
  add(t, "limits = { cpu = %d, memory = \"512Mi\", burst = 1.25, spill = { disk = true } }\n", i % 16);
  add(t, "retry.max_attempts = %d\n", i % 10 + 1);
  add(t, "retry.backoff = \"2s\"\n");
  add(t, "retry.jitter.kind = \"full\"\n");
  add(t, "matrix = [\n  [1, 2, 3],\n  [4, 5, 6],\n]\n");
  add(t, "description = \"\"\"\nService %d handles requests for tenant %d.\n"
         "It retries with backoff \\\n    and logs \"\"quoted\"\" words.\"\"\"\n", i, i * 7);
  add(t, "[[service-%d.endpoint]]\npath = \"/api/v1/items/%d\"\nmethods = [\"GET\", \"POST\"]\n"
         "timeout = 2.5\n",
      i, i);
  add(t, "[[service-%d.endpoint]]\npath = \"/health\"\nmethods = [\"GET\"]\ntimeout = 0.25\n\n", i);
}

/* qsort order for doubles. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Parse `t` RUNS times (after one warm-up) and print one row. */
static void measure(const char *name, const text *t) {
  double ms[RUNS];
  unsigned long long allocs = 0;
  for (int r = -1; r < RUNS; r++) {
    tk_toml_doc *doc;
    tk_err err;
    unsigned long long a0 = bench_allocs;
    int64_t t0 = tk_monotonic_ns();
    int rc = tk_toml_parse(t->buf, t->len, name, &doc, &err);
    int64_t t1 = tk_monotonic_ns();
    if (rc != 0) {
      fprintf(stderr, "bench_toml: %s\n", err.msg);
      exit(1);
    }
    allocs = bench_allocs - a0;
    tk_toml_free(doc);
    if (r >= 0) ms[r] = (double)(t1 - t0) / 1e6;
  }
  qsort(ms, RUNS, sizeof ms[0], cmp_double);
  double mb = (double)t->len / 1e6;
  printf("%-28s %9.2f %5d %9.2f %9.2f %9.0f %9.0f %9llu\n", name, mb, RUNS, ms[0], ms[RUNS / 2],
         mb / (ms[0] / 1e3), mb / (ms[RUNS / 2] / 1e3), allocs);
}

int main(void) {
  text mixed = {0}, flat = {0};
  add(&mixed, "# generated benchmark document\ntitle = \"bench\"\n\n");
  for (int i = 0; mixed.len < 10 * 1000 * 1000; i++) service(&mixed, i);
  add(&flat, "[keys]\n");
  for (int i = 0; i < 200000; i++) add(&flat, "key_%d = %d\n", i, i);

  printf("%-28s %9s %5s %9s %9s %9s %9s %9s\n", "toml parse", "MB", "runs", "best ms",
         "median ms", "best MB/s", "med MB/s", "allocs");
  measure("mixed document (10 MB)", &mixed);
  measure("flat table, 200k keys", &flat);
  free(mixed.buf);
  free(flat.buf);
  return 0;
}
