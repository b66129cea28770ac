-- Text search in last_error and activity over long windows (issue 19).
--
-- A list filtered by text in a step's last error (`tasker tasks --error`,
-- ?error=) scanned every task the other conditions left. steps_error_text
-- is a trigram index (pg_trgm, in Debian's postgresql-15 package) on
-- last_error: a search for text of 3 or more characters is a LIKE with %
-- and _ escaped (so literal), which the index serves; shorter text has no
-- trigram and scans as before (strpos). pg_trgm is a trusted extension: a
-- user who may create objects in the database may create it. Where it is
-- not installed on the server, or may not be created, this migration
-- leaves the index out and searches scan as before (a NOTICE says so).
-- The cost: an update of a step that changes its state (a claim, an
-- outcome) was never HOT, and now also writes the step's error's trigrams
-- when it has one (GIN's pending list takes them in batches).
DO $$
DECLARE
  ext_schema name;
BEGIN
  BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
      CREATE EXTENSION IF NOT EXISTS pg_trgm;
    END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pg_trgm may not be created here: searches in last_error scan';
  END;
  SELECT n.nspname INTO ext_schema FROM pg_extension e
    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
  IF ext_schema IS NULL THEN
    RAISE NOTICE 'pg_trgm is not installed: searches in last_error scan';
  ELSE
    EXECUTE format('CREATE INDEX steps_error_text ON steps USING gin (last_error %I.gin_trgm_ops)',
                   ext_schema);
  END IF;
END $$;

-- Attempts counted per minute as the engine writes them (the activity
-- report, /api/v1/activity), one row per minute (its start, ms since the
-- epoch, a multiple of 60,000) and orchestrator (the attempt's owner, so
-- that orchestrators sharing the server write rows of their own and do not
-- wait on each other's), summed on read: a window of whole minutes reads a
-- range of this key instead of every attempt in it. Attempts count in the
-- minute they started, as the report buckets them: a claim adds its
-- retries (an attempt after the first, or the first after an operator's
-- retry: the step was waiting for a retry) and how late each started after
-- its run_at (0 when early), and the outcome (or the refusal of a fenced
-- one) adds one to succeeded or failed, each in the statement that writes
-- the attempt row. Rows from before this version are counted from the
-- attempts stored. A prune removes the rows before its earliest cutoff.
CREATE TABLE activity_minutes (
  minute          bigint NOT NULL,
  orchestrator    text NOT NULL,
  succeeded       bigint NOT NULL DEFAULT 0,
  failed          bigint NOT NULL DEFAULT 0,
  retries         bigint NOT NULL DEFAULT 0,
  lateness_n      bigint NOT NULL DEFAULT 0,
  lateness_sum_ms bigint NOT NULL DEFAULT 0,
  lateness_max_ms bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, orchestrator)
);
INSERT INTO activity_minutes
SELECT minute, owner, count(*) FILTER (WHERE outcome = 'success'),
  count(*) FILTER (WHERE outcome <> 'success'), count(*) FILTER (WHERE r),
  count(*) FILTER (WHERE r AND due_at IS NOT NULL),
  COALESCE(SUM(GREATEST(started_at - due_at, 0)) FILTER (WHERE r), 0),
  COALESCE(MAX(GREATEST(started_at - due_at, 0)) FILTER (WHERE r), 0)
FROM (SELECT a.started_at - a.started_at % 60000 AS minute, a.owner, a.outcome, a.started_at,
  a.due_at, a.attempt > 1 OR EXISTS (SELECT 1 FROM attempts p WHERE p.step_id = a.step_id
  AND p.id < a.id) AS r FROM attempts a) x
GROUP BY minute, owner;
