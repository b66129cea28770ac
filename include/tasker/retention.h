/* tasker: retention of finished tasks (DESIGN §16).
 *
 * A finished task (complete, error or cancelled, with its finished_at
 * set) may be removed with everything it owns: its steps, attempts,
 * transitions, batch items and batch settings. A task that is not finished
 * is never removed. `tasker prune` calls tk_prune; with a [retention]
 * section (docs/config.md) every orchestrator prunes in the background, a
 * batch per transaction so that claims never wait long behind it.
 */
#ifndef TASKER_RETENTION_H
#define TASKER_RETENTION_H

#include <stdint.h>

#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows removed (or, in a dry run, that would be), by table. */
typedef struct tk_prune_counts {
  int64_t tasks, steps, attempts, transitions, items;
} tk_prune_counts;

typedef struct tk_prune_options {
  /* Remove tasks of each state that finished before this time (ms since
   * the epoch on the store's clock); 0: keep the tasks in that state. */
  int64_t complete_before, error_before, cancelled_before;
  int batch;   /* tasks per transaction; 0: 500 */
  int dry_run; /* count what would go; change nothing */
} tk_prune_options;

/* Remove what o selects, a batch per transaction, until none is left
 * (tasks that finish meanwhile and match are taken too); *out sums the
 * batches. On an error the batches committed before it stay removed and
 * are in *out. */
int tk_prune(tk_store *s, const tk_prune_options *o, tk_prune_counts *out, tk_err *err);

/* The options [retention] gives at `now`: 1 with *o filled in, or 0 when
 * no duration is set (retention is off). */
int tk_retention_options(const tk_retention_settings *r, int64_t now, tk_prune_options *o);

/* The bytes the store takes on disk: SQLite's file plus its WAL;
 * PostgreSQL's tables of the current schema with their indexes and TOAST
 * (pg_total_relation_size). */
int tk_store_size(tk_store *s, int64_t *bytes, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
