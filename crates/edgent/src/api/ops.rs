//! One operation type for both transports: an HTTP request on a thread and a WebSocket `rpc`
//! decode into the same [`ThreadOp`], so each operation has one validation, one paging rule
//! and one set of errors. The driver applies an op in one place and answers HTTP with
//! [`ThreadOp::http_status`] and the same JSON body an rpc `result` carries.

use serde_json::Value;

use crate::api::access::{Access, MintRequest};
use crate::api::{
    parse_params, ApiError, ApprovalParams, ForceTurnParams, PageQuery, PostMessage,
    QueueToolParams,
};
use crate::engine::store::Side;
use crate::engine::thread::{InjectMessage, ToolIndex};

/// What a client asks of one thread.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ThreadOp {
    /// The thread's summary (`GET /api/threads/:id`).
    Summary,
    /// A user message (`POST …/messages`, rpc `send_message`); starts a turn.
    SendMessage(PostMessage),
    /// A message of any role, stored without starting a turn (rpc `inject_message`).
    InjectMessage(InjectMessage),
    /// A tool call queued by the application (rpc `queue_tool`).
    QueueTool(QueueToolParams),
    /// A page of messages (`GET …/messages`, rpc `get_messages`).
    GetMessages(PageQuery),
    /// A page of the execution history (`GET …/tool-calls`, rpc `get_tool_calls`).
    GetToolCalls(PageQuery),
    /// A page of the model request log (`GET …/logs`).
    GetLogs(PageQuery),
    /// Each tool's status in this thread (`GET …/tools`).
    ToolStatuses,
    /// What the thread keeps of its prompts' MCP servers: sessions, tool lists and their
    /// times (`GET …/mcp`; [`crate::api::mcp::inspect`]).
    McpServers,
    /// Approve or reject a call that waits for it (`POST …/tool-calls/:call/approve|reject`,
    /// rpc `approve_tool`).
    DecideApproval(ApprovalParams),
    /// Make a side take a turn without a new message (rpc `force_turn`).
    ForceTurn(ForceTurnParams),
    /// End the conversation (`POST …/stop`, rpc `stop`).
    Stop,
    /// Answer the last user message again (rpc `regenerate`, the AI SDK's
    /// `regenerate-message`).
    Regenerate,
    /// A client token for this thread (`POST …/tokens`).
    MintToken(MintRequest),
    /// Revoke every token minted so far (`POST …/tokens/revoke`).
    RevokeTokens,
    /// The thread's schedules (`GET …/schedules`, `?ended=true` with the done and cancelled
    /// ones; rpc `list_schedules`).
    ListSchedules {
        /// Include schedules that are done or cancelled.
        ended: bool,
    },
    /// A new schedule (`POST …/schedules`, rpc `create_schedule`).
    CreateSchedule(crate::values::schedule::ScheduleSpec),
    /// Cancel a schedule (`DELETE …/schedules/:schedule_id`, rpc `cancel_schedule`).
    CancelSchedule {
        /// The schedule.
        schedule_id: String,
    },
    /// Send this socket every logged frame after a seq (rpc `resume`; a socket opened with
    /// `?after=` gets the same). Answered by the socket's driver, which alone knows the socket:
    /// the frames first, then `{"replayed", "seq"}`.
    Resume {
        /// The last seq the client saw.
        after: i64,
    },
}

/// Where client operations live in a thread object's own namespace, apart from the routes
/// only the host calls (`/create`, `/webhook`, `/run`, `/stream`): the router forwards
/// `/api/threads/:id/<rest>` as `OP_PREFIX/<rest>`.
pub const OP_PREFIX: &str = "/op";

/// The rpc methods, for the error that names them.
pub const RPC_METHODS: &[&str] = &[
    "send_message",
    "inject_message",
    "queue_tool",
    "get_messages",
    "get_tool_calls",
    "force_turn",
    "stop",
    "approve_tool",
    "regenerate",
    "resume",
    "list_schedules",
    "create_schedule",
    "cancel_schedule",
];

/// The `after` of `GET …/stream?after=<seq>`: a non-negative integer in decimal digits, else
/// 400 (before the socket is upgraded).
pub fn parse_after(text: &str) -> Result<i64, ApiError> {
    let valid = !text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit());
    valid
        .then(|| text.parse::<i64>().ok())
        .flatten()
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "\"after\" must be a non-negative integer (a seq), not {:?}",
                crate::values::limits::truncated(text, 32)
            ))
        })
}

/// The `after` of rpc `resume {"after": seq}`: a non-negative JSON integer, else 400.
fn resume_after(params: &Value) -> Result<i64, ApiError> {
    params
        .get("after")
        .and_then(Value::as_u64)
        .and_then(|after| i64::try_from(after).ok())
        .ok_or_else(|| ApiError::invalid("resume needs \"after\": a non-negative integer (a seq)"))
}

impl ThreadOp {
    /// Decodes a WebSocket `rpc {method, params}`.
    pub fn from_rpc(method: &str, params: &Value) -> Result<ThreadOp, ApiError> {
        Ok(match method {
            "send_message" => ThreadOp::SendMessage(PostMessage::from_object(
                &params.as_object().cloned().unwrap_or_default(),
            )?),
            "inject_message" => ThreadOp::InjectMessage(parse_params(params)?),
            "queue_tool" => ThreadOp::QueueTool(parse_params(params)?),
            "get_messages" => ThreadOp::GetMessages(page_from_params(params)?),
            "get_tool_calls" => ThreadOp::GetToolCalls(page_from_params(params)?),
            "force_turn" => ThreadOp::ForceTurn(parse_params(params)?),
            "stop" => ThreadOp::Stop,
            "approve_tool" => ThreadOp::DecideApproval(parse_params(params)?),
            "regenerate" => ThreadOp::Regenerate,
            "resume" => ThreadOp::Resume {
                after: resume_after(params)?,
            },
            "list_schedules" => ThreadOp::ListSchedules {
                ended: params
                    .get("ended")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            "create_schedule" => ThreadOp::CreateSchedule(parse_params(params)?),
            "cancel_schedule" => ThreadOp::CancelSchedule {
                schedule_id: params
                    .get("schedule_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("cancel_schedule needs \"schedule_id\""))?
                    .to_owned(),
            },
            other => {
                return Err(ApiError::new(
                    400,
                    "unknown_method",
                    format!(
                        "unknown rpc method {other:?}; available: {}",
                        RPC_METHODS.join(", ")
                    ),
                ))
            }
        })
    }

    /// Decodes an HTTP request on a thread: `method`, `path` (what follows
    /// `/api/threads/:id`: `""`, `/messages`, `/tool-calls/:call/approve`, …), the query pairs
    /// and the body. `None` when no operation has this method and path (404). The one table
    /// of the public thread routes: the router forwards every one of them as it is.
    pub fn from_http(
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: &[u8],
    ) -> Result<Option<ThreadOp>, ApiError> {
        let page = || PageQuery::parse(query.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        Ok(Some(match (method, segments.as_slice()) {
            ("GET", []) => ThreadOp::Summary,
            ("GET", ["messages"]) => ThreadOp::GetMessages(page()?),
            ("POST", ["messages"]) => ThreadOp::SendMessage(PostMessage::parse(body)?),
            ("POST", ["stop"]) => ThreadOp::Stop,
            ("POST", ["tokens"]) => ThreadOp::MintToken(MintRequest::parse(body)?),
            ("POST", ["tokens", "revoke"]) => ThreadOp::RevokeTokens,
            ("GET", ["logs"]) => ThreadOp::GetLogs(page()?),
            ("GET", ["tool-calls"]) => ThreadOp::GetToolCalls(page()?),
            ("GET", ["tools"]) => ThreadOp::ToolStatuses,
            ("GET", ["mcp"]) => ThreadOp::McpServers,
            ("GET", ["schedules"]) => ThreadOp::ListSchedules {
                ended: query.iter().any(|(k, v)| k == "ended" && v == "true"),
            },
            ("POST", ["schedules"]) => ThreadOp::CreateSchedule(parse_params(&json_body(body)?)?),
            ("DELETE", ["schedules", id]) => ThreadOp::CancelSchedule {
                schedule_id: (*id).to_owned(),
            },
            ("POST", ["tool-calls", call_id, decision @ ("approve" | "reject")]) => {
                ThreadOp::DecideApproval(ApprovalParams {
                    tool_call_id: (*call_id).to_owned(),
                    approved: *decision == "approve",
                    reason: reason_of(body)?,
                })
            }
            _ => return Ok(None),
        }))
    }

    /// The HTTP status of a successful answer (an rpc `result` carries the same body).
    pub fn http_status(&self) -> u16 {
        match self {
            ThreadOp::SendMessage(_) => 202,
            ThreadOp::MintToken(_) | ThreadOp::CreateSchedule(_) => 201,
            _ => 200,
        }
    }

    /// What the caller needs (the scope table of docs/security.md): a client token reads the
    /// thread, sends user messages and stops it with `chat`, decides approvals with
    /// `approve`, and queues only tools marked client-callable, without bindings; the rest
    /// is the server's.
    pub fn access(&self, tools: &dyn ToolIndex) -> Access {
        match self {
            ThreadOp::Summary
            | ThreadOp::SendMessage(_)
            | ThreadOp::GetMessages(_)
            | ThreadOp::GetToolCalls(_)
            | ThreadOp::ToolStatuses
            | ThreadOp::McpServers
            | ThreadOp::Regenerate
            | ThreadOp::Resume { .. }
            | ThreadOp::ListSchedules { .. }
            | ThreadOp::Stop => Access::Chat,
            ThreadOp::DecideApproval(_) => Access::Approve,
            ThreadOp::QueueTool(p)
                if p.bindings.is_none()
                    && tools
                        .tool_policy(&p.name)
                        .is_some_and(|policy| policy.client_callable) =>
            {
                Access::Chat
            }
            ThreadOp::QueueTool(_)
            | ThreadOp::InjectMessage(_)
            | ThreadOp::GetLogs(_)
            | ThreadOp::ForceTurn(_)
            | ThreadOp::MintToken(_)
            | ThreadOp::RevokeTokens
            // Each schedule can wake the thread and call a model again and again: the
            // server's to make and cancel, not a browser's.
            | ThreadOp::CreateSchedule(_)
            | ThreadOp::CancelSchedule { .. } => Access::Server,
        }
    }

    /// Whether applying the op may leave work for the turn loop (the driver schedules it).
    pub fn starts_work(&self) -> bool {
        matches!(
            self,
            ThreadOp::SendMessage(_)
                | ThreadOp::QueueTool(_)
                | ThreadOp::DecideApproval(_)
                | ThreadOp::ForceTurn(_)
                | ThreadOp::Regenerate
                // The alarm must follow the new (or next) due time.
                | ThreadOp::CreateSchedule(_)
                | ThreadOp::CancelSchedule { .. }
        )
    }

    /// The side a `force_turn` asks for (the driver checks the agent has it).
    pub fn forced_side(&self) -> Option<Side> {
        match self {
            ThreadOp::ForceTurn(p) => Some(p.side),
            _ => None,
        }
    }
}

/// Paging parameters of an rpc, validated exactly like the HTTP query: numbers, booleans or
/// their text, else 400.
fn page_from_params(params: &Value) -> Result<PageQuery, ApiError> {
    let mut owned: Vec<(&str, String)> = Vec::new();
    for key in ["limit", "offset", "order", "include_silent", "depth"] {
        match params.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) => owned.push((key, v.clone())),
            Some(Value::Number(n)) => owned.push((key, n.to_string())),
            Some(Value::Bool(b)) => owned.push((key, b.to_string())),
            Some(_) => {
                return Err(ApiError::invalid(format!(
                    "\"{key}\" must be a number, a boolean or a string"
                )))
            }
        }
    }
    PageQuery::parse(owned.iter().map(|(k, v)| (*k, v.as_str())))
}

/// A JSON body (an empty one reads as `{}`), else 400.
fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body must be JSON: {e}")))
}

/// The optional `{"reason": "…"}` body of an approve/reject request (an empty body is none).
fn reason_of(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body must be JSON: {e}")))?;
    match value.get("reason") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(r)) => Ok(Some(r.clone())),
        Some(_) => Err(ApiError::invalid("\"reason\" must be a string")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::engine::store::Order;
    use serde_json::json;

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn both_transports_decode_into_the_same_op() {
        let http = ThreadOp::from_http(
            "GET",
            "/tool-calls",
            &query(&[("limit", "2"), ("order", "desc")]),
            b"",
        )
        .unwrap()
        .unwrap();
        let rpc =
            ThreadOp::from_rpc("get_tool_calls", &json!({ "limit": 2, "order": "desc" })).unwrap();
        assert_eq!(http, rpc);
        let ThreadOp::GetToolCalls(q) = rpc else {
            panic!("a page of tool calls")
        };
        assert_eq!((q.limit, q.order), (2, Order::Desc));

        let http = ThreadOp::from_http("POST", "/messages", &[], br#"{"content":"hi"}"#)
            .unwrap()
            .unwrap();
        let rpc = ThreadOp::from_rpc("send_message", &json!({ "content": "hi" })).unwrap();
        assert_eq!(http, rpc);
        assert_eq!(http.http_status(), 202);
        assert!(http.starts_work());

        let body = br#"{"reason":"no"}"#;
        let http = ThreadOp::from_http("POST", "/tool-calls/c1/reject", &[], body)
            .unwrap()
            .unwrap();
        let rpc = ThreadOp::from_rpc(
            "approve_tool",
            &json!({ "tool_call_id": "c1", "approved": false, "reason": "no" }),
        )
        .unwrap();
        assert_eq!(http, rpc);
    }

    #[test]
    fn bad_paging_is_the_same_400_on_both_transports() {
        for (key, text, value) in [
            ("limit", "0", json!(0)),
            ("limit", "201", json!(201)),
            ("limit", "abc", json!("abc")),
            ("offset", "-1", json!(-1)),
            ("order", "sideways", json!("sideways")),
        ] {
            let http =
                ThreadOp::from_http("GET", "/messages", &query(&[(key, text)]), b"").unwrap_err();
            let mut params = serde_json::Map::new();
            params.insert(key.to_owned(), value);
            let rpc = ThreadOp::from_rpc("get_messages", &Value::Object(params)).unwrap_err();
            assert_eq!((http.status, http.code), (400, "invalid_request"));
            assert_eq!(
                (rpc.status, &rpc.code, &rpc.message),
                (400, &http.code, &http.message)
            );
        }
        let nested = ThreadOp::from_rpc("get_tool_calls", &json!({ "limit": [2] })).unwrap_err();
        assert_eq!(nested.code, "invalid_request");
    }

    #[test]
    fn resume_takes_a_non_negative_integer() {
        for (params, after) in [(json!({ "after": 0 }), 0), (json!({ "after": 42 }), 42)] {
            assert_eq!(
                ThreadOp::from_rpc("resume", &params).unwrap(),
                ThreadOp::Resume { after }
            );
        }
        for bad in [
            json!({}),
            json!({ "after": -1 }),
            json!({ "after": 1.5 }),
            json!({ "after": "3" }),
            json!({ "after": null }),
            json!({ "after": u64::MAX }),
        ] {
            let e = ThreadOp::from_rpc("resume", &bad).unwrap_err();
            assert_eq!((e.status, e.code), (400, "invalid_request"), "{bad}");
        }
        assert_eq!(parse_after("0").unwrap(), 0);
        assert_eq!(parse_after("007").unwrap(), 7);
        assert_eq!(parse_after("9223372036854775807").unwrap(), i64::MAX);
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1.0",
            "1e3",
            "abc",
            "9223372036854775808",
            "0x10",
        ] {
            let e = parse_after(bad).unwrap_err();
            assert_eq!((e.status, e.code), (400, "invalid_request"), "{bad:?}");
        }
    }

    #[test]
    fn unknown_methods_and_routes_are_refused() {
        let e = ThreadOp::from_rpc("summon", &json!({})).unwrap_err();
        assert_eq!((e.status, e.code), (400, "unknown_method"));
        assert!(RPC_METHODS.iter().all(|m| e.message.contains(m)));
        assert_eq!(
            ThreadOp::from_http("DELETE", "/messages", &[], b"").unwrap(),
            None
        );
        assert_eq!(
            ThreadOp::from_http("GET", "/webhook", &[], b"").unwrap(),
            None
        );
        // The object's own routes are not client operations.
        for internal in ["/create", "/run", "/stream", "/approval"] {
            assert_eq!(
                ThreadOp::from_http("POST", internal, &[], b"{}").unwrap(),
                None
            );
        }
        assert_eq!(
            ThreadOp::from_http("GET", "/mcp", &[], b"").unwrap(),
            Some(ThreadOp::McpServers)
        );
        assert_eq!(
            ThreadOp::from_http("POST", "/mcp", &[], b"{}").unwrap(),
            None,
            "the thread's MCP servers are read only"
        );
        let bad = ThreadOp::from_http("POST", "/tool-calls/c1/approve", &[], b"not json");
        assert_eq!(bad.unwrap_err().code, "invalid_request");
        let bad = ThreadOp::from_http("POST", "/tool-calls/c1/approve", &[], br#"{"reason":1}"#);
        assert_eq!(bad.unwrap_err().code, "invalid_request");
        let empty = ThreadOp::from_http("POST", "/tool-calls/c1/approve", &[], b" ").unwrap();
        assert!(matches!(
            empty,
            Some(ThreadOp::DecideApproval(ApprovalParams {
                approved: true,
                reason: None,
                ..
            }))
        ));
    }
}
