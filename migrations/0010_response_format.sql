-- A prompt's response_format (JSON: {"schema": {...}, "name"?} or {"type_name": "...", "name"?}):
-- the final answer is JSON of that shape, checked, and kept on the message as `structured`.
-- NULL: the answer is free text.
ALTER TABLE prompts ADD COLUMN response_format TEXT;
