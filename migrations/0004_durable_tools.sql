-- Durable tools: runtime bindings a prompt gives its tools and workflows
-- ({"tool_name": {"key": "value"}}), passed as `flow.bindings` and never shown to the model.
ALTER TABLE prompts ADD COLUMN tool_bindings TEXT NOT NULL DEFAULT '{}';
