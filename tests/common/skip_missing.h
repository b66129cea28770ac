/* Skipping a test that cannot run here, in the one form scripts/run-tests
 * reads: a line "# SKIP requires NAME: WHY" on stdout, then cmocka's skip.
 * The harness counts the skip as such, or as a failure when TK_REQUIRE_NAME
 * (NAME upper-cased, '-' as '_') is 1, as CI sets it: no test reads the
 * TK_REQUIRE_ variables itself. Shell tests do the same with tap.sh's
 * tap_skip_all. */
#ifndef TESTS_SKIP_MISSING_H
#define TESTS_SKIP_MISSING_H

/* Skip the running test for want of `requirement` ("pg", "toml-test", ...;
 * lower case, digits and '-'), saying why (printf's format). Like skip(),
 * it leaves the test: it returns only outside one. */
void skip_missing(const char *requirement, const char *why_fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print the line alone, for a program that skips on its own (exit 77). */
void skip_missing_line(const char *requirement, const char *why_fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
