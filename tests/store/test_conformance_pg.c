/* The store conformance suite's PostgreSQL half (test_conformance.c, whose
 * cases and main these are), a program of its own so that the suite runs
 * it beside the SQLite half. */
#define CONFORMANCE_BACKEND "postgres"
#include "test_conformance.c"
