-- Callbacks of http steps (issue 24 part 2, DESIGN §18, docs/callbacks.md).
--
-- One row per attempt (claim) of an http step that waits for a callback:
-- the SHA-256 of its token's secret (the token itself is never stored),
-- the timeout a heartbeat extends its wait by, and the time no wait of the
-- attempt passes (the step's timeout). Kept until the task is pruned, so
-- an earlier attempt's token is told apart (409) from an unknown one (404).
CREATE TABLE callbacks (
  claim_id   bigint PRIMARY KEY,
  step_id    bigint NOT NULL,
  token_hash bytea NOT NULL,
  timeout_ms bigint NOT NULL,
  limit_at   bigint NOT NULL,
  created_at bigint NOT NULL
);
CREATE INDEX callbacks_by_step ON callbacks (step_id);

-- A callback is a signal bound to its attempt (for_claim): delivered to
-- that claim only, never to a later attempt; one per attempt. final and
-- retry_after_ms: a failure's retryable = false and its retry_after.
ALTER TABLE signals ADD COLUMN for_claim bigint;
ALTER TABLE signals ADD COLUMN final integer NOT NULL DEFAULT 0;
ALTER TABLE signals ADD COLUMN retry_after_ms bigint;
CREATE UNIQUE INDEX signals_by_claim ON signals (for_claim) WHERE for_claim IS NOT NULL;
