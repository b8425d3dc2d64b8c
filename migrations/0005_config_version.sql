-- A version stamp for the agent configuration: bumped by every change to models, prompts or
-- agents (through the API or by hand with `wrangler d1 execute`). Threads keep a resolved
-- configuration for a few seconds and then ask only for this number, reloading when it moved.
CREATE TABLE config_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
INSERT INTO config_version (id, version) VALUES (1, 0);

CREATE TRIGGER models_insert_bumps_config AFTER INSERT ON models
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER models_update_bumps_config AFTER UPDATE ON models
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER models_delete_bumps_config AFTER DELETE ON models
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER prompts_insert_bumps_config AFTER INSERT ON prompts
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER prompts_update_bumps_config AFTER UPDATE ON prompts
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER prompts_delete_bumps_config AFTER DELETE ON prompts
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER agents_insert_bumps_config AFTER INSERT ON agents
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER agents_update_bumps_config AFTER UPDATE ON agents
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER agents_delete_bumps_config AFTER DELETE ON agents
BEGIN UPDATE config_version SET version = version + 1 WHERE id = 1; END;
