//! A thread's MCP servers as `GET /api/threads/:id/mcp` shows them (the inspector's MCP tab):
//! what the thread keeps of each server its prompts named ([`McpServerRow`]), shaped for
//! reading. Only what a browser may see leaves: the URL's host (never its path, query or any
//! `user:pass@`), whether a session is open (never the `Mcp-Session-Id`, which the server may
//! treat as a credential), the list's times and its tools. The bearer token is not stored in
//! the thread at all (it is read from the Worker secret on every request).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::TOOLS_TTL_MS;
use crate::config::mcp_servers::SEPARATOR;
use crate::engine::store::McpServerRow;

/// One MCP server of a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerState {
    /// The server's name in the prompt: the prefix of its tools' names.
    pub name: String,
    /// The host (and port) of its URL; the path and the query are left out.
    pub host: String,
    /// Whether the thread holds an initialised session with it (the session id itself is not
    /// shown).
    pub session_open: bool,
    /// The protocol version the server answered `initialize` with, while the session is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// When its tools were listed (ms since the epoch). After a failed refresh of a kept list
    /// this is set back, so that the old list is used one minute more: `expires_at` is then
    /// the next try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<i64>,
    /// When the list goes stale and is listed again before the next model call. Absent with a
    /// list: the server said its tools changed, so it is listed again before the next call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// A server whose first listing failed offers nothing, and is not asked again until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<i64>,
    /// Its tools, as the model is offered them (a prompt's `tools` may offer fewer).
    pub tools: Vec<McpToolState>,
}

/// One tool of a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpToolState {
    /// The name the model sees: `<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub tool: String,
    /// Its description, as offered.
    pub description: String,
}

/// The answer of `GET /api/threads/:id/mcp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerList {
    /// Every server the thread reached (or tried to), by name.
    pub servers: Vec<McpServerState>,
}

impl McpServerList {
    /// Shapes the stored rows, `(name, row)` as the store reads them.
    pub fn from_rows(rows: Vec<(String, McpServerRow)>) -> McpServerList {
        McpServerList {
            servers: rows
                .into_iter()
                .map(|(name, row)| McpServerState::from_row(name, row))
                .collect(),
        }
    }
}

impl McpServerState {
    /// Shapes one stored row.
    pub fn from_row(name: String, row: McpServerRow) -> McpServerState {
        let prefix = format!("{name}{SEPARATOR}");
        let listed = row.tools.is_some();
        let tools = match &row.tools {
            Some(Value::Array(specs)) => specs
                .iter()
                .filter_map(|spec| {
                    let offered = spec.get("name")?.as_str()?;
                    Some(McpToolState {
                        name: offered.to_owned(),
                        tool: offered.strip_prefix(&prefix).unwrap_or(offered).to_owned(),
                        description: spec
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        let until = row.listed_at.map(|at| at.saturating_add(TOOLS_TTL_MS));
        McpServerState {
            host: url_host(&row.url),
            session_open: row.protocol_version.is_some(),
            protocol_version: row.protocol_version,
            // Without a list, the stored time is a failed first listing's pause, not a listing.
            listed_at: row.listed_at.filter(|_| listed),
            expires_at: until.filter(|_| listed),
            paused_until: until.filter(|_| !listed),
            tools,
            name,
        }
    }
}

/// The host and port of `url` (`https://user:pw@kb.example.com:8443/mcp?k=v` gives
/// `kb.example.com:8443`): what follows the scheme up to the path, without any credentials.
/// Text that is not an absolute URL gives what it can, never more than the authority.
pub fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(tools: Option<Value>, listed_at: Option<i64>, version: Option<&str>) -> McpServerRow {
        McpServerRow {
            url: "https://kb.example.com/mcp?key=hidden".into(),
            session_id: version.map(|_| "session-secret".into()),
            protocol_version: version.map(str::to_owned),
            tools,
            listed_at,
        }
    }

    #[test]
    fn the_host_only_never_credentials_path_or_query() {
        assert_eq!(url_host("https://kb.example.com/mcp"), "kb.example.com");
        assert_eq!(url_host("http://127.0.0.1:8931/mcp"), "127.0.0.1:8931");
        assert_eq!(
            url_host("https://user:pw@KB.example.com:8443/mcp?token=x#y"),
            "kb.example.com:8443"
        );
        assert_eq!(url_host("https://[::1]:9000/mcp"), "[::1]:9000");
        assert_eq!(url_host("https://a@b@host.example/x"), "host.example");
        assert_eq!(url_host("https://host.example?token=x"), "host.example");
        assert_eq!(url_host("https://host.example\\@evil/"), "host.example");
        assert_eq!(url_host("not a url/with/path"), "not a url");
        assert_eq!(url_host(""), "");
    }

    #[test]
    fn a_listed_server_shows_its_tools_its_times_and_no_session_id() {
        let tools = json!([
            {"name": "kb__search", "description": "Searches.", "parameters": {"type": "object"}},
            {"name": "kb__chart", "parameters": {}},
            {"description": "no name: skipped"},
        ]);
        let state = McpServerState::from_row(
            "kb".into(),
            row(Some(tools), Some(1_000), Some("2025-06-18")),
        );
        assert_eq!(
            serde_json::to_value(&state).unwrap(),
            json!({
                "name": "kb",
                "host": "kb.example.com",
                "session_open": true,
                "protocol_version": "2025-06-18",
                "listed_at": 1_000,
                "expires_at": 1_000 + TOOLS_TTL_MS,
                "tools": [
                    {"name": "kb__search", "tool": "search", "description": "Searches."},
                    {"name": "kb__chart", "tool": "chart", "description": ""},
                ],
            })
        );
        let text = serde_json::to_string(&state).unwrap();
        assert!(!text.contains("session-secret") && !text.contains("hidden"));
    }

    #[test]
    fn a_failed_first_listing_is_a_pause_and_a_changed_list_has_no_expiry() {
        let paused = McpServerState::from_row("kb".into(), row(None, Some(5_000), None));
        assert_eq!(
            serde_json::to_value(&paused).unwrap(),
            json!({"name": "kb", "host": "kb.example.com", "session_open": false,
                   "paused_until": 5_000 + TOOLS_TTL_MS, "tools": []})
        );
        let changed = McpServerState::from_row(
            "kb".into(),
            row(
                Some(json!([{"name": "kb__more", "description": "More."}])),
                None,
                Some("v"),
            ),
        );
        assert_eq!(changed.listed_at, None);
        assert_eq!(changed.expires_at, None);
        assert_eq!(changed.paused_until, None);
        assert_eq!(changed.tools.len(), 1);
        // A list that is not an array (never written so) shows no tools.
        let odd = McpServerState::from_row("kb".into(), row(Some(json!({})), Some(1), None));
        assert!(odd.tools.is_empty());
    }

    #[test]
    fn rows_become_the_list_in_order() {
        let list = McpServerList::from_rows(vec![
            ("a".into(), row(None, None, None)),
            ("b".into(), row(None, None, None)),
        ]);
        let names: Vec<_> = list.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            serde_json::to_value(McpServerList { servers: vec![] }).unwrap(),
            json!({"servers": []})
        );
    }
}
