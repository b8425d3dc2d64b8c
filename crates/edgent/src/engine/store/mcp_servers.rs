//! What the thread remembers of its prompts' MCP servers: the session each one gave us (so it
//! survives hibernation and restarts, and is initialised again only when the server forgets
//! it) and its last tool list (used for [`TOOLS_TTL_MS`](crate::api::mcp::client::TOOLS_TTL_MS),
//! or until the server says it changed).

use super::*;

/// One server's row.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerRow {
    /// The URL the session and list belong to (a prompt that moves the server to another URL
    /// starts afresh).
    pub url: String,
    /// The `Mcp-Session-Id` the server gave, if any.
    pub session_id: Option<String>,
    /// The protocol version it answered `initialize` with.
    pub protocol_version: Option<String>,
    /// The tools offered from it (edgent's `ToolSpec`s, JSON), when listed.
    pub tools: Option<Value>,
    /// When they were listed (ms since the epoch).
    pub listed_at: Option<i64>,
}

impl Store<'_> {
    /// The row of the server `name` at `url` (`None`: never reached, or reached at another URL).
    pub fn mcp_server(&self, name: &str, url: &str) -> Result<Option<McpServerRow>, SqlError> {
        let rows = self.feature_exec(
            "SELECT url, session_id, protocol_version, tools, listed_at FROM mcp_servers WHERE name = ?",
            &[name.into()],
        )?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        if r.text(0)? != url {
            return Ok(None);
        }
        let tools = r
            .opt_text(3)?
            .map(|t| serde_json::from_str(&t).map_err(|e| SqlError(e.to_string())))
            .transpose()?;
        Ok(Some(McpServerRow {
            url: r.text(0)?,
            session_id: r.opt_text(1)?,
            protocol_version: r.opt_text(2)?,
            tools,
            listed_at: r.opt_int(4)?,
        }))
    }

    /// Every server's row, by name: what `GET /api/threads/:id/mcp` shows. A tool list that
    /// is not JSON (never written so) reads as none rather than failing the whole answer.
    pub fn mcp_servers(&self) -> Result<Vec<(String, McpServerRow)>, SqlError> {
        let rows = self.feature_exec(
            "SELECT name, url, session_id, protocol_version, tools, listed_at FROM mcp_servers ORDER BY name",
            &[],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push((
                r.text(0)?,
                McpServerRow {
                    url: r.text(1)?,
                    session_id: r.opt_text(2)?,
                    protocol_version: r.opt_text(3)?,
                    tools: r.opt_text(4)?.and_then(|t| serde_json::from_str(&t).ok()),
                    listed_at: r.opt_int(5)?,
                },
            ));
        }
        Ok(out)
    }

    /// Keeps a new session (after `initialize`); the tool list of another URL is dropped.
    pub fn set_mcp_session(
        &self,
        name: &str,
        url: &str,
        session_id: Option<&str>,
        protocol_version: &str,
    ) -> Result<(), SqlError> {
        self.feature_insert(
            Feature::McpServers,
            "INSERT INTO mcp_servers (name, url, session_id, protocol_version) VALUES (?, ?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET
               tools = CASE WHEN url = excluded.url THEN tools END,
               listed_at = CASE WHEN url = excluded.url THEN listed_at END,
               url = excluded.url, session_id = excluded.session_id,
               protocol_version = excluded.protocol_version",
            &[
                name.into(),
                url.into(),
                session_id.map_or(SqlValue::Null, SqlValue::from),
                protocol_version.into(),
            ],
        )?;
        Ok(())
    }

    /// Forgets the session the server no longer knows (the next request initialises again).
    pub fn forget_mcp_session(&self, name: &str) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE mcp_servers SET session_id = NULL, protocol_version = NULL WHERE name = ?",
            &[name.into()],
        )?;
        Ok(())
    }

    /// Keeps the tools listed from the server at `now`.
    pub fn set_mcp_tools(&self, name: &str, tools: &Value, now: i64) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE mcp_servers SET tools = ?, listed_at = ? WHERE name = ?",
            &[tools.to_string().into(), now.into(), name.into()],
        )?;
        Ok(())
    }

    /// Listing failed at `retry_at - TTL`: the last list (or none) stands until `retry_at`, so
    /// a server that is down does not hold up every model call.
    pub fn mcp_listing_failed(
        &self,
        name: &str,
        url: &str,
        listed_at: i64,
    ) -> Result<(), SqlError> {
        self.feature_insert(
            Feature::McpServers,
            "INSERT INTO mcp_servers (name, url, listed_at) VALUES (?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET listed_at = excluded.listed_at
             WHERE url = excluded.url",
            &[name.into(), url.into(), listed_at.into()],
        )?;
        Ok(())
    }

    /// The server said its tools changed: list them again before the next model call.
    pub fn mcp_tools_changed(&self, name: &str) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE mcp_servers SET listed_at = NULL WHERE name = ?",
            &[name.into()],
        )?;
        Ok(())
    }
}
