/* The lists' SQL for both backends (list_sql.h). Every page is keyed by
 * id, newest first, and reached through an index range: tasks by the
 * primary key, by template (one range per version of the name, merged),
 * by state (SQLite's tasks_state; on PostgreSQL, error through
 * tasks_with_errors and the other states by the primary key), steps in
 * error through tasks_with_errors (PostgreSQL) or tasks_failed (SQLite),
 * the tasks with a step in error. A created-since
 * bound becomes a lower bound on the id, by binary search on the primary
 * key (first_id_cte). */
#include "store/list_sql.h"

#include <stdio.h>
#include <string.h>

#include "store/rules.h"

const char *const tk__task_states[] = {TK__TASK_PENDING, TK__TASK_IN_PROGRESS, TK__TASK_COMPLETE,
                                       TK__TASK_ERROR,   TK__TASK_CANCELLED,   NULL};
const char *const tk__step_states[] = {
    TK__STEP_PENDING, TK__STEP_IN_PROGRESS, TK__STEP_WAITING_FOR_RETRY,  TK__STEP_COMPLETE,
    TK__STEP_ERROR,   TK__STEP_CANCELLED,   TK__STEP_RESOLVED, TK__STEP_SKIPPED,
    TK__STEP_MAPPED,  NULL};

const char *tk__state_known(const char *const *states, const char *s) {
  for (int i = 0; s && states[i]; i++)
    if (strcmp(states[i], s) == 0) return states[i];
  return NULL;
}

static void add(tk__sql *q, const char *s) { tk__buf_adds(&q->text, s); }

/* A new argument; its number (from 1). The statements here use fewer
 * than TK__SQL_MAX_ARGS. */
static int arg_int(tk__sql *q, int64_t v) {
  if (q->nargs == TK__SQL_MAX_ARGS) {
    q->text.oom = 1;
    return 1;
  }
  q->args[q->nargs].is_text = 0;
  q->args[q->nargs].i = v;
  return ++q->nargs;
}

static int arg_text(tk__sql *q, const char *t) {
  int n = arg_int(q, 0);
  q->args[n - 1].is_text = 1;
  q->args[n - 1].t = t;
  return n;
}

/* Argument n where it is used: typed on PostgreSQL, whose inference from
 * the context is not always certain. */
static void ref(tk__sql *q, int n) {
  if (q->pg)
    tk__buf_addf(&q->text, "$%d::%s", n, q->args[n - 1].is_text ? "text" : "bigint");
  else
    tk__buf_addf(&q->text, "?%d", n);
}

static void add_ref(tk__sql *q, const char *before, int n, const char *after) {
  add(q, before);
  ref(q, n);
  add(q, after);
}

/* The common table cte(lo, hi) of a binary search on the ids of `table`
 * for the first row whose `col` is at or after argument `since`: MAX(lo)
 * of it (an id past the last row when there is none).
 * Exact while col grows with id; ids are assigned in commit or claim
 * order, so col is out of order only within the clock skew between the
 * processes that wrote the rows, and a row within that skew of the bound
 * may be left out. log2(ids) primary-key lookups, whatever is stored. */
static void first_id_cte(tk__sql *q, const char *cte, const char *table, const char *col,
                         int since) {
  char probe_col[160], probe_id[160];
  snprintf(probe_col, sizeof probe_col,
           "(SELECT %s FROM %s WHERE id >= (lo + hi) / 2 ORDER BY id LIMIT 1)", col, table);
  snprintf(probe_id, sizeof probe_id,
           "(SELECT id FROM %s WHERE id >= (lo + hi) / 2 ORDER BY id LIMIT 1)", table);
  tk__buf_addf(&q->text,
               "%s(lo, hi) AS (SELECT (SELECT COALESCE(MIN(id), 1) FROM %s),"
               " (SELECT COALESCE(MAX(id), 0) + 1 FROM %s) UNION ALL SELECT CASE WHEN %s >= ",
               cte, table, table, probe_col);
  ref(q, since);
  tk__buf_addf(&q->text, " THEN lo ELSE %s + 1 END, CASE WHEN %s >= ", probe_id, probe_col);
  ref(q, since);
  tk__buf_addf(&q->text, " THEN (lo + hi) / 2 ELSE hi END FROM %s WHERE lo < hi)", cte);
}

/* "WITH [RECURSIVE b ...,] " for a filter, and the argument of its since
 * bound (0: none). */
static int with_since(tk__sql *q, const tk__task_query *f) {
  if (f->created_since <= 0) {
    add(q, "WITH ");
    return 0;
  }
  int since = arg_int(q, f->created_since);
  add(q, "WITH RECURSIVE ");
  first_id_cte(q, "b", "tasks", "created_at", since);
  add(q, ", ");
  return since;
}

/* The template condition on t: one id, or the ids (or the names) of tp. */
static void template_cond(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp,
                          int64_t one) {
  if (one > 0) {
    tk__buf_addf(&q->text, " AND t.template_id = %lld", (long long)one);
  } else if (tp->n >= 0 && tp->n < TK__SQL_MAX_TEMPLATES) {
    add(q, " AND t.template_id IN (");
    for (int i = 0; i < tp->n; i++)
      tk__buf_addf(&q->text, "%s%lld", i ? ", " : "", (long long)tp->ids[i]);
    add(q, tp->n ? ")" : "NULL)");
  } else if (tp->n >= 0) {
    add_ref(q,
            " AND t.template_id IN (SELECT id FROM templates WHERE name = ", arg_text(q, f->name),
            "");
    if (f->ns) add_ref(q, " AND namespace = ", arg_text(q, f->ns), "");
    add(q, ")");
  }
}

/* Characters (UTF-8 code points) in text: a trigram index needs 3. */
static size_t chars(const char *text) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) n += (*p & 0xC0) != 0x80;
  return n;
}

/* " AND ..." for a step of task t whose last_error holds `text` (literal,
 * case-sensitive). Text of 3 characters or more goes through the trigram
 * index of each backend (migration steps_error_text): SQLite's FTS5 table
 * with the text as one phrase (its trigrams in a row), each step found
 * then checked with instr; on PostgreSQL a LIKE with \, % and _ escaped,
 * which pg_trgm's index serves. Shorter text has no trigram: each task the
 * other conditions leave is looked at. */
/* Whether f's error text is searched through the trigram index. */
static int indexed_text(const tk__task_query *f) {
  return f->error_text && chars(f->error_text) >= 3;
}

/* SQLite's FTS5 query for argument x: the text as one phrase, its double
 * quotes doubled, so that nothing in it is FTS5 syntax. */
static void match_phrase(tk__sql *q, int x) {
  add_ref(q, "'\"' || replace(", x, ", '\"', '\"\"') || '\"'");
}

static void error_cond(tk__sql *q, const char *text) {
  int x = arg_text(q, text);
  if (chars(text) < 3) {
    add_ref(q,
            q->pg ? " AND EXISTS (SELECT 1 FROM steps e WHERE e.task_id = t.id"
                    " AND strpos(e.last_error, "
                  : " AND EXISTS (SELECT 1 FROM steps e WHERE e.task_id = t.id"
                    " AND instr(e.last_error, ",
            x, ") > 0)");
  } else if (q->pg) {
    add_ref(q,
            " AND EXISTS (SELECT 1 FROM steps e WHERE e.task_id = t.id AND e.last_error LIKE"
            " '%' || replace(replace(replace(",
            x, ", '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%')");
  } else {
    add(q,
        " AND t.id IN (SELECT e.task_id FROM steps e WHERE e.id IN (SELECT rowid FROM"
        " steps_error_text WHERE steps_error_text MATCH ");
    match_phrase(q, x);
    add_ref(q, ") AND instr(e.last_error, ", x, ") > 0)");
  }
}

/* " AND ..." for every condition of f on tasks t, but the state when
 * !with_state. since: with_since's argument. */
static void task_conds(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp,
                       int64_t one_template, int with_state, int since, int with_error) {
  const char *state = tk__state_known(tk__task_states, f->state);
  if (with_state && state) tk__buf_addf(&q->text, " AND t.state = '%s'", state);
  template_cond(q, f, tp, one_template);
  if (since) {
    add_ref(q, " AND t.id >= (SELECT MAX(lo) FROM b) AND t.created_at >= ", since, "");
  }
  if (with_error && f->error_text && *f->error_text) error_cond(q, f->error_text);
  if (f->task_id > 0) add_ref(q, " AND t.id = ", arg_int(q, f->task_id), "");
}

/* PostgreSQL reaches tasks in error through their steps in error. */
static int error_by_steps(const tk__sql *q, const tk__task_query *f) {
  return q->pg && f->state && strcmp(f->state, TK__TASK_ERROR) == 0;
}

/* One page of ids of tasks t below argument `before`, newest first. */
static void page_ids(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp,
                     int64_t one_template, int before, int limit, int since) {
  if (error_by_steps(q, f)) {
    /* Newest first along tasks_with_errors (tasks with a step in error),
     * each task looked up by its key (OFFSET 0 keeps the lateral subquery
     * a lookup per row: joined, the planner hashes the whole tasks
     * table), until the page is full. */
    add_ref(q,
            "SELECT t.id FROM (SELECT id AS task_id FROM tasks WHERE steps_error > 0"
            " AND id < ",
            before,
            " ORDER BY id DESC) e CROSS JOIN LATERAL (SELECT * FROM tasks t"
            " WHERE t.id = e.task_id OFFSET 0) t WHERE t.state = 'error'");
    task_conds(q, f, tp, one_template, 0, since, 1);
    add_ref(q, " ORDER BY e.task_id DESC LIMIT ", limit, "");
    return;
  }
  if (!q->pg && indexed_text(f)) {
    /* SQLite, error text: along the steps whose errors match, newest
     * first (FTS5 yields them in rowid order; a step's id grows with its
     * task's, as one writer inserts both in the task's transaction), each
     * task once (at its newest matching step), until the page is full: a
     * common text fills it at once, a rare one reads its few matches. The
     * cursor bounds the scan: steps of tasks below it have lower ids than
     * the first step of the cursor's task. */
    int x = arg_text(q, f->error_text);
    add(q,
        "SELECT t.id FROM steps_error_text m CROSS JOIN steps e ON e.id = m.rowid"
        " CROSS JOIN tasks t ON t.id = e.task_id WHERE m.steps_error_text MATCH ");
    match_phrase(q, x);
    add_ref(q,
            " AND m.rowid < COALESCE((SELECT c.id FROM steps c WHERE c.task_id >= ", before,
            " ORDER BY c.task_id, c.idx LIMIT 1), 9223372036854775807)");
    add_ref(q, " AND t.id < ", before, "");
    add_ref(q, " AND instr(e.last_error, ", x, ") > 0");
    add_ref(q,
            " AND NOT EXISTS (SELECT 1 FROM steps d WHERE d.task_id = e.task_id AND d.id > e.id"
            " AND instr(d.last_error, ",
            x, ") > 0)");
    task_conds(q, f, tp, one_template, 1, since, 0);
    add_ref(q, " ORDER BY m.rowid DESC LIMIT ", limit, "");
    return;
  }
  add_ref(q, "SELECT t.id FROM tasks t WHERE t.id < ", before, "");
  task_conds(q, f, tp, one_template, 1, since, 1);
  add_ref(q, " ORDER BY t.id DESC LIMIT ", limit, "");
}

int tk__sql_task_list(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp) {
  int since = with_since(q, f);
  int before = arg_int(q, f->before > 0 ? f->before : INT64_MAX);
  int limit = arg_int(q, f->limit);
  add(q, "page(id) AS (");
  /* Several versions: a range of tasks_template per version, merged. */
  if (tp->n > 1 && tp->n < TK__SQL_MAX_TEMPLATES && !error_by_steps(q, f)) {
    for (int i = 0; i < tp->n; i++) {
      add(q, i ? " UNION ALL SELECT id FROM (" : "SELECT id FROM (");
      page_ids(q, f, tp, tp->ids[i], before, limit, since);
      tk__buf_addf(&q->text, ") u%d", i);
    }
    add_ref(q, " ORDER BY id DESC LIMIT ", limit, "");
  } else {
    page_ids(q, f, tp, tp->n == 1 ? tp->ids[0] : 0, before, limit, since);
  }
  add(q,
      ") SELECT t.id, t.state, tp.namespace, tp.name, tp.version, t.identity, t.created_at,"
      " t.updated_at, t.finished_at, t.steps_total, t.steps_done, t.steps_error,"
      /* The most recent error: of the step whose last claim is the newest. */
      " (SELECT s.last_error FROM steps s WHERE s.task_id = t.id AND s.last_error IS NOT NULL"
      " ORDER BY COALESCE((SELECT MAX(a.id) FROM attempts a WHERE a.step_id = s.id), 0) DESC,"
      " s.id DESC LIMIT 1),"
      " (SELECT MIN(s.run_at) FROM steps s WHERE s.task_id = t.id"
      " AND s.state = 'waiting_for_retry'), t.priority"
      " FROM page p JOIN tasks t ON t.id = p.id JOIN templates tp ON tp.id = t.template_id"
      " ORDER BY t.id DESC");
  return q->text.oom ? TK_ENOMEM : 0;
}

int tk__sql_task_count(tk__sql *q, const tk__task_query *f, const tk__sql_templates *tp) {
  int since = with_since(q, f);
  /* A CTE that is not used: "WITH" needs one. */
  add(q, "one(x) AS (SELECT 1) SELECT COUNT(*) FROM tasks t WHERE ");
  if (error_by_steps(q, f)) {
    add(q, "t.id IN (SELECT task_id FROM steps WHERE state = 'error') AND t.state = 'error'");
    task_conds(q, f, tp, 0, 0, since, 1);
  } else {
    add(q, "1 = 1");
    task_conds(q, f, tp, 0, 1, since, 1);
  }
  return q->text.oom ? TK_ENOMEM : 0;
}

int tk__sql_step_list(tk__sql *q, const char *step_state, const tk__task_query *f,
                      const tk__sql_templates *tp) {
  const char *state = tk__state_known(tk__step_states, step_state);
  if (state == NULL) return TK_EINVAL;
  int since = with_since(q, f);
  /* When the step last moved: its latest move, from the moves view of
   * either backend (on PostgreSQL it also derives the moves that attempt
   * rows record: 0012_moves_view.sql). */
  add(q,
      "one(x) AS (SELECT 1) SELECT s.id, s.task_id, s.name, s.state, s.attempts,"
      " s.max_attempts, s.retryable, s.last_error, tp.namespace, tp.name, tp.version,"
      " COALESCE((SELECT MAX(x.at) FROM moves x WHERE x.task_id = s.task_id"
      " AND x.step_id = s.id), t.created_at)");
  /* The order's first key: the step's task. Steps in error are found
   * from the tasks that have one, newest first (CROSS JOIN fixes that
   * order), each one's steps after it: SQLite's tasks_failed,
   * PostgreSQL's tasks_with_errors. */
  int error = strcmp(state, TK__STEP_ERROR) == 0;
  const char *key = q->pg && !error ? "s.task_id" : "t.id";
  if (q->pg && !error)
    add(q, " FROM steps s JOIN tasks t ON t.id = s.task_id");
  else if (q->pg)
    add(q, " FROM tasks t JOIN steps s ON s.task_id = t.id");
  else
    tk__buf_addf(&q->text, " FROM tasks t%s CROSS JOIN steps s ON s.task_id = t.id",
                 error ? " INDEXED BY tasks_failed" : "");
  add(q, " JOIN templates tp ON tp.id = t.template_id");
  tk__buf_addf(&q->text, " WHERE s.state = '%s'", state);
  if (error) add(q, " AND t.steps_error > 0");
  if (f->before > 0) {
    /* After the cursor's step in (task, id) order, descending. */
    int c = arg_int(q, f->before);
    tk__buf_addf(&q->text, " AND %s <= (SELECT c.task_id FROM steps c WHERE c.id = ", key);
    ref(q, c);
    tk__buf_addf(&q->text, ") AND (%s < (SELECT c.task_id FROM steps c WHERE c.id = ", key);
    ref(q, c);
    add_ref(q, ") OR s.id < ", c, ")");
  }
  task_conds(q, f, tp, 0, 1, since, 1);
  tk__buf_addf(&q->text, " ORDER BY %s DESC, s.id DESC LIMIT ", key);
  ref(q, arg_int(q, f->limit));
  return q->text.oom ? TK_ENOMEM : 0;
}

int tk__sql_activity(tk__sql *q, int64_t since, int64_t bucket_ms, int n) {
  int s = arg_int(q, since), b = arg_int(q, bucket_ms), e = arg_int(q, since + n * bucket_ms);
  if (since % TK__MINUTE_MS == 0 && bucket_ms % TK__MINUTE_MS == 0) {
    /* Whole minutes: the per-minute counts (migration activity_minutes). */
    add_ref(q, "SELECT (minute - ", s, ") / ");
    ref(q, b);
    add(q,
        " AS bucket, SUM(succeeded), SUM(failed), SUM(retries), SUM(lateness_n),"
        " SUM(lateness_sum_ms), MAX(lateness_max_ms) FROM activity_minutes WHERE minute >= ");
    ref(q, s);
    add_ref(q, " AND minute < ", e, " GROUP BY bucket ORDER BY bucket");
    return q->text.oom ? TK_ENOMEM : 0;
  }
  add(q, "WITH RECURSIVE ");
  /* Attempt ids are assigned in claim order, so started_at grows with the
   * id but for the clock skew between orchestrators (first_id_cte): no
   * index on started_at, which every claim would pay for. */
  first_id_cte(q, "b", "attempts", "started_at", s);
  add(q, ", ");
  first_id_cte(q, "e", "attempts", "started_at", e); /* the rows from there on are later */
  add(q,
      " SELECT bucket, SUM(ok), SUM(bad), SUM(r), SUM(CASE WHEN late IS NULL THEN 0 ELSE 1 END),"
      " COALESCE(SUM(late), 0), COALESCE(MAX(late), 0) FROM (SELECT (started_at - ");
  ref(q, s);
  add(q, ") / ");
  ref(q, b);
  add(q,
      " AS bucket, CASE WHEN outcome = 'success' THEN 1 ELSE 0 END AS ok,"
      " CASE WHEN outcome IS NOT NULL AND outcome <> 'success' THEN 1 ELSE 0 END AS bad, r,"
      " CASE WHEN r = 1 AND due_at IS NOT NULL THEN CASE WHEN started_at > due_at"
      " THEN started_at - due_at ELSE 0 END END AS late"
      " FROM (SELECT a.started_at, a.outcome, a.due_at, CASE WHEN a.attempt > 1 OR EXISTS"
      /* An operator's retry starts again at attempt 1 after earlier claims. */
      " (SELECT 1 FROM attempts p WHERE p.step_id = a.step_id AND p.id < a.id) THEN 1 ELSE 0"
      " END AS r FROM attempts a WHERE a.id >= (SELECT MAX(lo) FROM b)"
      " AND a.id < (SELECT MAX(lo) FROM e) AND a.started_at >= ");
  ref(q, s);
  add_ref(q, " AND a.started_at < ", e, ") a) x GROUP BY bucket ORDER BY bucket");
  return q->text.oom ? TK_ENOMEM : 0;
}

void tk__sql_free(tk__sql *q) { tk__buf_free(&q->text); }

int tk__sql_templates_find(tk_store *s, const tk__task_query *f, tk__sql_templates *tp,
                           tk_err *err) {
  tp->n = -1;
  if (f->name == NULL) return 0;
  tk__template_rec recs[TK__SQL_MAX_TEMPLATES];
  int n = 0;
  int rc = s->ops->template_find(s, f->ns, f->name, NULL, recs, TK__SQL_MAX_TEMPLATES, &n, err);
  if (rc) return rc;
  for (int i = 0; i < n; i++) tp->ids[i] = recs[i].id;
  tk__template_recs_free(recs, n);
  tp->n = n;
  return 0;
}
