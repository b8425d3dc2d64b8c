//! The MCP servers a prompt lists (`mcp_servers`): their tools are offered to the model as
//! `<server>__<tool>` beside the local ones and called through the durable tool path
//! ([docs/mcp.md](../../../../docs/mcp.md)). Which URLs and secrets a definition may name is the
//! operator's ([`super::policy::ModelPolicy::check_mcp_server`]).

use serde::{Deserialize, Serialize};

use crate::values::Invalid;

/// Between a server's name and its tool's in the name the model sees.
pub const SEPARATOR: &str = "__";
/// The most servers one prompt may list.
pub const MAX_SERVERS: usize = 8;

/// One MCP server of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The prefix of its tools' names (`docs` gives `docs__search`): 1-32 characters of
    /// a-z 0-9 and single `_`.
    pub name: String,
    /// Its Streamable HTTP endpoint (`https://…/mcp`).
    pub url: String,
    /// The Worker secret holding its bearer token, if it needs one; the operator lists the
    /// secrets MCP servers may be sent in `MCP_SECRETS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret: Option<String>,
    /// Only these of its tools are offered (its own names); empty: all of them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Its tools whose calls wait for a client's approval (its own names; `"*"` for all).
    #[serde(default)]
    pub approval: Vec<String>,
}

impl McpServerConfig {
    /// Rules that need no other row (the URL and the secret are the operator's policy's).
    pub fn check(&self) -> Result<(), Invalid> {
        let ok = self.name.len() <= 32
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !self.name.starts_with('_')
            && !self.name.ends_with('_')
            && !self.name.contains(SEPARATOR);
        if self.name.is_empty() || !ok {
            return Err(format!(
                "mcp server name {:?} must be 1-32 characters of a-z 0-9 and single `_` (it prefixes its tools' names)",
                self.name
            )
            .into());
        }
        for tool in self.tools.iter().chain(&self.approval) {
            if tool.is_empty() || tool.len() > 64 {
                return Err(format!(
                    "mcp server {:?}: tool name {tool:?} must be 1-64 characters",
                    self.name
                )
                .into());
            }
        }
        Ok(())
    }

    /// The name the model sees for this server's `tool`.
    pub fn tool_name(&self, tool: &str) -> String {
        format!("{}{SEPARATOR}{tool}", self.name)
    }

    /// Whether this server's `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == tool)
    }

    /// Whether calls of this server's `tool` wait for approval.
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.approval.iter().any(|t| t == "*" || t == tool)
    }
}

/// Checks a prompt's list: each server's rules, unique names, at most [`MAX_SERVERS`], and no
/// clash with the prompt's own tools (`tools`).
pub fn check_all(servers: &[McpServerConfig], tools: &[String]) -> Result<(), Invalid> {
    if servers.len() > MAX_SERVERS {
        return Err(format!("at most {MAX_SERVERS} mcp_servers per prompt").into());
    }
    for (i, server) in servers.iter().enumerate() {
        server.check()?;
        if servers[..i].iter().any(|s| s.name == server.name) {
            return Err(format!("mcp server {:?} is listed twice", server.name).into());
        }
        let prefix = format!("{}{SEPARATOR}", server.name);
        if let Some(clash) = tools.iter().find(|t| t.starts_with(&prefix)) {
            return Err(format!(
                "tool {clash:?} clashes with the tools of mcp server {:?}",
                server.name
            )
            .into());
        }
    }
    Ok(())
}

/// The server and the server's own tool name that a model's tool name names, among `servers`.
pub fn split<'a>(
    servers: &'a [McpServerConfig],
    name: &'a str,
) -> Option<(&'a McpServerConfig, &'a str)> {
    let (server, tool) = name.split_once(SEPARATOR)?;
    let server = servers.iter().find(|s| s.name == server)?;
    (!tool.is_empty() && server.offers(tool)).then_some((server, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            url: "https://mcp.example.com/mcp".into(),
            token_secret: None,
            tools: Vec::new(),
            approval: vec!["delete_page".into()],
        }
    }

    #[test]
    fn names_prefix_tools_and_must_stay_apart() {
        assert!(server("docs").check().is_ok());
        assert!(server("docs_2").check().is_ok());
        for bad in ["", "Docs", "a__b", "_a", "a_", "a-b", &"x".repeat(33)] {
            assert!(server(bad).check().is_err(), "{bad:?}");
        }
        let servers = [server("docs"), server("crm")];
        assert!(check_all(&servers, &["get_weather".into()]).is_ok());
        assert!(check_all(&[server("docs"), server("docs")], &[]).is_err());
        let clash = check_all(&servers, &["docs__search".into()]).unwrap_err();
        assert!(clash.to_string().contains("clashes"), "{clash}");
        assert!(check_all(&vec![server("a"); MAX_SERVERS + 1], &[]).is_err());
    }

    #[test]
    fn a_model_tool_name_splits_into_its_server_and_tool() {
        let mut docs = server("docs");
        docs.tools = vec!["search".into()];
        let servers = [docs, server("crm")];
        let (s, t) = split(&servers, "docs__search").expect("offered");
        assert_eq!((s.name.as_str(), t), ("docs", "search"));
        assert_eq!(s.tool_name(t), "docs__search");
        assert!(
            split(&servers, "docs__fetch").is_none(),
            "not in its tools list"
        );
        assert!(split(&servers, "wiki__search").is_none(), "no such server");
        assert!(split(&servers, "crm__").is_none());
        assert!(split(&servers, "get_weather").is_none());
        let (crm, tool) = split(&servers, "crm__a__b").expect("a tool name may hold __");
        assert_eq!((crm.name.as_str(), tool), ("crm", "a__b"));
        assert!(crm.needs_approval("delete_page") && !crm.needs_approval("a__b"));
    }
}
