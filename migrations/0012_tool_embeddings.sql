-- Tool selection by embeddings (docs/agents.md, "Tool selection"): the models row (provider
-- openai or workers_ai) that embeds the query and the tools when a prompt's max_offered_tools
-- applies. NULL: the lexical ranking (BM25), which is also the fallback when embedding fails.
-- Checked by the configuration API like compaction_prompt (400 when it names no model, 409 on
-- deleting a model a prompt names here).
ALTER TABLE prompts ADD COLUMN tool_selection_model TEXT;
