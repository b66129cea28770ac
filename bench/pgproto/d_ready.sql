BEGIN;
WITH picked AS (SELECT step_id, task_id FROM ready WHERE queue IS NULL AND lease_expires_at IS NULL AND NOT retry ORDER BY queue, priority DESC, task_id, step_id LIMIT 100 FOR UPDATE SKIP LOCKED),
moved AS (UPDATE ready r SET lease_owner = 'w', lease_expires_at = 99, claim_id = nextval('claims') FROM picked p WHERE r.step_id = p.step_id RETURNING r.step_id, r.claim_id, r.task_id),
lk AS (SELECT pg_try_advisory_xact_lock(task_id) FROM picked),
started AS (UPDATE tasks t SET state = 'in_progress', updated_at = 1 FROM picked p WHERE t.id = p.task_id AND t.state = 'pending' RETURNING t.id)
SELECT array_agg(step_id) AS ids, array_agg(claim_id) AS cids, array_agg(task_id) AS tids FROM moved \gset
COMMIT;
BEGIN;
SELECT pg_advisory_xact_lock(t) FROM unnest(:tids::bigint[]) t ORDER BY t;
WITH gone AS (DELETE FROM ready r USING unnest(:ids::bigint[], :cids::bigint[]) AS u(id, cid) WHERE r.step_id = u.id AND r.claim_id = u.cid RETURNING r.step_id, r.task_id, r.claim_id),
done AS (UPDATE steps2 s SET state = 'complete', attempts = s.attempts + 1, results = '{}' FROM gone WHERE s.id = gone.step_id RETURNING s.id, s.task_id, gone.claim_id AS cid),
att AS (INSERT INTO attempts (id, step_id, attempt, owner, started_at, due_at, finished_at, outcome) SELECT cid, id, 1, 'w', 1, 0, 2, 'success' FROM done),
tk AS (UPDATE tasks t SET state = 'complete', steps_done = steps_done + 1, updated_at = 2, finished_at = 2 FROM done WHERE t.id = done.task_id)
SELECT count(*) FROM done;
COMMIT;
