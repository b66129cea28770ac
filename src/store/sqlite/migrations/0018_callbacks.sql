-- Callbacks of http steps (issue 24 part 2, DESIGN §18, docs/callbacks.md).
--
-- One row per attempt (claim) of an http step that waits for a callback:
-- the SHA-256 of its token's secret (the token itself is never stored),
-- the timeout a heartbeat extends its wait by, and the time no wait of the
-- attempt passes (the step's timeout). Kept until the task is pruned, so
-- an earlier attempt's token is told apart (409) from an unknown one (404).
CREATE TABLE callbacks (
  claim_id   INTEGER PRIMARY KEY,
  step_id    INTEGER NOT NULL,
  token_hash BLOB NOT NULL,
  timeout_ms INTEGER NOT NULL,
  limit_at   INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX callbacks_by_step ON callbacks (step_id);

-- A callback is a signal bound to its attempt (for_claim): delivered to
-- that claim only, never to a later attempt; one per attempt. final and
-- retry_after_ms: a failure's retryable = false and its retry_after.
ALTER TABLE signals ADD COLUMN for_claim INTEGER;
ALTER TABLE signals ADD COLUMN final INTEGER NOT NULL DEFAULT 0;
ALTER TABLE signals ADD COLUMN retry_after_ms INTEGER;
CREATE UNIQUE INDEX signals_by_claim ON signals (for_claim) WHERE for_claim IS NOT NULL;
