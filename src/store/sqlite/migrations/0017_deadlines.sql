-- Deadlines (issue 24 part 4, DESIGN §3, §18; docs/deadlines.md).
--
-- tasks.deadline_at: a task's deadline, absolute ms on the store's clock
-- (the submit's time plus the duration the submit or its template gave);
-- NULL: none. Kept for show, why and the API; never changes.
--
-- deadlines: the deadlines still to look at, one row a task, written with
-- the task. At its time one transaction (sqlite_deadline.c) removes the
-- row and, if the task is still pending or in progress, cancels every
-- unfinished step of it and ends it in error with the reason "deadline".
-- A task that finished first is untouched: its row just goes. The
-- earliest row is the engine's next due time for deadlines (next_due);
-- the rows due are a range of deadlines_due. A table of its own rather
-- than a partial index of tasks on its state: a deadline is looked at
-- once, so a task an operator resumes after its deadline (out of error)
-- runs without it, as on PostgreSQL, where an index on tasks' state
-- would cost every task's start its HOT update.
ALTER TABLE tasks ADD COLUMN deadline_at INTEGER;
CREATE TABLE deadlines (
  task_id     INTEGER PRIMARY KEY,
  deadline_at INTEGER NOT NULL
);
CREATE INDEX deadlines_due ON deadlines (deadline_at, task_id);
