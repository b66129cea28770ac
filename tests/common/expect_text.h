/* Text checks that say what they looked for and what they found. Include
 * after <cmocka.h>. */
#ifndef TESTS_EXPECT_TEXT_H
#define TESTS_EXPECT_TEXT_H

#include <stdio.h>
#include <string.h>

#include <jansson.h>

/* Fail the running test unless `needle` occurs in `text`, printing both
 * whole (cmocka's own messages are cut short). */
#define expect_contains(text, needle) expect_contains_at((text), (needle), __FILE__, __LINE__)

static inline void expect_contains_at(const char *text, const char *needle, const char *file,
                                      int line) {
  if (text != NULL && strstr(text, needle) != NULL) return;
  fprintf(stderr, "%s:%d: expected to find\n  %s\nin\n%s\n", file, line, needle,
          text ? text : "(null)");
  _fail(file, line);
}

/* The object's keys, in order, joined by ',', are `want` (a JSON shape's
 * members in their documented order). */
static inline void expect_keys(json_t *o, const char *want) {
  char got[512] = "";
  size_t used = 0;
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) used += (size_t)snprintf(got + used, sizeof got - used, "%s%s",
                                                        used ? "," : "", k);
  assert_string_equal(got, want);
}

#endif
