//! What a tool returns: a status and one or more content items (text, images, documents).

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

/// Where the bytes of an image or document are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    /// `url` (data is a URL the provider fetches) or `base64` (data is the bytes, encoded).
    #[serde(rename = "type")]
    pub kind: SourceKind,
    /// MIME type, e.g. `image/png` or `application/pdf`.
    pub media_type: String,
    /// The URL or the base64 text.
    pub data: String,
}

/// How [`Source::data`] is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A URL.
    Url,
    /// Base64-encoded bytes.
    Base64,
}

impl Source {
    /// A source the provider fetches from `url`.
    pub fn url(media_type: impl Into<String>, url: impl Into<String>) -> Self {
        Source {
            kind: SourceKind::Url,
            media_type: media_type.into(),
            data: url.into(),
        }
    }

    /// Inline bytes, already base64-encoded.
    pub fn base64(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        Source {
            kind: SourceKind::Base64,
            media_type: media_type.into(),
            data: data.into(),
        }
    }

    /// The source as one URL: the URL itself, or a `data:` URL for inline bytes.
    pub fn to_url(&self) -> String {
        match self.kind {
            SourceKind::Url => self.data.clone(),
            SourceKind::Base64 => format!("data:{};base64,{}", self.media_type, self.data),
        }
    }
}

/// One piece of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    /// Plain text (JSON results are text too).
    Text {
        /// The text.
        text: String,
    },
    /// An image the model should look at.
    Image {
        /// Its bytes or URL.
        source: Source,
    },
    /// A document (e.g. a PDF) the model should read.
    Document {
        /// Its bytes or URL.
        source: Source,
    },
}

impl Content {
    /// A text item.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// Whether this item is text.
    pub fn is_text(&self) -> bool {
        matches!(self, Content::Text { .. })
    }
}

/// The result of a tool call, as stored and as shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolResult {
    /// success or error.
    pub status: ToolStatus,
    /// The content items, in order.
    pub content: Vec<Content>,
}

impl CallToolResult {
    /// Bytes of its text and media (what storing it costs, near enough).
    pub fn byte_len(&self) -> usize {
        self.content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.len(),
                Content::Image { source } | Content::Document { source } => {
                    source.data.len() + source.media_type.len()
                }
            })
            .sum()
    }

    /// The same result with each text item and each media URL passed through `f`
    /// (redaction: a URL can carry a key).
    pub(crate) fn map_text(mut self, f: impl Fn(&str) -> String) -> Self {
        for item in &mut self.content {
            match item {
                Content::Text { text } => *text = f(text),
                Content::Image { source } | Content::Document { source }
                    if source.kind == SourceKind::Url =>
                {
                    source.data = f(&source.data);
                }
                _ => {}
            }
        }
        self
    }

    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self::success(vec![Content::text(text)])
    }

    /// A successful result made of several items (text, images, documents).
    pub fn success(content: Vec<Content>) -> Self {
        CallToolResult {
            status: ToolStatus::Success,
            content,
        }
    }

    /// An error result the model can read and act on.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            status: ToolStatus::Error,
            content: vec![Content::text(text)],
        }
    }

    /// The result of a call whose arguments its tool refuses (`why`: what is wrong, naming the
    /// place): the same words wherever the refusal happens, so the model learns one form.
    pub fn invalid_arguments(why: impl std::fmt::Display) -> Self {
        Self::error(format!(
            "invalid arguments: {why}. Fix the arguments and call the tool again."
        ))
    }

    /// A successful result holding `value` as JSON text.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(s) => Self::text(s),
            Err(e) => Self::error(format!("the result could not be serialised: {e}")),
        }
    }

    /// Adds an item (builder style): `CallToolResult::text("chart:").with(Content::Image {..})`.
    pub fn with(mut self, item: Content) -> Self {
        self.content.push(item);
        self
    }

    /// Whether this is an error result.
    pub fn is_error(&self) -> bool {
        self.status == ToolStatus::Error
    }

    /// Whether any item is an image or a document (stored as parts, sent to the model in the
    /// provider's multimodal format).
    pub fn has_media(&self) -> bool {
        self.content.iter().any(|c| !c.is_text())
    }

    /// The text of the result: text items joined by blank lines, media named in brackets;
    /// errors are marked so the model cannot mistake them for data.
    pub fn to_model_text(&self) -> String {
        let body = self
            .content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.clone(),
                Content::Image { source } => format!("[image: {}]", source.media_type),
                Content::Document { source } => format!("[document: {}]", source.media_type),
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        match self.status {
            ToolStatus::Success => body,
            ToolStatus::Error => format!("Error: {body}"),
        }
    }
}
