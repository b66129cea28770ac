-- Decisions and map (issue 21, DESIGN §17).
--
-- A map step becomes one instance per element of a list when its parents
-- are done. An instance is an ordinary step row of the same task (its own
-- attempts, lease, backoff, operator actions), told apart by map_idx: the
-- template position of its map step, whose handler it runs. Its idx is
-- past the template's steps (the task's steps stay unique by idx), its
-- name NAME[i], item_index its element's position and item the element
-- (JSON text). Ordinary steps leave all three NULL.
--
-- The map step's own row waits in state 'mapped' with parents_remaining
-- counting its unfinished instances; the last to finish settles it.
-- steps_instances serves that settling, the instances of one map in
-- element order (show, the API) and their results gathered in order: one
-- index range, never a scan of the task.
ALTER TABLE steps ADD COLUMN map_idx INTEGER;
ALTER TABLE steps ADD COLUMN item_index INTEGER;
ALTER TABLE steps ADD COLUMN item TEXT;
CREATE INDEX steps_instances ON steps (task_id, map_idx, item_index) WHERE map_idx IS NOT NULL;
