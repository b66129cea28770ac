/* PostgreSQL's leaner keys (migration leaner_keys, issue 22 item 2): a
 * store written at the schema before it, with tasks mid-way (a retry
 * recorded, a claim held across the upgrade, a task with an identity and
 * one without), migrates; each task's history reads exactly as before and
 * goes on in order; the identity still makes a single and a bulk submit
 * return the existing task, and the store refuses a second row with it;
 * and the rows are the lean ones: transitions keyed by (task_id, id) with
 * no other index, no foreign key from tasks to templates, the identity
 * indexed only where there is one, tasks' pages written 40% full; and a
 * lookup by identity (as the submits and a schedule's slot write it,
 * under a generic plan) reads that index; and the moves view's readers
 * (the history, a prune and its dry run: moves_view) reach each of its
 * parts by key. On a fresh database of the harness's cluster (skipped as
 * requiring pg without one). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <tasker/retention.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/pg_undo.h"
#include "core/buf.h"
#include "store/postgres/postgres_internal.h"
#include "store/migration.h"
#include "store/rules.h"
#include "store/store.h"

#define LEASE 30000
#define T(ms) (EFX_T0 + (ms))

/* The number of the migration this test is about, and of the one before
 * it (where the store starts). */
static int leaner_keys(int *before) {
  *before = 0;
  for (const tk__migration *m = tk__postgres_migrations; m->number != 0; m++) {
    if (strcmp(m->name, "leaner_keys") == 0) return m->number;
    *before = m->number;
  }
  fail_msg("no PostgreSQL migration named leaner_keys");
  return 0;
}

/* efx_use_postgres, but migrated only to `version`; into *state for the
 * teardown. */
static efx *open_at(void **state, int version) {
  efx *f = *state = calloc(1, sizeof *f);
  efx_open(f, NULL);
  const char *server = efx_pg_server(getenv("TK_TEST_PG_URL"));
  snprintf(f->pg_server, sizeof f->pg_server, "%s", server);
  efx_pg_database(server, "tk_pg_rows", f->pg_db, sizeof f->pg_db, f->url, sizeof f->url);
  tk_store_close(f->store);
  tk_err err;
  efx_must(tk_store_open(f->url, &f->store, &err), &err, "open");
  tk_store_set_clock(f->store, tk_clock_manual(&f->clock));
  int applied = 0, at = 0;
  efx_must(tk_store_migrate_to(f->store, version, &applied, &at, &err), &err, "migrate to before");
  assert_int_equal(at, version);
  return f;
}

/* Whether the query's text contains `part`. */
static void expect_sql_has(efx *f, const char *part, const char *sql) {
  char *got = efx_pg_text(f->url, sql);
  if (strstr(got, part) == NULL) {
    fprintf(stderr, "query: %s\n got: [%s]\nwant a part: [%s]\n", sql, got, part);
    free(got);
    fail_msg("unexpected rows");
  }
  free(got);
}

static tk__claimed claim_one(efx *f, int64_t now) {
  tk__claimed c;
  int n;
  tk_err err;
  efx_must(efx_claim_at(f->store, "w", now, LEASE, 1, &c, &n, &err), &err, "claim");
  if (n != 1) fail_msg("nothing to claim at %lld", (long long)now);
  return c;
}

/* Record claim c's outcome at now: a success, or a retry due at now + 10. */
static void finish(efx *f, const tk__claimed *c, int64_t now, int success) {
  tk__outcome o = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                   .template_id = c->template_id, .idx = c->idx, .instance = c->item_index + 1,
                   .owner = "w", .attempt = c->attempt, .now = now, .finished_at = now,
                   .attempt_outcome = success ? "success" : "failure",
                   .next = success ? TK__NEXT_COMPLETE : TK__NEXT_RETRY,
                   .results = success ? "{}" : NULL, .error = success ? NULL : "it broke"};
  if (!success) {
    o.delay_ms = 10;
    o.source = TK_DELAY_COMPUTED;
    o.run_at = now + 10;
  }
  tk__effects fx;
  tk_err e, err;
  efx_must(f->store->ops->record(f->store, &o, 1, &fx, &e, NULL, &err), &err, "record");
  efx_must(e.code, &e, "record outcome");
}

/* The task's history as the API shows it (its transitions), JSON text. */
static char *history(efx *f, int64_t task) {
  json_t *t = efx_task(f, task);
  char *text = json_dumps(json_object_get(t, "transitions"), JSON_COMPACT);
  json_decref(t);
  return text;
}

/* The same on a store at a schema before the moves view that the report
 * reads (0012_moves_view.sql): the view is lent for the read, from its
 * migration's SQL, and taken away again, so that the upgrade makes it. */
static char *history_before_the_view(efx *f, int64_t task) {
  const tk__migration *m = tk__postgres_migrations;
  while (m->number != 0 && strcmp(m->name, "moves_view") != 0) m++;
  if (m->number == 0) fail_msg("no PostgreSQL migration named moves_view");
  char *sql = malloc(strlen(m->sql) + 16);
  strcat(strcpy(sql, m->sql), " SELECT 1");
  free(efx_pg_text(f->url, sql));
  free(sql);
  char *text = history(f, task);
  free(efx_pg_text(f->url, PG_UNDO_0012));
  return text;
}

static int64_t submit(efx *f, const char *identity, int64_t now, int *existed) {
  tk_submit_request req = {.template_name = "pair", .context_json = "{}", .identity = identity};
  int64_t id = 0;
  tk_err err;
  efx_must(tk_task_submit(f->store, f->cfg, &req, now, &id, existed, &err), &err, "submit");
  return id;
}

/* The columns and table of 0015_queues.sql that claims and reports read,
 * lent to a store at an older schema and taken back. */
#define QUEUES_LENT                                                                             \
  " ALTER TABLE steps ADD COLUMN queue text, ADD COLUMN priority integer NOT NULL DEFAULT 0;"  \
  " ALTER TABLE tasks ADD COLUMN priority integer NOT NULL DEFAULT 0;"                          \
  " CREATE TABLE queues (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"               \
  " name text NOT NULL UNIQUE, concurrency integer NOT NULL DEFAULT 0,"                         \
  " rate double precision NOT NULL DEFAULT 0, burst integer NOT NULL DEFAULT 0,"               \
  " tokens double precision NOT NULL DEFAULT 0, refilled_at bigint NOT NULL DEFAULT 0,"        \
  " worker boolean NOT NULL DEFAULT false, plain boolean NOT NULL DEFAULT false);"
#define QUEUES_TAKEN                                                                            \
  " DROP TABLE queues; ALTER TABLE steps DROP COLUMN queue, DROP COLUMN priority;"             \
  " ALTER TABLE tasks DROP COLUMN priority;"

/* The ready table of 0017_ready_table.sql, which claims read and every
 * write of steps keeps, lent to a store at an older schema from its
 * migration's SQL: the part before the migration's changes to tasks and
 * steps' indexes (which the older schema does not have yet). */
static void lend_ready(efx *f) {
  const tk__migration *m = tk__postgres_migrations;
  while (m->number != 0 && strcmp(m->name, "ready_table") != 0) m++;
  if (m->number == 0) fail_msg("no PostgreSQL migration named ready_table");
  const char *end = strstr(m->sql, "CREATE INDEX tasks_with_errors");
  if (end == NULL) fail_msg("0017_ready_table.sql: no tasks_with_errors");
  size_t n = (size_t)(end - m->sql);
  char *sql = malloc(n + 16);
  memcpy(sql, m->sql, n);
  strcpy(sql + n, " SELECT 1");
  free(efx_pg_text(f->url, sql));
  free(sql);
}

static void upgrade_keeps_history_and_identity(void **state) {
  int before;
  int target = leaner_keys(&before);
  efx *f = open_at(state, before);
  /* Today's claims and reports read worker steps' columns (0013) and
   * queues' (0015), after the migration under test: the store at `before`
   * has them while it is populated, and loses them again before it
   * migrates; the same for the ready table (0017), deadlines (0019) and
   * children's columns (0021). */
  free(efx_pg_text(f->url, "ALTER TABLE steps ADD COLUMN worker_queue text;"
                           " ALTER TABLE attempts ADD COLUMN token_hash bytea;" QUEUES_LENT
                           " ALTER TABLE tasks ADD COLUMN deadline_at bigint;"
                           " CREATE TABLE deadlines (task_id bigint PRIMARY KEY,"
                           " deadline_at bigint NOT NULL);" PG_CHILD_COLUMNS " SELECT 1"));
  lend_ready(f);
  efx_template(f, "name = \"pair\"\nversion = \"1\"\n" EFX_STEP("a")
                  "handler = { kind = \"builtin\", name = \"noop\" }\n" EFX_STEP("b")
                  "depends_on = [\"a\"]\nhandler = { kind = \"builtin\", name = \"noop\" }\n");
  int existed = -1;
  int64_t kept = submit(f, "kept", T(0), &existed);
  assert_int_equal(existed, 0);
  /* kept: a fails once, then succeeds; b is claimed and held across the
   * upgrade. */
  finish(f, (tk__claimed[]){claim_one(f, T(1))}, T(2), 0);
  finish(f, (tk__claimed[]){claim_one(f, T(20))}, T(21), 1);
  tk__claimed held = claim_one(f, T(22));
  assert_int_equal(held.task_id, kept);
  int64_t plain = submit(f, NULL, T(23), &existed);
  char *kept_before = history_before_the_view(f, kept);
  char *plain_before = history_before_the_view(f, plain);
  char *rows_before = efx_pg_text(f->url, "SELECT * FROM transitions ORDER BY id");
  free(efx_pg_text(f->url, PG_READY_TAKEN " ALTER TABLE steps DROP COLUMN worker_queue;"
                           " ALTER TABLE attempts DROP COLUMN token_hash;" QUEUES_TAKEN
                           " DROP TABLE deadlines; ALTER TABLE tasks DROP COLUMN deadline_at;"
                           PG_CHILD_COLUMNS_TAKEN " SELECT 1"));

  tk_err err;
  int applied = 0, version = 0;
  efx_must(tk_store_migrate(f->store, &applied, &version, &err), &err, "migrate");
  assert_true(applied >= 1);
  assert_true(version >= target);

  /* The same rows, and the same history through the API. */
  char *rows_after = efx_pg_text(f->url, "SELECT * FROM transitions ORDER BY id");
  assert_string_equal(rows_after, rows_before);
  char *kept_after = history(f, kept), *plain_after = history(f, plain);
  assert_string_equal(kept_after, kept_before);
  assert_string_equal(plain_after, plain_before);

  /* It goes on, in order: the held claim's outcome, then plain's steps. */
  finish(f, &held, T(30), 1);
  finish(f, (tk__claimed[]){claim_one(f, T(31))}, T(32), 1);
  finish(f, (tk__claimed[]){claim_one(f, T(33))}, T(34), 1);
  json_t *k = efx_task(f, kept), *p = efx_task(f, plain);
  assert_string_equal(json_string_value(json_object_get(k, "state")), TK__TASK_COMPLETE);
  assert_string_equal(json_string_value(json_object_get(p, "state")), TK__TASK_COMPLETE);
  json_t *kt = json_object_get(k, "transitions");
  json_t *was = json_loads(kept_before, 0, NULL);
  size_t nbefore = json_array_size(was);
  json_decref(was);
  json_t *head = json_array();
  for (size_t i = 0; i < nbefore; i++) json_array_append(head, json_array_get(kt, i));
  char *head_text = json_dumps(head, JSON_COMPACT);
  assert_string_equal(head_text, kept_before);
  /* kept's new moves: b complete, then the task complete. */
  assert_int_equal(json_array_size(kt), nbefore + 2);
  json_t *last = json_array_get(kt, nbefore + 1);
  assert_string_equal(json_string_value(json_object_get(last, "to")), TK__TASK_COMPLETE);
  /* Ids and times agree in every task's history, old rows and new. */
  efx_pg_expect(f->url, "0",
                "SELECT count(*) FROM (SELECT at, lag(at) OVER (PARTITION BY task_id"
                " ORDER BY id) AS prev FROM transitions) x WHERE prev > at");

  /* The identity still holds, for a single submit, a bulk one, and a row
   * written by hand. */
  assert_int_equal(submit(f, "kept", T(40), &existed), kept);
  assert_int_equal(existed, 1);
  tk_submit_request many[3] = {{.template_name = "pair", .context_json = "{}", .identity = "kept"},
                               {.template_name = "pair", .context_json = "{}", .identity = "new"},
                               {.template_name = "pair", .context_json = "{}"}};
  int64_t ids[3];
  int old[3], failed;
  efx_must(tk_task_submit_many(f->store, f->cfg, many, 3, T(41), ids, old, &failed, &err), &err,
       "submit many");
  assert_int_equal(ids[0], kept);
  assert_int_equal(old[0], 1);
  assert_int_equal(old[1], 0);
  assert_int_equal(old[2], 0);
  efx_must(tk_task_submit_many(f->store, f->cfg, many + 1, 1, T(42), ids, old, &failed, &err), &err,
       "submit many again");
  assert_int_equal(old[0], 1);
  PGconn *c = PQconnectdb(f->url);
  PGresult *r = PQexec(c, "INSERT INTO tasks (template_id, identity, context, state, steps_total,"
                          " created_at, updated_at) SELECT template_id, 'kept', '{}', 'pending',"
                          " 0, 0, 0 FROM tasks LIMIT 1");
  const char *sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  assert_string_equal(sqlstate ? sqlstate : "none", "23505");
  PQclear(r);
  PQfinish(c);
  efx_pg_expect(f->url, "4", "SELECT count(*) FROM tasks");

  /* The lean rows. */
  efx_pg_expect(f->url,
                "CREATE UNIQUE INDEX transitions_pkey ON public.transitions USING btree"
                " (task_id, id)",
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'transitions'");
  efx_pg_expect(f->url, "0",
                "SELECT count(*) FROM pg_constraint WHERE conrelid = 'tasks'::regclass"
                " AND contype = 'f'");
  efx_pg_expect(f->url, "{fillfactor=40}",
                "SELECT reloptions FROM pg_class WHERE relname = 'tasks'");
  /* steps at 30 since 0017_ready_table.sql (room for two HOT updates). */
  efx_pg_expect(f->url, "attempts={fillfactor=50} steps={fillfactor=30}",
                "SELECT string_agg(relname || '=' || reloptions::text, ' ' ORDER BY relname)"
                " FROM pg_class WHERE relname IN ('steps', 'attempts')");
  efx_pg_expect(f->url,
                "CREATE UNIQUE INDEX tasks_identity ON public.tasks USING btree (identity)"
                " WHERE (identity IS NOT NULL)",
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'tasks'"
                " AND indexdef LIKE '%%(identity)%%'");
  json_decref(k);
  json_decref(p);
  json_decref(head);
  free(head_text);
  free(kept_before);
  free(plain_before);
  free(kept_after);
  free(plain_after);
  free(rows_before);
  free(rows_after);
}

/* A store at the newest schema with the template "pair" (one noop step
 * a, whatever its name says); into *state for the teardown. */
static efx *open_newest(void **state) {
  efx *f = *state = calloc(1, sizeof *f);
  efx_open(f, NULL);
  efx_use_postgres(f, getenv("TK_TEST_PG_URL"), "tk_pg_rows");
  efx_template(f, "name = \"pair\"\nversion = \"1\"\n" EFX_STEP("a")
                  "handler = { kind = \"builtin\", name = \"noop\" }\n");
  return f;
}

/* Lookups by identity as the code writes them (a single submit's winner,
 * a schedule's slot; bulk submit's join) read the partial index under a
 * generic plan. On a store created at the newest schema: an index built
 * over updated rows (the upgrade's) may serve a query only once the
 * transactions older than it have ended (pg_index.indcheckxmin), which on
 * the shared cluster can be any time. */
static void identity_lookups_use_the_partial_index(void **state) {
  efx *f = open_newest(state);
  int existed;
  submit(f, "kept", T(0), &existed);
  submit(f, NULL, T(0), &existed);
  /* (seq scans off: the table is tiny) */
  expect_sql_has(f, "Index Scan using tasks_identity",
                 "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan;"
                 " PREPARE by_identity(text) AS SELECT id FROM tasks WHERE identity = $1;"
                 " EXPLAIN EXECUTE by_identity('kept')");
  expect_sql_has(f, "tasks_identity",
                 "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan;"
                 " PREPARE ids(text[]) AS SELECT v.ord, t.id FROM unnest($1)"
                 " WITH ORDINALITY AS v(identity, ord) LEFT JOIN tasks t ON t.identity ="
                 " v.identity; EXPLAIN EXECUTE ids('{kept,x}')");
}

/* The generic plan of the statement the store prepared on its session
 * whose text contains `part` (one only), planned with sequential scans off
 * as the store's session has them, its parameters all 0. Malloc'd. */
static char *plan_of_prepared(efx *f, const char *part) {
  tk__buf q = {0};
  tk__buf_addf(&q,
               "SELECT statement, cardinality(parameter_types) FROM pg_prepared_statements"
               " WHERE strpos(statement, '%s') > 0",
               part);
  assert_false(q.oom);
  PGresult *r = PQexec(((tk__pg *)f->store)->conn, q.p);
  tk__buf_free(&q);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  if (PQntuples(r) != 1) fail_msg("%d prepared statements contain [%s]", PQntuples(r), part);
  tk__buf_addf(&q,
               "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan;"
               " PREPARE q AS %s; EXPLAIN EXECUTE q(0",
               PQgetvalue(r, 0, 0));
  for (int i = 1; i < atoi(PQgetvalue(r, 0, 1)); i++) tk__buf_addf(&q, ", 0");
  tk__buf_addf(&q, ")");
  PQclear(r);
  assert_false(q.oom);
  char *plan = efx_pg_text(f->url, q.p);
  tk__buf_free(&q);
  return plan;
}

/* plan holds want, or the test fails showing it. */
static void expect_plan_has(const char *what, const char *plan, const char *want) {
  if (strstr(plan, want) == NULL) {
    fprintf(stderr, "%s's plan:\n%s\n", what, plan);
    fail_msg("%s's plan has no [%s]", what, want);
  }
}

/* The readers of the moves view (0012_moves_view.sql) reach each of its
 * parts by key: the history by the task's id (its transitions, its
 * steps, their attempts, its row), a prune and its dry run by the ids of
 * the tasks they select, given as = ANY of an array (as IN (SELECT ...),
 * a join, no part's index would be used and every row of transitions,
 * attempts and tasks read). The statements are those the store prepared. */
static void the_moves_view_is_read_by_key(void **state) {
  efx *f = open_newest(state);
  int existed;
  int64_t task = submit(f, NULL, T(0), &existed);
  finish(f, (tk__claimed[]){claim_one(f, T(1))}, T(2), 1);
  free(history(f, task));
  tk_prune_options po = {.complete_before = T(100000), .dry_run = 1};
  tk_prune_counts counts;
  tk_err err;
  efx_must(tk_prune(f->store, &po, &counts, &err), &err, "prune (dry run)");
  assert_int_equal(counts.transitions, 5); /* created, started, claimed, completed, finished */
  po.dry_run = 0;
  efx_must(tk_prune(f->store, &po, &counts, &err), &err, "prune");
  assert_int_equal(counts.transitions, 5);

  char *plan = plan_of_prepared(f, "FROM moves WHERE task_id = $1");
  expect_plan_has("the history", plan, "Index Cond: (task_id = $1)"); /* transitions, steps */
  expect_plan_has("the history", plan, "Index Cond: (id = $1)");      /* the task's row */
  free(plan);
  plan = plan_of_prepared(f, "DELETE FROM attempts");
  expect_plan_has("the prune", plan, "Index Cond: (task_id = ANY");
  expect_plan_has("the prune", plan, "Index Cond: (id = ANY");
  free(plan);
  plan = plan_of_prepared(f, "(SELECT count(*) FROM attempts WHERE step_id IN");
  expect_plan_has("the prune's dry run", plan, "Index Cond: (task_id = ANY");
  expect_plan_has("the prune's dry run", plan, "Index Cond: (id = ANY");
  free(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(upgrade_keeps_history_and_identity, efx_teardown),
      cmocka_unit_test_teardown(identity_lookups_use_the_partial_index, efx_teardown),
      cmocka_unit_test_teardown(the_moves_view_is_read_by_key, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
