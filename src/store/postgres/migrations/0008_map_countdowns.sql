-- A mapped step's countdown of unfinished instances (DESIGN §17), kept in
-- a table of its own rather than in the map's steps row.
--
-- Each finished instance counts down once. On the steps row that was an
-- update of parents_remaining, a column in the predicate of steps_fresh
-- and steps_delayed, so never HOT: a new row version and a new entry in
-- every index of steps for each instance, and each later update found the
-- row again through the dead entries of the earlier ones. Here the
-- counted column is in no index and the rows are few and small, so each
-- count is a HOT update pruned in place (100 maps of 1,000 instances, no
-- workers: 0.59 ms and 102 buffer reads per instance outcome before,
-- against 0.44 ms and 38 for an independent step's).
--
-- A row is written when its map expands (remaining = its instances) and
-- when an operator's action leaves a map with instances unfinished again
-- (remaining = those), and deleted when the map completes or fails. The
-- map row's own parents_remaining is 0 while it is mapped; a report
-- derives the unfinished count from the instances, as SQLite's column
-- holds it. Settling a map recounts its instances in any case, so the
-- countdown only says when to look. No foreign key, as for steps (0007):
-- a prune deletes the rows of the tasks it removes.
CREATE TABLE map_countdowns (
  task_id bigint NOT NULL,
  idx integer NOT NULL,
  remaining integer NOT NULL,
  PRIMARY KEY (task_id, idx)
) WITH (fillfactor = 50);

INSERT INTO map_countdowns (task_id, idx, remaining)
  SELECT task_id, idx, parents_remaining FROM steps WHERE state = 'mapped';
UPDATE steps SET parents_remaining = 0 WHERE state = 'mapped';
