-- Child tasks (issue 24 part 3, DESIGN §18; docs/children.md).
--
-- A step of kind `task` starts one child task when it is claimed, in the
-- transaction that parks it as waiting (postgres_children.c). The child's
-- row names its parent: the task, the step, the attempt and the claim
-- (the attempt row's id, never reused: an operator's retry starts the
-- attempts again from 1). NULL for every other task; no default, so
-- adding them rewrites nothing. They are written with the child and never
-- change: the index over them keeps a task's other updates HOT.
ALTER TABLE tasks ADD COLUMN parent_task_id bigint;
ALTER TABLE tasks ADD COLUMN parent_step_id bigint;
ALTER TABLE tasks ADD COLUMN parent_attempt integer;
ALTER TABLE tasks ADD COLUMN parent_claim_id bigint;
CREATE INDEX tasks_children ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;

-- A child's end is a signal bound to the parent's claim (signals.for_claim,
-- added with the callbacks of http steps): the outcome of the attempt that
-- started the child, never of a later one.

-- A child's end, by whatever path its task finishes (an outcome, an
-- operator's cancel, its deadline), stores in the same transaction a
-- signal for its parent's step, bound to the parent's claim, and wakes
-- the orchestrators: complete brings the results of the child's leaf
-- steps (steps no other step depends on, by name; null for one without
-- results), error and cancelled fail the parent's attempt. wait_take
-- delivers it.
CREATE FUNCTION tasker_child_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO signals (step_id, data, error, created_at, for_claim)
  VALUES (NEW.parent_step_id,
    CASE WHEN NEW.state = 'complete' THEN
      (SELECT COALESCE(json_object_agg(s.name, s.results::json ORDER BY s.idx)::text, '{}')
       FROM steps s WHERE s.task_id = NEW.id AND s.map_idx IS NULL
       AND NOT EXISTS (SELECT 1 FROM template_edges e WHERE e.template_id = NEW.template_id
                       AND e.parent_idx = s.idx)) END,
    CASE NEW.state
      WHEN 'error' THEN 'child task ' || NEW.id || ' ended in error' ||
        COALESCE((SELECT ': step ' || s.name || ': ' || COALESCE(s.last_error, 'failed')
                  FROM steps s WHERE s.task_id = NEW.id AND s.state = 'error'
                  ORDER BY s.idx LIMIT 1), '')
      WHEN 'cancelled' THEN 'child task ' || NEW.id || ' was cancelled' END,
    NEW.updated_at, NEW.parent_claim_id);
  PERFORM pg_notify('tasker', 'wait'); -- a wait's news (drain_changes)
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_child_end AFTER UPDATE OF state ON tasks FOR EACH ROW
  WHEN (NEW.parent_claim_id IS NOT NULL AND NEW.state IN ('complete', 'error', 'cancelled')
        AND OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION tasker_child_end();
