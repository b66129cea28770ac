-- A step's moves that its attempt row already records are no longer
-- written as transitions rows (issue 22): the claim's (pending or
-- waiting_for_retry -> in_progress) and the recorded outcome's
-- (in_progress -> complete, waiting_for_retry or error). Each was a heap
-- insert and two btree inserts beside the attempt row that says the same,
-- a third of the WAL of a single-step task.
--
-- The history (postgres_reports.c) reads the transitions rows and the
-- moves derived from these columns together, in the order of their *_seq:
-- each is drawn from transitions_id_seq at the moment its transitions row
-- would have been inserted, so the order is the one the rows had,
-- including moves with the same time. NULL: nothing derived. Rows written
-- before this migration keep NULLs and their transitions rows, so an old
-- store shows the same history; an attempt refused as fenced_out, or
-- still running, derives no outcome move, as none was written.
--
-- The outcome's columns come first: the finish's update changes them and
-- leaves the claim's, so the unchanged claim columns end the row (the
-- suffix a same-page update leaves out of its WAL record).
ALTER TABLE attempts
  -- The outcome's move: its place in the history; when it was recorded,
  -- NULL when that is finished_at; the step's new state, NULL when it is
  -- the one the outcome implies (success: complete; a next run:
  -- waiting_for_retry; else error: TK__PG_OUTCOME_STATE). Its reason is
  -- the outcome, its attempt the attempt's.
  ADD COLUMN outcome_seq bigint,
  ADD COLUMN outcome_at bigint,
  ADD COLUMN outcome_state text,
  -- The claim's move: its place in the history, and whether the step was
  -- waiting_for_retry (else pending). Its time is started_at, its reason
  -- 'claimed', its attempt the attempt's.
  ADD COLUMN claim_seq bigint,
  ADD COLUMN claim_from_retry boolean;
