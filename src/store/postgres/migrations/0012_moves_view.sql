-- Every move of a task and of its steps, one row each, in one view: the
-- transitions rows and the moves that an attempt row or a tasks row
-- records instead (0009_moves_in_their_rows.sql). It is the one
-- definition of those derived moves: the history (`tasker show`, the
-- API's transitions), the step list's "last moved" and prune's counts all
-- read it, so a change to what a row records is made here alone.
--
-- Columns: those of transitions, with the id as seq (the order of the
-- history: each derived move's place was drawn from transitions_id_seq as
-- its row's id would have been), then the step's name and, for an
-- instance of a map step, its map's idx (NULL for a task's own move):
-- the history leaves instances out, and filtering on map_idx here lets
-- that condition reach the steps that each part of the view reads.
--
-- Each part is read by its keys when the reader gives the task as a
-- condition on task_id (= a value, or = ANY of an array: a subquery's
-- ids as ARRAY(...); `IN (SELECT ...)` is a join, which reaches no part's
-- index and reads them all), with the step's id where it has one:
-- transitions by (task_id, id); attempts through the task's steps (steps
-- by (task_id, idx) or by id, attempts by step); the task's own row by
-- id. A reader that needs neither step nor map_idx costs no join to steps
-- for the transitions rows (the planner removes it).
CREATE VIEW moves AS
SELECT t.id AS seq, t.task_id, t.step_id, t.from_state, t.to_state, t.at, t.reason,
       t.attempt, s.name AS step, s.map_idx
  FROM transitions t LEFT JOIN steps s ON s.id = t.step_id
UNION ALL
-- A step's claim (pending or waiting_for_retry -> in_progress, at the
-- attempt's start, reason 'claimed') and its recorded outcome
-- (in_progress -> the state it chose, at outcome_at or else finished_at,
-- reason the attempt's outcome). outcome_state is NULL where the state is
-- the one the outcome implies (TK__PG_OUTCOME_STATE, which the writers
-- use to leave it NULL): a next run waits for a retry, success completes,
-- anything else is an error.
SELECT m.seq, s.task_id, a.step_id, m.from_state, m.to_state, m.at, m.reason, a.attempt,
       s.name, s.map_idx
  FROM steps s JOIN attempts a ON a.step_id = s.id
  CROSS JOIN LATERAL (VALUES
    (a.claim_seq, a.started_at,
     CASE WHEN a.claim_from_retry THEN 'waiting_for_retry' ELSE 'pending' END,
     'in_progress', 'claimed'),
    (a.outcome_seq, COALESCE(a.outcome_at, a.finished_at), 'in_progress',
     COALESCE(a.outcome_state,
              CASE WHEN a.next_run_at IS NOT NULL THEN 'waiting_for_retry'
                   WHEN a.outcome = 'success' THEN 'complete' ELSE 'error' END),
     a.outcome)) AS m (seq, at, from_state, to_state, reason)
 WHERE m.seq IS NOT NULL
UNION ALL
-- A task's start (pending -> in_progress when its first step was claimed)
-- and its ordinary finish (in_progress -> complete or error, at
-- finished_at, with TK__PG_FINISH_REASON's reason), while its row holds it.
SELECT m.seq, k.id, NULL::bigint, m.from_state, m.to_state, m.at, m.reason, NULL::integer,
       NULL::text, NULL::integer
  FROM tasks k
  CROSS JOIN LATERAL (VALUES
    (k.start_seq, k.started_at, 'pending', 'in_progress', 'first step claimed'),
    (k.finish_seq, k.finished_at, 'in_progress', k.state,
     CASE k.state WHEN 'complete' THEN 'all steps complete'
                  WHEN 'error' THEN 'a step failed and nothing else can progress' END))
    AS m (seq, at, from_state, to_state, reason)
 WHERE m.seq IS NOT NULL;
