-- The MCP servers a prompt lists (JSON: [{"name","url","token_secret"?,"tools"?,"approval"?}]):
-- their tools are offered to the model as <server>__<tool>. The token itself is a Worker
-- secret; only its name is stored here.
ALTER TABLE prompts ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
