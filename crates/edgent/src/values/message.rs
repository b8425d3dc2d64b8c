//! Messages as stored in a thread and sent on the wire.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The human (or the other side in a dual-AI thread).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

impl Role {
    /// The lowercase name used in SQL and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses the lowercase name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }
}

/// Lifecycle of a message: an assistant message is `pending` while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// Being written (an assistant message while the model streams).
    Pending,
    /// Final.
    Completed,
    /// Abandoned: the model call failed or was interrupted. Kept for clients, never sent to a model.
    Failed,
}

impl MessageStatus {
    /// The lowercase name used in SQL and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Pending => "pending",
            MessageStatus::Completed => "completed",
            MessageStatus::Failed => "failed",
        }
    }

    /// Parses the lowercase name; unknown values read as `Failed` so they never reach a model.
    pub fn parse(s: &str) -> Self {
        match s {
            "pending" => MessageStatus::Pending,
            "completed" => MessageStatus::Completed,
            _ => MessageStatus::Failed,
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    /// The provider's call id (or one we generated), echoed by the result.
    pub id: String,
    /// The tool's registered name.
    pub name: String,
    /// The arguments exactly as the model wrote them: a JSON text, possibly malformed.
    pub arguments: String,
}

/// One message of a thread, as stored and as sent to clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    /// Random UUID.
    pub id: String,
    /// Author.
    pub role: Role,
    /// Text content.
    pub content: String,
    /// Tool name for `tool` messages, or a participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` messages: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Hidden from the model, visible to clients.
    pub silent: bool,
    /// 0 for the main conversation; sub-prompts run deeper.
    pub depth: u32,
    /// Streaming state.
    pub status: MessageStatus,
    /// For tool results with images or documents: every content item, in order (`content`
    /// then holds the text rendering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<crate::values::tool_result::Content>,
    /// The side that wrote an assistant message or ran a tool (`a` or `b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<crate::values::status::Side>,
    /// For messages of a sub-prompt (depth > 0): the assistant message holding the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    /// For messages of a sub-prompt (depth > 0): the prompt-tool call they answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// For the final answer of a prompt with a `response_format`: the answer's value, checked
    /// against the format's schema (`content` holds it as JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<serde_json::Value>,
}

impl Message {
    /// A top-level, visible, completed message with a fresh id; adjust fields as needed.
    pub fn new(role: Role, content: impl Into<String>, created_at: i64) -> Self {
        Self::with_id(crate::values::ids::new_id(), role, content, created_at)
    }

    /// Like [`Message::new`], for a message whose id already exists (a streamed reply).
    pub fn with_id(id: String, role: Role, content: impl Into<String>, created_at: i64) -> Self {
        Message {
            id,
            role,
            content: content.into(),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at,
            silent: false,
            depth: 0,
            status: MessageStatus::Completed,
            parts: Vec::new(),
            side: None,
            parent_message_id: None,
            parent_tool_call_id: None,
            structured: None,
        }
    }

    /// A `tool` message answering `call`.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>, created_at: i64) -> Self {
        Message {
            name: Some(call.name.clone()),
            tool_call_id: Some(call.id.clone()),
            ..Message::new(Role::Tool, content, created_at)
        }
    }
}
