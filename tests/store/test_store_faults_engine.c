/* The store under I/O and allocation faults (tests/common/store_faults.h):
 * the engine's passes over plain steps (batch steps:
 * test_store_faults_batches, run beside this one). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/store_faults.h"

static void engine_survives_each_io_fault(void **state) {
  (void)state;
  faults_engine_under(&faults_diamonds, FAULT_IO, 0);
}
static void engine_survives_persistent_io_faults(void **state) {
  (void)state;
  faults_engine_under(&faults_diamonds, FAULT_IO, 1);
}
static void engine_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_engine_under(&faults_diamonds, FAULT_MALLOC, 0);
}
static void engine_survives_persistent_allocation_failures(void **state) {
  (void)state;
  faults_engine_under(&faults_diamonds, FAULT_MALLOC, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(engine_survives_each_io_fault),
      cmocka_unit_test(engine_survives_persistent_io_faults),
      cmocka_unit_test(engine_survives_each_allocation_failure),
      cmocka_unit_test(engine_survives_persistent_allocation_failures),
  };
  return cmocka_run_group_tests(tests, faults_install, faults_summary);
}
