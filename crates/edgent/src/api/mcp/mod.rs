//! edgent as an MCP server: the JSON-RPC messages of the Model Context Protocol's Streamable
//! HTTP transport (`POST /mcp`, `POST /mcp/:agent`), decoded and answered without a Worker.
//!
//! What is exposed: every registered tool whose policy has `mcp` set
//! ([`Tool::mcp`](crate::tool::Tool::mcp)), and every agent as `ask_<agent>`, a tool that
//! runs a turn and returns the answer. The router decides which thread serves a call; the
//! thread's object watches its frames for the outcome ([`watch`]).
//!
//! The server answers each POST with one JSON body (the transport's `application/json` mode;
//! it opens no server-to-client SSE stream, so `GET` is 405), which every conforming client
//! accepts.

pub mod client;
pub mod inspect;
pub mod watch;

use serde_json::{json, Map, Value};

use crate::llm::ToolSpec;

/// The protocol versions this server speaks, newest first; an `initialize` asking for another
/// gets the newest (the client then decides whether it can go on).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The header naming the session on every request after `initialize` (`/mcp/:agent` only).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The header a client sends with the negotiated version on every request after `initialize`.
pub const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// How long a call over MCP waits for its outcome before answering "still running" (below the
/// official SDK's 60 s request timeout, so the client hears why).
pub const CALL_WAIT_MS: i64 = 50_000;
/// The prefix of the tool that asks an agent.
pub const ASK_PREFIX: &str = "ask_";

/// JSON-RPC's error codes that this server answers with.
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC 2.0 request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters, or an unknown tool (as the MCP specification asks).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// One message of a POST body.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request, to be answered with the same `id`.
    Request {
        /// Its id (a string or a number).
        id: Value,
        /// What it asks.
        call: Call,
    },
    /// A notification or a response to a request of ours (we send none): answered with
    /// nothing.
    Notification,
    /// A message that is not JSON-RPC 2.0: answered with this error (and a null id when the
    /// id could not be read).
    Invalid {
        /// The id, when it could be read.
        id: Value,
        /// Why.
        message: String,
    },
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `initialize`, with the version the client would like.
    Initialize {
        /// `params.protocolVersion`.
        protocol_version: String,
    },
    /// `ping`.
    Ping,
    /// `tools/list` (one page holds every tool).
    ListTools,
    /// `tools/call`.
    CallTool {
        /// The tool.
        name: String,
        /// Its arguments (`{}` when absent).
        arguments: Map<String, Value>,
    },
    /// A method this server does not have.
    Unknown(String),
    /// A known method with parameters of the wrong shape.
    BadParams(String),
}

/// Decodes a POST body: one message or a batch (an array, as the 2025-03-26 version allows).
/// A body that is not JSON is answered with one parse error.
pub fn parse_body(body: &[u8]) -> Result<(Vec<Incoming>, bool), Value> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        error_response(
            Value::Null,
            code::PARSE_ERROR,
            &format!("the body is not JSON: {e}"),
        )
    })?;
    match value {
        Value::Array(items) if items.is_empty() => Err(error_response(
            Value::Null,
            code::INVALID_REQUEST,
            "an empty batch",
        )),
        Value::Array(items) => Ok((items.into_iter().map(incoming).collect(), true)),
        one => Ok((vec![incoming(one)], false)),
    }
}

fn incoming(value: Value) -> Incoming {
    let Value::Object(obj) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            message: "a JSON-RPC message must be an object".into(),
        };
    };
    let id = obj.get("id").cloned().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id,
            message: "\"jsonrpc\" must be \"2.0\"".into(),
        };
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        // A response (result or error) to a request we never send.
        return if obj.contains_key("result") || obj.contains_key("error") {
            Incoming::Notification
        } else {
            Incoming::Invalid {
                id,
                message: "a request needs a \"method\" string".into(),
            }
        };
    };
    if !obj.contains_key("id") {
        return Incoming::Notification;
    }
    if !matches!(id, Value::String(_) | Value::Number(_)) {
        return Incoming::Invalid {
            id: Value::Null,
            message: "\"id\" must be a string or a number".into(),
        };
    }
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    Incoming::Request {
        id,
        call: call(method, &params),
    }
}

fn call(method: &str, params: &Value) -> Call {
    match method {
        "initialize" => match params.get("protocolVersion").and_then(Value::as_str) {
            Some(v) => Call::Initialize {
                protocol_version: v.to_owned(),
            },
            None => Call::BadParams("initialize needs params.protocolVersion".into()),
        },
        "ping" => Call::Ping,
        "tools/list" => Call::ListTools,
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Call::BadParams("tools/call needs params.name".into());
            };
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(args)) => args.clone(),
                Some(_) => return Call::BadParams("params.arguments must be an object".into()),
            };
            Call::CallTool {
                name: name.to_owned(),
                arguments,
            }
        }
        other => Call::Unknown(other.to_owned()),
    }
}

/// The version to answer `initialize` with: the client's when we speak it, else our newest.
pub fn negotiate(requested: &str) -> &'static str {
    PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

/// Whether a request's `MCP-Protocol-Version` header (absent: the 2025-03-26 default) names a
/// version this server speaks.
pub fn supports_header(version: Option<&str>) -> bool {
    version.is_none_or(|v| PROTOCOL_VERSIONS.contains(&v))
}

/// The result of `initialize`.
pub fn initialize_result(requested: &str, server_version: &str, agent: Option<&str>) -> Value {
    let instructions = match agent {
        Some(agent) => format!(
            "Tools of the edgent agent {agent:?}: `{ASK_PREFIX}{agent}` sends it a message in \
             this session's conversation and returns its answer."
        ),
        None => format!(
            "edgent agents and tools. Each `{ASK_PREFIX}<agent>` tool sends a message to that \
             agent (a new conversation, or the one `thread_id` names) and returns its answer."
        ),
    };
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "edgent", "version": server_version },
        "instructions": instructions,
    })
}

/// A successful response.
pub fn result_response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// What a `tools/call` name reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// `ask_<agent>`.
    Ask(&'a str),
    /// A registered tool.
    Tool(&'a str),
}

/// Which kind of tool `name` is (the caller checks that it is exposed).
pub fn target(name: &str) -> Target<'_> {
    match name.strip_prefix(ASK_PREFIX) {
        Some(agent) if !agent.is_empty() => Target::Ask(agent),
        _ => Target::Tool(name),
    }
}

/// The `ask_<agent>` tool's listing. On `/mcp` (`session` false) it takes an optional
/// `thread_id` to go on with a conversation; on `/mcp/:agent` the session is the
/// conversation.
pub fn ask_descriptor(agent: &str, description: &str, session: bool) -> Value {
    let mut properties = json!({
        "message": { "type": "string", "minLength": 1, "description": "What to say to the agent." }
    });
    if !session {
        properties["thread_id"] = json!({
            "type": "string",
            "description": "Go on with this conversation (a thread_id an earlier answer gave); a new one when absent."
        });
    }
    let what = if description.is_empty() {
        format!("the edgent agent {agent:?}")
    } else {
        format!("the edgent agent {agent:?} ({description})")
    };
    json!({
        "name": format!("{ASK_PREFIX}{agent}"),
        "title": format!("Ask {agent}"),
        "description": format!("Sends a message to {what} and returns its answer, with the thread_id to go on with."),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": ["message"],
            "additionalProperties": false,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "thread_id": { "type": "string" },
                "status": { "type": "string", "description": "idle, stopped, or running (still working after the wait)" },
                "answer": { "type": "string" },
                "message_id": { "type": ["string", "null"] },
                "structured": { "description": "The answer's value, checked against the agent prompt's response_format (only when it has one)" },
            },
            "required": ["thread_id", "status", "answer"],
        },
    })
}

/// A registered tool's listing: its name, description and argument schema.
pub fn tool_descriptor(spec: &ToolSpec) -> Value {
    let mut schema = Value::clone(&spec.parameters);
    // MCP requires an object schema at the top; every registered tool's is one already.
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": schema,
    })
}

/// A registered tool's listing on `/mcp`, which has no session thread: its own arguments and a
/// required `thread_id`, the thread the call runs in (its storage, context, webhooks and
/// execution history are that thread's). `None` for a tool that takes a `thread_id` of its
/// own, or whose arguments are not an object of properties: it is offered on `/mcp/:agent`
/// only.
pub fn tool_descriptor_in_thread(spec: &ToolSpec) -> Option<Value> {
    let mut listing = tool_descriptor(spec);
    let schema = &mut listing["inputSchema"];
    let properties = match schema.get_mut("properties") {
        Some(Value::Object(p)) => p,
        None => {
            schema["properties"] = json!({});
            schema["properties"].as_object_mut()?
        }
        Some(_) => return None,
    };
    if properties.contains_key(THREAD_ARGUMENT) {
        return None;
    }
    properties.insert(
        THREAD_ARGUMENT.into(),
        json!({ "type": "string", "description": "The thread (its id) the tool runs in: its storage, context and execution history are that thread's." }),
    );
    match schema.get_mut("required") {
        Some(Value::Array(required)) => required.push(json!(THREAD_ARGUMENT)),
        _ => schema["required"] = json!([THREAD_ARGUMENT]),
    }
    Some(listing)
}

/// The argument that names the thread a registered tool runs in on `/mcp`.
pub const THREAD_ARGUMENT: &str = "thread_id";

/// Takes the `thread_id` out of a registered tool's arguments on `/mcp`: the thread, and the
/// tool's own arguments.
pub fn thread_of_call(
    mut arguments: Map<String, Value>,
) -> Result<(String, Map<String, Value>), String> {
    match arguments.remove(THREAD_ARGUMENT) {
        Some(Value::String(thread)) if !thread.is_empty() => Ok((thread, arguments)),
        Some(_) => Err(format!("\"{THREAD_ARGUMENT}\" must be a thread's id")),
        None => Err(format!(
            "\"{THREAD_ARGUMENT}\" is required: the thread the tool runs in (on /mcp/:agent the session's thread is used)"
        )),
    }
}

/// The arguments of `ask_<agent>`: the message and, on `/mcp`, an optional thread.
pub fn ask_arguments(
    arguments: &Map<String, Value>,
    session: bool,
) -> Result<(String, Option<String>), String> {
    for key in arguments.keys() {
        if key != "message" && (session || key != "thread_id") {
            return Err(format!("unknown argument {key:?}"));
        }
    }
    let message = match arguments.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        _ => return Err("\"message\" must be a non-empty string".into()),
    };
    let thread = match arguments.get("thread_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => return Err("\"thread_id\" must be a string".into()),
    };
    Ok((message, thread))
}

/// A tool result that reports a failure to the caller (`isError`, as MCP asks for errors a
/// model should see rather than protocol errors).
pub fn error_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

#[cfg(test)]
mod tests;
