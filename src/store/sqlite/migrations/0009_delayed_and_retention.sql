-- Delayed starts and retention (DESIGN §16).
--
-- A task submitted with a start time (`tasker submit --at`) keeps it in
-- start_at until it is due, and its root steps wait with parents_remaining
-- = -1 (the start time stands in for a parent), out of steps_fresh: that
-- index is ordered by task and filters run_at row by row, so a backlog of
-- tasks delayed to tomorrow would be walked by every claim. A claim reads
-- the first entries of tasks_delayed, releases the roots of the tasks that
-- came due (parents_remaining 0, run_at the start time) and clears their
-- start_at. The index is on tasks, not steps, and names only start_at: an
-- SQLite partial index is kept up to date by the statements that set a
-- column it names, and no statement of the engine's hot path sets start_at
-- (an index on steps naming state would cost every claim and outcome).
ALTER TABLE tasks ADD COLUMN start_at INTEGER;
CREATE INDEX tasks_delayed ON tasks (start_at) WHERE start_at IS NOT NULL;

-- Finished tasks by when they finished, for retention: a batch is the
-- start of this range. finished_at is set when a task settles in complete,
-- error or cancelled (and cleared if an operator reopens it); only those
-- statements maintain the index.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
