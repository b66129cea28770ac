-- Readiness out of the steps row (issue 22, DESIGN §4): the work index.
--
-- Before this, every change of a step's state was an update of steps that
-- wrote new entries in each of its indexes (not HOT): its partial
-- readiness indexes (steps_fresh, steps_retry_due, steps_delayed), its
-- leases (steps_leases), a queue's steps in progress (steps_queue_busy)
-- and its steps in error (steps_error) all name state, parents_remaining,
-- run_at or the lease. Now `ready` holds one row per step that is ready
-- (kind 2: pending, its parents done), delayed (1: pending with
-- parents_remaining -1 until due), waiting for a retry (0) or leased (3:
-- in progress), with what a claim orders and filters by; the step leaves
-- it when it leaves those states. No index of steps names a column that
-- a move changes, so with the room fillfactor leaves on its page each
-- write of a step is HOT.
--
-- steps stays the truth (its state, lease and claim_id, the fence, are
-- written as before, by the same statements): the ready row follows every
-- write of steps through the statement triggers below, one set-based
-- statement per statement of steps (transition tables), so no writer can
-- forget it. A claim takes its order from ready and locks the steps rows
-- (SKIP LOCKED), never a ready row (postgres_claim.c): every writer, the
-- claim too, locks a step's steps row before its ready row, so none waits
-- for another the other way round.
--
-- Tasks in error are found along tasks_with_errors (their steps_error
-- counter, which changes only when a step enters or leaves error) instead
-- of steps_error.
CREATE TABLE ready (
  step_id          bigint PRIMARY KEY,
  task_id          bigint NOT NULL,
  kind             smallint NOT NULL, -- 0 retry, 1 delayed, 2 fresh, 3 leased
  worker           boolean NOT NULL,  -- a worker step's (steps.worker_queue)
  queue            text,
  priority         integer NOT NULL,
  run_at           bigint NOT NULL,
  attempts         integer NOT NULL,
  lease_expires_at bigint
) WITH (fillfactor = 50);
-- Half of each page left free: a claim's update of a row (not HOT: its
-- kind changes) then finds room on the row's own page, with no lock of the
-- old version written first (bench/pg_wal_rows.sh).
-- Ready pending steps, higher priority first, then oldest task first.
CREATE INDEX ready_fresh ON ready (queue, priority DESC, task_id, step_id) WHERE kind = 2;
-- Due retries and delayed starts, earliest first.
CREATE INDEX ready_timed ON ready (queue, kind, run_at, step_id) WHERE kind < 2;
-- Leases, for the reaper and the next expiry.
CREATE INDEX ready_leases ON ready (lease_expires_at) WHERE kind = 3;
-- A queue's steps in progress (its concurrency, whoever holds them).
CREATE INDEX ready_busy ON ready (queue) WHERE kind = 3 AND queue IS NOT NULL;

CREATE FUNCTION tasker_ready_kind(state text, parents integer) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
  $$ SELECT CASE WHEN state = 'waiting_for_retry' THEN 0
                 WHEN state = 'pending' AND parents = -1 THEN 1
                 WHEN state = 'pending' AND parents = 0 THEN 2
                 WHEN state = 'in_progress' THEN 3 END::smallint $$;

CREATE FUNCTION tasker_ready_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ready (step_id, task_id, kind, worker, queue, priority, run_at, attempts,
                     lease_expires_at)
    SELECT id, task_id, k, worker_queue IS NOT NULL, queue, priority, run_at, attempts,
           lease_expires_at
    FROM (SELECT n.*, tasker_ready_kind(n.state, n.parents_remaining) AS k FROM new_steps n) n
    WHERE k IS NOT NULL;
  RETURN NULL;
END $$;

-- Only the rows whose readiness or what a claim reads of it changed: a
-- step's results or error written, or a parent counted down short of its
-- last, write no ready row. A step that stays in ready has its row
-- updated, one that leaves it its row deleted, one that enters it a row
-- inserted.
CREATE FUNCTION tasker_ready_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH ch AS MATERIALIZED (
    SELECT n.id, n.task_id, n.worker_queue, n.queue, n.priority, n.run_at, n.attempts,
           n.lease_expires_at, tasker_ready_kind(n.state, n.parents_remaining) AS k,
           tasker_ready_kind(o.state, o.parents_remaining) AS ok
    FROM new_steps n JOIN old_steps o ON o.id = n.id
    WHERE (n.state, n.parents_remaining, n.run_at, n.attempts, n.lease_expires_at, n.queue,
           n.priority, n.worker_queue)
          IS DISTINCT FROM (o.state, o.parents_remaining, o.run_at, o.attempts,
           o.lease_expires_at, o.queue, o.priority, o.worker_queue)),
  gone AS (DELETE FROM ready r WHERE r.step_id = ANY (ARRAY(
    SELECT id FROM ch WHERE k IS NULL AND ok IS NOT NULL))),
  moved AS (UPDATE ready r SET kind = ch.k, worker = ch.worker_queue IS NOT NULL,
      queue = ch.queue, priority = ch.priority, run_at = ch.run_at, attempts = ch.attempts,
      lease_expires_at = ch.lease_expires_at
    FROM ch WHERE r.step_id = ch.id AND ch.k IS NOT NULL AND ch.ok IS NOT NULL)
  INSERT INTO ready (step_id, task_id, kind, worker, queue, priority, run_at, attempts,
                     lease_expires_at)
    SELECT id, task_id, k, worker_queue IS NOT NULL, queue, priority, run_at, attempts,
           lease_expires_at FROM ch WHERE k IS NOT NULL AND ok IS NULL;
  RETURN NULL;
END $$;

CREATE FUNCTION tasker_ready_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM ready r WHERE r.step_id = ANY (ARRAY(
    SELECT id FROM old_steps WHERE tasker_ready_kind(state, parents_remaining) IS NOT NULL));
  RETURN NULL;
END $$;

CREATE TRIGGER steps_ready_inserted AFTER INSERT ON steps
  REFERENCING NEW TABLE AS new_steps FOR EACH STATEMENT EXECUTE FUNCTION tasker_ready_inserted();
CREATE TRIGGER steps_ready_updated AFTER UPDATE ON steps
  REFERENCING OLD TABLE AS old_steps NEW TABLE AS new_steps
  FOR EACH STATEMENT EXECUTE FUNCTION tasker_ready_updated();
CREATE TRIGGER steps_ready_deleted AFTER DELETE ON steps
  REFERENCING OLD TABLE AS old_steps FOR EACH STATEMENT EXECUTE FUNCTION tasker_ready_deleted();

INSERT INTO ready (step_id, task_id, kind, worker, queue, priority, run_at, attempts,
                   lease_expires_at)
  SELECT id, task_id, tasker_ready_kind(state, parents_remaining), worker_queue IS NOT NULL,
         queue, priority, run_at, attempts, lease_expires_at
  FROM steps WHERE state IN ('pending', 'waiting_for_retry', 'in_progress')
    AND tasker_ready_kind(state, parents_remaining) IS NOT NULL;

CREATE INDEX tasks_with_errors ON tasks (id) WHERE steps_error > 0;
-- Room on each new page of steps for two more versions of each row (its
-- claim and its outcome, both HOT now): at 0011's 50, 22-31% of those
-- updates found no room and were not HOT (bench/pg_wal_rows.sh, 20,000
-- single-step tasks: 2,222 B of WAL per task, 2,040 at 30).
ALTER TABLE steps SET (fillfactor = 30);
DROP INDEX steps_retry_due, steps_fresh, steps_delayed, steps_leases, steps_queue_busy,
  steps_error;
