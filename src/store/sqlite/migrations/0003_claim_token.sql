-- Fence outcomes on the claim itself: steps.claim_id is the id of the
-- attempts row written by the claim that holds the step. Owner and attempt
-- number alone can repeat (an operator's retry resets attempts), a claim id
-- never does.
ALTER TABLE steps ADD COLUMN claim_id INTEGER;
