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

-- No foreign key from steps to tasks, as attempts has none (0001): a
-- map's instances are inserted by the thousand in the transaction that
-- holds their task's lock, and the key's check, a lookup of the task for
-- each row, cost as much as the inserts themselves (10,000 instances:
-- about 200 ms more). Steps are only ever written with their task: at
-- its creation, in one statement, or under its lock; a prune removes
-- them before it.
ALTER TABLE steps DROP CONSTRAINT IF EXISTS steps_task_id_fkey;

-- The trigram index of last_error (0006) only over steps that have one: a
-- step is inserted without an error (every step of a new task, every
-- instance of a map), and GIN indexes a NULL too, one entry per row for
-- nothing a search can find (10,000 instances: about 60 ms). A search,
-- a LIKE on last_error, implies last_error IS NOT NULL, so it still uses
-- the index.
DO $$
DECLARE
  ext_schema name;
BEGIN
  SELECT n.nspname INTO ext_schema FROM pg_extension e
    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
  IF ext_schema IS NOT NULL AND to_regclass('steps_error_text') IS NOT NULL THEN
    DROP INDEX steps_error_text;
    EXECUTE format('CREATE INDEX steps_error_text ON steps USING gin (last_error %I.gin_trgm_ops)'
                   ' WHERE last_error IS NOT NULL', ext_schema);
  END IF;
END $$;
