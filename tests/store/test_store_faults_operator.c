/* The store under I/O and allocation faults (tests/common/store_faults.h):
 * a submit with an identity and the operator's retry and cancel. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/store_faults.h"

static void identity_submit_survives_each_io_fault(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_identity_op, FAULT_IO, 0);
}
static void identity_submit_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_identity_op, FAULT_MALLOC, 0);
}
static void operator_retry_survives_each_io_fault(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_retry_op, FAULT_IO, 0);
}
static void operator_retry_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_retry_op, FAULT_MALLOC, 0);
}
static void cancel_survives_each_io_fault(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_cancel_op, FAULT_IO, 0);
}
static void cancel_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_cancel_op, FAULT_MALLOC, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(identity_submit_survives_each_io_fault),
      cmocka_unit_test(identity_submit_survives_each_allocation_failure),
      cmocka_unit_test(operator_retry_survives_each_io_fault),
      cmocka_unit_test(operator_retry_survives_each_allocation_failure),
      cmocka_unit_test(cancel_survives_each_io_fault),
      cmocka_unit_test(cancel_survives_each_allocation_failure),
  };
  return cmocka_run_group_tests(tests, faults_install, faults_summary);
}
