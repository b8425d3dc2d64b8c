//! HTTP and WebSocket API contracts that need no Worker: request validation, authentication,
//! and [`ops::ThreadOp`], the one operation type both transports decode into.

pub mod access;
pub mod cors;
pub mod mcp;
pub mod ops;
pub mod routes;
pub mod thread_index;
pub mod tools;
pub mod ui_stream;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::engine::store::Side;

pub use crate::values::error::ApiError;
pub use crate::values::limits::{DEFAULT_PAGE, MAX_BODY_BYTES, MAX_CONTENT_BYTES, MAX_PAGE};

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::too_large());
    }
    parse_object_unbounded(body)
}

/// [`parse_object`] for a body whose size the caller has bounded already.
fn parse_object_unbounded(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::new(400, "bad_json", "body must be a JSON object")),
        Err(e) => Err(ApiError::new(
            400,
            "bad_json",
            format!("body is not valid JSON: {e}"),
        )),
    }
}

/// `POST /api/threads` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateThread {
    /// The agent (must exist in D1).
    pub agent_id: String,
    /// Labels (at most 32, each at most 64 bytes).
    pub tags: Vec<String>,
    /// A client token to mint with the thread (`"token": {"scopes", "ttl_seconds"}`), so a
    /// server creates a thread and hands a browser its token in one request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<access::MintRequest>,
}

impl CreateThread {
    /// Validates a request body.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = parse_object(body)?;
        let agent_id = match obj.get("agent_id") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 128 => s.clone(),
            _ => {
                return Err(ApiError::invalid(
                    "\"agent_id\" must be a non-empty string (max 128 bytes)",
                ))
            }
        };
        let tags = match obj.get("tags") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= 32 => items
                .iter()
                .map(|t| match t {
                    Value::String(s) if s.len() <= 64 => Ok(s.clone()),
                    _ => Err(ApiError::invalid(
                        "each tag must be a string of at most 64 bytes",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ApiError::invalid(
                    "\"tags\" must be an array of at most 32 strings",
                ))
            }
        };
        let token = match obj.get("token") {
            None | Some(Value::Null) => None,
            Some(request) => Some(access::MintRequest::from_value(request)?),
        };
        Ok(CreateThread {
            agent_id,
            tags,
            token,
        })
    }

    /// Validates the query of `GET /api/threads/new/stream` (`agent_id=…`, one `tag=…` per
    /// tag), with the same rules as a body.
    pub fn from_query(query: &[(String, String)]) -> Result<Self, ApiError> {
        let agent_id = query.iter().find(|(k, _)| k == "agent_id").map(|(_, v)| v);
        let tags: Vec<&String> = query
            .iter()
            .filter(|(k, _)| k == "tag")
            .map(|(_, v)| v)
            .collect();
        let body = json!({ "agent_id": agent_id, "tags": tags });
        Self::parse(body.to_string().as_bytes())
    }
}

/// `POST /api/threads/:id/messages` body, and the `send_message` rpc params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostMessage {
    /// The text.
    pub content: String,
}

impl PostMessage {
    /// Validates a request body.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        Self::from_object(&parse_object(body)?)
    }

    /// Validates already-parsed params (the rpc path).
    pub fn from_object(obj: &serde_json::Map<String, Value>) -> Result<Self, ApiError> {
        match obj.get("role") {
            None | Some(Value::Null) => {}
            Some(Value::String(r)) if r == "user" => {}
            Some(_) => {
                return Err(ApiError::invalid(
                    "\"role\" must be \"user\" (clients post user messages only)",
                ))
            }
        }
        match obj.get("content") {
            Some(Value::String(s)) if s.trim().is_empty() => {
                Err(ApiError::invalid("\"content\" must not be empty"))
            }
            Some(Value::String(s)) if s.len() > MAX_CONTENT_BYTES => Err(ApiError::new(
                413,
                "payload_too_large",
                format!("\"content\" is limited to {MAX_CONTENT_BYTES} bytes"),
            )),
            Some(Value::String(s)) => Ok(PostMessage { content: s.clone() }),
            _ => Err(ApiError::invalid("\"content\" must be a string")),
        }
    }
}

pub use crate::values::page::PageQuery;

/// Parameters of the `queue_tool` rpc: `{"name": "...", "args": {...}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueToolParams {
    /// Registered tool name.
    pub name: String,
    /// Arguments object (`{}` when absent).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// Runtime bindings for the call (`flow.bindings`), kept apart from the arguments.
    #[serde(default)]
    pub bindings: Option<serde_json::Map<String, Value>>,
}

/// Parameters of the `approve_tool` rpc and body of the approve/reject routes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalParams {
    /// The call waiting for approval.
    pub tool_call_id: String,
    /// Run it (true) or reject it (false).
    pub approved: bool,
    /// Why it was rejected; the model sees it.
    #[serde(default)]
    pub reason: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// Parameters of the `force_turn` rpc: `{"side": "a" | "b"}` (default `a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForceTurnParams {
    /// The side that takes the next turn.
    #[serde(default)]
    pub side: Side,
}

/// Parses rpc parameters into `T`, as a 400 naming the field at fault.
pub fn parse_params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, ApiError> {
    crate::values::validate::parse_args(params_object(params)).map_err(invalid_params)
}

/// [`parse_params`]' input: absent parameters read as `{}`.
fn params_object(params: &Value) -> Value {
    if params.is_null() {
        json!({})
    } else {
        params.clone()
    }
}

fn invalid_params(why: crate::values::Invalid) -> ApiError {
    ApiError::invalid(format!("invalid params: {why}"))
}

/// Compares two secrets in constant time (their length is not secret).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Order;

    #[test]
    fn create_thread_validation() {
        let ok = CreateThread::parse(br#"{"agent_id":"support","tags":["a"]}"#).unwrap();
        assert_eq!(ok.agent_id, "support");
        assert_eq!(ok.tags, vec!["a".to_string()]);
        assert_eq!(CreateThread::parse(b"{").unwrap_err().code, "bad_json");
        assert_eq!(CreateThread::parse(b"[]").unwrap_err().code, "bad_json");
        assert_eq!(CreateThread::parse(b"{}").unwrap_err().status, 400);
        assert_eq!(
            CreateThread::parse(br#"{"agent_id":"a","tags":[1]}"#)
                .unwrap_err()
                .status,
            400
        );
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(CreateThread::parse(&huge).unwrap_err().status, 413);
    }

    #[test]
    fn a_query_creates_a_thread_under_the_same_rules() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let ok =
            CreateThread::from_query(&q(&[("agent_id", "support"), ("tag", "web"), ("tag", "b")]))
                .unwrap();
        assert_eq!((ok.agent_id.as_str(), ok.tags.len()), ("support", 2));
        let missing = CreateThread::from_query(&q(&[("token", "k")])).unwrap_err();
        assert!(missing.message.contains("agent_id"), "{}", missing.message);
        let long_tag = "x".repeat(65);
        let bad = CreateThread::from_query(&q(&[("agent_id", "a"), ("tag", &long_tag)]));
        assert_eq!(bad.unwrap_err().status, 400);
        let many: Vec<(&str, &str)> = std::iter::once(("agent_id", "a"))
            .chain(std::iter::repeat_n(("tag", "t"), 33))
            .collect();
        assert_eq!(CreateThread::from_query(&q(&many)).unwrap_err().status, 400);
    }

    #[test]
    fn post_message_validation() {
        assert_eq!(
            PostMessage::parse(br#"{"content":"hi"}"#).unwrap().content,
            "hi"
        );
        assert_eq!(
            PostMessage::parse(br#"{"content":"hi","role":"user"}"#)
                .unwrap()
                .content,
            "hi"
        );
        assert_eq!(
            PostMessage::parse(br#"{"content":"hi","role":"system"}"#)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            PostMessage::parse(br#"{"content":"  "}"#)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            PostMessage::parse(br#"{"content":5}"#).unwrap_err().status,
            400
        );
        let long = format!(r#"{{"content":"{}"}}"#, "x".repeat(MAX_CONTENT_BYTES + 1));
        assert_eq!(PostMessage::parse(long.as_bytes()).unwrap_err().status, 413);
    }

    #[test]
    fn page_query_validation() {
        let q = PageQuery::parse([("limit", "10"), ("offset", "5"), ("order", "desc")]).unwrap();
        assert_eq!((q.limit, q.offset, q.order), (10, 5, Order::Desc));
        assert_eq!(PageQuery::parse([]).unwrap().limit, DEFAULT_PAGE);
        for bad in [
            ("limit", "0"),
            ("limit", "201"),
            ("limit", "x"),
            ("offset", "-1"),
            ("order", "up"),
            ("include_silent", "yes"),
        ] {
            assert_eq!(PageQuery::parse([bad]).unwrap_err().status, 400, "{bad:?}");
        }
    }
}
