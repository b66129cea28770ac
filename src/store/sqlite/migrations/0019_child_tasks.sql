-- Child tasks (issue 24 part 3, DESIGN §18; docs/children.md).
--
-- A step of kind `task` starts one child task when it is claimed, in the
-- transaction that parks it as waiting (sqlite_children.c). The child's
-- row names its parent: the task, the step, the attempt and the claim
-- (the attempt row's id, never reused: an operator's retry starts the
-- attempts again from 1). NULL for every other task.
ALTER TABLE tasks ADD COLUMN parent_task_id INTEGER;
ALTER TABLE tasks ADD COLUMN parent_step_id INTEGER;
ALTER TABLE tasks ADD COLUMN parent_attempt INTEGER;
ALTER TABLE tasks ADD COLUMN parent_claim_id INTEGER;
CREATE INDEX tasks_children ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;

-- A child's end is a signal bound to the parent's claim (signals.for_claim,
-- added with the callbacks of http steps): the outcome of the attempt that
-- started the child, never of a later one.

-- A child's end, by whatever path its task finishes (an outcome, an
-- operator's cancel, its deadline), stores in the same transaction a
-- signal for its parent's step, bound to the parent's claim: complete
-- brings the results of the child's leaf steps (steps no other step
-- depends on, by name; null for one without results), error and
-- cancelled fail the parent's attempt. wait_take delivers it.
CREATE TRIGGER tasks_child_end AFTER UPDATE OF state ON tasks
WHEN NEW.parent_claim_id IS NOT NULL AND NEW.state IN ('complete', 'error', 'cancelled')
  AND OLD.state <> NEW.state
BEGIN
  INSERT INTO signals (step_id, data, error, created_at, for_claim)
  VALUES (NEW.parent_step_id,
    CASE WHEN NEW.state = 'complete' THEN
      (SELECT COALESCE(json_group_object(l.name, json(l.results)), '{}') FROM
        (SELECT s.name, s.results FROM steps s WHERE s.task_id = NEW.id AND s.map_idx IS NULL
         AND NOT EXISTS (SELECT 1 FROM template_edges e WHERE e.template_id = NEW.template_id
                         AND e.parent_idx = s.idx) ORDER BY s.idx) l) END,
    CASE NEW.state
      WHEN 'error' THEN 'child task ' || NEW.id || ' ended in error' ||
        COALESCE((SELECT ': step ' || s.name || ': ' || COALESCE(s.last_error, 'failed')
                  FROM steps s WHERE s.task_id = NEW.id AND s.state = 'error'
                  ORDER BY s.idx LIMIT 1), '')
      WHEN 'cancelled' THEN 'child task ' || NEW.id || ' was cancelled' END,
    NEW.updated_at, NEW.parent_claim_id);
END;
