//! The configuration copies a thread keeps: what each of its (agent, side) last ran on, so an
//! instance that starts with an empty configuration cache plans its first model request with
//! it while D1 confirms it (`runtime::config_check`).

use super::*;

/// A configuration copy: the resolved configuration as JSON and the version stamp it was read
/// at.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigCopy {
    /// The configuration's version stamp when it was read.
    pub version: i64,
    /// The resolved configuration (`AgentConfig`) as JSON.
    pub body: String,
}

impl Store<'_> {
    /// The copy kept for `agent_id`'s `side`, if any.
    pub fn config_copy(&self, agent_id: &str, side: Side) -> Result<Option<ConfigCopy>, SqlError> {
        self.sql
            .exec(
                "SELECT version, body FROM config_copies WHERE agent_id = ? AND side = ?",
                &[agent_id.into(), side.as_str().into()],
            )?
            .first()
            .map(|r| {
                Ok(ConfigCopy {
                    version: r.int(0)?,
                    body: r.text(1)?,
                })
            })
            .transpose()
    }

    /// Keeps `copy` for `agent_id`'s `side`, replacing the one before.
    pub fn set_config_copy(
        &self,
        agent_id: &str,
        side: Side,
        copy: &ConfigCopy,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "INSERT INTO config_copies (agent_id, side, version, body) VALUES (?, ?, ?, ?)
             ON CONFLICT (agent_id, side) DO UPDATE
             SET version = excluded.version, body = excluded.body",
            &[
                agent_id.into(),
                side.as_str().into(),
                copy.version.into(),
                copy.body.as_str().into(),
            ],
        )?;
        Ok(())
    }
}
