-- Deadlines (issue 24 part 4, DESIGN §3, §18; docs/deadlines.md).
--
-- tasks.deadline_at: a task's deadline, absolute ms on the store's clock
-- (the database server's: the submit's time plus the duration the submit
-- or its template gave); NULL: none. Kept for show, why and the API; never
-- changes. No default: adding it rewrites nothing.
--
-- deadlines: the deadlines still to look at, one row a task, written with
-- the task. At its time one transaction (postgres_deadline.c) takes the
-- row (FOR UPDATE SKIP LOCKED: several orchestrators never take one row
-- twice), removes it and, under the task's lock, if the task is still
-- pending or in progress, cancels every unfinished step of it and ends it
-- in error with the reason "deadline". A task that finished first is
-- untouched: its row just goes. The earliest row is the engines' next due
-- time for deadlines (next_due). A table of its own rather than a partial
-- index of tasks on its state: such an index would make every task's
-- start (pending to in_progress) a non-HOT update (0010), deadline or not;
-- the claim never reads this table.
ALTER TABLE tasks ADD COLUMN deadline_at bigint;
CREATE TABLE deadlines (
  task_id     bigint PRIMARY KEY,
  deadline_at bigint NOT NULL
);
CREATE INDEX deadlines_due ON deadlines (deadline_at, task_id);
