//! The client side of MCP's Streamable HTTP transport, without I/O: the bodies and headers of
//! our requests to a prompt's MCP servers, the reading of their answers (one JSON body, or an
//! SSE stream holding the response and maybe notifications), and their tool lists and results
//! in edgent's types. The runtime performs the requests ([`crate::runtime`]'s `mcp` module).

use serde_json::{json, Value};

use super::{PROTOCOL_HEADER, SESSION_HEADER};
use crate::llm::sse::SseParser;
use crate::llm::ToolSpec;
use crate::values::tool_error::ToolError;
use crate::values::tool_result::CallToolResult;
use crate::values::tool_result::{Content, Source};

/// The version we ask for (servers may answer an older one they speak; we accept those we
/// know, [`super::PROTOCOL_VERSIONS`]).
pub const CLIENT_PROTOCOL_VERSION: &str = "2025-06-18";
/// The most tools taken from one server (a list beyond it is cut, and the cut logged).
pub const MAX_TOOLS_PER_SERVER: usize = 128;
/// How long a server's tool list is used before it is listed again.
pub const TOOLS_TTL_MS: i64 = 5 * 60_000;

/// A JSON-RPC request body.
pub fn request_body(id: u64, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

/// The `initialize` request's parameters.
pub fn initialize_params(client_version: &str) -> Value {
    json!({
        "protocolVersion": CLIENT_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": { "name": "edgent", "version": client_version },
    })
}

/// The notification that ends the handshake.
pub fn initialized_body() -> String {
    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string()
}

/// The headers of a request: the transport's `Accept`, the session and version once
/// negotiated, the bearer token when the server has one.
pub fn headers(
    session: Option<&str>,
    version: Option<&str>,
    token: Option<&str>,
) -> Vec<(String, String)> {
    let mut out = vec![
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
    ];
    if let Some(session) = session {
        out.push((SESSION_HEADER.into(), session.into()));
    }
    if let Some(version) = version {
        out.push((PROTOCOL_HEADER.into(), version.into()));
    }
    if let Some(token) = token {
        out.push(("authorization".into(), format!("Bearer {token}")));
    }
    out
}

/// A server's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The response's `result`, or its JSON-RPC error (code, message).
    pub result: Result<Value, (i64, String)>,
    /// The server said its tool list changed (a notification in the same stream).
    pub list_changed: bool,
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The session is unknown to the server (HTTP 404 to a request that named one): initialise
    /// again.
    SessionGone,
    /// Another HTTP status (with the start of the body).
    Status(u16, String),
    /// Not JSON-RPC, or no response with our id.
    Malformed(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::SessionGone => f.write_str("the MCP session expired"),
            WireError::Status(status, body) => write!(f, "HTTP {status}: {body}"),
            WireError::Malformed(why) => write!(f, "malformed answer: {why}"),
        }
    }
}

impl WireError {
    /// The same error with every occurrence of `secret` in its text replaced.
    pub fn redacted(self, secret: &str) -> Self {
        let cut = |t: String| t.replace(secret, "[redacted]");
        match self {
            WireError::SessionGone => WireError::SessionGone,
            WireError::Status(status, body) => WireError::Status(status, cut(body)),
            WireError::Malformed(why) => WireError::Malformed(cut(why)),
        }
    }

    /// As a tool call's failure: server faults and rate limits are retried under the call's
    /// policy; a refusal of the request (4xx) or a redirect (3xx) is final.
    pub fn into_tool_error(self, server: &str) -> ToolError {
        let text = format!("MCP server {server:?}: {self}");
        match self {
            WireError::Status(status, _) if (300..500).contains(&status) && status != 429 => {
                ToolError::fatal(text)
            }
            _ => ToolError::new(text),
        }
    }
}

/// Reads the answer to the request `id`: a JSON body, or an SSE stream whose `message`
/// events hold it (and perhaps notifications before it). `had_session`: whether the request
/// named a session (a 404 then means it expired).
pub fn read_reply(
    status: u16,
    content_type: Option<&str>,
    body: &str,
    id: u64,
    had_session: bool,
) -> Result<Reply, WireError> {
    if status == 404 && had_session {
        return Err(WireError::SessionGone);
    }
    if (300..400).contains(&status) {
        return Err(WireError::Status(
            status,
            "a redirect, which is not followed (its token would go with it): put the final URL in the prompt's mcp_servers".into(),
        ));
    }
    if !(200..300).contains(&status) {
        let start: String = body.chars().take(300).collect();
        return Err(WireError::Status(status, start));
    }
    let messages: Vec<Value> = if content_type.is_some_and(|c| c.starts_with("text/event-stream")) {
        let mut parser = SseParser::new();
        let mut events = parser
            .feed(body.as_bytes())
            .map_err(|e| WireError::Malformed(e.to_string()))?;
        // A stream that ends without a blank line still ends its last event.
        events.extend(
            parser
                .feed(b"\n\n")
                .map_err(|e| WireError::Malformed(e.to_string()))?,
        );
        events
            .iter()
            .filter(|e| !e.data.is_empty())
            .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
            .flat_map(|v| match v {
                Value::Array(items) => items,
                one => vec![one],
            })
            .collect()
    } else {
        match serde_json::from_str::<Value>(body) {
            Ok(Value::Array(items)) => items,
            Ok(one) => vec![one],
            Err(e) => return Err(WireError::Malformed(format!("not JSON: {e}"))),
        }
    };
    let list_changed = messages
        .iter()
        .any(|m| m["method"] == "notifications/tools/list_changed");
    let answer = messages
        .into_iter()
        .find(|m| m["id"].as_u64() == Some(id) && m.get("method").is_none())
        .ok_or_else(|| WireError::Malformed(format!("no response with id {id}")))?;
    let result = match (answer.get("result"), answer.get("error")) {
        (Some(result), _) => Ok(result.clone()),
        (None, Some(error)) => Err((
            error["code"].as_i64().unwrap_or_default(),
            error["message"]
                .as_str()
                .unwrap_or("an error without a message")
                .to_owned(),
        )),
        (None, None) => {
            return Err(WireError::Malformed(
                "a response with neither result nor error".into(),
            ))
        }
    };
    Ok(Reply {
        result,
        list_changed,
    })
}

/// One page of `tools/list`: the tools as the model is offered them (named
/// `<prefix>__<name>`, filtered by `offers`), and the cursor of the next page.
pub fn tool_page(
    result: &Value,
    name_of: impl Fn(&str) -> Option<String>,
) -> (Vec<ToolSpec>, Option<String>) {
    let tools = result["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|tool| {
            let name = name_of(tool["name"].as_str()?)?;
            let mut parameters = tool["inputSchema"].clone();
            if !parameters.is_object() {
                parameters = json!({ "type": "object" });
            }
            Some(ToolSpec {
                name,
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                parameters: parameters.into(),
                returns: None,
            })
        })
        .collect();
    let next = result["nextCursor"].as_str().map(str::to_owned);
    (tools, next)
}

/// A `tools/call` result as the tool result the model reads: text, images, embedded text
/// resources; links and binary resources named by their URI. `isError` makes it an error
/// result (the tool failed; the model reads why).
pub fn call_result(result: &Value) -> CallToolResult {
    let items = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut content: Vec<Content> = items.iter().filter_map(content_of).collect();
    if content.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            content.push(Content::text(structured.to_string()));
        }
    }
    if result["isError"] == true {
        let text: Vec<String> = content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        return CallToolResult::error(if text.is_empty() {
            "the MCP tool failed without a message".to_owned()
        } else {
            text.join("\n")
        });
    }
    CallToolResult::success(content)
}

fn content_of(item: &Value) -> Option<Content> {
    let text = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
    match item["type"].as_str()? {
        "text" => Some(Content::text(text("text"))),
        "image" => Some(Content::Image {
            source: Source::base64(text("mimeType"), text("data")),
        }),
        "resource_link" => Some(Content::text(format!(
            "[resource: {} {}]",
            text("name"),
            text("uri")
        ))),
        "resource" => {
            let resource = &item["resource"];
            match resource["text"].as_str() {
                Some(body) => Some(Content::text(body.to_owned())),
                None => Some(Content::text(format!(
                    "[resource: {}]",
                    resource["uri"].as_str().unwrap_or_default()
                ))),
            }
        }
        // Audio and kinds added later: named, not dropped silently.
        other => Some(Content::text(format!("[{other} content]"))),
    }
}
