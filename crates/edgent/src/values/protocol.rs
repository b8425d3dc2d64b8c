//! WebSocket frames, both directions. JSON text frames whose first key is `"type"`.

use serde::Serialize;
use serde_json::Value;

use crate::values::invalid::Invalid;
use crate::values::message::Message;
use crate::values::status::{CallStatus, Side, ThreadStatus};

/// Version announced in `hello`; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest client frame accepted, in bytes (same limit as HTTP bodies).
pub const MAX_FRAME_BYTES: usize = crate::values::limits::MAX_BODY_BYTES;

/// A machine-readable error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// Stable code, e.g. `bad_frame`.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// What the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// First frame on every connection.
    Hello {
        /// The thread this socket is attached to.
        thread_id: String,
        /// [`PROTOCOL_VERSION`].
        protocol: u32,
        /// The newest seq in the thread's frame log when the socket opened (0: none yet):
        /// live frames on this socket carry greater ones.
        seq: i64,
    },
    /// A message was stored or updated.
    Message {
        /// The message as stored.
        message: Message,
    },
    /// More streamed text of a pending assistant message.
    MessageChunk {
        /// The pending message.
        message_id: String,
        /// Text to append.
        delta: String,
    },
    /// An application event (`emit_thread_event`): logged for resuming sockets unless it was
    /// emitted as ephemeral; never part of the conversation.
    Event {
        /// Event type, chosen by the emitter.
        event: String,
        /// Any JSON.
        data: Value,
        /// When it was emitted, ms since the Unix epoch.
        timestamp: i64,
    },
    /// A tool call changed state.
    Tool {
        /// The call.
        tool_call_id: String,
        /// Tool name.
        name: String,
        /// Where the call is in its life.
        status: CallStatus,
        /// A parked call's wake time (ms since the epoch).
        #[serde(skip_serializing_if = "Option::is_none")]
        wake_at: Option<i64>,
        /// What a parked call waits for: `{"sleep"}`, `{"webhook", "url"}`,
        /// `{"approval": "pending"}` or `{"rate_limit"}`.
        #[serde(skip_serializing_if = "Option::is_none")]
        waiting_for: Option<Value>,
        /// The attempt this frame is about (from 1).
        #[serde(skip_serializing_if = "Option::is_none")]
        attempt: Option<i64>,
        /// Why the last attempt failed (`retrying`).
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A schedule was made, fired (with its next due time) or cancelled.
    Schedule {
        /// The schedule as now stored.
        schedule: crate::values::schedule::Schedule,
    },
    /// The thread's state.
    Status {
        /// `running`, `idle` or `stopped`.
        #[schemars(with = "crate::values::status::ThreadStatus")]
        state: String,
        /// Completed turns.
        turn: i64,
        /// Side that acts next.
        #[schemars(with = "crate::values::status::Side")]
        side: String,
    },
    /// The reply to an `rpc` frame.
    Result {
        /// The request's id, echoed.
        id: Value,
        /// Whether it succeeded.
        ok: bool,
        /// The method's result, when ok.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Why it failed, when not ok.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorBody>,
    },
    /// Something went wrong (a bad frame, a failed model call).
    Error {
        /// Stable code.
        code: String,
        /// Explanation.
        message: String,
        /// The offending rpc id, if known.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    /// Answer to `ping`.
    Pong,
    /// Sent instead of the missed frames to a socket resuming after a seq the frame log no
    /// longer holds: refetch pages, then continue from `seq`.
    Reset {
        /// The newest seq in the log: live frames carry greater ones.
        seq: i64,
    },
}

impl ServerFrame {
    /// The frame as JSON text.
    pub fn to_json(&self) -> String {
        // Serialising these plain structs cannot fail; an empty frame would be a bug, not a crash.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// An `event` frame; the type must be 1-64 printable characters.
    pub fn event(event: &str, data: Value, timestamp: i64) -> Result<Self, Invalid> {
        if event.is_empty() || event.chars().count() > 64 || event.chars().any(char::is_control) {
            return Err(format!(
                "event type {event:?} must be 1 to 64 characters without control characters"
            )
            .into());
        }
        Ok(ServerFrame::Event {
            event: event.to_owned(),
            data,
            timestamp,
        })
    }

    /// A `status` frame: the thread's state, its completed turns, the side that acts next.
    pub fn status(state: ThreadStatus, turn: i64, side: Side) -> Self {
        ServerFrame::Status {
            state: state.as_str().to_owned(),
            turn,
            side: side.as_str().to_owned(),
        }
    }

    /// A `tool` frame with only the status.
    pub fn tool(tool_call_id: &str, name: &str, status: CallStatus) -> Self {
        ServerFrame::Tool {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            status,
            wake_at: None,
            waiting_for: None,
            attempt: None,
            error: None,
        }
    }

    /// An `error` frame.
    pub fn error(code: &str, message: impl Into<String>, id: Option<Value>) -> Self {
        ServerFrame::Error {
            code: code.into(),
            message: message.into(),
            id,
        }
    }
}

/// Whether an `error` frame with this `code` is a failure of the turn (the turn ended without
/// its answer), rather than a notice that the turn goes on (`model_retry`: a model attempt
/// failed and another follows). Every reader of frames that ends something on an error (the
/// AI SDK stream, the thread index, the MCP watches) asks this one question.
pub fn error_ends_turn(code: &str) -> bool {
    code != "model_retry"
}

/// What a client may send.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    /// Liveness check; answered with `pong`.
    Ping,
    /// A method call; answered with `result`.
    Rpc {
        /// Client-chosen id (string or number), echoed in the result.
        id: Value,
        /// Method name.
        method: String,
        /// Method parameters (an object; `{}` when absent).
        params: Value,
    },
}

/// Parses one text frame. Every failure is an `error` frame saying what was wrong (boxed: it
/// is the rare path).
pub fn parse_client_frame(text: &str) -> Result<ClientFrame, Box<ServerFrame>> {
    parse_frame(text).map_err(Box::new)
}

#[allow(clippy::result_large_err)] // boxed once, by the caller
fn parse_frame(text: &str) -> Result<ClientFrame, ServerFrame> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(ServerFrame::error(
            "frame_too_large",
            format!("frames are limited to {MAX_FRAME_BYTES} bytes"),
            None,
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ServerFrame::error("bad_frame", format!("frame is not JSON: {e}"), None))?;
    let Some(obj) = value.as_object() else {
        return Err(ServerFrame::error(
            "bad_frame",
            "frame must be a JSON object",
            None,
        ));
    };
    let id = obj.get("id").cloned();
    match obj.get("type").and_then(Value::as_str) {
        Some("ping") => Ok(ClientFrame::Ping),
        Some("rpc") => {
            let id = match id {
                Some(id @ (Value::String(_) | Value::Number(_))) => id,
                _ => {
                    return Err(ServerFrame::error(
                        "bad_frame",
                        "rpc needs an \"id\" (string or number)",
                        None,
                    ))
                }
            };
            let Some(method) = obj.get("method").and_then(Value::as_str) else {
                return Err(ServerFrame::error(
                    "bad_frame",
                    "rpc needs a \"method\" string",
                    Some(id),
                ));
            };
            let params = match obj.get("params") {
                None | Some(Value::Null) => Value::Object(Default::default()),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(_) => {
                    return Err(ServerFrame::error(
                        "bad_frame",
                        "rpc \"params\" must be an object",
                        Some(id),
                    ))
                }
            };
            Ok(ClientFrame::Rpc {
                id,
                method: method.to_owned(),
                params,
            })
        }
        Some(other) => Err(ServerFrame::error(
            "unknown_frame",
            format!("unknown frame type {other:?}; expected \"ping\" or \"rpc\""),
            id,
        )),
        None => Err(ServerFrame::error(
            "bad_frame",
            "frame needs a \"type\" string",
            id,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(r: Result<ClientFrame, Box<ServerFrame>>) -> String {
        match r.map_err(|b| *b) {
            Err(ServerFrame::Error { code, .. }) => code,
            other => panic!("expected error, got {other:?}"),
        }
    }

    #[test]
    fn parses_ping_and_rpc() {
        assert_eq!(
            parse_client_frame(r#"{"type":"ping"}"#),
            Ok(ClientFrame::Ping)
        );
        assert_eq!(
            parse_client_frame(
                r#"{"type":"rpc","id":7,"method":"send_message","params":{"content":"hi"}}"#
            ),
            Ok(ClientFrame::Rpc {
                id: json!(7),
                method: "send_message".into(),
                params: json!({"content":"hi"})
            })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"rpc","id":"a","method":"stop"}"#),
            Ok(ClientFrame::Rpc {
                id: json!("a"),
                method: "stop".into(),
                params: json!({})
            })
        );
    }

    #[test]
    fn rejects_bad_frames_with_codes() {
        assert_eq!(code(parse_client_frame("not json")), "bad_frame");
        assert_eq!(code(parse_client_frame("[1,2]")), "bad_frame");
        assert_eq!(code(parse_client_frame(r#"{"kind":"ping"}"#)), "bad_frame");
        assert_eq!(
            code(parse_client_frame(r#"{"type":"shout"}"#)),
            "unknown_frame"
        );
        assert_eq!(
            code(parse_client_frame(r#"{"type":"rpc","method":"x"}"#)),
            "bad_frame"
        );
        assert_eq!(
            code(parse_client_frame(r#"{"type":"rpc","id":1}"#)),
            "bad_frame"
        );
        assert_eq!(
            code(parse_client_frame(
                r#"{"type":"rpc","id":1,"method":"x","params":[]}"#
            )),
            "bad_frame"
        );
        let big = format!(
            r#"{{"type":"ping","pad":"{}"}}"#,
            "x".repeat(MAX_FRAME_BYTES)
        );
        assert_eq!(code(parse_client_frame(&big)), "frame_too_large");
    }

    #[test]
    fn type_is_the_first_key() {
        let f = ServerFrame::MessageChunk {
            message_id: "m".into(),
            delta: "d".into(),
        };
        assert!(f.to_json().starts_with(r#"{"type":"message_chunk""#));
        assert_eq!(ServerFrame::Pong.to_json(), r#"{"type":"pong"}"#);
        assert_eq!(
            ServerFrame::Reset { seq: 7 }.to_json(),
            r#"{"type":"reset","seq":7}"#
        );
    }
}
