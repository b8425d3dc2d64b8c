-- Agent configuration: models, prompts and agents. Secrets are never stored here: a model
-- names the Worker secret that holds its key.
CREATE TABLE models (
  name TEXT PRIMARY KEY,
  provider TEXT NOT NULL DEFAULT 'openai',
  model TEXT NOT NULL,
  base_url TEXT NOT NULL,
  api_key_secret TEXT,
  fallbacks TEXT NOT NULL DEFAULT '[]',
  input_price_per_mtok REAL NOT NULL DEFAULT 0,
  output_price_per_mtok REAL NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE prompts (
  name TEXT PRIMARY KEY,
  system TEXT NOT NULL DEFAULT '',
  model TEXT NOT NULL REFERENCES models (name),
  tools TEXT NOT NULL DEFAULT '[]',
  tool_choice TEXT NOT NULL DEFAULT 'auto',
  parallel_tool_calls INTEGER NOT NULL DEFAULT 1,
  include_chat INTEGER NOT NULL DEFAULT 1,
  description TEXT NOT NULL DEFAULT '',
  updated_at INTEGER NOT NULL DEFAULT 0
);

-- side_a / side_b: JSON objects {"prompt": "<prompt name>", "label"?, "max_steps"?, ...}.
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL DEFAULT 'ai_human',
  description TEXT NOT NULL DEFAULT '',
  side_a TEXT NOT NULL,
  side_b TEXT,
  max_turns INTEGER NOT NULL DEFAULT 25,
  expose_as_tool INTEGER NOT NULL DEFAULT 0,
  tool_description TEXT NOT NULL DEFAULT '',
  updated_at INTEGER NOT NULL DEFAULT 0
);
