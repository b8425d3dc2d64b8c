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
    /// The configuration in the platform's own encoding (the Worker: the D1 rows it was
    /// resolved from, as JSON).
    pub body: String,
    /// When it was kept (ms since the epoch).
    pub kept_at: i64,
}

impl Store<'_> {
    /// The copy kept for `agent_id`'s `side`, if any.
    pub fn config_copy(&self, agent_id: &str, side: Side) -> Result<Option<ConfigCopy>, SqlError> {
        self.sql
            .exec(
                "SELECT version, body, kept_at FROM config_copies WHERE agent_id = ? AND side = ?",
                &[agent_id.into(), side.as_str().into()],
            )?
            .first()
            .map(|r| {
                Ok(ConfigCopy {
                    version: r.int(0)?,
                    body: r.text(1)?,
                    kept_at: r.int(2)?,
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
            "INSERT INTO config_copies (agent_id, side, version, body, kept_at)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (agent_id, side) DO UPDATE
             SET version = excluded.version, body = excluded.body, kept_at = excluded.kept_at",
            &[
                agent_id.into(),
                side.as_str().into(),
                copy.version.into(),
                copy.body.as_str().into(),
                copy.kept_at.into(),
            ],
        )?;
        Ok(())
    }
}
