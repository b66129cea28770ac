/* The SQLite backend: operator actions, handler input, and the reports
 * behind `tasker show` and `tasker status`. */
#include "store/sqlite/sqlite_internal.h"

#include <string.h>

/* Column i as a JSON value: integers, text, NULL. */
static json_t *column_json(sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_INTEGER: return json_integer((json_int_t)sqlite3_column_int64(st, i));
  case SQLITE_NULL: return json_null();
  default: return json_string(tk__sq_text(st, i));
  }
}

/* JSON text stored in a column, parsed; null when NULL or unparsable. */
static json_t *column_parsed(sqlite3_stmt *st, int i) {
  const char *t = tk__sq_text(st, i);
  json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
  return v ? v : json_null();
}

int tk__sq_step_input(tk_store *s, int64_t step_id, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  *out = NULL;
  /* Cached: every claimed command or function step reads its input. */
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_STEP_INPUT,
      "SELECT t.context, p.name, p.results FROM steps s"
      " JOIN tasks t ON t.id = s.task_id"
      " LEFT JOIN template_edges e ON e.template_id = t.template_id AND e.child_idx = s.idx"
      " LEFT JOIN steps p ON p.task_id = s.task_id AND p.idx = e.parent_idx"
      " WHERE s.id = ?",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  json_t *parents = json_object();
  json_t *context = NULL;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (context == NULL) context = column_parsed(st, 0);
    if (sqlite3_column_type(st, 1) != SQLITE_NULL)
      json_object_set_new(parents, tk__sq_text(st, 1), column_parsed(st, 2));
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    json_decref(context);
    json_decref(parents);
    return tk__sq_fail(q, "step input", err);
  }
  if (context == NULL) {
    json_decref(parents);
    return tk_err_set(err, TK_ENOENT, "no step with id %lld", (long long)step_id);
  }
  *out = json_pack("{s:o, s:o}", "context", context, "parents", parents);
  return 0;
}

/* Find the task's state and, for step actions, the step by name. */
static int find_step(tk__sqlite *q, int64_t task_id, const char *step, char *task_state,
                     int64_t *step_id, char *step_state, int64_t *template_id, int *idx,
                     tk_err *err) {
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
  if (sqlite3_prepare_v2(q->db, "SELECT id, state, idx FROM steps WHERE task_id = ? AND name = ?",
                         -1, &st, NULL))
    return tk__sq_fail(q, "find step", err);
  sqlite3_bind_int64(st, 1, task_id);
  sqlite3_bind_text(st, 2, step, -1, SQLITE_STATIC);
  rc = tk__sq_row(q, st, "find step", &found, err);
  if (found) {
    *step_id = sqlite3_column_int64(st, 0);
    snprintf(step_state, 24, "%s", tk__sq_text(st, 1));
    *idx = sqlite3_column_int(st, 2);
  }
  sqlite3_finalize(st);
  if (rc) return rc;
  if (!found)
    return tk_err_set(err, TK_ENOENT, "task %lld has no step \"%s\"", (long long)task_id, step);
  return 0;
}

/* Run a one-off statement whose parameters ?1, ?2, ?3 (as many as it
 * uses) are the integers a, b, c. */
static int exec_bound(tk__sqlite *q, const char *sql, int64_t a, int64_t b, int64_t c,
                      tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) return tk__sq_fail(q, "update", err);
  const int64_t v[3] = {a, b, c};
  for (int i = 0; i < sqlite3_bind_parameter_count(st) && i < 3; i++)
    sqlite3_bind_int64(st, i + 1, v[i]);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "update", err);
  sqlite3_finalize(st);
  return rc;
}

static int op_retry(tk__sqlite *q, int64_t task_id, const char *step, int64_t step_id,
                    const char *state, int64_t now, tk__effects *fx, tk_err *err) {
  if (strcmp(state, TK__STEP_ERROR) != 0)
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld is %s: only a step in error can be retried",
                      step, (long long)task_id, state);
  int rc = exec_bound(q,
                      "UPDATE steps SET state = 'waiting_for_retry', attempts = 0, run_at = ?1,"
                      " last_delay_ms = 0 WHERE id = ?2",
                      now, step_id, 0, err);
  /* A batch step's given-up items get a fresh budget with the step: the
   * operator asked for another go. Acked items stay acked. */
  if (!rc) rc = exec_bound(q,
                           "UPDATE items SET state = 'pending', attempts = 0"
                           " WHERE step_id = ?1 AND state = 'gave_up'",
                           step_id, 0, 0, err);
  if (!rc) rc = exec_bound(q,
                           "UPDATE tasks SET steps_error = steps_error - 1, updated_at = ?1"
                           " WHERE id = ?2",
                           now, task_id, 0, err);
  if (!rc) rc = tk__sq_transition(q, task_id, step_id, state, TK__STEP_WAITING, now,
                                  "operator retry", 0, err);
  if (!rc) rc = tk__sq_settle_task(q, task_id, now, &fx->task_state, err);
  return rc;
}

static int op_resolve(tk__sqlite *q, int64_t task_id, const char *step, int64_t step_id,
                      const char *state, int64_t template_id, int idx, int64_t now,
                      tk__effects *fx, tk_err *err) {
  int was_error = strcmp(state, TK__STEP_ERROR) == 0;
  if (!was_error && strcmp(state, TK__STEP_PENDING) != 0 && strcmp(state, TK__STEP_WAITING) != 0)
    return tk_err_set(err, TK_ESTATE,
                      "step \"%s\" of task %lld is %s: only a step that is pending, waiting for "
                      "a retry or in error can be resolved",
                      step, (long long)task_id, state);
  int rc = exec_bound(q,
                      "UPDATE steps SET state = 'resolved_manually' WHERE id = ?1",
                      step_id, 0, 0, err);
  if (!rc) rc = exec_bound(q,
                           "UPDATE tasks SET steps_done = steps_done + 1,"
                           " steps_error = steps_error - ?3, updated_at = ?1 WHERE id = ?2",
                           now, task_id, was_error, err);
  if (!rc) rc = tk__sq_transition(q, task_id, step_id, state, TK__STEP_RESOLVED, now,
                                  "operator resolve", 0, err);
  if (!rc) rc = tk__sq_release_children(q, task_id, template_id, step_id, idx, now,
                                        &fx->children_released, err);
  if (!rc) rc = tk__sq_settle_task(q, task_id, now, &fx->task_state, err);
  return rc;
}

static int op_cancel(tk__sqlite *q, int64_t task_id, const char *task_state, int64_t now,
                     tk__effects *fx, tk_err *err) {
  if (strcmp(task_state, TK__TASK_COMPLETE) == 0 || strcmp(task_state, TK__TASK_CANCELLED) == 0)
    return tk_err_set(err, TK_ESTATE, "task %lld is already %s", (long long)task_id, task_state);
  int rc = tk__sq_transitions_flush(q, err);
  if (!rc) rc = exec_bound(q,
                           "INSERT INTO transitions (task_id, step_id, from_state, to_state,"
                           " at, reason) SELECT task_id, id, state, 'cancelled', ?1,"
                           " 'task cancelled' FROM steps WHERE task_id = ?2 AND state IN"
                           " ('pending', 'in_progress', 'waiting_for_retry')",
                      now, task_id, 0, err);
  if (!rc) rc = exec_bound(q,
                           "UPDATE steps SET state = 'cancelled', lease_owner = NULL,"
                           " lease_expires_at = NULL WHERE task_id = ?2 AND state IN"
                           " ('pending', 'in_progress', 'waiting_for_retry')",
                           now, task_id, 0, err);
  if (!rc) rc = exec_bound(q,
                           "UPDATE tasks SET state = 'cancelled', updated_at = ?1,"
                           " finished_at = ?1 WHERE id = ?2",
                           now, task_id, 0, err);
  if (!rc) rc = tk__sq_transition(q, task_id, 0, task_state, TK__TASK_CANCELLED, now,
                                  "operator cancel", 0, err);
  fx->task_state = TK__TASK_CANCELLED;
  return rc;
}

int tk__sq_operator(tk_store *s, tk__operator_action action, int64_t task_id, const char *step,
                    int64_t now, tk__effects *fx, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(fx, 0, sizeof *fx);
  char task_state[24], step_state[24] = "";
  int64_t step_id = 0, template_id = 0;
  int idx = 0, rc;
  if ((rc = tk__sq_begin(q, err))) return rc;
  rc = find_step(q, task_id, action == TK__OP_CANCEL ? NULL : step, task_state, &step_id,
                 step_state, &template_id, &idx, err);
  if (!rc && action != TK__OP_CANCEL && strcmp(task_state, TK__TASK_CANCELLED) == 0)
    rc = tk_err_set(err, TK_ESTATE, "task %lld is cancelled", (long long)task_id);
  if (!rc) {
    switch (action) {
    case TK__OP_RETRY: rc = op_retry(q, task_id, step, step_id, step_state, now, fx, err); break;
    case TK__OP_RESOLVE:
      rc = op_resolve(q, task_id, step, step_id, step_state, template_id, idx, now, fx, err);
      break;
    case TK__OP_CANCEL: rc = op_cancel(q, task_id, task_state, now, fx, err); break;
    }
  }
  if (!rc) rc = tk__sq_commit(q, err);
  if (rc) tk__sq_rollback(q);
  return rc;
}

/* The rows of a query on one task (?1: its id), each an object of `keys`
 * (one per column, in order), into *out. */
static int task_rows(tk__sqlite *q, const char *what, const char *sql, int64_t task_id,
                     const char *const *keys, int nkeys, json_t **out, tk_err *err) {
  sqlite3_stmt *st;
  *out = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL)) return tk__sq_fail(q, what, err);
  sqlite3_bind_int64(st, 1, task_id);
  json_t *rows = json_array();
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    json_t *row = json_object();
    for (int k = 0; k < nkeys; k++) json_object_set_new(row, keys[k], column_json(st, k));
    json_array_append_new(rows, row);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    json_decref(rows);
    return tk__sq_fail(q, what, err);
  }
  *out = rows;
  return 0;
}

/* The step of `steps` that row belongs to (its "step_id", which is taken
 * out of the row), or NULL. */
static json_t *take_step(json_t *steps, json_t *row) {
  json_int_t step_id = json_integer_value(json_object_get(row, "step_id"));
  json_object_del(row, "step_id");
  size_t i;
  json_t *step;
  json_array_foreach(steps, i, step) if (json_integer_value(json_object_get(step, "id")) == step_id)
      return step;
  return NULL;
}

/* Each step's claims, oldest first, as "history": [{attempt, owner,
 * started_at, finished_at, outcome, error, delay_ms, delay_source,
 * next_run_at}]. */
static int attempt_history(tk__sqlite *q, int64_t task_id, json_t *steps, tk_err *err) {
  static const char *const keys[] = {"step_id",  "attempt", "owner",    "started_at",
                                     "finished_at", "outcome", "error", "delay_ms",
                                     "delay_source", "next_run_at"};
  json_t *rows;
  int rc = task_rows(q, "attempt history",
                     "SELECT a.step_id, a.attempt, a.owner, a.started_at, a.finished_at,"
                     " a.outcome, a.error, a.delay_ms, a.delay_source, a.next_run_at"
                     " FROM attempts a JOIN steps s ON s.id = a.step_id"
                     " WHERE s.task_id = ?1 ORDER BY a.id",
                     task_id, keys, 10, &rows, err);
  if (rc) return rc;
  size_t i;
  json_t *step, *row;
  json_array_foreach(steps, i, step) json_object_set_new(step, "history", json_array());
  json_array_foreach(rows, i, row) {
    step = take_step(steps, row);
    if (step) json_array_append(json_object_get(step, "history"), row);
  }
  json_decref(rows);
  return 0;
}

/* Each batch step's items (DESIGN §9) as "items": {total, pending, acked,
 * gave_up, given_up: [{key, attempts, last_error}]}: the counts, and the
 * first 100 items that gave up, in submission order (a step may hold
 * 100,000). Other steps get no "items". */
static int batch_items(tk__sqlite *q, int64_t task_id, json_t *steps, tk_err *err) {
  static const char *const count_keys[] = {"step_id", "state", "n"};
  static const char *const gave_up_keys[] = {"step_id", "key", "attempts", "last_error"};
  json_t *counts, *gave_up;
  /* Every batch step has a row, counted or not (an empty list of items). */
  int rc = task_rows(q, "batch items",
                     "SELECT b.step_id, i.state, COUNT(i.step_id) FROM batch_steps b"
                     " JOIN steps s ON s.id = b.step_id"
                     " LEFT JOIN items i ON i.step_id = b.step_id"
                     " WHERE s.task_id = ?1 GROUP BY b.step_id, i.state",
                     task_id, count_keys, 3, &counts, err);
  if (rc) return rc;
  rc = task_rows(q, "batch items",
                 "SELECT step_id, key, attempts, last_error FROM (SELECT i.step_id, i.key,"
                 " i.attempts, i.last_error, i.seq, ROW_NUMBER() OVER (PARTITION BY i.step_id"
                 " ORDER BY i.seq) AS nth FROM items i JOIN steps s ON s.id = i.step_id"
                 " WHERE s.task_id = ?1 AND i.state = 'gave_up')"
                 " WHERE nth <= 100 ORDER BY step_id, seq",
                 task_id, gave_up_keys, 4, &gave_up, err);
  if (rc) {
    json_decref(counts);
    return rc;
  }
  size_t k;
  json_t *row, *step;
  json_array_foreach(counts, k, row) {
    const char *state = json_string_value(json_object_get(row, "state"));
    json_int_t n = json_integer_value(json_object_get(row, "n"));
    if ((step = take_step(steps, row)) == NULL) continue;
    json_t *items = json_object_get(step, "items");
    if (items == NULL) {
      items = json_pack("{s:i, s:i, s:i, s:i, s:[]}", "total", 0, "pending", 0, "acked", 0,
                        "gave_up", 0, "given_up");
      json_object_set_new(step, "items", items);
    }
    if (state == NULL) continue; /* no items at all */
    json_object_set_new(items, state, json_integer(n));
    json_object_set_new(items, "total",
                        json_integer(json_integer_value(json_object_get(items, "total")) + n));
  }
  json_array_foreach(gave_up, k, row) {
    json_t *list = json_object_get(json_object_get(take_step(steps, row), "items"), "given_up");
    if (list) json_array_append(list, row);
  }
  json_decref(counts);
  json_decref(gave_up);
  return 0;
}

/* The task's audit trail, oldest first, as "transitions": [{at, step
 * (null for the task itself), from, to, reason, attempt}], a range of the
 * transitions_task index. */
static int transition_history(tk__sqlite *q, int64_t task_id, json_t *task, tk_err *err) {
  static const char *const keys[] = {"at", "step", "from", "to", "reason", "attempt"};
  json_t *rows;
  int rc = task_rows(q, "transitions",
                     "SELECT tr.at, s.name, tr.from_state, tr.to_state, tr.reason, tr.attempt"
                     " FROM transitions tr LEFT JOIN steps s ON s.id = tr.step_id"
                     " WHERE tr.task_id = ?1 ORDER BY tr.id",
                     task_id, keys, 6, &rows, err);
  if (rc == 0) json_object_set_new(task, "transitions", rows);
  return rc;
}

int tk__sq_task_show(tk_store *s, int64_t task_id, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc;
  sqlite3_stmt *st;
  *out = NULL;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT t.id, t.state, t.identity, t.created_at, t.updated_at,"
                         " t.finished_at, t.steps_total, t.steps_done, t.steps_error,"
                         " tp.namespace, tp.name, tp.version, t.context, tp.definition"
                         " FROM tasks t JOIN templates tp ON tp.id = t.template_id"
                         " WHERE t.id = ?",
                         -1, &st, NULL))
    return tk__sq_fail(q, "show task", err);
  sqlite3_bind_int64(st, 1, task_id);
  int found;
  if ((rc = tk__sq_row(q, st, "show task", &found, err)) || !found) {
    sqlite3_finalize(st);
    return rc ? rc : tk_err_set(err, TK_ENOENT, "no task %lld", (long long)task_id);
  }
  static const char *const task_keys[] = {"id", "state", "identity", "created_at", "updated_at",
                                          "finished_at", "steps_total", "steps_done",
                                          "steps_error"};
  json_t *task = json_object();
  for (int i = 0; i < 9; i++) json_object_set_new(task, task_keys[i], column_json(st, i));
  json_object_set_new(task, "template",
                      json_pack("{s:s, s:s, s:s}", "namespace", tk__sq_text(st, 9), "name",
                                tk__sq_text(st, 10), "version", tk__sq_text(st, 11)));
  json_object_set_new(task, "context", column_parsed(st, 12));
  json_t *def = column_parsed(st, 13);
  sqlite3_finalize(st);

  if (sqlite3_prepare_v2(q->db,
                         "SELECT name, state, attempts, max_attempts, retryable, backoff,"
                         " parents_remaining, run_at, lease_owner, lease_expires_at,"
                         " last_delay_ms, last_error, results, id FROM steps WHERE task_id = ?"
                         " ORDER BY idx",
                         -1, &st, NULL)) {
    json_decref(task);
    json_decref(def);
    return tk__sq_fail(q, "show steps", err);
  }
  sqlite3_bind_int64(st, 1, task_id);
  static const char *const step_keys[] = {"name", "state", "attempts", "max_attempts",
                                          "retryable", "backoff", "parents_remaining", "run_at",
                                          "lease_owner", "lease_expires_at", "last_delay_ms",
                                          "last_error"};
  json_t *steps = json_array();
  json_t *def_steps = json_object_get(def, "steps");
  size_t i = 0;
  for (; (rc = sqlite3_step(st)) == SQLITE_ROW; i++) {
    json_t *step = json_object();
    for (int k = 0; k < 12; k++) json_object_set_new(step, step_keys[k], column_json(st, k));
    json_object_set_new(step, "retryable", json_boolean(sqlite3_column_int(st, 4)));
    json_object_set_new(step, "results", column_parsed(st, 12));
    json_object_set_new(step, "id", column_json(st, 13));
    json_t *deps = json_object_get(json_array_get(def_steps, i), "depends_on");
    json_object_set_new(step, "depends_on", deps ? json_incref(deps) : json_array());
    json_array_append_new(steps, step);
  }
  rc = tk__sq_rows_end(q, rc, "show steps", err);
  sqlite3_finalize(st);
  json_decref(def);
  json_object_set_new(task, "steps", steps);
  if (rc) {
    json_decref(task);
    return rc;
  }
  if ((rc = attempt_history(q, task_id, steps, err)) ||
      (rc = batch_items(q, task_id, steps, err)) ||
      (rc = transition_history(q, task_id, task, err))) {
    json_decref(task);
    return rc;
  }
  *out = task;
  return 0;
}

int tk__sq_status(tk_store *s, int64_t now, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  json_t *tasks = json_object(), *steps = json_object();
  if (sqlite3_prepare_v2(q->db, "SELECT state, COUNT(*) FROM tasks GROUP BY state", -1, &st,
                         NULL))
    goto fail;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    json_object_set_new(tasks, tk__sq_text(st, 0), column_json(st, 1));
  if (rc != SQLITE_DONE) goto fail_stmt;
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(q->db, "SELECT state, COUNT(*) FROM steps GROUP BY state", -1, &st,
                         NULL))
    goto fail;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    json_object_set_new(steps, tk__sq_text(st, 0), column_json(st, 1));
  if (rc != SQLITE_DONE) goto fail_stmt;
  sqlite3_finalize(st);
  int64_t ready = 0;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT (SELECT COUNT(*) FROM steps INDEXED BY steps_fresh"
                         " WHERE state = 'pending' AND parents_remaining = 0 AND run_at <= ?1)"
                         " + (SELECT COUNT(*) FROM steps INDEXED BY steps_retry_due"
                         " WHERE state = 'waiting_for_retry' AND run_at <= ?1)",
                         -1, &st, NULL))
    goto fail;
  sqlite3_bind_int64(st, 1, now);
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) goto fail_stmt;
  ready = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  int64_t due = INT64_MAX, lease = INT64_MAX;
  rc = tk__sq_next_due(s, &due, &lease, err);
  if (lease < due) due = lease;
  if (rc) {
    json_decref(tasks);
    json_decref(steps);
    return rc;
  }
  json_t *counters = json_object();
  if (sqlite3_prepare_v2(q->db, "SELECT name, value FROM counters ORDER BY name", -1, &st, NULL)) {
    json_decref(counters);
    goto fail;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    json_object_set_new(counters, tk__sq_text(st, 0), column_json(st, 1));
  if (rc != SQLITE_DONE) {
    json_decref(counters);
    goto fail_stmt;
  }
  sqlite3_finalize(st);
  *out = json_pack("{s:o, s:o, s:I, s:o, s:o}", "tasks", tasks, "steps", steps, "ready_now",
                   (json_int_t)ready, "next_due_at",
                   due == INT64_MAX ? json_null() : json_integer((json_int_t)due), "counters",
                   counters);
  return 0;
fail_stmt:
  rc = tk__sq_fail(q, "status", err);
  sqlite3_finalize(st);
  json_decref(tasks);
  json_decref(steps);
  return rc;
fail:
  json_decref(tasks);
  json_decref(steps);
  return tk__sq_fail(q, "status", err);
}
