-- Text search in last_error and activity over long windows (issue 19).
--
-- A list filtered by text in a step's last error (`tasker tasks --error`,
-- ?error=) scanned every task the other conditions left. steps_error_text
-- indexes every step's last_error by trigrams (FTS5's trigram tokenizer,
-- case-sensitive; SQLite 3.34 and later): a search for text of 3 or more
-- characters reads the steps whose errors hold all its trigrams in a row,
-- and then checks the text itself (instr: literal, so % and _ are only
-- themselves). Shorter text has no trigram and scans as before. The table
-- holds no copy of the text (content = steps); the triggers keep it in
-- step with steps, and fire only where last_error changes: a claim, or an
-- outcome that keeps last_error as it was, costs nothing more.
CREATE VIRTUAL TABLE steps_error_text USING fts5 (
  last_error, content = 'steps', content_rowid = 'id', tokenize = 'trigram case_sensitive 1'
);
INSERT INTO steps_error_text (steps_error_text) VALUES ('rebuild');
CREATE TRIGGER steps_error_text_insert AFTER INSERT ON steps
WHEN new.last_error IS NOT NULL BEGIN
  INSERT INTO steps_error_text (rowid, last_error) VALUES (new.id, new.last_error);
END;
CREATE TRIGGER steps_error_text_update AFTER UPDATE OF last_error ON steps
WHEN old.last_error IS NOT new.last_error BEGIN
  INSERT INTO steps_error_text (steps_error_text, rowid, last_error)
    SELECT 'delete', old.id, old.last_error WHERE old.last_error IS NOT NULL;
  INSERT INTO steps_error_text (rowid, last_error)
    SELECT new.id, new.last_error WHERE new.last_error IS NOT NULL;
END;
CREATE TRIGGER steps_error_text_delete AFTER DELETE ON steps
WHEN old.last_error IS NOT NULL BEGIN
  INSERT INTO steps_error_text (steps_error_text, rowid, last_error)
    VALUES ('delete', old.id, old.last_error);
END;

-- Attempts counted per minute as the engine writes them (the activity
-- report, /api/v1/activity), one row per minute (its start, ms since the
-- epoch, a multiple of 60,000) and orchestrator (the attempt's owner, so
-- that orchestrators on a shared server write rows of their own), summed
-- on read: a window of whole minutes reads a range of this key instead of
-- every attempt in it. Attempts count in the minute they started, as the
-- report buckets them: a claim adds its retries (an attempt after the
-- first, or the first after an operator's retry: the step was waiting for
-- a retry) and how late each started after its run_at (0 when early), and
-- the outcome (or the refusal of a fenced one) adds one to succeeded or
-- failed, each in the transaction that writes the attempt row. Rows from
-- before this version are counted from the attempts stored. A prune
-- removes the rows before its earliest cutoff.
CREATE TABLE activity_minutes (
  minute          INTEGER NOT NULL,
  orchestrator    TEXT NOT NULL,
  succeeded       INTEGER NOT NULL DEFAULT 0,
  failed          INTEGER NOT NULL DEFAULT 0,
  retries         INTEGER NOT NULL DEFAULT 0,
  lateness_n      INTEGER NOT NULL DEFAULT 0,
  lateness_sum_ms INTEGER NOT NULL DEFAULT 0,
  lateness_max_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, orchestrator)
) WITHOUT ROWID;
INSERT INTO activity_minutes
SELECT minute, owner, SUM(outcome = 'success'), SUM(outcome IS NOT NULL AND outcome <> 'success'),
  SUM(r), SUM(r AND due_at IS NOT NULL),
  SUM(CASE WHEN r AND due_at IS NOT NULL THEN MAX(started_at - due_at, 0) ELSE 0 END),
  MAX(CASE WHEN r AND due_at IS NOT NULL THEN MAX(started_at - due_at, 0) ELSE 0 END)
FROM (SELECT a.started_at - a.started_at % 60000 AS minute, a.owner, a.outcome, a.started_at,
  a.due_at, a.attempt > 1 OR EXISTS (SELECT 1 FROM attempts p WHERE p.step_id = a.step_id
  AND p.id < a.id) AS r FROM attempts a)
GROUP BY minute, owner;
