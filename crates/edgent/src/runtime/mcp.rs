//! Talking to a prompt's MCP servers: listing their tools before a model call, and calling
//! one when the model asks (each call inside the durable tool path, which decides its
//! retries, timeout, approval and limits). The session a server gives us is kept in the
//! thread's storage, so it survives hibernation; a server that forgot it (HTTP 404) is
//! initialised again and the request sent once more. The wire format is
//! [`crate::api::mcp::client`]'s.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use super::ThreadRuntime;
use crate::api::mcp::client::{self, Reply, WireError, MAX_TOOLS_PER_SERVER, TOOLS_TTL_MS};
use crate::api::mcp::PROTOCOL_VERSIONS;
use crate::config::mcp_servers::{self, McpServerConfig};
use crate::config::policy::ModelPolicy;
use crate::config::PromptConfig;
use crate::engine::store::Store;
use crate::llm::ToolSpec;
use crate::tool::HttpRequest;
use crate::values::tool_error::ToolError;
use crate::values::tool_result::CallToolResult;

/// How long one request to an MCP server may take (a call's own timeout, the policy's, is
/// applied around the whole call by the tool path).
const REQUEST_TIMEOUT_MS: u32 = 30_000;
/// How long a server whose listing failed is not asked again.
const LISTING_RETRY_MS: i64 = 60_000;
/// The most `tools/list` pages read from one server.
const MAX_PAGES: usize = 8;

/// JSON-RPC ids: unique within this isolate, which is all a session needs.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl ThreadRuntime {
    /// The tools the prompt's MCP servers offer, as the model sees them (`<server>__<tool>`):
    /// each server's list from storage while it is fresh, else listed again. A server that
    /// cannot be reached offers its last list, or nothing; the failure is logged, and the turn
    /// goes on with the other tools.
    pub(crate) async fn mcp_tool_specs(&self, prompt: &PromptConfig) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for server in &prompt.mcp_servers {
            let store = Store::new(self.platform.sql());
            let row = store.mcp_server(&server.name, &server.url).ok().flatten();
            let cached = row.as_ref().and_then(|r| r.tools.clone());
            let fresh = row
                .as_ref()
                .and_then(|r| r.listed_at)
                .is_some_and(|at| self.now() - at < TOOLS_TTL_MS);
            let tools = match (fresh, cached) {
                // Fresh, or a failed listing's pause (no list: nothing from this server).
                (true, cached) => cached.unwrap_or_default(),
                (false, cached) => match self.list_mcp_tools(server).await {
                    Ok(tools) => tools,
                    Err(e) => {
                        self.platform.log_error(&format!(
                            "MCP server {:?}: could not list its tools (tried again in {} s): {e}",
                            server.name,
                            LISTING_RETRY_MS / 1000
                        ));
                        // Its last list (or none) stands for a while: a server that is down
                        // must not hold up every model call.
                        let _ = Store::new(self.platform.sql()).mcp_listing_failed(
                            &server.name,
                            &server.url,
                            self.now() - TOOLS_TTL_MS + LISTING_RETRY_MS,
                        );
                        cached.unwrap_or_default()
                    }
                },
            };
            // The list is the server's whole (valid) list: this prompt's `tools` choose from it.
            if let Ok(tools) = serde_json::from_value::<Vec<ToolSpec>>(tools) {
                specs.extend(tools.into_iter().filter(|t| {
                    mcp_servers::split(std::slice::from_ref(server), &t.name).is_some()
                }));
            }
        }
        specs
    }

    /// Lists a server's tools (every page, bounded) and keeps the list.
    async fn list_mcp_tools(&self, server: &McpServerConfig) -> Result<Value, String> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let reply = self
                .mcp_request(server, "tools/list", params)
                .await
                .map_err(|e| e.to_string())?;
            let result = reply
                .result
                .map_err(|(code, message)| format!("error {code}: {message}"))?;
            // Every tool the providers can name (`<server>__<tool>` within their rules); the
            // prompt's own `tools` filter is applied when reading, so prompts sharing a
            // server name in one thread share the list, not each other's choice.
            let (page, next) = client::tool_page(&result, |tool| {
                let name = server.tool_name(tool);
                if is_tool_name(&name) {
                    Some(name)
                } else {
                    self.platform.log_error(&format!(
                        "MCP server {:?}: tool {tool:?} is left out: {name:?} is not a name models take (1-64 of A-Z a-z 0-9 _ -)",
                        server.name
                    ));
                    None
                }
            });
            tools.extend(page);
            cursor = next;
            if cursor.is_none() || tools.len() >= MAX_TOOLS_PER_SERVER {
                break;
            }
        }
        if tools.len() > MAX_TOOLS_PER_SERVER {
            self.platform.log_error(&format!(
                "MCP server {:?} lists {} tools; the first {MAX_TOOLS_PER_SERVER} are offered",
                server.name,
                tools.len()
            ));
            tools.truncate(MAX_TOOLS_PER_SERVER);
        }
        let tools = serde_json::to_value(&tools).map_err(|e| e.to_string())?;
        Store::new(self.platform.sql())
            .set_mcp_tools(&server.name, &tools, self.now())
            .map_err(|e| e.to_string())?;
        Ok(tools)
    }

    /// One call of the server's `tool` with the model's `arguments` (JSON text): its result,
    /// an error result when the tool failed, or a failure the tool path may retry.
    pub(crate) async fn call_mcp_tool(
        &self,
        server: &McpServerConfig,
        tool: &str,
        arguments: &str,
    ) -> Result<CallToolResult, ToolError> {
        let arguments: Value = match arguments.trim() {
            "" => json!({}),
            text => serde_json::from_str(text).map_err(|e| {
                ToolError::fatal(format!(
                    "the arguments are not valid JSON ({e}); send an object"
                ))
            })?,
        };
        if !arguments.is_object() {
            return Err(ToolError::fatal("the arguments must be a JSON object"));
        }
        let reply = self
            .mcp_request(
                server,
                "tools/call",
                json!({ "name": tool, "arguments": arguments }),
            )
            .await
            .map_err(|e| e.into_tool_error(&server.name))?;
        match reply.result {
            Ok(result) => Ok(client::call_result(&result)),
            // A protocol error (an unknown tool, invalid arguments): the model reads it.
            Err((code, message)) => Ok(CallToolResult::error(format!(
                "MCP server {:?} refused the call ({code}): {message}",
                server.name
            ))),
        }
    }

    /// Sends one request in the server's session, opening one first when there is none, and
    /// once more in a new session when the server forgot ours.
    async fn mcp_request(
        &self,
        server: &McpServerConfig,
        method: &str,
        params: Value,
    ) -> Result<Reply, WireError> {
        let token = self.mcp_token(server)?;
        // A server may echo the token in an error body: it never reaches a result or a log.
        let redact = |e: WireError| match &token {
            Some(t) if !t.is_empty() => e.redacted(t),
            _ => e,
        };
        self.mcp_exchange(server, method, params, token.as_deref())
            .await
            .map_err(redact)
    }

    async fn mcp_exchange(
        &self,
        server: &McpServerConfig,
        method: &str,
        params: Value,
        token: Option<&str>,
    ) -> Result<Reply, WireError> {
        for _ in 0..2 {
            let store = Store::new(self.platform.sql());
            let row = store.mcp_server(&server.name, &server.url).ok().flatten();
            let (session, version) = match row.filter(|r| r.protocol_version.is_some()) {
                Some(r) => (r.session_id, r.protocol_version),
                None => self.mcp_initialize(server, token).await?,
            };
            let id = next_id();
            let sent = self
                .mcp_post(
                    server,
                    client::request_body(id, method, params.clone()),
                    session.as_deref(),
                    version.as_deref(),
                    token,
                )
                .await?;
            match client::read_reply(
                sent.status,
                sent.header("content-type"),
                &sent.body,
                id,
                session.is_some(),
            ) {
                Err(WireError::SessionGone) => {
                    let _ = store.forget_mcp_session(&server.name);
                }
                Ok(reply) => {
                    if reply.list_changed {
                        let _ = store.mcp_tools_changed(&server.name);
                    }
                    return Ok(reply);
                }
                Err(e) => return Err(e),
            }
        }
        Err(WireError::SessionGone)
    }

    /// `initialize`, then `notifications/initialized`; keeps the session and version.
    async fn mcp_initialize(
        &self,
        server: &McpServerConfig,
        token: Option<&str>,
    ) -> Result<(Option<String>, Option<String>), WireError> {
        let id = next_id();
        let params = client::initialize_params(env!("CARGO_PKG_VERSION"));
        let sent = self
            .mcp_post(
                server,
                client::request_body(id, "initialize", params),
                None,
                None,
                token,
            )
            .await?;
        let reply = client::read_reply(
            sent.status,
            sent.header("content-type"),
            &sent.body,
            id,
            false,
        )?;
        let result = reply.result.map_err(|(code, message)| {
            WireError::Malformed(format!("initialize failed ({code}): {message}"))
        })?;
        let version = result["protocolVersion"].as_str().unwrap_or_default();
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(WireError::Malformed(format!(
                "the server speaks MCP {version:?}, which edgent does not"
            )));
        }
        let session = sent
            .header(crate::api::mcp::SESSION_HEADER)
            .map(str::to_owned);
        let done = self
            .mcp_post(
                server,
                client::initialized_body(),
                session.as_deref(),
                Some(version),
                token,
            )
            .await?;
        if !(200..300).contains(&done.status) {
            return Err(WireError::Status(
                done.status,
                "notifications/initialized".into(),
            ));
        }
        let _ = Store::new(self.platform.sql()).set_mcp_session(
            &server.name,
            &server.url,
            session.as_deref(),
            version,
        );
        Ok((session, Some(version.to_owned())))
    }

    async fn mcp_post(
        &self,
        server: &McpServerConfig,
        body: String,
        session: Option<&str>,
        version: Option<&str>,
        token: Option<&str>,
    ) -> Result<crate::tool::HttpResponse, WireError> {
        let request = HttpRequest {
            method: "POST".into(),
            url: server.url.clone(),
            headers: client::headers(session, version, token),
            body: Some(body),
            timeout_ms: REQUEST_TIMEOUT_MS,
            // The operator checked this URL's host (MCP_HOSTS) and the token goes with it: a
            // redirect is an error, never a second request to another host.
            follow_redirects: false,
        };
        self.platform
            .fetch(request)
            .await
            .map_err(|e| WireError::Status(503, format!("unreachable: {e}")))
    }

    /// The server's bearer token, after the operator's policy is checked again (a prompt
    /// seeded into D1 directly never passed the API's check).
    fn mcp_token(&self, server: &McpServerConfig) -> Result<Option<String>, WireError> {
        let policy = ModelPolicy::from_vars(|k| self.platform.var(k));
        policy
            .check_mcp_server(server)
            .map_err(|why| WireError::Status(403, why.to_string()))?;
        match &server.token_secret {
            None => Ok(None),
            Some(secret) => self.platform.secret(secret).map(Some).ok_or_else(|| {
                WireError::Status(
                    401,
                    format!("the secret {secret:?} holding its token is not set"),
                )
            }),
        }
    }
}

/// Whether `name` is one every provider takes for a tool (OpenAI's and Anthropic's rule).
fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
