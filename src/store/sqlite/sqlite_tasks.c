/* Bulk submit on SQLite: many tasks in one transaction (one commit, one
 * sync, for them all). Tasks and steps go in by groups of rows (one
 * statement per TK__SQ_ROWS_PER_INSERT rows, which SQLite runs for far
 * less than as many statements); a task with batch steps, whose items
 * need their step's id, is written alone by the single submit's
 * tk__sq_task_insert. */
#include "store/sqlite/sqlite_internal.h"

#include "store/rules.h"

/* The tasks waiting to be written by groups: their indexes in t[]. */
typedef struct group {
  int *idx;
  int n;
} group;

/* Write the group's tasks (ids already in task_ids[]), their steps, their
 * first transitions and delayed starts; empty the group. */
static int group_flush(tk__sqlite *q, const tk__new_task *t, const int64_t *task_ids, group *g,
                       tk_err *err) {
  int rc = 0;
  for (int done = 0; rc == 0 && done < g->n;) {
    int rows = g->n - done >= TK__SQ_ROWS_PER_INSERT ? TK__SQ_ROWS_PER_INSERT : 1;
    sqlite3_stmt *st = tk__sq_insert_rows(q, SQ_BULK_TASK, SQ_BULK_TASKS,
                                          "INSERT INTO tasks (id, template_id, identity, context,"
                                          " state, steps_total, created_at, updated_at)",
                                          8, rows, err);
    if (st == NULL) return TK_ESTORE;
    for (int r = 0; r < rows; r++, done++) {
      const tk__new_task *k = &t[g->idx[done]];
      int c = 8 * r;
      sqlite3_bind_int64(st, c + 1, task_ids[g->idx[done]]);
      sqlite3_bind_int64(st, c + 2, k->template_id);
      if (k->identity) sqlite3_bind_text(st, c + 3, k->identity, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, c + 4, k->context, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, c + 5, TK__TASK_PENDING, -1, SQLITE_STATIC);
      sqlite3_bind_int(st, c + 6, k->nsteps);
      sqlite3_bind_int64(st, c + 7, k->now);
      sqlite3_bind_int64(st, c + 8, k->now);
    }
    rc = tk__sq_done(q, st, err);
  }
  /* The steps of every task of the group, in order: (task, step) pairs
   * walked as one list. */
  int total = 0;
  for (int i = 0; i < g->n; i++) total += t[g->idx[i]].nsteps;
  int ti = 0, si = 0;
  for (int done = 0; rc == 0 && done < total;) {
    int rows = total - done >= TK__SQ_ROWS_PER_INSERT ? TK__SQ_ROWS_PER_INSERT : 1;
    sqlite3_stmt *st = tk__sq_insert_rows(q, SQ_BULK_STEP, SQ_BULK_STEPS,
                                          "INSERT INTO steps (task_id, idx, name, state,"
                                          " max_attempts, retryable, backoff, parents_remaining,"
                                          " run_at)",
                                          9, rows, err);
    if (st == NULL) return TK_ESTORE;
    for (int r = 0; r < rows; r++, done++) {
      while (si >= t[g->idx[ti]].nsteps) ti++, si = 0;
      const tk__new_task *k = &t[g->idx[ti]];
      const tk__new_step *ns = &k->steps[si];
      int c = 9 * r, delayed = k->start_at > k->now && ns->nparents == 0;
      sqlite3_bind_int64(st, c + 1, task_ids[g->idx[ti]]);
      sqlite3_bind_int(st, c + 2, si);
      sqlite3_bind_text(st, c + 3, ns->name, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, c + 4, TK__STEP_PENDING, -1, SQLITE_STATIC);
      sqlite3_bind_int(st, c + 5, ns->max_attempts);
      sqlite3_bind_int(st, c + 6, ns->retryable);
      sqlite3_bind_text(st, c + 7, ns->backoff, -1, SQLITE_STATIC);
      sqlite3_bind_int(st, c + 8, delayed ? TK__DELAYED : ns->nparents);
      sqlite3_bind_int64(st, c + 9, delayed ? k->start_at : k->now);
      si++;
    }
    rc = tk__sq_done(q, st, err);
  }
  for (int i = 0; rc == 0 && i < g->n; i++) {
    const tk__new_task *k = &t[g->idx[i]];
    int64_t id = task_ids[g->idx[i]];
    if (k->start_at > k->now) rc = tk__sq_delay_task(q, id, k->start_at, err);
    if (rc == 0) rc = tk__sq_task_extras(q, id, k, err);
    if (rc == 0)
      rc = tk__sq_transition(q, id, 0, NULL, TK__TASK_PENDING, k->now, TK__REASON_CREATED, 0,
                             err);
  }
  g->n = 0;
  return rc;
}

static int has_batch(const tk__new_task *t) {
  for (int i = 0; i < t->nsteps; i++)
    if (t->steps[i].batch) return 1;
  return 0;
}

/* Each task's id (an existing identity's task, or the next free id: the
 * write lock is held, so MAX(id) + 1 onward is what SQLite would choose)
 * and its rows. */
static int insert_all(tk__sqlite *q, const tk__new_task *t, int n, int64_t *task_ids,
                      int *existed, group *g, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_BULK_NEXT_ID, "SELECT COALESCE(MAX(id), 0) + 1 FROM tasks",
                                 err);
  if (st == NULL) return TK_ESTORE;
  int found, rc = tk__sq_row(q, st, "next task id", &found, err);
  int64_t next = found ? sqlite3_column_int64(st, 0) : 1;
  sqlite3_reset(st);
  for (int i = 0; rc == 0 && i < n; i++) {
    existed[i] = 0;
    if (t[i].identity != NULL) {
      st = tk__sq_stmt(q, SQ_TASK_BY_IDENTITY, "SELECT id FROM tasks WHERE identity = ?", err);
      if (st == NULL) return TK_ESTORE;
      sqlite3_bind_text(st, 1, t[i].identity, -1, SQLITE_STATIC);
      if ((rc = tk__sq_row(q, st, "identity lookup", &existed[i], err))) break;
      if (existed[i]) task_ids[i] = sqlite3_column_int64(st, 0);
      sqlite3_reset(st);
      if (existed[i]) continue;
    }
    if (has_batch(&t[i])) {
      int again;
      if ((rc = group_flush(q, t, task_ids, g, err)) ||
          (rc = tk__sq_task_insert(q, &t[i], &task_ids[i], &again, err)))
        break;
      next = task_ids[i] + 1;
      continue;
    }
    task_ids[i] = next++;
    g->idx[g->n++] = i;
  }
  if (rc == 0) rc = group_flush(q, t, task_ids, g, err);
  return rc;
}

int tk__sq_submit_many(tk_store *s, const tk__new_task *t, int n, int64_t *task_ids,
                       int *existed, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  group g = {calloc((size_t)n + 1, sizeof *g.idx), 0};
  if (g.idx == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory submitting %d tasks", n);
  int rc = tk__sq_begin(q, err);
  if (rc == 0 && (rc = insert_all(q, t, n, task_ids, existed, &g, err)) != 0) tk__sq_rollback(q);
  if (rc == 0) rc = tk__sq_commit(q, err);
  free(g.idx);
  return rc;
}
