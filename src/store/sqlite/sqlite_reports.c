/* The SQLite backend: operator actions, handler input, and the reports
 * behind `tasker show` and `tasker status`. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/flow.h"

/* The input of one step into *out (NULL when there is no such step). */
static int step_input(tk__sqlite *q, int64_t step_id, json_t **out, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_STEP_INPUT,
      "SELECT t.context, p.name, p.results, s.item_index, s.item FROM steps s"
      " JOIN tasks t ON t.id = s.task_id"
      /* An instance of a map has its map step's parents. */
      " LEFT JOIN template_edges e ON e.template_id = t.template_id"
      " AND e.child_idx = COALESCE(s.map_idx, s.idx)"
      " LEFT JOIN steps p ON p.task_id = s.task_id AND p.idx = e.parent_idx"
      " WHERE s.id = ?",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if (tk__input_add(out, tk__sq_text(st, 0), tk__sq_text(st, 1), tk__sq_text(st, 2)) ||
        (sqlite3_column_type(st, 3) != SQLITE_NULL &&
         tk__input_item(*out, sqlite3_column_int64(st, 3), tk__sq_text(st, 4)))) {
      sqlite3_reset(st);
      return tk_err_set(err, TK_ENOMEM, "out of memory reading step inputs");
    }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : tk__sq_fail(q, "step input", err);
}

int tk__sq_inputs(tk_store *s, const int64_t *step_ids, int n, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  for (int i = 0; i < n; i++) out[i] = NULL;
  /* One cached statement run per step: SQLite reads are calls into the
   * library, not round trips, so a batch gains nothing by one query. */
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++)
    if ((rc = step_input(q, step_ids[i], &out[i], err)) == 0 && out[i] == NULL)
      rc = tk_err_set(err, TK_ENOENT, "no step with id %lld", (long long)step_ids[i]);
  if (rc)
    for (int i = 0; i < n; i++) {
      json_decref(out[i]);
      out[i] = NULL;
    }
  return rc;
}

void tk__sq_claim_inputs(tk__sqlite *q, tk__claim_request *r, tk__claimed *c, int n) {
  for (int i = 0; i < n; i++) {
    c[i].input = NULL;
    if (!tk__claim_wants_input(r, c[i].template_id, c[i].idx)) continue;
    json_t *input = NULL;
    tk_err ignored; /* the caller reads the input again, and says why it failed */
    if (step_input(q, c[i].step_id, &input, &ignored) == 0 && input != NULL)
      c[i].input = json_dumps(input, JSON_COMPACT);
    json_decref(input);
  }
}

/* Find the task's state and, for step actions, the step by name. */
static int find_step(tk__sqlite *q, int64_t task_id, const char *step, char *task_state,
                     int64_t *step_id, char *step_state, int64_t *template_id, int *idx,
                     int *map_idx, char *map_state, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, "SELECT state, template_id FROM tasks WHERE id = ?", -1, &st,
                         NULL))
    return tk__sq_fail(q, "find task", err);
  sqlite3_bind_int64(st, 1, task_id);
  int found, rc = tk__sq_row(q, st, "find task", &found, err);
  if (found) {
    snprintf(task_state, 24, "%s", tk__sq_text(st, 0));
    *template_id = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  if (rc) return rc;
  if (!found) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  if (step == NULL) return 0;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT s.id, s.state, s.idx, COALESCE(s.map_idx, -1),"
                         " (SELECT m.state FROM steps m WHERE m.task_id = s.task_id"
                         " AND m.idx = s.map_idx) FROM steps s WHERE s.task_id = ? AND s.name = ?",
                         -1, &st, NULL))
    return tk__sq_fail(q, "find step", err);
  sqlite3_bind_int64(st, 1, task_id);
  sqlite3_bind_text(st, 2, step, -1, SQLITE_STATIC);
  rc = tk__sq_row(q, st, "find step", &found, err);
  if (found) {
    *step_id = sqlite3_column_int64(st, 0);
    snprintf(step_state, 24, "%s", tk__sq_text(st, 1));
    *idx = sqlite3_column_int(st, 2);
    *map_idx = sqlite3_column_int(st, 3);
    snprintf(map_state, 24, "%s", tk__sq_text(st, 4));
  }
  sqlite3_finalize(st);
  if (rc) return rc;
  if (!found)
    return tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)task_id, step);
  return 0;
}

/* Run a one-off statement whose parameters ?1 to ?4 (as many as it uses)
 * are the integers a, b, c, d. */
static int exec_bound4(tk__sqlite *q, const char *sql, int64_t a, int64_t b, int64_t c,
                       int64_t d, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) return tk__sq_fail(q, "update", err);
  const int64_t v[4] = {a, b, c, d};
  for (int i = 0; i < sqlite3_bind_parameter_count(st) && i < 4; i++)
    sqlite3_bind_int64(st, i + 1, v[i]);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "update", err);
  sqlite3_finalize(st);
  return rc;
}

static int exec_bound(tk__sqlite *q, const char *sql, int64_t a, int64_t b, int64_t c,
                      tk_err *err) {
  return exec_bound4(q, sql, a, b, c, 0, err);
}

/* Run a one-off statement with ?1 now, ?2 task_id and ?3 the text t. */
static int exec_text(tk__sqlite *q, const char *sql, int64_t now, int64_t task_id,
                     const char *t, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) return tk__sq_fail(q, "update", err);
  sqlite3_bind_int64(st, 1, now);
  sqlite3_bind_int64(st, 2, task_id);
  sqlite3_bind_text(st, 3, t, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "update", err);
  sqlite3_finalize(st);
  return rc;
}

/* The unfinished steps' states, which a cancel (an operator's, a
 * deadline's) moves to cancelled. */
#define UNFINISHED "('pending', 'in_progress', 'waiting_for_retry', 'mapped', 'waiting')"

int tk__sq_cancel_task(tk__sqlite *q, const tk__op_plan *p, int64_t task_id,
                       const char *task_state, int64_t now, tk__effects *fx, tk_err *err) {
  int rc = tk__sq_transitions_flush(q, err);
  if (!rc) rc = exec_text(q,
                          "INSERT INTO transitions (task_id, step_id, from_state, to_state,"
                          " at, reason) SELECT task_id, id, state, 'cancelled', ?1, ?3"
                          " FROM steps WHERE task_id = ?2 AND state IN " UNFINISHED,
                          now, task_id, p->step_reason, err);
  if (!rc) rc = exec_bound(q,
                           "UPDATE steps SET state = 'cancelled', lease_owner = NULL,"
                           " lease_expires_at = NULL WHERE task_id = ?2 AND state IN " UNFINISHED,
                           now, task_id, 0, err);
  if (!rc) rc = exec_text(q,
                          "UPDATE tasks SET state = ?3, updated_at = ?1, finished_at = ?1"
                          " WHERE id = ?2",
                          now, task_id, p->task_to, err);
  if (!rc) rc = tk__sq_child_end(q, task_id, 1, task_state, p->task_to, err);
  if (!rc) rc = tk__sq_transition(q, task_id, 0, task_state, p->task_to, now, p->reason, 0, err);
  if (!rc) rc = tk__sq_children_cancel(q, task_id, now, err);
  fx->task_state = p->task_to;
  return rc;
}

/* Carry out an operator's plan (tk__operator_plan) for step step_id (idx
 * in its template) of task_id, inside the caller's transaction. */
static int apply_plan(tk__sqlite *q, const tk__op_plan *p, int64_t task_id, int64_t template_id,
                      int64_t step_id, int idx, int map_idx, const char *step_state,
                      const char *task_state, int64_t now, tk__effects *fx, tk_err *err) {
  int rc = 0;
  if (p->cancel_task) return tk__sq_cancel_task(q, p, task_id, task_state, now, fx, err);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db,
                         "UPDATE steps SET state = ?1,"
                         " attempts = CASE WHEN ?2 THEN 0 ELSE attempts END,"
                         " run_at = CASE WHEN ?2 THEN ?3 ELSE run_at END,"
                         " last_delay_ms = CASE WHEN ?2 THEN 0 ELSE last_delay_ms END"
                         " WHERE id = ?4",
                         -1, &st, NULL))
    return tk__sq_fail(q, "operator", err);
  sqlite3_bind_text(st, 1, p->step_to, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, p->reset_attempts);
  sqlite3_bind_int64(st, 3, now);
  sqlite3_bind_int64(st, 4, step_id);
  rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "operator", err);
  sqlite3_finalize(st);
  /* A batch step's given-up items get a fresh budget with the step: the
   * operator asked for another go. Acked items stay acked. */
  if (!rc && p->reset_attempts)
    rc = exec_bound(q,
                    "UPDATE items SET state = 'pending', attempts = 0"
                    " WHERE step_id = ?1 AND state = 'gave_up'",
                    step_id, 0, 0, err);
  if (!rc)
    rc = exec_bound4(q,
                     "UPDATE tasks SET steps_done = steps_done + ?3,"
                     " steps_error = steps_error + ?4, updated_at = ?1 WHERE id = ?2",
                     now, task_id, p->steps_done_delta, p->steps_error_delta, err);
  if (!rc) rc = tk__sq_transition(q, task_id, step_id, step_state, p->step_to, now, p->reason, 0,
                                  err);
  if (!rc && p->release_children)
    rc = tk__sq_release_children(q, task_id, template_id, idx, NULL, 1, now,
                                 &fx->children_released, err);
  if (!rc && p->map_settle) {
    const tk__flow *flow;
    rc = tk__sq_flow(q, template_id, &flow, err);
    if (!rc)
      rc = tk__sq_flow_map_settle(q, flow, task_id, map_idx, now, &fx->children_released, err);
  }
  if (!rc && p->settle) rc = tk__sq_settle_task(q, task_id, now, &fx->task_state, err);
  return rc;
}

int tk__sq_operator(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                    int64_t now, tk__effects *fx, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(fx, 0, sizeof *fx);
  char task_state[TK__STATE_MAX], step_state[TK__STATE_MAX] = "", map_state[TK__STATE_MAX] = "";
  int64_t step_id = 0, template_id = 0;
  int idx = 0, map_idx = -1, rc;
  tk__op_plan plan;
  const tk__flow *flow = NULL;
  if ((rc = tk__sq_begin(q, err))) return rc;
  rc = find_step(q, task_id, action == TK__OP_CANCEL ? NULL : step, task_state, &step_id,
                 step_state, &template_id, &idx, &map_idx, map_state, err);
  if (!rc && step != NULL && action != TK__OP_CANCEL) rc = tk__sq_flow(q, template_id, &flow, err);
  tk__op_step_kind kind = {.decision = tk__flow_is_decision(flow, idx),
                           .map = tk__flow_is_map(flow, idx),
                           .instance = map_idx >= 0,
                           .map_state = map_idx >= 0 ? map_state : NULL};
  if (!rc)
    rc = tk__operator_plan(action, task_id, task_state, step, step_state, &kind, &plan, err);
  if (!rc) rc = apply_plan(q, &plan, task_id, template_id, step_id, idx, map_idx, step_state,
                           task_state, now, fx, err);
  if (!rc) rc = tk__sq_commit(q, err);
  if (rc) tk__sq_rollback(q);
  return rc;
}

/* Prepare a one-off query with ?1 = id; NULL (err set) on failure. */
static sqlite3_stmt *task_query(tk__sqlite *q, const char *what, const char *sql, int64_t id,
                                tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) {
    tk__sq_fail(q, what, err);
    return NULL;
  }
  sqlite3_bind_int64(st, 1, id);
  return st;
}

/* The step of r whose id is step_id, or NULL. */
static tk__step_rec *step_by_id(tk__task_report *r, int64_t step_id) {
  for (int i = 0; i < r->nsteps; i++)
    if (r->steps[i].id == step_id) return &r->steps[i];
  return NULL;
}

/* The task row and its template. */
static int report_task(tk__sqlite *q, int64_t task_id, tk__task_report *r, int *oom,
                       tk_err *err) {
  sqlite3_stmt *st = task_query(q, "show task",
                                "SELECT t.id, t.state, t.identity, t.created_at, t.updated_at,"
                                " t.finished_at, t.steps_total, t.steps_done, t.steps_error,"
                                " t.context," TK__SQ_TEMPLATE_COLUMNS(" tp.")
                                ", t.priority, t.deadline_at"
                                " FROM tasks t JOIN templates tp ON tp.id = t.template_id"
                                " WHERE t.id = ?1",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  int found, rc = tk__sq_row(q, st, "show task", &found, err);
  if (rc == 0 && found) {
    r->id = sqlite3_column_int64(st, 0);
    snprintf(r->state, sizeof r->state, "%s", tk__sq_text(st, 1));
    r->identity = tk__sq_col_dup(st, 2, oom);
    r->created_at = sqlite3_column_int64(st, 3);
    r->updated_at = sqlite3_column_int64(st, 4);
    r->finished_at = tk__sq_col_i64(st, 5);
    r->steps_total = sqlite3_column_int(st, 6);
    r->steps_done = sqlite3_column_int(st, 7);
    r->steps_error = sqlite3_column_int(st, 8);
    r->context = tk__sq_col_dup(st, 9, oom);
    if (tk__sq_template_rec(st, 10, &r->template_) != 0) *oom = 1;
    r->priority = sqlite3_column_int(st, 17); /* after the template's 7 columns */
    r->deadline_at = tk__sq_col_i64(st, 18);
  }
  sqlite3_finalize(st);
  if (rc) return rc;
  if (!found) return tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  return 0;
}

/* The columns step_row reads, from steps. */
#define STEP_COLUMNS                                                                         \
  "SELECT id, idx, name, state, attempts, max_attempts, retryable, parents_remaining,"     \
  " backoff, run_at, lease_expires_at, last_delay_ms, lease_owner, last_error, results,"  \
  " COALESCE(item_index, -1), item FROM steps"

/* One row of STEP_COLUMNS into *s. */
static void step_row(sqlite3_stmt *st, tk__step_rec *s, int *oom) {
  s->id = sqlite3_column_int64(st, 0);
  s->idx = sqlite3_column_int(st, 1);
  s->name = tk__sq_col_dup(st, 2, oom);
  snprintf(s->state, sizeof s->state, "%s", tk__sq_text(st, 3));
  s->attempts = sqlite3_column_int(st, 4);
  s->max_attempts = sqlite3_column_int(st, 5);
  s->retryable = sqlite3_column_int(st, 6);
  s->parents_remaining = sqlite3_column_int(st, 7);
  s->backoff = tk__sq_col_dup(st, 8, oom);
  s->run_at = sqlite3_column_int64(st, 9);
  s->lease_expires_at = tk__sq_col_i64(st, 10);
  s->last_delay_ms = sqlite3_column_int64(st, 11);
  s->lease_owner = tk__sq_col_dup(st, 12, oom);
  s->last_error = tk__sq_col_dup(st, 13, oom);
  s->results = tk__sq_col_dup(st, 14, oom);
  s->item_index = sqlite3_column_int(st, 15);
  s->item = tk__sq_col_dup(st, 16, oom);
  s->instances_total = TK__NONE;
}

/* Rows of st (bound) appended to *rows (*n of them, *cap room). */
static int step_rows(tk__sqlite *q, sqlite3_stmt *st, const char *what, tk__step_rec **rows,
                     int *n, int *cap, int *oom, tk_err *err) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)rows, cap, *n + 1, sizeof **rows)) {
      *oom = 1;
      break;
    }
    tk__step_rec *s = &(*rows)[(*n)++];
    memset(s, 0, sizeof *s);
    step_row(st, s, oom);
  }
  if (*oom) rc = SQLITE_DONE;
  rc = tk__sq_rows_end(q, rc, what, err);
  sqlite3_finalize(st);
  return rc;
}

/* The template's steps (instances are listed by instance_list), each map
 * step with the counts of its instances by state. */
static int report_steps(tk__sqlite *q, int64_t task_id, tk__task_report *r, int *oom,
                        tk_err *err) {
  sqlite3_stmt *st = task_query(q, "show steps",
                                STEP_COLUMNS " WHERE task_id = ?1 AND map_idx IS NULL ORDER BY idx",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  int cap = 0;
  int rc = step_rows(q, st, "show steps", &r->steps, &r->nsteps, &cap, oom, err);
  if (rc) return rc;
  st = task_query(q, "show instances",
                  "SELECT map_idx, count(*), sum(state IN ('complete', 'resolved_manually')),"
                  " sum(state = 'error'), sum(state IN ('pending', 'in_progress',"
                  " 'waiting_for_retry')) FROM steps WHERE task_id = ?1 AND map_idx IS NOT NULL"
                  " GROUP BY map_idx",
                  task_id, err);
  if (st == NULL) return TK_ESTORE;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int m = sqlite3_column_int(st, 0);
    for (int i = 0; i < r->nsteps; i++) {
      tk__step_rec *s = &r->steps[i];
      if (s->idx != m) continue;
      s->instances_total = sqlite3_column_int64(st, 1);
      s->instances_done = sqlite3_column_int64(st, 2);
      s->instances_failed = sqlite3_column_int64(st, 3);
      s->instances_waiting = sqlite3_column_int64(st, 4);
    }
  }
  rc = tk__sq_rows_end(q, rc, "show instances", err);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_instance_list(tk_store *s, int64_t task_id, int map_idx, int after, int limit,
                         tk__step_rec **out, int *n, int64_t *total, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *out = NULL;
  *n = 0;
  *total = 0;
  sqlite3_stmt *st = task_query(q, "instances",
                                "SELECT count(*) FROM steps WHERE task_id = ?1 AND map_idx = ?2",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int(st, 2, map_idx);
  int found, rc = tk__sq_row(q, st, "instances", &found, err);
  if (rc == 0 && found) *total = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc) return rc;
  st = task_query(q, "instances",
                  STEP_COLUMNS " WHERE task_id = ?1 AND map_idx = ?2 AND item_index > ?3"
                               " ORDER BY item_index LIMIT ?4",
                  task_id, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int(st, 2, map_idx);
  sqlite3_bind_int(st, 3, after);
  sqlite3_bind_int(st, 4, limit);
  int cap = 0, oom = 0;
  rc = step_rows(q, st, "instances", out, n, &cap, &oom, err);
  if (rc == 0 && oom) rc = tk_err_set(err, TK_ENOMEM, "out of memory listing instances");
  if (rc) {
    tk__step_recs_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

/* Each step's claims, oldest first. */
static int report_attempts(tk__sqlite *q, int64_t task_id, tk__task_report *r, int *oom,
                           tk_err *err) {
  sqlite3_stmt *st = task_query(q, "attempt history",
                                "SELECT a.step_id, a.attempt, a.owner, a.started_at,"
                                " a.finished_at, a.delay_ms, a.next_run_at, a.outcome, a.error,"
                                " a.delay_source, a.due_at FROM attempts a JOIN steps s ON s.id = a.step_id"
                                " WHERE s.task_id = ?1 AND s.map_idx IS NULL ORDER BY a.id",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  int rc, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)&r->attempts, &cap, r->nattempts + 1, sizeof *r->attempts)) {
      *oom = 1;
      break;
    }
    tk__attempt_rec *a = &r->attempts[r->nattempts++];
    a->step_id = sqlite3_column_int64(st, 0);
    a->attempt = sqlite3_column_int(st, 1);
    a->owner = tk__sq_col_dup(st, 2, oom);
    a->started_at = sqlite3_column_int64(st, 3);
    a->finished_at = tk__sq_col_i64(st, 4);
    a->delay_ms = tk__sq_col_i64(st, 5);
    a->next_run_at = tk__sq_col_i64(st, 6);
    a->outcome = tk__sq_col_dup(st, 7, oom);
    a->error = tk__sq_col_dup(st, 8, oom);
    a->delay_source = tk__sq_col_dup(st, 9, oom);
    a->due_at = tk__sq_col_i64(st, 10);
  }
  if (*oom) rc = SQLITE_DONE;
  rc = tk__sq_rows_end(q, rc, "attempt history", err);
  sqlite3_finalize(st);
  return rc;
}

/* The task's audit trail, oldest first: a range of the transitions_task
 * index. */
static int report_transitions(tk__sqlite *q, int64_t task_id, tk__task_report *r, int *oom,
                              tk_err *err) {
  sqlite3_stmt *st = task_query(q, "transitions",
                                "SELECT t.at, t.step_id, t.from_state, t.to_state, t.reason,"
                                " t.attempt, s.name FROM transitions t"
                                " LEFT JOIN steps s ON s.id = t.step_id"
                                " WHERE t.task_id = ?1 AND s.map_idx IS NULL ORDER BY t.id",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  int rc, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)&r->transitions, &cap, r->ntransitions + 1, sizeof *r->transitions)) {
      *oom = 1;
      break;
    }
    tk__transition_rec *t = &r->transitions[r->ntransitions++];
    t->at = sqlite3_column_int64(st, 0);
    t->step_id = tk__sq_col_i64(st, 1);
    t->from = tk__sq_col_dup(st, 2, oom);
    t->to = tk__sq_col_dup(st, 3, oom);
    t->reason = tk__sq_col_dup(st, 4, oom);
    t->attempt = tk__sq_col_i64(st, 5);
    t->step = tk__sq_col_dup(st, 6, oom);
  }
  if (*oom) rc = SQLITE_DONE;
  rc = tk__sq_rows_end(q, rc, "transitions", err);
  sqlite3_finalize(st);
  return rc;
}

/* Each batch step's item counts by state, and the first items that gave
 * up (TK__GAVE_UP_SHOWN per step, in submission order). */
static int report_items(tk__sqlite *q, int64_t task_id, tk__task_report *r, int *oom,
                        tk_err *err) {
  /* Every batch step has a row, counted or not (an empty list of items). */
  sqlite3_stmt *st = task_query(q, "batch items",
                                "SELECT b.step_id, i.state, COUNT(i.step_id) FROM batch_steps b"
                                " JOIN steps s ON s.id = b.step_id"
                                " LEFT JOIN items i ON i.step_id = b.step_id"
                                " WHERE s.task_id = ?1 GROUP BY b.step_id, i.state",
                                task_id, err);
  if (st == NULL) return TK_ESTORE;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    tk__step_rec *s = step_by_id(r, sqlite3_column_int64(st, 0));
    if (s == NULL) continue;
    s->batch = 1;
    const char *state = tk__sq_text(st, 1);
    int64_t n = sqlite3_column_int64(st, 2);
    if (state == NULL) continue; /* no items at all */
    if (strcmp(state, TK__ITEM_PENDING) == 0) s->items_pending = n;
    else if (strcmp(state, TK__ITEM_ACKED) == 0) s->items_acked = n;
    else if (strcmp(state, TK__ITEM_GAVE_UP) == 0) s->items_gave_up = n;
  }
  rc = tk__sq_rows_end(q, rc, "batch items", err);
  sqlite3_finalize(st);
  if (rc) return rc;
  st = task_query(q, "batch items",
                  "SELECT step_id, key, attempts, last_error FROM (SELECT i.step_id, i.key,"
                  " i.attempts, i.last_error, i.seq, ROW_NUMBER() OVER (PARTITION BY i.step_id"
                  " ORDER BY i.seq) AS nth FROM items i JOIN steps s ON s.id = i.step_id"
                  " WHERE s.task_id = ?1 AND i.state = 'gave_up')"
                  " WHERE nth <= ?2 ORDER BY step_id, seq",
                  task_id, err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int(st, 2, TK__GAVE_UP_SHOWN);
  int cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)&r->gave_up, &cap, r->ngave_up + 1, sizeof *r->gave_up)) {
      *oom = 1;
      break;
    }
    tk__gave_up_rec *g = &r->gave_up[r->ngave_up++];
    g->step_id = sqlite3_column_int64(st, 0);
    g->key = tk__sq_col_dup(st, 1, oom);
    g->attempts = sqlite3_column_int(st, 2);
    g->last_error = tk__sq_col_dup(st, 3, oom);
  }
  if (*oom) rc = SQLITE_DONE;
  rc = tk__sq_rows_end(q, rc, "batch items", err);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_task_report(tk_store *s, int64_t task_id, tk__task_report *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  int oom = 0, rc;
  if ((rc = report_task(q, task_id, out, &oom, err)) == 0 &&
      (rc = report_steps(q, task_id, out, &oom, err)) == 0 &&
      (rc = report_attempts(q, task_id, out, &oom, err)) == 0 &&
      (rc = report_transitions(q, task_id, out, &oom, err)) == 0)
    rc = report_items(q, task_id, out, &oom, err);
  if (rc == 0 && oom) rc = tk_err_set(err, TK_ENOMEM, "out of memory reading task %lld",
                                      (long long)task_id);
  if (rc) tk__task_report_free(out);
  return rc;
}

/* The rows of `SELECT state, COUNT(*) ... GROUP BY state` into counts. */
static int state_counts(tk__sqlite *q, const char *sql, tk__state_count *counts, int *n,
                        tk_err *err) {
  sqlite3_stmt *st;
  *n = 0;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) return tk__sq_fail(q, "status", err);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < TK__STATUS_STATES) {
    snprintf(counts[*n].state, sizeof counts[*n].state, "%s", tk__sq_text(st, 0));
    counts[(*n)++].n = sqlite3_column_int64(st, 1);
  }
  rc = rc == SQLITE_ROW ? 0 : tk__sq_rows_end(q, rc, "status", err);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_status(tk_store *s, int64_t now, tk__status_report *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  int rc = state_counts(q, "SELECT state, COUNT(*) FROM tasks GROUP BY state", out->tasks,
                        &out->ntasks, err);
  if (!rc) rc = state_counts(q, "SELECT state, COUNT(*) FROM steps GROUP BY state", out->steps,
                             &out->nsteps, err);
  if (rc) return rc;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT (SELECT COUNT(*) FROM steps INDEXED BY steps_fresh"
                         " WHERE state = 'pending' AND parents_remaining = 0 AND run_at <= ?1)"
                         " + (SELECT COUNT(*) FROM steps INDEXED BY steps_retry_due"
                         " WHERE state = 'waiting_for_retry' AND run_at <= ?1)",
                         -1, &st, NULL))
    return tk__sq_fail(q, "status", err);
  sqlite3_bind_int64(st, 1, now);
  int found;
  rc = tk__sq_row(q, st, "status", &found, err);
  if (found) out->ready_now = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc) return rc;
  if (sqlite3_prepare_v2(q->db, "SELECT name, value FROM counters ORDER BY name", -1, &st, NULL))
    return tk__sq_fail(q, "status", err);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && out->ncounters < TK__STATUS_COUNTERS) {
    snprintf(out->counters[out->ncounters].name, sizeof out->counters[0].name, "%s",
             tk__sq_text(st, 0));
    out->counters[out->ncounters++].value = sqlite3_column_int64(st, 1);
  }
  rc = rc == SQLITE_ROW ? 0 : tk__sq_rows_end(q, rc, "status", err);
  sqlite3_finalize(st);
  return rc;
}
