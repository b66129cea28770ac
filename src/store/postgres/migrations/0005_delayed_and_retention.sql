-- Delayed starts and retention (DESIGN §16).
--
-- A root step of a task submitted with a start time (`tasker submit --at`)
-- is stored pending with parents_remaining = -1 until a claim takes it:
-- the start time stands in for a parent. It is out of steps_fresh (ordered
-- by task, with run_at filtered row by row: a backlog of tasks delayed to
-- tomorrow would be walked by every claim) and in this index, ordered by
-- start time like the due retries, so a claim and next_due read its first
-- entries only.
CREATE INDEX steps_delayed ON steps (run_at, id) WHERE state = 'pending' AND parents_remaining = -1;

-- Finished tasks by when they finished, for retention: a batch is the
-- start of this range. finished_at changes only when a task settles in
-- complete, error or cancelled (or an operator reopens it), so the task's
-- other updates stay HOT (0003_lists.sql).
CREATE INDEX tasks_finished ON tasks (finished_at, id) WHERE finished_at IS NOT NULL;
