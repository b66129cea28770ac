/* The SQL of the lists over the whole store (store.h: task_list,
 * task_count, step_list, activity), written once for both backends: the
 * statements differ only in how a parameter is written and in the name of
 * the substring function, and in how tasks in state error are reached
 * (SQLite indexes tasks.state; PostgreSQL does not, to keep task updates
 * HOT, and goes through the steps in error instead), and how steps in
 * error are (PostgreSQL: steps_error; SQLite: tasks_failed, the tasks with
 * a step in error, which costs the engine less). Each backend binds
 * the arguments collected here and reads the rows in the column order
 * documented below. */
#ifndef TASKER_STORE_LIST_SQL_H
#define TASKER_STORE_LIST_SQL_H

#include <stdint.h>

#include "core/buf.h"
#include "store/store.h"

#define TK__SQL_MAX_ARGS 16
/* Template versions a task filter reads one by one (each an index range,
 * merged); a name with more versions is filtered by a subquery instead. */
#define TK__SQL_MAX_TEMPLATES 32

typedef struct tk__sql {
  tk__buf text;
  int pg; /* PostgreSQL: $n::type and strpos; else SQLite: ?n and instr */
  int nargs;
  struct {
    int is_text;
    int64_t i;
    const char *t;
  } args[TK__SQL_MAX_ARGS];
} tk__sql;

/* The template ids a filter's template names (found by the caller with
 * template_find); n < 0: no template condition. n == TK__SQL_MAX_TEMPLATES
 * may mean more: the name is matched by subquery then. */
typedef struct tk__sql_templates {
  int64_t ids[TK__SQL_MAX_TEMPLATES];
  int n;
} tk__sql_templates;

/* The statements, into q (q->pg set by the caller, the rest zero); each
 * returns 0 or TK_ENOMEM (q->text freed by tk__sql_free either way).
 *
 * Task rows: id, state, namespace, name, version, identity, created_at,
 * updated_at, finished_at, steps_total, steps_done, steps_error,
 * last_error, next_run_at, priority. */
int tk__sql_task_list(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp);
/* One row, one column: the count. */
int tk__sql_task_count(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp);
/* Step rows: id, task_id, name, state, attempts, max_attempts, retryable,
 * last_error, namespace, template name, version, updated_at. step_state
 * must be one of the TK__STEP_* states (it is written into the text, so
 * that a partial index on it can serve). */
int tk__sql_step_list(tk__sql *q, const char *step_state, const tk__task_query *f,
                      const tk__sql_templates *tp);
/* Rows per bucket that has attempts: bucket number (0 first), succeeded,
 * failed, retries, lateness_n, lateness_sum_ms, lateness_max_ms. Buckets
 * of whole minutes (since and bucket_ms multiples of TK__MINUTE_MS) are
 * summed from the per-minute counts; any other from the attempts. */
int tk__sql_activity(tk__sql *q, int64_t since, int64_t bucket_ms, int n);

void tk__sql_free(tk__sql *q);

/* The ids of the templates f names (f->name in f->ns, any namespace when
 * NULL; every version), through the store's template_find; tp->n = -1
 * when f names none. */
int tk__sql_templates_find(tk_store *s, const tk__task_query *f, tk__sql_templates *tp,
                           tk_err *err);

/* The task states and step states as stored, NULL-terminated. */
extern const char *const tk__task_states[];
extern const char *const tk__step_states[];
/* The stored spelling of state s among states (so that SQL text holds a
 * constant), or NULL when it is not one. */
const char *tk__state_known(const char *const *states, const char *s);

#endif
