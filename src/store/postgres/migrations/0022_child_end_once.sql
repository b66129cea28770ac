-- A child's end is its parent's claim's signal once (0021_child_tasks.sql).
--
-- A child that ended (its end the signal of the claim that started it) and
-- that an operator then retried ends again. The trigger stored a second
-- signal for the same claim, which the unique index signals_by_claim
-- refused, so the child's last outcome could never be recorded: the
-- orchestrator tried it again and again. Its first end stays the claim's
-- signal; a later one is the outcome of no attempt, as the end of a child
-- whose parent step timed out is.
CREATE OR REPLACE FUNCTION tasker_child_end() RETURNS trigger LANGUAGE plpgsql AS $$
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
    NEW.updated_at, NEW.parent_claim_id)
  ON CONFLICT (for_claim) WHERE for_claim IS NOT NULL DO NOTHING;
  IF FOUND THEN
    PERFORM pg_notify('tasker', 'wait'); -- a wait's news (drain_changes)
  END IF;
  RETURN NULL;
END $$;
