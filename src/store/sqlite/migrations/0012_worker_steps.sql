-- Steps run by outside workers (issue 23, DESIGN §19).
--
-- A step whose handler is { kind = "worker", queue = "images" } keeps its
-- queue in worker_queue (copied from the template at submit; a map's
-- instances inherit their map step's). Such a step is claimed only by a
-- worker's claim of its queue, through `tasker serve`, never by an
-- orchestrator's ordinary claim: the two readiness indexes of migration
-- 0005 now hold only the orchestrators' steps (worker_queue IS NULL), so an
-- orchestrator's claim scans the same index ranges as before however many
-- worker steps wait. The worker steps whose parents are done are in one
-- index of their own, by queue, state and run_at: a queue's due retries and
-- its fresh steps are each a range of it, in the order they became due.
-- One index, not one per kind as for the orchestrators, and its condition
-- starts with worker_queue: every update that moves a step from state to
-- state must look at it, and for an orchestrator's step (worker_queue NULL)
-- that look ends at its first term (bench/callgrind_compare.sh: the second
-- index cost the engine's hot path as much again).
-- A worker's claim hands out a token (claim id and a random secret); its
-- attempt row keeps only the SHA-256 of the secret (token_hash), against
-- which every heartbeat and outcome of that claim is checked.
ALTER TABLE steps ADD COLUMN worker_queue TEXT;
ALTER TABLE attempts ADD COLUMN token_hash BLOB;

DROP INDEX steps_retry_due;
CREATE INDEX steps_retry_due ON steps (run_at)
  WHERE state = 'waiting_for_retry' AND worker_queue IS NULL;
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (task_id)
  WHERE state = 'pending' AND parents_remaining = 0 AND worker_queue IS NULL;

CREATE INDEX steps_queue_ready ON steps (worker_queue, state, run_at)
  WHERE worker_queue IS NOT NULL AND parents_remaining = 0;
