/* Skipping a test that cannot run here: see skip_missing.h. */
#include "skip_missing.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

static void print_line(const char *requirement, const char *why_fmt, va_list ap) {
  printf("# SKIP requires %s: ", requirement);
  vprintf(why_fmt, ap);
  printf("\n");
  fflush(stdout);
}

void skip_missing_line(const char *requirement, const char *why_fmt, ...) {
  va_list ap;
  va_start(ap, why_fmt);
  print_line(requirement, why_fmt, ap);
  va_end(ap);
}

void skip_missing(const char *requirement, const char *why_fmt, ...) {
  va_list ap;
  va_start(ap, why_fmt);
  print_line(requirement, why_fmt, ap);
  va_end(ap);
  skip();
}
