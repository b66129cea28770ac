BEGIN;
WITH picked AS (SELECT r.step_id, r.task_id FROM ready r CROSS JOIN LATERAL (SELECT s.id FROM steps2 s WHERE s.id = r.step_id AND s.state = 'pending' FOR UPDATE SKIP LOCKED) s WHERE r.queue IS NULL AND r.lease_expires_at IS NULL AND NOT r.retry ORDER BY r.queue, r.priority DESC, r.task_id, r.step_id LIMIT 100),
moved AS (UPDATE steps2 s SET state = 'in_progress', attempts = s.attempts + 1, lease_owner = 'w', lease_expires_at = 99, claim_id = nextval('claims') FROM picked p WHERE s.id = p.step_id RETURNING s.id, s.claim_id, s.task_id),
rd AS (UPDATE ready r SET lease_owner = 'w', lease_expires_at = 99, claim_id = m.claim_id FROM moved m WHERE r.step_id = m.id),
started AS (UPDATE tasks t SET state = 'in_progress', updated_at = 1, started_at = 1 FROM picked p WHERE t.id = p.task_id AND t.state = 'pending' AND pg_try_advisory_xact_lock(t.id) RETURNING t.id)
SELECT array_agg(id) AS ids, array_agg(claim_id) AS cids, array_agg(task_id) AS tids FROM moved \gset
COMMIT;
BEGIN;
SELECT pg_advisory_xact_lock(t) FROM unnest(:tids::bigint[]) t ORDER BY t;
WITH done AS (UPDATE steps2 s SET state = 'complete', attempts = s.attempts, results = '{}', lease_owner = NULL, lease_expires_at = NULL, claim_id = NULL FROM unnest(:ids::bigint[], :cids::bigint[]) AS u(id, cid) WHERE s.id = u.id AND s.state = 'in_progress' AND s.claim_id = u.cid RETURNING s.id, s.task_id, u.cid),
gone AS (DELETE FROM ready r USING done WHERE r.step_id = done.id),
att AS (INSERT INTO attempts (id, step_id, attempt, owner, started_at, due_at, finished_at, outcome) SELECT cid, id, 1, 'w', 1, 0, 2, 'success' FROM done),
tk AS (UPDATE tasks t SET state = 'complete', steps_done = steps_done + 1, updated_at = 2, finished_at = 2 FROM done WHERE t.id = done.task_id)
SELECT count(*) FROM done;
COMMIT;
