/* Fault injection into the SQLite store for the test_store_faults_*
 * programs (four, so that the suite runs them side by side), the way
 * SQLite tests itself: a VFS over the default one that fails the Nth read,
 * write, sync or truncate, and an allocator under SQLite that fails the Nth
 * allocation.
 * Each scenario is run with N = 0, 1, 2, ... until the operation gets
 * through without meeting the fault (init's thousands of allocations are
 * sampled), with a single fault and, for submit and the engine, with every
 * later call failing too. After each fault:
 *   - init left whole migrations only, and a clean init finishes;
 *   - a submit either succeeded or left the store exactly as it was;
 *   - an engine pass may lose outcomes (their leases expire), but a clean
 *     run afterwards finishes every task, every claim has its attempt row,
 *     and no step completes twice;
 *   - the same connection keeps working once the fault is gone. */
#ifndef TESTS_STORE_FAULTS_H
#define TESTS_STORE_FAULTS_H

#include "engine_fixture.h"

typedef enum fault_kind { FAULT_IO, FAULT_MALLOC } fault_kind;

/* An operation that is one transaction: prepare brings a fresh store to
 * where it applies (faults off), run does it once (under the fault), done
 * checks what a success left. */
typedef struct faults_op {
  const char *name;
  void (*prepare)(efx *f);
  int (*run)(efx *f, tk_err *err);
  void (*done)(efx *f);
} faults_op;

/* What the engine runs while faults are armed: tasks of one template,
 * `warmup` clean passes first, then two passes under the fault, each at the
 * time the engine asked to wake. */
typedef struct workload {
  const char *template_toml, *name, *context;
  int tasks, warmup;
  const char *unfinished; /* SQL giving a row for each item left behind, or NULL */
} faults_workload;

/* cmocka group setup: install the faulty VFS (as the default) and
 * allocator, before SQLite initializes; and the group teardown that prints
 * how many fault points were tried. */
int faults_install(void **state);
int faults_summary(void **state);

/* `op` under each fault point: it succeeds, or it fails with a message
 * and the store is byte for byte as it was, and then the same connection
 * does it once the fault is gone. */
void faults_all_or_nothing(const faults_op *op, fault_kind kind, int keep_failing);
/* Engine passes of `w` under each fault point, then a clean run to the end,
 * which must leave a consistent store. */
void faults_engine_under(const faults_workload *w, fault_kind kind, int keep_failing);
/* `tasker init` under each fault point, from an empty file. */
void faults_migrate_under(fault_kind kind, int keep_failing);

/* The operations: submit, submit with an identity, template add, an
 * operator's retry, cancel. */
extern const faults_op faults_submit_op, faults_identity_op, faults_template_op, faults_retry_op,
    faults_cancel_op;
/* The engine's workloads: diamonds (a step failing once), batch steps. */
extern const faults_workload faults_diamonds, faults_batches;

#endif
