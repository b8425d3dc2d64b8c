-- Tool selection (docs/agents.md, "Tool selection"): a prompt that lists more tools than
-- max_offered_tools offers the model only the most relevant ones per call; pinned_tools (a JSON
-- list of names from its tools) are offered every time. NULL: every tool is offered.
ALTER TABLE prompts ADD COLUMN max_offered_tools INTEGER;
ALTER TABLE prompts ADD COLUMN pinned_tools TEXT NOT NULL DEFAULT '[]';
