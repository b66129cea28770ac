-- Lists over the whole store (DESIGN §15; include/tasker/query.h).
--
-- The run_at a claim took the step at: how late a retry started is
-- started_at - due_at. Written by the claim in the attempt row it inserts
-- anyway; rows from before this version keep NULL (unknown). Adding a
-- nullable column without a default rewrites nothing.
ALTER TABLE attempts ADD COLUMN due_at bigint;

-- Tasks of a template, newest first. template_id never changes, so this
-- index keeps every update of a task HOT (0001_init.sql): tasks still has
-- no index on state, whose changes would then each need new entries in
-- every index of the table.
CREATE INDEX tasks_by_template ON tasks (template_id, id);

-- Steps in error, by task: the failed-steps list, and the way to tasks in
-- state error (a task is in error only while one of its steps is). steps
-- is already indexed on state (the readiness indexes), so its updates that
-- change state were never HOT: this costs one index entry per failed step.
CREATE INDEX steps_error ON steps (task_id, id) WHERE state = 'error';

-- Unindexed on purpose: attempts.started_at (a second index written by
-- every claim; the activity window finds its first row by binary search on
-- the primary key instead), and text search in last_error (a substring
-- cannot use a b-tree; it scans the tasks the other conditions leave).
