-- An operator's retry resets a step's attempts to 0 (DESIGN §3), so a step
-- can have two claims with the same attempt number: the UNIQUE (step_id,
-- attempt) of 0001 made the first claim after `tasker retry` fail. Attempt
-- rows stay append-only, one per claim; the row being finished is the
-- newest one with that number.
CREATE TABLE attempts_v2 (
  id           INTEGER PRIMARY KEY,
  step_id      INTEGER NOT NULL REFERENCES steps (id),
  attempt      INTEGER NOT NULL,
  owner        TEXT NOT NULL,
  started_at   INTEGER NOT NULL,
  finished_at  INTEGER,
  outcome      TEXT,          -- NULL while running
  error        TEXT,
  delay_ms     INTEGER,
  delay_source TEXT,
  next_run_at  INTEGER
);
INSERT INTO attempts_v2 SELECT id, step_id, attempt, owner, started_at, finished_at, outcome,
  error, delay_ms, delay_source, next_run_at FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v2 RENAME TO attempts;
CREATE INDEX attempts_step ON attempts (step_id, attempt);
