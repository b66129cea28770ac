BEGIN;
WITH picked AS (SELECT id, task_id FROM steps WHERE worker_queue IS NULL AND state = 'pending' AND parents_remaining = 0 ORDER BY worker_queue, task_id, id LIMIT 100 FOR UPDATE SKIP LOCKED),
moved AS (UPDATE steps s SET state = 'in_progress', attempts = 1, lease_owner = 'w', lease_expires_at = 99, claim_id = nextval('claims') FROM picked p WHERE s.id = p.id RETURNING s.id, s.claim_id, s.task_id),
lk AS (SELECT pg_try_advisory_xact_lock(task_id) FROM picked),
started AS (UPDATE tasks t SET state = 'in_progress', updated_at = 1 FROM picked p WHERE t.id = p.task_id AND t.state = 'pending' RETURNING t.id)
SELECT array_agg(id) AS ids, array_agg(claim_id) AS cids, array_agg(task_id) AS tids FROM moved \gset
COMMIT;
BEGIN;
SELECT pg_advisory_xact_lock(t) FROM unnest(:tids::bigint[]) t ORDER BY t;
WITH done AS (UPDATE steps s SET state = 'complete', results = '{}', lease_owner = NULL, lease_expires_at = NULL, claim_id = NULL FROM unnest(:ids::bigint[], :cids::bigint[]) AS u(id, cid) WHERE s.id = u.id AND s.state = 'in_progress' AND s.claim_id = u.cid RETURNING s.id, s.task_id, u.cid),
att AS (INSERT INTO attempts (id, step_id, attempt, owner, started_at, due_at, finished_at, outcome) SELECT cid, id, 1, 'w', 1, 0, 2, 'success' FROM done),
tk AS (UPDATE tasks t SET state = 'complete', steps_done = steps_done + 1, updated_at = 2, finished_at = 2 FROM done WHERE t.id = done.task_id)
SELECT count(*) FROM done;
COMMIT;
