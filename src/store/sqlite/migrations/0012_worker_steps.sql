-- Steps run by outside workers (issue 23, DESIGN §19).
--
-- A step whose handler is { kind = "worker", queue = "images" } keeps its
-- queue in worker_queue (copied from the template at submit; a map's
-- instances inherit their map step's). Such a step is claimed only by a
-- worker's claim of its queue, through `tasker serve`, never by an
-- orchestrator's ordinary claim: the two readiness indexes of migration
-- 0005 now hold only the orchestrators' steps (worker_queue IS NULL), and
-- two more hold each queue's ready steps in the same orders (due retries
-- by run_at; fresh steps by task). So an orchestrator's claim scans the
-- same index ranges as before however many worker steps wait, and a
-- queue's claim is a range of its own. worker_queue is written once, when
-- the row is inserted: no statement of the hot path sets it, so the
-- partial indexes that name it cost the engine's updates nothing more.
--
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

CREATE INDEX steps_queue_retry_due ON steps (worker_queue, run_at)
  WHERE state = 'waiting_for_retry' AND worker_queue IS NOT NULL;
CREATE INDEX steps_queue_fresh ON steps (worker_queue, task_id)
  WHERE state = 'pending' AND parents_remaining = 0 AND worker_queue IS NOT NULL;
