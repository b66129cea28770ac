-- Queues with limits and priority (issue 23, DESIGN §4 and §19).
--
-- Any step may name a queue (steps.queue; a worker step's is its
-- worker_queue, so the worker steps stored before this migration get it
-- here). A task's priority is kept on the task and copied to its steps (a
-- map's instances too), so that the readiness index orders by it without a
-- join. Rows written before: queue NULL (but worker steps), priority 0.
--
-- The two readiness indexes of 0012 lead with queue instead of worker_queue
-- (and the fresh steps' gain priority, higher first, before task_id): an
-- orchestrator's steps of no queue are one range of each (a worker step
-- always names its queue), in the order they were claimed before but for
-- priority, and each queue's steps are a range of their own, which a claim
-- reads only while the queue has room. The steps of a queue that both
-- worker steps and an orchestrator's steps name share its range, and each
-- kind of claim passes over the other's. Measured with
-- bench/callgrind_compare.sh: worker_queue and queue both leading cost
-- about +3% on the steps of no queue (two more fields in every key
-- comparison of the indexes the engine's updates keep); queue alone costs
-- what worker_queue did, and priority one integer field more.
--
-- A queue's steps in progress are counted at claim time (its concurrency,
-- whoever holds them), no counter that could drift, through steps_leases
-- (0001: every step in progress): a look at each step in progress
-- store-wide, made only by a claim of a queue with a concurrency limit. A
-- partial index of the queues' steps in progress would make it a look at
-- the queue's alone, but the engine's every claim and outcome of a step
-- of no queue then pays for keeping it: +1.4% instructions per step on
-- bench_engine throughput (bench/callgrind_compare.sh), for a count that
-- the steps of no queue never need.
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
CREATE INDEX steps_retry_due ON steps (queue, run_at)
  WHERE state = 'waiting_for_retry';
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (queue, priority DESC, task_id)
  WHERE state = 'pending' AND parents_remaining = 0;

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
