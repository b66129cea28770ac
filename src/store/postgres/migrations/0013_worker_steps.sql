-- Steps run by outside workers (issue 23, DESIGN §19).
--
-- A step whose handler is { kind = "worker", queue = "images" } keeps its
-- queue in worker_queue (copied from the template at submit; a map's
-- instances inherit their map step's). Such a step is claimed only by a
-- worker's claim of its queue, through `tasker serve`, never by an
-- orchestrator's claim: the three readiness indexes (0001, 0005) now hold
-- only the orchestrators' steps (worker_queue IS NULL), and three more hold
-- each queue's ready steps in the same orders. So an orchestrator's claim
-- scans the same index ranges as before however many worker steps wait,
-- and a queue's claim is a range of its own. worker_queue is written once,
-- with the row: naming it in the predicates makes no update less HOT than
-- it was (state is named already).
--
-- A worker's claim hands out a token (claim id and a random secret); its
-- attempt row keeps only the SHA-256 of the secret (token_hash), against
-- which every heartbeat and outcome of that claim is checked.
ALTER TABLE steps ADD COLUMN worker_queue text;
ALTER TABLE attempts ADD COLUMN token_hash bytea;

DROP INDEX steps_retry_due;
CREATE INDEX steps_retry_due ON steps (run_at, id)
  WHERE state = 'waiting_for_retry' AND worker_queue IS NULL;
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (task_id, id)
  WHERE state = 'pending' AND parents_remaining = 0 AND worker_queue IS NULL;
DROP INDEX steps_delayed;
CREATE INDEX steps_delayed ON steps (run_at, id)
  WHERE state = 'pending' AND parents_remaining = -1 AND worker_queue IS NULL;

CREATE INDEX steps_queue_retry_due ON steps (worker_queue, run_at, id)
  WHERE state = 'waiting_for_retry' AND worker_queue IS NOT NULL;
CREATE INDEX steps_queue_fresh ON steps (worker_queue, task_id, id)
  WHERE state = 'pending' AND parents_remaining = 0 AND worker_queue IS NOT NULL;
CREATE INDEX steps_queue_delayed ON steps (worker_queue, run_at, id)
  WHERE state = 'pending' AND parents_remaining = -1 AND worker_queue IS NOT NULL;
