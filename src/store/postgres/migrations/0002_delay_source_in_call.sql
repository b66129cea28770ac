-- Delay sources (DESIGN §2, §14). Until now an attempt's delay_source
-- 'budget' meant a batch step's in-call retries ran out (docs/batch.md);
-- from this version that is 'in_call', and 'budget' means a retry budget
-- deferred the retry. Rows written before keep their meaning: every
-- 'budget' here was written by the batch path, since nothing else wrote it.
UPDATE attempts SET delay_source = 'in_call' WHERE delay_source = 'budget';
