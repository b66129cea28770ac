-- Lists over the whole store (DESIGN §15; include/tasker/query.h).
--
-- The run_at a claim took the step at: how late a retry started is
-- started_at - due_at. Written by the claim in the attempt row it inserts
-- anyway; rows from before this version keep NULL (unknown).
ALTER TABLE attempts ADD COLUMN due_at INTEGER;

-- Tasks of a template, newest first (the key ends with the rowid): a
-- template_id never changes, so this costs one entry per task at submit.
CREATE INDEX tasks_template ON tasks (template_id);

-- Tasks with a step in error, newest first: the failed-steps list starts
-- here (then the task's steps, by the (task_id, idx) key). SQLite keeps a
-- partial index up to date only in statements that set a column it names:
-- of the engine's, only a step failing for good sets steps_error, while an
-- index on steps in error would be checked by every claim and outcome,
-- which all set steps.state (about 1% of the engine's instructions).
CREATE INDEX tasks_failed ON tasks (id) WHERE steps_error > 0;

-- Unindexed on purpose: attempts.started_at (an index there would cost
-- every claim a second b-tree write; the activity window finds its first
-- row by binary search on the primary key instead), and text search in
-- last_error (a substring cannot use a b-tree; it scans the tasks the
-- other conditions leave).
