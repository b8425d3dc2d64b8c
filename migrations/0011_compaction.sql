-- The prompt that summarises a prompt's older messages when its history outgrows the model's
-- max_history_tokens (NULL: the oldest messages are left out instead).
ALTER TABLE prompts ADD COLUMN compaction_prompt TEXT;
