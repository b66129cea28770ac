-- Claim order (DESIGN §4; README, "How the engine keeps its promises"): a claim
-- takes the retries that are due first, earliest run_at first, and then the
-- ready pending steps of the oldest task first. One index per kind of ready
-- step replaces steps_ready, whose single run_at order put every due retry
-- behind all the fresh work submitted before it came due, and sent a chain
-- of steps breadth-first across every stored task.

DROP INDEX steps_ready;

-- A step waits for a retry only after it ran, so its parents are done.
CREATE INDEX steps_retry_due ON steps (run_at) WHERE state = 'waiting_for_retry';

-- A pending step enters this index when its last parent completes (or at
-- submit, with no parents), and is due from then on: its run_at is the time
-- it became ready, never in the future. Keyed by task so that the oldest
-- task's steps go first (the rowid breaks ties in step order).
CREATE INDEX steps_fresh ON steps (task_id) WHERE state = 'pending' AND parents_remaining = 0;
