/* The store under I/O and allocation faults (tests/common/store_faults.h):
 * the engine's passes over batch steps, a program apart from
 * test_store_faults_engine so that the suite runs the two side by side. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/store_faults.h"

static void batch_steps_survive_each_io_fault(void **state) {
  (void)state;
  faults_engine_under(&faults_batches, FAULT_IO, 0);
}
static void batch_steps_survive_each_allocation_failure(void **state) {
  (void)state;
  faults_engine_under(&faults_batches, FAULT_MALLOC, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(batch_steps_survive_each_io_fault),
      cmocka_unit_test(batch_steps_survive_each_allocation_failure),
  };
  return cmocka_run_group_tests(tests, faults_install, faults_summary);
}
