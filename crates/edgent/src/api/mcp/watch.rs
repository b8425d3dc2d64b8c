//! Watching a thread's frames for the outcome of a call made over MCP, and that outcome as an
//! MCP tool result. The thread's object feeds every frame it broadcasts to the watches open in
//! it (opened right after the call was stored, before the turn runs), so nothing is missed.

use serde_json::{json, Value};

use crate::values::protocol::error_ends_turn;

/// The status of a call that waits on the outside world (an approval, a webhook): the turn
/// holds until someone acts, so an ask answers then rather than at the end of its wait. Other
/// parked statuses (a retry, a sleep, a rate limit) come back by themselves.
const WAITING: &str = "waiting";
/// The statuses after which a call is over.
const FINISHED: &[&str] = &["success", "error"];

/// An `ask_<agent>` in progress: the turn that answers one user message.
#[derive(Debug, Default, Clone)]
pub struct AskWatch {
    /// The last completed assistant message of the conversation (`id`, text).
    answer: Option<(String, String)>,
    /// Its structured answer, when its prompt has a `response_format`.
    structured: Option<Value>,
    /// The last turn failure.
    error: Option<String>,
    /// Calls of the turn not yet finished, by id, with their last status.
    calls: Vec<(String, String)>,
    /// The thread's state once the turn ended.
    ended: Option<String>,
    /// The user message the watch waits to see stored before it follows the turn (a watch
    /// opened before the message is stored ignores what comes earlier).
    awaiting: Option<String>,
}

impl AskWatch {
    /// A watch that has seen nothing.
    pub fn new() -> Self {
        AskWatch::default()
    }

    /// A watch opened before the user message `content` is stored: it follows the turn from
    /// that message's frame on.
    pub fn after_message(content: &str) -> Self {
        AskWatch {
            awaiting: Some(content.to_owned()),
            ..AskWatch::default()
        }
    }

    /// Feeds one broadcast frame; true once the turn is over (the thread is no longer
    /// running) or holds on the outside world (every unfinished call waits for an approval
    /// or a webhook).
    pub fn on_frame(&mut self, frame: &Value) -> bool {
        let text = |key: &str| frame.get(key).and_then(Value::as_str).unwrap_or_default();
        if let Some(content) = &self.awaiting {
            let m = &frame["message"];
            let ours = text("type") == "message"
                && m["role"] == "user"
                && m["content"].as_str() == Some(content.as_str());
            if ours {
                self.awaiting = None;
            }
            return false;
        }
        match text("type") {
            "message" => {
                let m = &frame["message"];
                let field = |key: &str| m.get(key).and_then(Value::as_str).unwrap_or_default();
                let top = m.get("depth").and_then(Value::as_i64).unwrap_or(0) == 0;
                if top && field("role") == "assistant" && field("status") == "completed" {
                    self.answer = Some((field("id").to_owned(), field("content").to_owned()));
                    self.structured = m.get("structured").cloned();
                    self.error = None;
                }
            }
            "error" if error_ends_turn(text("code")) => {
                self.error = Some(text("message").to_owned());
            }
            "tool" => {
                let id = text("tool_call_id");
                self.calls.retain(|(call, _)| call != id);
                let status = text("status");
                if !FINISHED.contains(&status) {
                    self.calls.push((id.to_owned(), status.to_owned()));
                }
                return self.held();
            }
            "status" if text("state") != "running" => {
                self.ended = Some(text("state").to_owned());
                return true;
            }
            _ => {}
        }
        false
    }

    /// Whether every unfinished call waits on the outside world.
    fn held(&self) -> bool {
        !self.calls.is_empty() && self.calls.iter().all(|(_, status)| status == WAITING)
    }

    /// The MCP tool result: the answer as text, and `{thread_id, status, answer, message_id}`
    /// as structured content, with `structured` (the answer's value) when the agent's prompt
    /// has a `response_format`. `status` is `waiting` when the turn holds on an approval or a
    /// webhook, `running` when the wait ran out, else the thread's state.
    pub fn result(&self, thread_id: &str) -> Value {
        let status = match &self.ended {
            _ if self.held() => WAITING,
            None => "running",
            Some(state) => state.as_str(),
        };
        let (message_id, answer) = match &self.answer {
            Some((id, text)) => (json!(id), text.clone()),
            None => (Value::Null, String::new()),
        };
        let mut text = answer.clone();
        let mut is_error = false;
        if let Some(error) = &self.error {
            is_error = true;
            text = format!("The turn failed: {error}");
        } else if status == "running" {
            text = format!(
                "The agent is still working on thread {thread_id}; read its answer later \
                 (GET /api/threads/{thread_id}/messages) or ask again with this thread_id."
            );
        } else if status == "waiting" {
            let calls: Vec<String> = self
                .calls
                .iter()
                .map(|(id, status)| format!("{id} ({status})"))
                .collect();
            text = format!(
                "{answer}\n\n[The turn waits on tool calls: {}. Thread {thread_id} goes on once they finish.]",
                calls.join(", ")
            )
            .trim_start()
            .to_owned();
        }
        let mut structured = json!({
            "thread_id": thread_id,
            "status": status,
            "answer": answer,
            "message_id": message_id,
        });
        if let Some(value) = &self.structured {
            structured["structured"] = value.clone();
        }
        json!({
            "content": [{ "type": "text", "text": text }],
            "structuredContent": structured,
            "isError": is_error,
        })
    }
}

/// The most frames a [`CallWatch`] keeps before it knows its call.
const MAX_EARLY_FRAMES: usize = 256;

/// A registered tool's call in progress, queued in a thread.
#[derive(Debug, Clone)]
pub struct CallWatch {
    /// `None` until the call is stored: frames seen meanwhile wait in `early`.
    call_id: Option<String>,
    early: Vec<Value>,
    /// The last status its `tool` frames gave.
    status: Option<String>,
    /// Its `tool` message, once it finished.
    message: Option<Value>,
}

impl CallWatch {
    /// Watches the call `call_id`.
    pub fn new(call_id: &str) -> Self {
        let mut watch = CallWatch::before_its_id();
        watch.call_id = Some(call_id.to_owned());
        watch
    }

    /// A watch opened before its call is stored (so no frame of the call can be missed, even
    /// one sent while the store's work is being started); [`CallWatch::set_call_id`] names it.
    pub fn before_its_id() -> Self {
        CallWatch {
            call_id: None,
            early: Vec::new(),
            status: None,
            message: None,
        }
    }

    /// Names the call, and feeds it the frames kept meanwhile; true when its result was among
    /// them.
    pub fn set_call_id(&mut self, call_id: &str) -> bool {
        self.call_id = Some(call_id.to_owned());
        let early = std::mem::take(&mut self.early);
        early.iter().any(|frame| self.on_frame(frame))
    }

    /// Feeds one broadcast frame; true once the call's result is stored.
    pub fn on_frame(&mut self, frame: &Value) -> bool {
        let Some(call_id) = self.call_id.as_deref() else {
            let relevant = matches!(
                frame.get("type").and_then(Value::as_str),
                Some("tool" | "message")
            );
            if relevant && self.early.len() < MAX_EARLY_FRAMES {
                self.early.push(frame.clone());
            }
            return false;
        };
        let mine =
            |value: &Value| value.get("tool_call_id").and_then(Value::as_str) == Some(call_id);
        match frame.get("type").and_then(Value::as_str) {
            Some("tool") if mine(frame) => {
                self.status = frame
                    .get("status")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            Some("message") if mine(&frame["message"]) && frame["message"]["role"] == "tool" => {
                self.message = Some(frame["message"].clone());
                return true;
            }
            _ => {}
        }
        false
    }

    /// The MCP tool result: the tool's content items (text, images; links for content held
    /// at a URL), `isError` when the call ended in error. Before the result, a note of the
    /// call's status and where its result will be.
    pub fn result(&self, thread_id: &str) -> Value {
        let Some(message) = &self.message else {
            let status = self.status.as_deref().unwrap_or("queued");
            return super::error_result(&format!(
                "The call {} is {status} and has no result yet (thread {thread_id}); its result \
                 will be in the thread's messages.",
                self.call_id.as_deref().unwrap_or("not stored")
            ));
        };
        let content = match message.get("parts").and_then(Value::as_array) {
            Some(parts) => parts.iter().map(content_item).collect(),
            None => vec![json!({
                "type": "text",
                "text": message.get("content").and_then(Value::as_str).unwrap_or_default(),
            })],
        };
        json!({
            "content": content,
            "isError": self.status.as_deref() == Some("error"),
        })
    }
}

/// One content part of a tool message as an MCP content item.
fn content_item(part: &Value) -> Value {
    fn text<'v>(v: &'v Value, key: &str) -> &'v str {
        v.get(key).and_then(Value::as_str).unwrap_or_default()
    }
    let source = &part["source"];
    let media_type = text(source, "media_type");
    let data = text(source, "data");
    match (text(part, "type"), text(source, "type")) {
        ("image", "base64") => json!({ "type": "image", "data": data, "mimeType": media_type }),
        ("document", "base64") => json!({
            "type": "resource",
            "resource": { "uri": format!("edgent:document.{}", subtype(media_type)), "mimeType": media_type, "blob": data },
        }),
        ("image" | "document", "url") => json!({
            "type": "resource_link", "uri": data, "name": text(part, "type"), "mimeType": media_type,
        }),
        _ => json!({ "type": "text", "text": text(part, "text") }),
    }
}

fn subtype(media_type: &str) -> &str {
    media_type
        .split_once('/')
        .map_or("bin", |(_, sub)| sub)
        .split(['+', ';'])
        .next()
        .unwrap_or("bin")
}
