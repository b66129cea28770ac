/* The SQLite backend's side of decisions and map (store/flow.h): skipping,
 * convergence, creating a map's instances and settling a map, inside the
 * transaction of the outcome or operator action that caused them. Only
 * templates with a decision or a map come here; the others keep the plain
 * release of sqlite_steps.c. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/flow.h"

/* One flow change in progress: its task, and what it adds to the task's
 * counters (written once, at the end). */
typedef struct flow_run {
  tk__sqlite *q;
  const tk__flow *f;
  int64_t task_id, now;
  int released; /* steps that became ready, instances included */
  int done, errors;
  tk_err *err;
} flow_run;

static int release(flow_run *r, int child, int live);
static int skip(flow_run *r, int idx, const char *reason);
static int release_children(flow_run *r, int idx, const unsigned char *chosen);

/* The cached statement `id` of sql with ?1 = the task and ?2 = a step
 * position, as many of them as it uses. NULL (r->err set) on failure.
 * An instance's outcome comes here once per instance: preparing anew
 * each time was most of a map's cost. */
static sqlite3_stmt *prepare(flow_run *r, int id, const char *sql, int idx) {
  sqlite3_stmt *st = tk__sq_stmt(r->q, id, sql, r->err);
  if (st == NULL) return NULL;
  sqlite3_bind_int64(st, 1, r->task_id);
  if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int(st, 2, idx);
  return st;
}

/* Step st to its end (no rows wanted). */
static int run(flow_run *r, sqlite3_stmt *st) {
  if (st == NULL) return TK_ESTORE;
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : tk__sq_fail(r->q, "flow", r->err);
}

/* Step st for its first row: *found 1 and the row left for the caller to
 * read (then sqlite3_reset), or *found 0 and st reset. */
static int first_row(flow_run *r, sqlite3_stmt *st, int *found) {
  *found = 0;
  if (st == NULL) return TK_ESTORE;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *found = 1;
    return 0;
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : tk__sq_fail(r->q, "flow", r->err);
}

/* Move step idx from `from` to `to` if it is in `from` (setting results
 * and last_error as given, NULL keeping them), with a transition for
 * `reason`. *moved (may be NULL) says whether it was. */
static int move(flow_run *r, int idx, const char *from, const char *to, const char *results,
                const char *error, const char *reason, int *moved) {
  sqlite3_stmt *st = prepare(r,
                             SQ_FLOW_MOVE,
                             "UPDATE steps SET state = ?3, results = COALESCE(?4, results),"
                             " last_error = CASE WHEN ?6 THEN ?5 ELSE last_error END,"
                             " lease_owner = NULL, lease_expires_at = NULL"
                             " WHERE task_id = ?1 AND idx = ?2 AND state = ?7 RETURNING id",
                             idx);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 3, to, -1, SQLITE_STATIC);
  if (results) sqlite3_bind_text(st, 4, results, -1, SQLITE_STATIC);
  if (error) sqlite3_bind_text(st, 5, error, -1, SQLITE_STATIC);
  /* A step leaving error for anything but error forgets its error. */
  sqlite3_bind_int(st, 6, error != NULL || strcmp(to, TK__STEP_ERROR) != 0);
  sqlite3_bind_text(st, 7, from, -1, SQLITE_STATIC);
  int found, rc = first_row(r, st, &found);
  if (rc) return rc;
  if (moved) *moved = found;
  if (!found) return 0;
  int64_t step_id = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return tk__sq_transition(r->q, r->task_id, step_id, from, to, r->now, reason, 0, r->err);
}

/* The results of step idx (malloc'd text) into *out, NULL for none. */
static int results_of(flow_run *r, int idx, char **out) {
  *out = NULL;
  sqlite3_stmt *st = prepare(r, SQ_FLOW_RESULTS,
      "SELECT results FROM steps WHERE task_id = ?1 AND idx = ?2", idx);
  int found, rc = first_row(r, st, &found);
  if (rc || !found) return rc;
  const char *text = tk__sq_text(st, 0);
  if (text && (*out = strdup(text)) == NULL)
    rc = tk_err_set(r->err, TK_ENOMEM, "out of memory reading results");
  sqlite3_reset(st);
  return rc;
}

/* Map step m has become ready: create its instances, one per element,
 * or finish it at once for none or for a value it cannot map. */
static int expand(flow_run *r, int m) {
  const tk__flow_step *fs = &r->f->steps[m];
  char *parent = NULL, why[320];
  json_t *elements = NULL;
  int rc = results_of(r, fs->map_parent, &parent);
  if (rc) return rc;
  int bad = tk__flow_map_elements(r->f, m, parent, &elements, why, sizeof why);
  free(parent);
  if (bad == TK_ENOMEM) return tk_err_set(r->err, TK_ENOMEM, "%s", why);
  if (bad) {
    const char *reason = bad == TK_ERANGE ? TK__REASON_MAP_TOO_WIDE : TK__REASON_MAP_BAD_VALUE;
    int moved;
    rc = move(r, m, TK__STEP_PENDING, TK__STEP_ERROR, NULL, why, reason, &moved);
    r->errors += moved;
    return rc;
  }
  size_t n = json_array_size(elements);
  char reason[64];
  snprintf(reason, sizeof reason, TK__REASON_MAPPED_FMT, (long long)n);
  if (n == 0) {
    json_decref(elements);
    int moved;
    rc = move(r, m, TK__STEP_PENDING, TK__STEP_COMPLETE, "[]", NULL, reason, &moved);
    r->done += moved;
    return rc || !moved ? rc : release_children(r, m, NULL);
  }
  char *text = json_dumps(elements, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(elements);
  if (text == NULL) return tk_err_set(r->err, TK_ENOMEM, "out of memory mapping %s", fs->name);
  /* Every instance in one statement, element by element from the JSON
   * array itself: json_each gives a string unquoted and true as 1, so
   * each element is written back as JSON by its type. Instances take idx
   * values past every step of the task. */
  sqlite3_stmt *st = prepare(
      r, SQ_FLOW_EXPAND,
      "INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"
      " parents_remaining, run_at, map_idx, item_index, item, worker_queue, queue, priority)"
      " SELECT ?1, b.top + 1 + j.key, m.name || '[' || j.key || ']', 'pending', m.max_attempts,"
      " m.retryable, m.backoff, 0, ?3, ?2, j.key,"
      " CASE j.type WHEN 'text' THEN json_quote(j.value) WHEN 'true' THEN 'true'"
      " WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' ELSE j.value END, m.worker_queue,"
      " m.queue, m.priority"
      " FROM steps m, (SELECT MAX(idx) AS top FROM steps WHERE task_id = ?1) b, json_each(?4) j"
      " WHERE m.task_id = ?1 AND m.idx = ?2 AND m.state = 'pending' ORDER BY j.key",
      m);
  if (st == NULL) {
    free(text);
    return TK_ESTORE;
  }
  sqlite3_bind_int64(st, 3, r->now);
  sqlite3_bind_text(st, 4, text, -1, free);
  if ((rc = run(r, st))) return rc;
  int made = sqlite3_changes(r->q->db);
  if (made == 0) return 0; /* not pending: nothing to expand */
  if ((size_t)made != n)
    return tk_err_set(r->err, TK_ESTORE, "map %s: %d of %zu instances created", fs->name, made, n);
  r->released += made;
  st = prepare(r, SQ_FLOW_MAP_LEFT,
      "UPDATE steps SET parents_remaining = ?3 WHERE task_id = ?1 AND idx = ?2", m);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 3, (sqlite3_int64)n);
  if ((rc = run(r, st))) return rc;
  return move(r, m, TK__STEP_PENDING, TK__STEP_MAPPED, NULL, NULL, reason, NULL);
}

/* Whether a parent of step c is complete or resolved (a live parent). */
static int live_parent(flow_run *r, int c, int *yes) {
  *yes = 0;
  const tk__flow_step *fs = &r->f->steps[c];
  for (int i = 0; i < fs->nparents && !*yes; i++) {
    sqlite3_stmt *st = prepare(r,
                               SQ_FLOW_LIVE_PARENT,
                               "SELECT 1 FROM steps WHERE task_id = ?1 AND idx = ?2"
                               " AND state IN ('complete', 'resolved_manually')",
                               fs->parents[i]);
    int rc = first_row(r, st, yes);
    if (rc) return rc;
    if (*yes) sqlite3_reset(st);
  }
  return 0;
}

/* One parent of pending step `child` finished: complete or resolved
 * (live) or skipped. The last one makes it ready when any parent was live
 * (a map then expands), and skips it when none was. */
static int release(flow_run *r, int child, int live) {
  sqlite3_stmt *st = prepare(r,
                             SQ_FLOW_RELEASE,
                             "UPDATE steps SET parents_remaining = parents_remaining - 1"
                             " WHERE task_id = ?1 AND idx = ?2 AND state = 'pending'"
                             " AND parents_remaining > 0 RETURNING parents_remaining",
                             child);
  int found, rc = first_row(r, st, &found);
  if (rc || !found) return rc;
  int left = sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  if (left > 0) return 0;
  if (!live && (rc = live_parent(r, child, &live))) return rc;
  if (!live) return skip(r, child, TK__REASON_ALL_SKIPPED);
  st = prepare(r, SQ_FLOW_RUN_AT,
      "UPDATE steps SET run_at = ?3 WHERE task_id = ?1 AND idx = ?2", child);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 3, r->now);
  if ((rc = run(r, st))) return rc;
  if (tk__flow_is_map(r->f, child)) return expand(r, child);
  r->released++;
  return 0;
}

/* Skip pending step idx for `reason`, and release its children as
 * skipped. */
static int skip(flow_run *r, int idx, const char *reason) {
  int moved, rc = move(r, idx, TK__STEP_PENDING, TK__STEP_SKIPPED, NULL, NULL, reason, &moved);
  if (rc || !moved) return rc;
  r->done++;
  const tk__flow_step *fs = &r->f->steps[idx];
  for (int i = 0; i < fs->nchildren && rc == 0; i++) rc = release(r, fs->children[i], 0);
  return rc;
}

/* Release the children of step idx, which counts as complete: a
 * decision's branches not in chosen (NULL: all chosen) are skipped. */
static int release_children(flow_run *r, int idx, const unsigned char *chosen) {
  const tk__flow_step *fs = &r->f->steps[idx];
  char reason[160];
  snprintf(reason, sizeof reason, TK__REASON_NOT_CHOSEN_FMT, fs->name);
  int rc = 0;
  for (int i = 0; i < fs->nchildren && rc == 0; i++) {
    int c = fs->children[i], branch = 0;
    for (int k = 0; k < fs->ndecides && !branch; k++) branch = fs->decides[k] == c;
    if (branch && chosen != NULL && !chosen[c]) rc = skip(r, c, reason);
    else rc = release(r, c, 1);
  }
  return rc;
}

/* Settle map step m from its instances' states (flow.h). */
static int map_settle(flow_run *r, int m) {
  sqlite3_stmt *st = prepare(r, SQ_FLOW_MAP_STATE,
      "SELECT state FROM steps WHERE task_id = ?1 AND idx = ?2", m);
  int found, rc = first_row(r, st, &found);
  if (rc || !found) return rc ? rc : tk_err_set(r->err, TK_ESTORE, "no map step %d", m);
  char state[TK__STATE_MAX];
  snprintf(state, sizeof state, "%s", tk__sq_text(st, 0));
  sqlite3_reset(st);
  int mapped = strcmp(state, TK__STEP_MAPPED) == 0, failed_map = strcmp(state, TK__STEP_ERROR) == 0;
  if (!mapped && !failed_map) return 0;
  st = prepare(r,
               SQ_FLOW_MAP_COUNT,
               "SELECT count(*), COALESCE(sum(state IN ('pending', 'in_progress',"
               " 'waiting_for_retry')), 0), COALESCE(sum(state = 'error'), 0)"
               " FROM steps WHERE task_id = ?1 AND map_idx = ?2",
               m);
  if ((rc = first_row(r, st, &found))) return rc;
  int64_t total = sqlite3_column_int64(st, 0), open = sqlite3_column_int64(st, 1),
          failed = sqlite3_column_int64(st, 2);
  sqlite3_reset(st);
  if (total == 0) return 0; /* failed before it had instances: stays so */
  st = prepare(r, SQ_FLOW_MAP_LEFT,
      "UPDATE steps SET parents_remaining = ?3 WHERE task_id = ?1 AND idx = ?2", m);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 3, open);
  if ((rc = run(r, st))) return rc;
  if (open > 0) {
    if (!failed_map) return 0;
    r->errors--;
    return move(r, m, TK__STEP_ERROR, TK__STEP_MAPPED, NULL, NULL, "operator retry", NULL);
  }
  char why[160];
  if (!tk__flow_map_verdict(r->f, m, total, failed, why, sizeof why)) {
    if (failed_map) return 0;
    r->errors++;
    return move(r, m, TK__STEP_MAPPED, TK__STEP_ERROR, NULL, why, TK__REASON_MAP_FAILED, NULL);
  }
  /* The instances' results in element order, null for one without. */
  st = prepare(r,
               SQ_FLOW_MAP_RESULTS,
               "SELECT json_group_array(json(COALESCE(results, 'null'))) FROM (SELECT results"
               " FROM steps WHERE task_id = ?1 AND map_idx = ?2 ORDER BY item_index)",
               m);
  if ((rc = first_row(r, st, &found))) return rc;
  char *results = strdup(tk__sq_text(st, 0) ? tk__sq_text(st, 0) : "[]");
  sqlite3_reset(st);
  if (results == NULL) return tk_err_set(r->err, TK_ENOMEM, "out of memory gathering a map");
  if (failed_map) r->errors--;
  r->done++;
  rc = move(r, m, state, TK__STEP_COMPLETE, results, NULL, TK__REASON_MAP_DONE, NULL);
  free(results);
  return rc ? rc : release_children(r, m, NULL);
}

/* Write what r added to its task's counters. */
static int counters(flow_run *r) {
  if (r->done == 0 && r->errors == 0) return 0;
  sqlite3_stmt *st = prepare(r,
                             SQ_FLOW_COUNTERS,
                             "UPDATE tasks SET steps_done = steps_done + ?3,"
                             " steps_error = steps_error + ?4, updated_at = ?5 WHERE id = ?1",
                             0);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int(st, 3, r->done);
  sqlite3_bind_int(st, 4, r->errors);
  sqlite3_bind_int64(st, 5, r->now);
  return run(r, st);
}

int tk__sq_flow_release(tk__sqlite *q, const tk__flow *f, int64_t task_id, int idx,
                        const char *results, int resolving, int64_t now, int *released,
                        tk_err *err) {
  flow_run r = {.q = q, .f = f, .task_id = task_id, .now = now, .err = err};
  unsigned char *chosen = NULL;
  int rc = 0;
  if (tk__flow_is_decision(f, idx)) {
    /* A resolved decision made no choice: none of its branches runs. */
    chosen = calloc((size_t)f->nsteps + 1, 1);
    char why[320];
    if (chosen == NULL) rc = tk_err_set(err, TK_ENOMEM, "out of memory");
    else if (!resolving && tk__flow_decide(f, idx, results, chosen, why, sizeof why) != 0)
      rc = tk_err_set(err, TK_ESTORE, "%s", why); /* the engine refuses these first */
  }
  if (rc == 0) rc = release_children(&r, idx, chosen);
  free(chosen);
  if (rc == 0) rc = counters(&r);
  if (released) *released = r.released;
  return rc;
}

int tk__sq_flow_instance_done(tk__sqlite *q, const tk__flow *f, int64_t task_id, int map_idx,
                              int64_t now, int *released, int *settle, tk_err *err) {
  flow_run r = {.q = q, .f = f, .task_id = task_id, .now = now, .err = err};
  *settle = 0;
  /* An UPDATE, then a SELECT when it changed the row: RETURNING costs
   * SQLite an ephemeral table per call, and this runs per instance. */
  sqlite3_stmt *st = prepare(&r, SQ_FLOW_INSTANCE_DONE,
                             "UPDATE steps SET parents_remaining = parents_remaining - 1"
                             " WHERE task_id = ?1 AND idx = ?2 AND state = 'mapped'"
                             " AND parents_remaining > 0",
                             map_idx);
  int rc = run(&r, st), found;
  if (rc || sqlite3_changes(q->db) == 0) return rc;
  st = prepare(&r, SQ_FLOW_INSTANCE_LEFT,
               "SELECT parents_remaining FROM steps WHERE task_id = ?1 AND idx = ?2", map_idx);
  if ((rc = first_row(&r, st, &found)) || !found) return rc;
  int left = sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  if (left > 0) return 0;
  if ((rc = map_settle(&r, map_idx)) == 0) rc = counters(&r);
  if (released) *released = r.released;
  *settle = 1;
  return rc;
}

int tk__sq_flow_map_settle(tk__sqlite *q, const tk__flow *f, int64_t task_id, int map_idx,
                           int64_t now, int *released, tk_err *err) {
  flow_run r = {.q = q, .f = f, .task_id = task_id, .now = now, .err = err};
  int rc = map_settle(&r, map_idx);
  if (rc == 0) rc = counters(&r);
  if (released) *released = r.released;
  return rc;
}
