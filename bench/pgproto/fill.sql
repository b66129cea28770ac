INSERT INTO tasks (id, template_id, context, state, steps_total, created_at, updated_at)
  SELECT g, 1, '{}', 'pending', 1, 0, 0 FROM generate_series(1, :n) g;
INSERT INTO steps (task_id, idx, state, max_attempts, retryable, backoff, parents_remaining, run_at)
  SELECT g, 0, 'pending', 3, true, 'default', 0, 0 FROM generate_series(1, :n) g;
INSERT INTO steps2 (id, task_id, idx, state, max_attempts, retryable, backoff, parents_remaining)
  SELECT g, g, 0, 'pending', 3, true, 'default', 0 FROM generate_series(1, :n) g;
INSERT INTO ready (step_id, task_id, run_at) SELECT g, g, 0 FROM generate_series(1, :n) g;
INSERT INTO jobs (task_identifier, payload, run_at, created_at, updated_at)
  SELECT 'noop', '{}', 0, 0, 0 FROM generate_series(1, :n) g;
VACUUM ANALYZE;
