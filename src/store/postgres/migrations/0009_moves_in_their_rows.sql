-- Moves that a row written at the same moment already records are no
-- longer written as transitions rows too (issue 22): a step's claim
-- (pending or waiting_for_retry -> in_progress) and its recorded outcome
-- (in_progress -> complete, waiting_for_retry or error), in the attempt
-- row that the claim inserts and the outcome finishes; a task's ordinary
-- start (its first claim) and finish (all steps complete, or a step failed
-- and nothing else can progress), in the tasks row those moments update.
-- Each transitions row was a heap insert and two btree inserts: of a
-- single-step task's WAL, these four were a third.
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

-- A task's start (pending -> in_progress, reason 'first step claimed'):
-- its place and time. Its ordinary finish (in_progress -> its state, at
-- finished_at, reason TK__PG_FINISH_REASON of the state): its place, set
-- only while the task is in that state; a later move of the task (an
-- operator's retry or cancel) first writes it out as its transitions row
-- (TK__PG_FINISH_ROW), so an earlier finish stays in the history.
ALTER TABLE tasks
  ADD COLUMN start_seq bigint,
  ADD COLUMN started_at bigint,
  ADD COLUMN finish_seq bigint;
