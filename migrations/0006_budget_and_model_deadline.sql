-- A thread's spending budget, per agent: tokens and/or US dollars over the thread's life.
-- NULL means no budget. A thread that has used its budget stops with stopped_by = 'budget'.
ALTER TABLE agents ADD COLUMN max_tokens INTEGER;
ALTER TABLE agents ADD COLUMN max_cost_usd REAL;
-- A model attempt's overall deadline, request to the end of the stream (NULL: 10 minutes).
ALTER TABLE models ADD COLUMN total_timeout_ms INTEGER;
