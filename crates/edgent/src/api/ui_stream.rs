//! The AI SDK's chat transport as a second view of a thread: the request `useChat` posts
//! (`{id, messages, trigger, messageId}`) and the UI message stream (SSE of JSON chunks,
//! `x-vercel-ai-ui-message-stream: v1`) made from the thread's frames.
//!
//! Only the newest user message of a request is taken: the thread's stored history is the
//! truth, not the copy the browser holds. The stream of one answer maps the frames of the turn
//! it started: text → `text-*` parts, a reply's tool calls → `tool-input-available`, a call
//! waiting for approval → `tool-approval-request`, tool results → `tool-output-*`, thread
//! events → `data-<event>` parts, the turn's end → `finish`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{ApiError, PostMessage};
use crate::values::limits::MAX_CHAT_BODY_BYTES;
use crate::values::protocol::error_ends_turn;

/// The response headers of a UI message stream.
pub const STREAM_HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The SSE line that ends a stream.
pub const DONE: &str = "data: [DONE]\n\n";

/// What a chat request asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatRequest {
    /// `submit-message`: the newest user message of the request, to be sent.
    Submit(PostMessage),
    /// `regenerate-message`: answer the last user message again.
    Regenerate,
    /// The newest message is the assistant's, with tool parts the user approved or denied
    /// (`state: "approval-responded"`, sent by `addToolApprovalResponse`): decide those calls.
    Decide(Vec<super::ApprovalParams>),
}

impl ChatRequest {
    /// Validates the body `useChat`'s `DefaultChatTransport` posts.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        if body.len() > MAX_CHAT_BODY_BYTES {
            return Err(ApiError::new(
                413,
                "payload_too_large",
                format!(
                    "chat requests are limited to {MAX_CHAT_BODY_BYTES} bytes; send only the \
                     newest message (the transport's prepareSendMessagesRequest)"
                ),
            ));
        }
        let obj = super::parse_object_unbounded(body)?;
        let trigger = obj
            .get("trigger")
            .and_then(Value::as_str)
            .unwrap_or("submit-message");
        match trigger {
            "submit-message" => {}
            "regenerate-message" => return Ok(ChatRequest::Regenerate),
            other => {
                return Err(ApiError::invalid(format!(
                    "unknown trigger {other:?}; expected \"submit-message\" or \
                     \"regenerate-message\""
                )))
            }
        }
        let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
            return Err(ApiError::invalid(
                "\"messages\" must be an array of UI messages",
            ));
        };
        if let Some(decisions) = messages.last().and_then(approval_responses) {
            return Ok(ChatRequest::Decide(decisions));
        }
        let Some(last_user) = messages
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        else {
            return Err(ApiError::invalid("the request holds no user message"));
        };
        let text: String = last_user
            .get("parts")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let mut post = serde_json::Map::new();
        post.insert("content".into(), Value::String(text));
        PostMessage::from_object(&post).map(ChatRequest::Submit)
    }
}

/// The approvals an assistant UI message answers, if it is one that does.
fn approval_responses(message: &Value) -> Option<Vec<super::ApprovalParams>> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let decisions: Vec<super::ApprovalParams> = message
        .get("parts")
        .and_then(Value::as_array)?
        .iter()
        .filter(|p| p.get("state").and_then(Value::as_str) == Some("approval-responded"))
        .filter_map(|p| {
            let approval = p.get("approval")?;
            Some(super::ApprovalParams {
                tool_call_id: p.get("toolCallId")?.as_str()?.to_owned(),
                approved: approval.get("approved")?.as_bool()?,
                reason: approval
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect();
    (!decisions.is_empty()).then_some(decisions)
}

/// One answer's stream: feed it the thread's frames (as JSON) in order, send what it returns.
#[derive(Debug, Default)]
pub struct UiStream {
    started: bool,
    in_step: bool,
    /// Messages whose text part is open.
    open_text: Vec<String>,
    /// Terminal statuses seen in `tool` frames, by call id (a result's `tool` frame comes
    /// before its message).
    call_failed: HashMap<String, bool>,
    /// Assistant messages this answer saw begin, and the calls it announced: a `message`
    /// frame about any other (a regenerate failing the previous answer) is not this answer's.
    begun: Vec<String>,
    calls: Vec<String>,
    /// Calls this answer's request rejected: their results are `tool-output-denied`.
    denied: Vec<String>,
    finished: bool,
}

impl UiStream {
    /// A stream that has sent nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The request that opened this answer rejected `call_id` (an approval answered "no"):
    /// its result shows as denied, not as a tool error.
    pub fn deny(&mut self, call_id: &str) {
        self.denied.push(call_id.to_owned());
    }

    /// Whether the answer is over (its `finish` was produced).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The chunks a frame becomes (none for frames the AI SDK has no part for).
    pub fn on_frame(&mut self, frame: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        if self.finished {
            return out;
        }
        if !self.started {
            self.started = true;
            out.push(json!({ "type": "start" }));
        }
        let text = |key: &str| frame.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "message_chunk" => {
                let id = text("message_id");
                self.open_text_part(id, &mut out);
                out.push(json!({ "type": "text-delta", "id": id, "delta": text("delta") }));
            }
            "message" => {
                if let Some(message) = frame.get("message") {
                    self.on_message(message, &mut out);
                }
            }
            "tool" => self.on_tool(frame, &mut out),
            "event" => {
                let name = text("event");
                let data = frame.get("data").cloned().unwrap_or(Value::Null);
                out.push(json!({ "type": format!("data-{name}"), "data": data }));
            }
            "error" if error_ends_turn(text("code")) => {
                out.push(json!({ "type": "error", "errorText": text("message") }));
            }
            "status" if text("state") != "running" => {
                self.close_step(&mut out);
                out.push(json!({ "type": "finish", "finishReason": "stop" }));
                self.finished = true;
            }
            _ => {}
        }
        out
    }

    fn open_step(&mut self, out: &mut Vec<Value>) {
        if !self.in_step {
            self.in_step = true;
            out.push(json!({ "type": "start-step" }));
        }
    }

    fn close_step(&mut self, out: &mut Vec<Value>) {
        for id in std::mem::take(&mut self.open_text) {
            out.push(json!({ "type": "text-end", "id": id }));
        }
        if self.in_step {
            self.in_step = false;
            out.push(json!({ "type": "finish-step" }));
        }
    }

    fn open_text_part(&mut self, id: &str, out: &mut Vec<Value>) {
        self.open_step(out);
        if !self.open_text.iter().any(|open| open == id) {
            self.open_text.push(id.to_owned());
            out.push(json!({ "type": "text-start", "id": id }));
        }
    }

    fn on_message(&mut self, message: &Value, out: &mut Vec<Value>) {
        let field = |key: &str| message.get(key).and_then(Value::as_str).unwrap_or_default();
        if message.get("depth").and_then(Value::as_u64).unwrap_or(0) != 0 {
            return; // sub-prompts are the inspector's, not the chat's
        }
        let id = field("id");
        match (field("role"), field("status")) {
            ("assistant", "pending") => {
                if !self.begun.iter().any(|b| b == id) {
                    self.begun.push(id.to_owned());
                }
                // A retried attempt empties the pending message: its streamed text is void,
                // and `reset-step` takes the step's parts back out of the SDK's message.
                if self.open_text.iter().any(|open| open == id) && field("content").is_empty() {
                    out.push(json!({ "type": "reset-step" }));
                    self.open_text.retain(|open| open != id);
                    self.in_step = false;
                }
                self.open_step(out);
            }
            ("assistant", "failed") if !self.begun.iter().any(|b| b == id) => {}
            ("assistant", status) => {
                let content = field("content");
                if !self.open_text.iter().any(|open| open == id) && !content.is_empty() {
                    // Nothing streamed (a whole reply, or a replay after compaction).
                    self.open_text_part(id, out);
                    out.push(json!({ "type": "text-delta", "id": id, "delta": content }));
                }
                self.open_step(out);
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let arguments = call
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("{}");
                    let input: Value = serde_json::from_str(arguments)
                        .unwrap_or_else(|_| Value::String(arguments.to_owned()));
                    if let Some(call_id) = call.get("id").and_then(Value::as_str) {
                        self.calls.push(call_id.to_owned());
                    }
                    out.push(json!({
                        "type": "tool-input-available",
                        "toolCallId": call.get("id").cloned().unwrap_or(Value::Null),
                        "toolName": call.get("name").cloned().unwrap_or(Value::Null),
                        "input": input,
                        "dynamic": true,
                    }));
                }
                if status == "failed" && content.is_empty() {
                    out.push(json!({ "type": "error", "errorText": "the model call failed" }));
                }
                self.close_step(out);
            }
            // A result this answer did not announce and that a regenerate failed.
            ("tool", "failed") if !self.calls.iter().any(|c| c == field("tool_call_id")) => {}
            ("tool", _) if self.denied.iter().any(|d| d == field("tool_call_id")) => {
                out.push(
                    json!({ "type": "tool-output-denied", "toolCallId": field("tool_call_id") }),
                );
            }
            ("tool", _) => {
                let call_id = field("tool_call_id");
                if self.call_failed.get(call_id).copied().unwrap_or(false) {
                    out.push(json!({
                        "type": "tool-output-error",
                        "toolCallId": call_id,
                        "errorText": field("content"),
                        "dynamic": true,
                    }));
                } else {
                    let output: Value = serde_json::from_str(field("content"))
                        .unwrap_or_else(|_| Value::String(field("content").to_owned()));
                    out.push(json!({
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": output,
                        "dynamic": true,
                    }));
                }
            }
            _ => {}
        }
    }

    fn on_tool(&mut self, frame: &Value, out: &mut Vec<Value>) {
        let field = |key: &str| frame.get(key).and_then(Value::as_str).unwrap_or_default();
        let call_id = field("tool_call_id");
        match field("status") {
            "success" => {
                self.call_failed.insert(call_id.to_owned(), false);
            }
            "error" => {
                self.call_failed.insert(call_id.to_owned(), true);
            }
            "waiting"
                if frame
                    .get("waiting_for")
                    .and_then(|w| w.get("approval"))
                    .is_some() =>
            {
                out.push(json!({
                    "type": "tool-approval-request",
                    "approvalId": call_id,
                    "toolCallId": call_id,
                }));
            }
            _ => {}
        }
        // Every change of a call's state, as a transient data part the UI may show.
        let mut status = frame.clone();
        if let Some(obj) = status.as_object_mut() {
            obj.remove("type");
            obj.remove("seq");
        }
        out.push(
            json!({ "type": "data-tool-status", "id": call_id, "data": status, "transient": true }),
        );
        if field("status") == "waiting" {
            // The turn now waits on a person (an approval) or the outside world (a webhook):
            // this answer is over; the decision's request streams what follows.
            self.close_step(out);
            out.push(json!({ "type": "finish", "finishReason": "tool-calls" }));
            self.finished = true;
        }
    }
}

/// One chunk as an SSE event.
pub fn sse(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn types(chunks: &[Value]) -> Vec<String> {
        chunks
            .iter()
            .map(|c| c["type"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_request_takes_the_newest_user_message_only() {
        let body = json!({
            "id": "chat1",
            "trigger": "submit-message",
            "messages": [
                {"id": "1", "role": "user", "parts": [{"type": "text", "text": "old"}]},
                {"id": "2", "role": "assistant", "parts": [{"type": "text", "text": "hi"}]},
                {"id": "3", "role": "user", "parts": [{"type": "text", "text": "new"}, {"type": "file", "url": "x"}]}
            ]
        });
        let parsed = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed,
            ChatRequest::Submit(PostMessage {
                content: "new".into()
            })
        );
        let approved = json!({"messages": [
            {"id": "1", "role": "user", "parts": [{"type": "text", "text": "refund me"}]},
            {"id": "2", "role": "assistant", "parts": [{"type": "dynamic-tool", "toolName": "issue_refund",
                "toolCallId": "c1", "state": "approval-responded", "input": {},
                "approval": {"id": "c1", "approved": false, "reason": "too much"}}]}
        ]});
        let ChatRequest::Decide(d) = ChatRequest::parse(approved.to_string().as_bytes()).unwrap()
        else {
            panic!("an approval answer")
        };
        assert_eq!((d[0].tool_call_id.as_str(), d[0].approved), ("c1", false));
        assert_eq!(d[0].reason.as_deref(), Some("too much"));
        let regen = json!({"trigger": "regenerate-message", "messages": []});
        assert_eq!(
            ChatRequest::parse(regen.to_string().as_bytes()).unwrap(),
            ChatRequest::Regenerate
        );
        for bad in [
            json!({"trigger": "summon", "messages": []}),
            json!({"messages": "x"}),
            json!({"messages": [{"role": "assistant", "parts": []}]}),
            json!({"messages": [{"role": "user", "parts": []}]}),
        ] {
            assert_eq!(
                ChatRequest::parse(bad.to_string().as_bytes())
                    .unwrap_err()
                    .status,
                400,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_turn_with_a_tool_becomes_the_sdk_parts_in_order() {
        let mut s = UiStream::new();
        let frames = [
            json!({"type":"status","state":"running","turn":0,"side":"a"}),
            json!({"type":"message","message":{"id":"m1","role":"assistant","content":"","status":"pending","depth":0}}),
            json!({"type":"message_chunk","message_id":"m1","delta":"Let me "}),
            json!({"type":"message_chunk","message_id":"m1","delta":"check."}),
            json!({"type":"message","message":{"id":"m1","role":"assistant","content":"Let me check.","status":"completed","depth":0,
                "tool_calls":[{"id":"c1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}]}}),
            json!({"type":"tool","tool_call_id":"c1","name":"get_weather","status":"running"}),
            json!({"type":"tool","tool_call_id":"c1","name":"get_weather","status":"success"}),
            json!({"type":"message","message":{"id":"t1","role":"tool","content":"{\"temp\":3}","tool_call_id":"c1","status":"completed","depth":0}}),
            json!({"type":"event","event":"progress","data":{"done":1},"timestamp":1}),
            json!({"type":"message","message":{"id":"m2","role":"assistant","content":"","status":"pending","depth":0}}),
            json!({"type":"message_chunk","message_id":"m2","delta":"3 degrees."}),
            json!({"type":"message","message":{"id":"m2","role":"assistant","content":"3 degrees.","status":"completed","depth":0}}),
            json!({"type":"status","state":"idle","turn":1,"side":"a"}),
            json!({"type":"message_chunk","message_id":"m3","delta":"after the end"}),
        ];
        let chunks: Vec<Value> = frames.iter().flat_map(|f| s.on_frame(f)).collect();
        let kinds: Vec<String> = types(&chunks)
            .into_iter()
            .filter(|t| t != "data-tool-status")
            .collect();
        assert_eq!(
            kinds,
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-delta",
                "tool-input-available",
                "text-end",
                "finish-step",
                "tool-output-available",
                "data-progress",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        let input = chunks
            .iter()
            .find(|c| c["type"] == "tool-input-available")
            .unwrap();
        assert_eq!(input["input"], json!({"city": "Oslo"}));
        let output = chunks
            .iter()
            .find(|c| c["type"] == "tool-output-available")
            .unwrap();
        assert_eq!(output["output"], json!({"temp": 3}));
        assert!(s.is_finished());
    }

    #[test]
    fn failures_approvals_and_whole_replies_map_too() {
        let mut s = UiStream::new();
        let asked: Vec<Value> = [
            json!({"type":"message","message":{"id":"m1","role":"assistant","content":"whole","status":"completed","depth":0,
                "tool_calls":[{"id":"c1","name":"issue_refund","arguments":"{}"}]}}),
            json!({"type":"tool","tool_call_id":"c1","name":"issue_refund","status":"waiting","waiting_for":{"approval":"pending"}}),
            json!({"type":"message_chunk","message_id":"m9","delta":"not this answer's"}),
        ]
        .iter()
        .flat_map(|f| s.on_frame(f))
        .collect();
        let kinds = types(&asked);
        assert!(kinds.contains(&"tool-approval-request".to_owned()));
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("finish"),
            "an approval ends the answer"
        );
        assert!(s.is_finished());
        // The decision's request streams the rest: the rejected call's result, a failed retry.
        let mut rest = UiStream::new();
        rest.deny("c1");
        let chunks: Vec<Value> = [
            json!({"type":"tool","tool_call_id":"c1","name":"issue_refund","status":"error"}),
            json!({"type":"message","message":{"id":"t1","role":"tool","content":"rejected","tool_call_id":"c1","status":"completed","depth":0}}),
            json!({"type":"message","message":{"id":"m2","role":"assistant","content":"","status":"pending","depth":0}}),
            json!({"type":"error","code":"model_retry","message":"retrying"}),
            json!({"type":"message","message":{"id":"m2","role":"assistant","content":"","status":"failed","depth":0}}),
            json!({"type":"status","state":"idle","turn":1,"side":"a"}),
        ]
        .iter()
        .flat_map(|f| rest.on_frame(f))
        .collect();
        let kinds = types(&chunks);
        assert!(
            kinds.contains(&"tool-output-denied".to_owned()),
            "{kinds:?}"
        );
        assert!(
            !kinds.contains(&"tool-output-error".to_owned()),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.iter().filter(|k| *k == "error").count(),
            1,
            "{kinds:?}"
        );
        let whole = asked.iter().find(|c| c["type"] == "text-delta").unwrap();
        // A regenerate fails the previous answer: those frames are not the new answer's.
        let mut regen = UiStream::new();
        let retracted: Vec<Value> = [
            json!({"type":"message","message":{"id":"old","role":"assistant","content":"First try.","status":"failed","depth":0,
                "tool_calls":[{"id":"c0","name":"x","arguments":"{}"}]}}),
            json!({"type":"message","message":{"id":"t0","role":"tool","content":"r","tool_call_id":"c0","status":"failed","depth":0}}),
        ]
        .iter()
        .flat_map(|f| regen.on_frame(f))
        .collect();
        assert_eq!(types(&retracted), ["start"]);
        // A retried attempt takes its streamed text back out of the step.
        let mut retried = UiStream::new();
        let chunks: Vec<Value> = [
            json!({"type":"message","message":{"id":"m1","role":"assistant","content":"","status":"pending","depth":0}}),
            json!({"type":"message_chunk","message_id":"m1","delta":"Half an ans"}),
            json!({"type":"message","message":{"id":"m1","role":"assistant","content":"","status":"pending","depth":0}}),
            json!({"type":"message_chunk","message_id":"m1","delta":"Whole."}),
        ]
        .iter()
        .flat_map(|f| retried.on_frame(f))
        .collect();
        assert_eq!(
            types(&chunks),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "reset-step",
                "start-step",
                "text-start",
                "text-delta"
            ]
        );
        assert_eq!(whole["delta"], "whole");
        assert_eq!(
            sse(&json!({"type":"finish"})),
            "data: {\"type\":\"finish\"}\n\n"
        );
    }
}
