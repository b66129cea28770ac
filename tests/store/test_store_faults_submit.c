/* The store under I/O and allocation faults (tests/common/store_faults.h):
 * `tasker init` (migrations), submit and template add. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/store_faults.h"

static void init_survives_each_io_fault(void **state) {
  (void)state;
  faults_migrate_under(FAULT_IO, 0);
}
static void init_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_migrate_under(FAULT_MALLOC, 0);
}
static void submit_survives_each_io_fault(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_submit_op, FAULT_IO, 0);
}
static void submit_survives_persistent_io_faults(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_submit_op, FAULT_IO, 1);
}
static void submit_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_submit_op, FAULT_MALLOC, 0);
}
static void submit_survives_persistent_allocation_failures(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_submit_op, FAULT_MALLOC, 1);
}
static void template_add_survives_each_io_fault(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_template_op, FAULT_IO, 0);
}
static void template_add_survives_each_allocation_failure(void **state) {
  (void)state;
  faults_all_or_nothing(&faults_template_op, FAULT_MALLOC, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_survives_each_io_fault),
      cmocka_unit_test(init_survives_each_allocation_failure),
      cmocka_unit_test(submit_survives_each_io_fault),
      cmocka_unit_test(submit_survives_persistent_io_faults),
      cmocka_unit_test(submit_survives_each_allocation_failure),
      cmocka_unit_test(submit_survives_persistent_allocation_failures),
      cmocka_unit_test(template_add_survives_each_io_fault),
      cmocka_unit_test(template_add_survives_each_allocation_failure),
  };
  return cmocka_run_group_tests(tests, faults_install, faults_summary);
}
