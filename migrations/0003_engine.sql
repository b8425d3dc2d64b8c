-- The agent engine: per-model stream timeouts, history budget and output limit; hooks per
-- prompt and per agent (JSON lists of names of files in agents/hooks/).
ALTER TABLE models ADD COLUMN first_chunk_timeout_ms INTEGER;
ALTER TABLE models ADD COLUMN stall_timeout_ms INTEGER;
ALTER TABLE models ADD COLUMN max_history_tokens INTEGER;
ALTER TABLE models ADD COLUMN max_output_tokens INTEGER;
ALTER TABLE prompts ADD COLUMN hooks TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agents ADD COLUMN hooks TEXT NOT NULL DEFAULT '[]';
