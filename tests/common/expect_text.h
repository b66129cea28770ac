/* A text check that says what it looked for and what it found. Include
 * after <cmocka.h>. */
#ifndef TESTS_EXPECT_TEXT_H
#define TESTS_EXPECT_TEXT_H

#include <stdio.h>
#include <string.h>

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

#endif
