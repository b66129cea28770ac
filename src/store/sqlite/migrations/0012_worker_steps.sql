-- Steps run by outside workers (issue 23, DESIGN §19).
--
-- A step whose handler is { kind = "worker", queue = "images" } keeps its
-- queue in worker_queue (copied from the template at submit; a map's
-- instances inherit their map step's). Such a step is claimed only by a
-- worker's claim of its queue, through `tasker serve`, never by an
-- orchestrator's ordinary claim. The two readiness indexes of migration
-- 0005 keep their conditions and lead with worker_queue: an
-- orchestrator's steps (worker_queue NULL) are one range of each, in the
-- order it always claimed them in, and each queue's ready steps are a range
-- of their own, in the same order. So an orchestrator's claim scans what it
-- did before however many worker steps wait, a queue's claim reads only its
-- own, and no index was added for the engine's updates to keep. Measured
-- with bench/callgrind_compare.sh (bench_engine throughput, instructions
-- per step against the schema before): indexes of the queues' own cost
-- every state change of every step a cursor and conditions (+3.6% with
-- two, +1.4% with one); the leading column costs about as much, +1.3%
-- (independent steps) and +1.7% (chains), in SQLite's comparisons of keys
-- that begin with a NULL (its generic record comparator instead of the
-- one for a leading integer). worker_queue is written once, with the row.
--
-- A worker's claim hands out a token (claim id and a random secret); its
-- attempt row keeps only the SHA-256 of the secret (token_hash), against
-- which every heartbeat and outcome of that claim is checked.
ALTER TABLE steps ADD COLUMN worker_queue TEXT;
ALTER TABLE attempts ADD COLUMN token_hash BLOB;

DROP INDEX steps_retry_due;
CREATE INDEX steps_retry_due ON steps (worker_queue, run_at) WHERE state = 'waiting_for_retry';
DROP INDEX steps_fresh;
CREATE INDEX steps_fresh ON steps (worker_queue, task_id)
  WHERE state = 'pending' AND parents_remaining = 0;
