//! What chat-completions request bodies are made of besides the messages themselves
//! (`body.rs` writes the body): media from tool results, and the error text of a failed call.

use serde_json::{json, Value};

use crate::values::message::Message;
use crate::values::tool_result::{Content, SourceKind};

/// The image and document parts of a tool result, as chat-completions content parts.
pub(super) fn media_parts(m: &Message) -> Vec<Value> {
    let tool = m.name.as_deref().unwrap_or("tool");
    let mut parts = Vec::new();
    let media = m.parts.iter().filter(|c| !c.is_text());
    for (i, item) in media.enumerate() {
        match item {
            Content::Text { .. } => {}
            Content::Image { source } => {
                parts.push(
                    json!({ "type": "text", "text": format!("Image {} from `{tool}`:", i + 1) }),
                );
                parts.push(json!({ "type": "image_url", "image_url": { "url": source.to_url() } }));
            }
            Content::Document { source } => match source.kind {
                SourceKind::Base64 => {
                    parts.push(json!({ "type": "text", "text": format!("Document {} from `{tool}`:", i + 1) }));
                    parts.push(json!({ "type": "file", "file": {
                        "filename": format!("{tool}-{}.{}", i + 1, extension(&source.media_type)),
                        "file_data": source.to_url(),
                    }}));
                }
                // Chat completions cannot fetch documents by URL; the model gets the link.
                SourceKind::Url => parts.push(json!({ "type": "text", "text": format!(
                    "Document {} from `{tool}` ({}): {}", i + 1, source.media_type, source.data
                )})),
            },
        }
    }
    parts
}

fn extension(media_type: &str) -> &str {
    match media_type {
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "text/csv" => "csv",
        "text/html" => "html",
        "application/json" => "json",
        _ => "bin",
    }
}

/// Reads the error message out of an OpenAI-style error body (or returns the text, trimmed).
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(300).collect::<String>().trim().to_owned())
}
