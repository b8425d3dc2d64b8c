//! What a tool returns.

use serde::{Deserialize, Serialize};

/// Whether the call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The tool did its job.
    Success,
    /// It did not; the content says why, for the model.
    Error,
}

/// One piece of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    /// Plain text (JSON results are text too).
    Text {
        /// The text.
        text: String,
    },
}

/// The result of a tool call, as stored and as shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolResult {
    /// success or error.
    pub status: ToolStatus,
    /// The content items.
    pub content: Vec<Content>,
}

impl CallToolResult {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        CallToolResult {
            status: ToolStatus::Success,
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// An error result the model can read and act on.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            status: ToolStatus::Error,
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// A successful result holding `value` as JSON text.
    pub fn json<T: Serialize>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(s) => Self::text(s),
            Err(e) => Self::error(format!("result could not be serialised: {e}")),
        }
    }

    /// Whether this is an error result.
    pub fn is_error(&self) -> bool {
        self.status == ToolStatus::Error
    }

    /// The text sent to the model: content items joined by blank lines; errors are marked
    /// so the model cannot mistake them for data.
    pub fn to_model_text(&self) -> String {
        let body = self
            .content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.as_str(),
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        match self.status {
            ToolStatus::Success => body,
            ToolStatus::Error => format!("Error: {body}"),
        }
    }
}
