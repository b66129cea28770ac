-- Lists over the whole store (DESIGN §15; include/tasker/query.h).
--
-- The run_at a claim took the step at: how late a retry started is
-- started_at - due_at. Written by the claim in the attempt row it inserts
-- anyway; rows from before this version keep NULL (unknown).
ALTER TABLE attempts ADD COLUMN due_at INTEGER;

-- Tasks of a template, newest first (the key ends with the rowid): a
-- template_id never changes, so this costs one entry per task at submit.
CREATE INDEX tasks_template ON tasks (template_id);

-- Steps in error, by task: the failed-steps list and the tasks whose steps
-- failed. A step enters it when it fails for good and leaves when an
-- operator retries or resolves it; every other write to a step changes no
-- column of the key and does not meet the condition.
CREATE INDEX steps_error ON steps (task_id) WHERE state = 'error';

-- Unindexed on purpose: attempts.started_at (an index there would cost
-- every claim a second b-tree write; the activity window finds its first
-- row by binary search on the primary key instead), and text search in
-- last_error (a substring cannot use a b-tree; it scans the tasks the
-- other conditions leave).
