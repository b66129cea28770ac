-- Queues with limits and priority (issue 23, DESIGN §4 and §19).
--
-- Any step may name a queue (steps.queue; a worker step's is its
-- worker_queue, so the worker steps stored before this migration get it
-- here). A task's priority is kept on the task and copied to its steps (a
-- map's instances too), so that the readiness index orders by it without a
-- join. Rows written before: queue NULL (but worker steps), priority 0.
--
-- The two readiness indexes of 0012 gain queue after worker_queue (and the
-- fresh steps' priority, higher first, before task_id): an orchestrator's
-- steps of no queue are one range of each, in the order they were claimed
-- before but for priority; an orchestrator's steps of queue Q (worker_queue
-- NULL, queue Q) are a range, and a worker queue's steps (worker_queue Q,
-- queue Q) another. A claim reads each range it may take from with room.
--
-- steps_queue_busy counts a queue's steps in progress at claim time (its
-- concurrency, whoever holds them): no counter that could drift. Its
-- condition tests queue first, so a step of no queue costs one test of a
-- NULL on each change of state.
--
-- queues: a row per queue that a stored step named (written at submit, with
-- whether a worker step, `worker`, or an orchestrator's step, `plain`, named
-- it) or that the configuration defined (queue_put): its limits (0: none),
-- and its token bucket (tokens as of refilled_at). An orchestrator's claim
-- reads the rows with `plain` set: none, and it claims exactly as before.
-- queue_workers: when each worker last polled each queue (worker_seen).
ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN queue TEXT;
ALTER TABLE steps ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
UPDATE steps SET queue = worker_queue WHERE worker_queue IS NOT NULL;

DROP INDEX steps_retry_due;
CREATE INDEX steps_retry_due ON steps (worker_queue, queue, run_at)
  WHERE state = 'waiting_for_retry';
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (worker_queue, queue, priority DESC, task_id)
  WHERE state = 'pending' AND parents_remaining = 0;
CREATE INDEX steps_queue_busy ON steps (queue)
  WHERE queue IS NOT NULL AND state = 'in_progress';

CREATE TABLE queues (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  concurrency INTEGER NOT NULL DEFAULT 0,
  rate        REAL NOT NULL DEFAULT 0,    -- steps per second
  burst       INTEGER NOT NULL DEFAULT 0, -- the bucket's size (rate > 0)
  tokens      REAL NOT NULL DEFAULT 0,
  refilled_at INTEGER NOT NULL DEFAULT 0,
  worker      INTEGER NOT NULL DEFAULT 0,
  plain       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX queues_plain ON queues (name) WHERE plain = 1;
INSERT INTO queues (name, worker)
  SELECT DISTINCT worker_queue, 1 FROM steps WHERE worker_queue IS NOT NULL;

CREATE TABLE queue_workers (
  queue     TEXT NOT NULL,
  worker    TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  PRIMARY KEY (queue, worker)
) WITHOUT ROWID;
