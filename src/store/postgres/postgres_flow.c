/* Decisions and map on PostgreSQL (DESIGN §17; the rules are store/flow.h's):
 * each template's flow read once per connection, and the flow's work
 * inside a transaction that holds the task's lock: skipping branches and
 * the steps that can then never run, releasing children under the
 * convergence rule, expanding a map into its instances in one statement,
 * and settling a map from its instances' states.
 *
 * None of this is on the path of a template without decisions or maps:
 * its outcomes release their children in the pipelined outcome statement
 * (postgres_record.c). Here each step is one statement and one round trip,
 * taken only where the flow does something: a decision completes, a step
 * with a map child completes, the last instance of a map finishes, an
 * operator acts. Every statement reaches rows by (task_id, idx) or by the
 * instances' index (0007_decisions_and_map.sql). */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/flow.h"

#define Q TK__PG_Q

/* ---- The flows of templates, kept per connection ---- */

/* The definition and the edges (parent,child,parent,child...) of a template. */
static const char TEMPLATE_SQL[] =
    "SELECT definition, (SELECT string_agg(e.parent_idx || ',' || e.child_idx, ','"
    " ORDER BY e.parent_idx, e.child_idx) FROM template_edges e"
    " WHERE e.template_id = $1::bigint) FROM templates WHERE id = $1";

/* The pairs of "p,c,p,c" into a malloc'd array (*n pairs); -1: no memory. */
static int parse_edges(const char *text, int **edges, int *n) {
  *edges = NULL;
  *n = 0;
  int count = 0, cap = 0;
  for (const char *c = text; c && *c; c++) count += *c == ',';
  cap = text && *text ? count + 1 : 0;
  if (cap == 0) return 0;
  if ((*edges = malloc((size_t)cap * sizeof **edges)) == NULL) return -1;
  const char *c = text;
  for (int i = 0; i < cap; i++) {
    char *end;
    (*edges)[i] = (int)strtol(c, &end, 10);
    c = *end == ',' ? end + 1 : end;
  }
  *n = cap / 2;
  return 0;
}

int tk__pg_flow_get(tk__pg_pipe *p, int64_t template_id, const tk__flow **out, tk_err *err) {
  tk__pg *pg = p->pg;
  *out = NULL;
  for (int i = 0; i < pg->nflows; i++)
    if (pg->flows[i]->template_id == template_id) {
      *out = pg->flows[i];
      return 0;
    }
  tk__pg_pipe_reset(p);
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, template_id);
  int slot = tk__pg_pipe_stmt(p, PG_FLOW_TEMPLATE, TEMPLATE_SQL, a.n, a.v);
  int rc = tk__pg_pipe_run(p, "template flow", err);
  if (rc) return rc;
  PGresult *r = tk__pg_result(p, slot);
  if (PQntuples(r) != 1)
    return tk_err_set(err, TK_ENOENT, "no template with id %lld", (long long)template_id);
  int *edges, nedges;
  if (parse_edges(tk__pg_text(r, 0, 1), &edges, &nedges) != 0)
    return tk__pg_oom(err, "template flow");
  tk__flow *f;
  rc = tk__flow_read(template_id, tk__pg_text(r, 0, 0), edges, nedges, &f, err);
  free(edges);
  tk__pg_pipe_reset(p);
  if (rc) return rc;
  if (tk__grow((void **)&pg->flows, &pg->flows_cap, pg->nflows + 1, sizeof *pg->flows) != 0) {
    tk__flow_free(f);
    return tk__pg_oom(err, "template flow");
  }
  pg->flows[pg->nflows++] = f;
  *out = f;
  return 0;
}

void tk__pg_flows_free(tk__pg *pg) {
  for (int i = 0; i < pg->nflows; i++) tk__flow_free(pg->flows[i]);
  free(pg->flows);
  pg->flows = NULL;
  pg->nflows = pg->flows_cap = 0;
}

/* ---- Statements of the flow ---- */

/* A pending step skipped, with its transition. $1 task, $2 idx, $3 now,
 * $4 reason. */
static const char SKIP_SQL[] =
    "WITH s AS (UPDATE steps SET state = " Q(TK__STEP_SKIPPED) " WHERE task_id = $1::bigint"
    " AND idx = $2::int AND state = " Q(TK__STEP_PENDING) " RETURNING id)"
    " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, " Q(TK__STEP_PENDING) ", " Q(TK__STEP_SKIPPED) ", $3::bigint, $4::text"
    " FROM s RETURNING step_id";

/* Children $2 (template positions) of task $1 each wait for one parent
 * fewer; one that waited for its last becomes due at $3. Each changed
 * child comes back with whether any of its parents (template $4) is
 * complete or resolved: with none, a child whose parents have all
 * finished is skipped instead of run. Steps already skipped are left
 * alone. */
static const char RELEASE_SQL[] =
    "UPDATE steps c SET parents_remaining = c.parents_remaining - 1,"
    " run_at = CASE WHEN c.parents_remaining = 1 THEN $3::bigint ELSE c.run_at END"
    " WHERE c.task_id = $1::bigint AND c.idx = ANY ($2::int[])"
    " AND c.state = " Q(TK__STEP_PENDING) " AND c.parents_remaining > 0"
    " RETURNING c.idx, c.parents_remaining, EXISTS (SELECT 1 FROM steps p"
    " WHERE p.task_id = c.task_id AND p.idx = ANY (ARRAY(SELECT e.parent_idx"
    " FROM template_edges e WHERE e.template_id = $4::bigint AND e.child_idx = c.idx))"
    " AND p.state IN (" Q(TK__STEP_COMPLETE) ", " Q(TK__STEP_RESOLVED) "))";

static const char RESULTS_SQL[] =
    "SELECT results FROM steps WHERE task_id = $1::bigint AND idx = $2::int";

/* A mapped step's countdown of unfinished instances (its own table,
 * 0008_map_countdowns.sql): set to n where `moved` (its expansion, or an
 * operator's action that leaves instances unfinished again), and dropped
 * when the map ends. Each the statement of a CTE. */
#define COUNTDOWN_SET(task, idx, n, moved)                                                 \
  "INSERT INTO map_countdowns (task_id, idx, remaining) SELECT " task ", " idx ", " n      \
  " WHERE " moved " ON CONFLICT (task_id, idx) DO UPDATE SET remaining = EXCLUDED.remaining"
#define COUNTDOWN_DROP(task, idx, moved)                                                   \
  "DELETE FROM map_countdowns WHERE task_id = " task " AND idx = " idx " AND " moved

/* A pending map step's instances, one per element of $5 (a JSON array),
 * in one statement: each a ready pending row with the map's retry
 * settings, idx past every step of the task, name NAME[i] (as
 * tk__flow_instance_name writes it), its element's position and text;
 * the map row moves to mapped and its countdown starts at $6 instances
 * unfinished (0008_map_countdowns.sql). $1 task, $2 the map's idx, $3 its
 * name, $4 now, $5 elements, $6 their count, $7 the reason. */
static const char EXPAND_SQL[] =
    "WITH m AS (SELECT id, max_attempts, retryable, backoff, worker_queue, queue, priority"
    " FROM steps"
    " WHERE task_id = $1::bigint AND idx = $2::int AND state = " Q(TK__STEP_PENDING) "),"
    " top AS (SELECT max(idx) AS top FROM steps WHERE task_id = $1),"
    " ins AS (INSERT INTO steps (task_id, idx, name, state, max_attempts, retryable, backoff,"
    " parents_remaining, run_at, map_idx, item_index, item, worker_queue, queue, priority)"
    " SELECT $1, top.top + e.ord, $3::text || '[' || (e.ord - 1) || ']', " Q(TK__STEP_PENDING)
    ", m.max_attempts, m.retryable, m.backoff, 0, $4::bigint, $2, e.ord - 1, e.value::text,"
    " m.worker_queue, m.queue, m.priority"
    " FROM m, top, json_array_elements($5::json) WITH ORDINALITY AS e(value, ord)"
    " RETURNING 1),"
    " upd AS (UPDATE steps s SET state = " Q(TK__STEP_MAPPED) ", parents_remaining = 0"
    " FROM m WHERE s.id = m.id RETURNING s.id),"
    " cd AS (" COUNTDOWN_SET("$1", "$2", "$6::int", "EXISTS (SELECT 1 FROM upd)") "),"
    " tr AS (INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, " Q(TK__STEP_PENDING) ", " Q(TK__STEP_MAPPED) ", $4, $7::text FROM upd)"
    " SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd)";

/* A map row ends without instances to collect (none at all, a failure,
 * or a failed map's message renewed): from state $8 to $3 with results
 * $4 and last_error $5, and a transition when the state changes. $1
 * task, $2 idx, $6 now, $7 reason. */
static const char MAP_END_SQL[] =
    "WITH u AS (UPDATE steps SET state = $3::text, results = $4::text, last_error = $5::text,"
    " parents_remaining = 0 WHERE task_id = $1::bigint AND idx = $2::int AND state = $8::text"
    " RETURNING id),"
    " tr AS (INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, $8, $3, $6::bigint, $7::text FROM u WHERE $8 <> $3),"
    " cd AS (" COUNTDOWN_DROP("$1", "$2", "EXISTS (SELECT 1 FROM u)") ")"
    " SELECT id FROM u";

/* The map row's state and its instances by state: unfinished, in error,
 * all. One range of steps_instances. $1 task, $2 the map's idx. */
static const char MAP_COUNT_SQL[] =
    "SELECT (SELECT state FROM steps WHERE task_id = $1::bigint AND idx = $2::int),"
    " count(*) FILTER (WHERE state IN (" Q(TK__STEP_PENDING) ", " Q(TK__STEP_IN_PROGRESS) ", "
    Q(TK__STEP_WAITING_FOR_RETRY) ")),"
    " count(*) FILTER (WHERE state = " Q(TK__STEP_ERROR) "), count(*)"
    " FROM steps WHERE task_id = $1 AND map_idx = $2";

/* A map complete: its results the array of its instances' results in
 * element order, null for one with none (in error, or resolved). From
 * state $5; $1 task, $2 idx, $3 now, $4 reason. */
static const char MAP_DONE_SQL[] =
    "WITH r AS (SELECT '[' || COALESCE(string_agg(COALESCE(results, 'null'), ','"
    " ORDER BY item_index), '') || ']' AS results FROM steps"
    " WHERE task_id = $1::bigint AND map_idx = $2::int),"
    " u AS (UPDATE steps s SET state = " Q(TK__STEP_COMPLETE) ", results = r.results,"
    " last_error = NULL, parents_remaining = 0 FROM r"
    " WHERE s.task_id = $1 AND s.idx = $2 AND s.state = $5::text RETURNING s.id),"
    " cd AS (" COUNTDOWN_DROP("$1", "$2", "EXISTS (SELECT 1 FROM u)") ")"
    " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, $5, " Q(TK__STEP_COMPLETE) ", $3::bigint, $4::text FROM u"
    " RETURNING step_id";

/* A map with instances unfinished again: mapped (from error: reopened,
 * with its transition), its countdown at $3 of them. $1 task, $2 idx, $4
 * now, $5 reason. Returns a row when it was reopened. */
static const char MAP_REOPEN_SQL[] =
    "WITH old AS (SELECT id, state FROM steps WHERE task_id = $1::bigint AND idx = $2::int"
    " AND state IN (" Q(TK__STEP_MAPPED) ", " Q(TK__STEP_ERROR) ")),"
    " u AS (UPDATE steps s SET state = " Q(TK__STEP_MAPPED) ", parents_remaining = 0,"
    " last_error = CASE WHEN old.state = " Q(TK__STEP_ERROR) " THEN NULL ELSE s.last_error END"
    " FROM old WHERE s.id = old.id RETURNING s.id, old.state),"
    " cd AS (" COUNTDOWN_SET("$1", "$2", "$3::int", "EXISTS (SELECT 1 FROM u)") ")"
    " INSERT INTO transitions (task_id, step_id, from_state, to_state, at, reason)"
    " SELECT $1, id, state, " Q(TK__STEP_MAPPED) ", $4::bigint, $5::text FROM u"
    " WHERE state <> " Q(TK__STEP_MAPPED) " RETURNING step_id";

static const char TASK_SQL[] =
    "SELECT state, steps_done, steps_total, steps_error FROM tasks WHERE id = $1::bigint";

/* Run one statement now; its result in *r (valid until the next call). */
static int run1(tk__pg_flow_run *x, int id, const char *sql, const tk__pg_args *a,
                PGresult **r) {
  tk__pg_pipe_reset(x->p);
  int slot = tk__pg_pipe_stmt(x->p, id, sql, a->n, a->v);
  int rc = tk__pg_pipe_run(x->p, "flow", x->err);
  *r = rc ? NULL : tk__pg_result(x->p, slot);
  if (rc == 0 && *r == NULL) rc = tk_err_set(x->err, TK_ESTORE, "postgres: flow: no result");
  return rc;
}

static int skip(tk__pg_flow_run *x, int idx, const char *reason);
static int expand(tk__pg_flow_run *x, int m);

/* The children in set[0..n) of a step that finished (complete, resolved or
 * skipped) wait for one parent fewer; those now waiting for none run,
 * expand (a map) or are skipped (no parent complete or resolved). */
static int release_set(tk__pg_flow_run *x, const int *set, int n) {
  if (n == 0) return 0;
  tk__buf b = {0};
  tk__pg_array_open(&b);
  for (int i = 0; i < n; i++) tk__pg_array_i64(&b, set[i]);
  const char *arr = tk__pg_array_close(&b);
  if (arr == NULL) {
    tk__buf_free(&b);
    return tk__pg_oom(x->err, "flow");
  }
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_text(&a, arr);
  tk__pg_arg_i64(&a, x->now);
  tk__pg_arg_i64(&a, x->f->template_id);
  PGresult *r;
  int rc = run1(x, PG_FLOW_RELEASE, RELEASE_SQL, &a, &r);
  tk__buf_free(&b);
  if (rc) return rc;
  /* Copied out: what follows runs statements of its own. */
  int rows = PQntuples(r), nready = 0;
  int *ready = malloc(((size_t)rows + 1) * 2 * sizeof *ready);
  if (ready == NULL) return tk__pg_oom(x->err, "flow");
  for (int i = 0; i < rows; i++) {
    if (tk__pg_i64(r, i, 1) != 0) continue;
    ready[2 * nready] = (int)tk__pg_i64(r, i, 0);
    ready[2 * nready++ + 1] = tk__pg_bool(r, i, 2);
  }
  for (int i = 0; rc == 0 && i < nready; i++) {
    int c = ready[2 * i], live = ready[2 * i + 1];
    if (!live) rc = skip(x, c, TK__REASON_ALL_SKIPPED);
    else if (tk__flow_is_map(x->f, c)) rc = expand(x, c);
    else x->released++;
  }
  free(ready);
  return rc;
}

/* Every child of step idx, as a finished parent. */
static int release_children(tk__pg_flow_run *x, int idx) {
  const tk__flow_step *st = &x->f->steps[idx];
  return release_set(x, st->children, st->nchildren);
}

/* Skip step idx if it is still pending, then its children see a skipped
 * parent. */
static int skip(tk__pg_flow_run *x, int idx, const char *reason) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, idx);
  tk__pg_arg_i64(&a, x->now);
  tk__pg_arg_text(&a, reason);
  PGresult *r;
  int rc = run1(x, PG_FLOW_SKIP, SKIP_SQL, &a, &r);
  if (rc || PQntuples(r) == 0) return rc;
  x->done++; /* a skipped step counts as finished */
  return release_children(x, idx);
}

/* Map row m ends without instances: state `to` from `from`. 1 when it
 * moved (or, from == to, was written), 0 when it was not in `from`. */
static int map_end(tk__pg_flow_run *x, int m, const char *from, const char *to,
                   const char *results, const char *why, const char *reason, int *moved) {
  char *tmp;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, m);
  tk__pg_arg_text(&a, to);
  tk__pg_arg_text(&a, results);
  tk__pg_arg_text(&a, tk__pg_utf8(why, &tmp));
  tk__pg_arg_i64(&a, x->now);
  tk__pg_arg_text(&a, reason);
  tk__pg_arg_text(&a, from);
  PGresult *r;
  int rc = run1(x, PG_FLOW_MAP_END, MAP_END_SQL, &a, &r);
  free(tmp);
  *moved = rc == 0 && PQntuples(r) > 0;
  return rc;
}

/* Map step m became ready: its elements from its parent's results, then
 * its instances, or [] at once for none, or a permanent failure. */
static int expand(tk__pg_flow_run *x, int m) {
  const tk__flow_step *st = &x->f->steps[m];
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, st->map_parent);
  PGresult *r;
  int rc = run1(x, PG_FLOW_RESULTS, RESULTS_SQL, &a, &r);
  if (rc) return rc;
  json_t *elements;
  char why[512];
  rc = tk__flow_map_elements(x->f, m, PQntuples(r) ? tk__pg_text(r, 0, 0) : NULL, &elements,
                             why, sizeof why);
  if (rc == TK_ENOMEM) return tk__pg_oom(x->err, "map");
  int moved;
  if (rc) {
    rc = map_end(x, m, TK__STEP_PENDING, TK__STEP_ERROR, NULL, why,
                 rc == TK_ERANGE ? TK__REASON_MAP_TOO_WIDE : TK__REASON_MAP_BAD_VALUE, &moved);
    if (rc == 0 && moved) x->errors++;
    return rc;
  }
  size_t n = json_array_size(elements);
  char reason[64];
  snprintf(reason, sizeof reason, TK__REASON_MAPPED_FMT, (long long)n);
  if (n == 0) {
    json_decref(elements);
    rc = map_end(x, m, TK__STEP_PENDING, TK__STEP_COMPLETE, "[]", NULL, reason, &moved);
    if (rc || !moved) return rc;
    x->done++;
    return release_children(x, m);
  }
  char *text = json_dumps(elements, JSON_COMPACT);
  json_decref(elements);
  if (text == NULL) return tk__pg_oom(x->err, "map");
  a.n = 0;
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, m);
  tk__pg_arg_text(&a, st->name);
  tk__pg_arg_i64(&a, x->now);
  tk__pg_arg_text(&a, text);
  tk__pg_arg_i64(&a, (int64_t)n);
  tk__pg_arg_text(&a, reason);
  rc = run1(x, PG_FLOW_EXPAND, EXPAND_SQL, &a, &r);
  free(text);
  /* Every instance is a step made ready, as on every backend. */
  if (rc == 0 && tk__pg_i64(r, 0, 1) == 1) x->released += (int)tk__pg_i64(r, 0, 0);
  return rc;
}

int tk__pg_flow_finished(tk__pg_flow_run *x, int idx, const char *results, int decided) {
  const tk__flow *f = x->f;
  const tk__flow_step *st = &f->steps[idx];
  if (st->ndecides == 0) return release_children(x, idx);
  unsigned char *chosen = calloc((size_t)f->nsteps + 1, 1);
  int *rest = malloc(((size_t)st->nchildren + 1) * sizeof *rest);
  if (chosen == NULL || rest == NULL) {
    free(chosen);
    free(rest);
    return tk__pg_oom(x->err, "decision");
  }
  char why[512];
  int rc = 0;
  /* The engine refused results that choose nothing valid before they got
   * here: refusing them now is the store's error. */
  if (decided && tk__flow_decide(f, idx, results, chosen, why, sizeof why) != 0)
    rc = tk_err_set(x->err, TK_ESTORE, "postgres: record outcome: %s", why);
  char reason[256];
  snprintf(reason, sizeof reason, TK__REASON_NOT_CHOSEN_FMT, st->name);
  for (int i = 0; rc == 0 && i < st->ndecides; i++)
    if (!chosen[st->decides[i]]) rc = skip(x, st->decides[i], reason);
  int nrest = 0;
  for (int i = 0; i < st->nchildren; i++) {
    int c = st->children[i], branch = 0;
    for (int j = 0; j < st->ndecides; j++) branch |= st->decides[j] == c;
    if (!branch || chosen[c]) rest[nrest++] = c;
  }
  if (rc == 0) rc = release_set(x, rest, nrest);
  free(chosen);
  free(rest);
  return rc;
}

int tk__pg_flow_map_settle(tk__pg_flow_run *x, int m) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, m);
  PGresult *r;
  int rc = run1(x, PG_FLOW_MAP_COUNT, MAP_COUNT_SQL, &a, &r);
  if (rc) return rc;
  char state[TK__STATE_MAX];
  tk__pg_copy(state, sizeof state, r, 0, 0);
  int64_t unfinished = tk__pg_i64(r, 0, 1), failed = tk__pg_i64(r, 0, 2);
  int64_t total = tk__pg_i64(r, 0, 3);
  int in_error = strcmp(state, TK__STEP_ERROR) == 0;
  if (!in_error && strcmp(state, TK__STEP_MAPPED) != 0) return 0; /* resolved, cancelled */
  if (unfinished > 0) {
    a.n = 0;
    tk__pg_arg_i64(&a, x->task_id);
    tk__pg_arg_i64(&a, m);
    tk__pg_arg_i64(&a, unfinished);
    tk__pg_arg_i64(&a, x->now);
    tk__pg_arg_text(&a, "operator retry");
    if ((rc = run1(x, PG_FLOW_MAP_REOPEN, MAP_REOPEN_SQL, &a, &r)) == 0 && PQntuples(r) > 0)
      x->errors--;
    return rc;
  }
  char why[512];
  int moved;
  if (!tk__flow_map_verdict(x->f, m, total, failed, why, sizeof why)) {
    rc = map_end(x, m, state, TK__STEP_ERROR, NULL, why, TK__REASON_MAP_FAILED, &moved);
    if (rc == 0 && moved && !in_error) x->errors++;
    return rc;
  }
  a.n = 0;
  tk__pg_arg_i64(&a, x->task_id);
  tk__pg_arg_i64(&a, m);
  tk__pg_arg_i64(&a, x->now);
  tk__pg_arg_text(&a, TK__REASON_MAP_DONE);
  tk__pg_arg_text(&a, state);
  if ((rc = run1(x, PG_FLOW_MAP_DONE, MAP_DONE_SQL, &a, &r)) != 0 || PQntuples(r) == 0)
    return rc;
  x->done++;
  if (in_error) x->errors--;
  return release_children(x, m);
}

int tk__pg_flow_task_counts(tk__pg_flow_run *x, char *state, size_t cap, tk__task_counts *c) {
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, x->task_id);
  PGresult *r;
  int rc = run1(x, PG_FLOW_TASK, TASK_SQL, &a, &r);
  if (rc) return rc;
  if (PQntuples(r) != 1)
    return tk_err_set(x->err, TK_ESTORE, "postgres: flow: no task %lld", (long long)x->task_id);
  tk__pg_copy(state, cap, r, 0, 0);
  c->state = state;
  c->done = (int)tk__pg_i64(r, 0, 1);
  c->total = (int)tk__pg_i64(r, 0, 2);
  c->errors = (int)tk__pg_i64(r, 0, 3);
  return 0;
}
