/* SQL that takes a PostgreSQL store's schema back before a migration, its
 * rows as a tasker of that time would have written them, for tests of a
 * store written before it: apply it (efx_pg_text), then let tasker
 * migrate the store again. The newest migration first: each undo takes
 * for granted that the later ones are undone (0022 before 0021, and so on
 * down to 0009). */
#ifndef TESTS_PG_UNDO_H
#define TESTS_PG_UNDO_H

/* The columns 0021_child_tasks.sql gives tasks (today's reports read
 * them). */
#define PG_CHILD_COLUMNS                                                                        \
  "ALTER TABLE tasks ADD COLUMN parent_task_id bigint, ADD COLUMN parent_step_id bigint,"       \
  " ADD COLUMN parent_attempt integer, ADD COLUMN parent_claim_id bigint;"
#define PG_CHILD_COLUMNS_TAKEN                                                                  \
  " ALTER TABLE tasks DROP COLUMN parent_task_id, DROP COLUMN parent_step_id,"                  \
  " DROP COLUMN parent_attempt, DROP COLUMN parent_claim_id;"

/* 0022_child_end_once.sql: the function of a child's end as 0021 made it
 * (0021's undo drops it). */
#define PG_UNDO_0022 "DELETE FROM schema_migrations WHERE version = 22; SELECT 1"

/* 0021_child_tasks.sql: no children, no trigger for their end. */
#define PG_UNDO_0021                                                                            \
  "DROP TRIGGER tasks_child_end ON tasks; DROP FUNCTION tasker_child_end();"                    \
  " DROP INDEX tasks_children;" PG_CHILD_COLUMNS_TAKEN                                          \
  " DELETE FROM schema_migrations WHERE version = 21; SELECT 1"

/* 0020_callbacks.sql: no callbacks, signals bound to no claim. */
#define PG_UNDO_0020                                                                            \
  "DROP TABLE callbacks; DROP INDEX signals_by_claim;"                                          \
  " ALTER TABLE signals DROP COLUMN for_claim, DROP COLUMN final, DROP COLUMN retry_after_ms;"  \
  " DELETE FROM schema_migrations WHERE version = 20; SELECT 1"

/* 0019_deadlines.sql: no deadlines. */
#define PG_UNDO_0019                                                                            \
  "DROP TABLE deadlines; ALTER TABLE tasks DROP COLUMN deadline_at;"                            \
  " DELETE FROM schema_migrations WHERE version = 19; SELECT 1"

/* 0018_waits_and_signals.sql: no signals, no kind 4 (waiting) in ready. */
#define PG_UNDO_0018                                                                            \
  "DROP TABLE signals; DROP INDEX ready_waiting;"                                               \
  " CREATE OR REPLACE FUNCTION tasker_ready_kind(state text, parents integer)"                  \
  " RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS"                                   \
  " $$ SELECT CASE WHEN state = 'waiting_for_retry' THEN 0"                                     \
  " WHEN state = 'pending' AND parents = -1 THEN 1 WHEN state = 'pending' AND parents = 0"      \
  " THEN 2 WHEN state = 'in_progress' THEN 3 END::smallint $$;"                                 \
  " DELETE FROM schema_migrations WHERE version = 18; SELECT 1"

/* The ready table of 0017_ready_table.sql and what keeps it, gone. */
#define PG_READY_TAKEN                                                                          \
  "DROP TRIGGER steps_ready_inserted ON steps; DROP TRIGGER steps_ready_updated ON steps;"     \
  " DROP TRIGGER steps_ready_deleted ON steps; DROP TABLE ready;"                               \
  " DROP FUNCTION tasker_ready_inserted(), tasker_ready_updated(), tasker_ready_deleted(),"     \
  " tasker_ready_kind(text, integer);"

/* 0017_ready_table.sql: readiness in the partial indexes of steps, as
 * 0015 and 0003 made them, and no ready table. */
#define PG_UNDO_0017                                                                            \
  PG_READY_TAKEN " DROP INDEX tasks_with_errors; ALTER TABLE steps SET (fillfactor = 50);"     \
  " CREATE INDEX steps_retry_due ON steps (queue, run_at, id)"                                  \
  " WHERE state = 'waiting_for_retry';"                                                         \
  " CREATE INDEX steps_fresh ON steps (queue, priority DESC, task_id, id)"                      \
  " WHERE state = 'pending' AND parents_remaining = 0;"                                         \
  " CREATE INDEX steps_delayed ON steps (queue, run_at, id)"                                    \
  " WHERE state = 'pending' AND parents_remaining = -1;"                                        \
  " CREATE INDEX steps_queue_busy ON steps (queue)"                                             \
  " WHERE queue IS NOT NULL AND state = 'in_progress';"                                         \
  " CREATE INDEX steps_leases ON steps (lease_expires_at) WHERE lease_expires_at IS NOT NULL;" \
  " CREATE INDEX steps_error ON steps (task_id, id) WHERE state = 'error';"                     \
  " DELETE FROM schema_migrations WHERE version = 17; SELECT 1"

/* 0016_retry_budgets.sql: retry budgets kept in each orchestrator. */
#define PG_UNDO_0016                                                                            \
  "DROP TABLE retry_budgets; DELETE FROM schema_migrations WHERE version = 16; SELECT 1"

/* 0015_queues.sql: no queues, no priority; the readiness indexes as 0013
 * made them. */
#define PG_UNDO_0015                                                                            \
  "DROP TABLE queue_workers, queues; DROP INDEX steps_queue_busy, steps_retry_due,"             \
  " steps_fresh, steps_delayed;"                                                                \
  " CREATE INDEX steps_retry_due ON steps (worker_queue, run_at, id)"                           \
  " WHERE state = 'waiting_for_retry';"                                                         \
  " CREATE INDEX steps_fresh ON steps (worker_queue, task_id, id) WHERE state = 'pending'"      \
  " AND parents_remaining = 0;"                                                                 \
  " CREATE INDEX steps_delayed ON steps (worker_queue, run_at, id) WHERE state = 'pending'"     \
  " AND parents_remaining = -1;"                                                                \
  " ALTER TABLE steps DROP COLUMN queue, DROP COLUMN priority;"                                  \
  " ALTER TABLE tasks DROP COLUMN priority;"                                                     \
  " DELETE FROM schema_migrations WHERE version = 15; SELECT 1"

/* 0014_smaller_error_text_flushes.sql: the index's default pending list. */
#define PG_UNDO_0014                                                                            \
  "ALTER INDEX steps_error_text RESET (gin_pending_list_limit);"                                \
  " DELETE FROM schema_migrations WHERE version = 14; SELECT 1"

/* 0013_worker_steps.sql: no worker steps (worker_queue, token_hash) and the
 * readiness indexes without their leading worker_queue. */
#define PG_UNDO_0013                                                                            \
  "DROP INDEX steps_retry_due, steps_fresh, steps_delayed;"                                     \
  " CREATE INDEX steps_retry_due ON steps (run_at, id) WHERE state = 'waiting_for_retry';"      \
  " CREATE INDEX steps_fresh ON steps (task_id, id) WHERE state = 'pending'"                    \
  " AND parents_remaining = 0;"                                                                 \
  " CREATE INDEX steps_delayed ON steps (run_at, id) WHERE state = 'pending'"                   \
  " AND parents_remaining = -1;"                                                                \
  " ALTER TABLE steps DROP COLUMN worker_queue; ALTER TABLE attempts DROP COLUMN token_hash;"    \
  " DELETE FROM schema_migrations WHERE version = 13; SELECT 1"

/* 0012_moves_view.sql: the moves view goes (it reads the columns that
 * undoing 0009 drops). */
#define PG_UNDO_0012                                                                            \
  "DROP VIEW moves; DELETE FROM schema_migrations WHERE version = 12; SELECT 1"

/* 0011_room_for_updates.sql: steps 100% full, attempts 70%. */
#define PG_UNDO_0011                                                                            \
  "ALTER TABLE steps RESET (fillfactor); ALTER TABLE attempts SET (fillfactor = 70);"           \
  " DELETE FROM schema_migrations WHERE version = 11; SELECT 1"

/* 0010_leaner_keys.sql: transitions keyed by id with their index by task
 * again, the identity unique over every task, the key from tasks to
 * templates, tasks written 70% full. */
#define PG_UNDO_0010                                                                            \
  "ALTER TABLE transitions DROP CONSTRAINT transitions_pkey;"                                   \
  " ALTER TABLE transitions ADD CONSTRAINT transitions_pkey PRIMARY KEY (id);"                  \
  " CREATE INDEX transitions_by_task ON transitions (task_id, id);"                             \
  " DROP INDEX tasks_identity; ALTER TABLE tasks ADD CONSTRAINT tasks_identity_key"             \
  " UNIQUE (identity); ALTER TABLE tasks ADD CONSTRAINT tasks_template_id_fkey"                 \
  " FOREIGN KEY (template_id) REFERENCES templates (id);"                                       \
  " ALTER TABLE tasks SET (fillfactor = 70);"                                                   \
  " DELETE FROM schema_migrations WHERE version = 10; SELECT 1"

/* 0009_moves_in_their_rows.sql: every move an attempt row or a tasks row
 * records becomes the transitions row written before 0009 (its *_seq as
 * the id: the same place in the order), then the columns go. The
 * statement's last result is the number of transitions rows. */
#define PG_UNDO_0009                                                                            \
  "INSERT INTO transitions (id, task_id, step_id, from_state, to_state, at, reason, attempt)"   \
  " SELECT m.seq, s.task_id, a.step_id, m.f, m.t, m.at, m.r, a.attempt"                         \
  " FROM attempts a JOIN steps s ON s.id = a.step_id CROSS JOIN LATERAL (VALUES"                \
  " (a.claim_seq, a.started_at, CASE WHEN a.claim_from_retry THEN 'waiting_for_retry'"          \
  " ELSE 'pending' END, 'in_progress', 'claimed'),"                                             \
  " (a.outcome_seq, COALESCE(a.outcome_at, a.finished_at), 'in_progress',"                      \
  " COALESCE(a.outcome_state, CASE WHEN a.next_run_at IS NOT NULL THEN 'waiting_for_retry'"     \
  " WHEN a.outcome = 'success' THEN 'complete' ELSE 'error' END), a.outcome))"                  \
  " AS m (seq, at, f, t, r) WHERE m.seq IS NOT NULL;"                                           \
  " INSERT INTO transitions (id, task_id, from_state, to_state, at, reason)"                    \
  " SELECT m.seq, k.id, m.f, m.t, m.at, m.r FROM tasks k CROSS JOIN LATERAL (VALUES"            \
  " (k.start_seq, k.started_at, 'pending', 'in_progress', 'first step claimed'),"              \
  " (k.finish_seq, k.finished_at, 'in_progress', k.state, CASE k.state WHEN 'complete' THEN"    \
  " 'all steps complete' ELSE 'a step failed and nothing else can progress' END))"              \
  " AS m (seq, at, f, t, r) WHERE m.seq IS NOT NULL;"                                           \
  " ALTER TABLE attempts DROP COLUMN outcome_seq, DROP COLUMN outcome_at,"                      \
  " DROP COLUMN outcome_state, DROP COLUMN claim_seq, DROP COLUMN claim_from_retry;"            \
  " ALTER TABLE tasks DROP COLUMN start_seq, DROP COLUMN started_at, DROP COLUMN finish_seq;"   \
  " DELETE FROM schema_migrations WHERE version = 9; SELECT count(*) FROM transitions"

#endif
