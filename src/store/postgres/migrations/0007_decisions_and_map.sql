-- Decisions and map (DESIGN §17).
--
-- A map step's instances are rows of steps of their own: the same task,
-- an idx past the template's steps (allocated MAX(idx) + 1.. when the map
-- expands), name NAME[i], and:
--   map_idx     the template idx of their map step (NULL: not an instance)
--   item_index  the element's position, 0..N-1
--   item        the element, JSON text as the map's parent gave it
-- Adding NULL columns rewrites nothing. An instance is an ordinary ready
-- row (pending, parents_remaining 0), so claims find it through
-- steps_fresh like any other step, and its lease, retry and error rows
-- go through steps_retry_due, steps_leases and steps_error unchanged.
-- The map row itself, while its instances run, is in state 'mapped'
-- with parents_remaining = its unfinished instances: in none of the
-- readiness indexes.
ALTER TABLE steps ADD COLUMN map_idx integer, ADD COLUMN item_index integer,
  ADD COLUMN item text;

-- A map's instances in element order: settling a map (counts by state,
-- the results array), the report's counts, and instance_list's pages are
-- ranges of this index, never a walk over the task's other steps.
CREATE INDEX steps_instances ON steps (task_id, map_idx, item_index) WHERE map_idx IS NOT NULL;
