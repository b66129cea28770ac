-- Steps run by outside workers (issue 23, DESIGN §19).
--
-- A step whose handler is { kind = "worker", queue = "images" } keeps its
-- queue in worker_queue (copied from the template at submit; a map's
-- instances inherit their map step's). Such a step is claimed only by a
-- worker's claim of its queue, through `tasker serve`, never by an
-- orchestrator's claim. The three readiness indexes (0001, 0005) keep their
-- conditions and lead with worker_queue: an orchestrator's steps
-- (worker_queue NULL) are one range of each, in the order it always claimed
-- them in, and each queue's ready steps a range of their own in the same
-- order. So an orchestrator's claim scans what it did before however many
-- worker steps wait, a queue's claim reads only its own, and no index is
-- added for the engine's updates to keep. worker_queue is written once,
-- with the row: no update is less HOT than it was (state is in the
-- predicates already).
--
-- A worker's claim hands out a token (claim id and a random secret); its
-- attempt row keeps only the SHA-256 of the secret (token_hash), against
-- which every heartbeat and outcome of that claim is checked.
ALTER TABLE steps ADD COLUMN worker_queue text;
ALTER TABLE attempts ADD COLUMN token_hash bytea;

DROP INDEX steps_retry_due;
CREATE INDEX steps_retry_due ON steps (worker_queue, run_at, id)
  WHERE state = 'waiting_for_retry';
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (worker_queue, task_id, id)
  WHERE state = 'pending' AND parents_remaining = 0;
DROP INDEX steps_delayed;
CREATE INDEX steps_delayed ON steps (worker_queue, run_at, id)
  WHERE state = 'pending' AND parents_remaining = -1;
