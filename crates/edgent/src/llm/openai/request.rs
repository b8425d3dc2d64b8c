//! Chat-completions request bodies.

use serde_json::{json, Value};

use crate::llm::request::ToolSpec;
use crate::llm::ModelRequest;
use crate::values::message::{Message, Role};
use crate::values::tool_result::{Content, SourceKind};

/// Tools in the chat-completions `{"type": "function", "function": …}` shape (also what
/// Workers AI takes).
pub fn function_tools(tools: &[ToolSpec]) -> Value {
    tools
        .iter()
        .map(|t| {
            json!({
                "type": "function",
                "function": { "name": t.name, "description": t.description, "parameters": t.parameters },
            })
        })
        .collect()
}

/// Builds a streaming chat-completions request body for a model row: the messages and tools,
/// plus the row's output limit and the prompt's tool settings.
///
/// `history` must already be model-ready (no silent or failed messages, every tool call
/// paired with its result); see [`crate::engine::thread::repair_history`].
pub fn build_request_for(req: &ModelRequest) -> Value {
    let mut body = build_request(req.target.model, req.system, req.history, req.tools);
    if !req.tools.is_empty() {
        // Sent only alongside tools: several servers reject tool settings without any tools.
        body["tool_choice"] = Value::from(req.tool_choice.as_str());
        body["parallel_tool_calls"] = Value::from(req.parallel_tool_calls);
    }
    if let Some(limit) = req.target.max_output_tokens {
        // `max_tokens` rather than OpenAI's newer `max_completion_tokens`: it is the one
        // field every compatible server (vLLM, llama.cpp, Groq, OpenRouter) understands.
        body["max_tokens"] = Value::from(limit);
    }
    body
}

/// Builds a streaming chat-completions request body with the server's defaults for tool
/// choice, parallel calls and output length.
///
/// `history` must already be model-ready (no silent or failed messages, every tool call
/// paired with its result); see [`crate::engine::thread::repair_history`].
pub fn build_request(model: &str, system: &str, history: &[Message], tools: &[ToolSpec]) -> Value {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !system.is_empty() {
        messages.push(json!({ "role": "system", "content": system }));
    }
    // Chat completions accepts only text in `tool` messages, and nothing may come between the
    // results of one assistant message: images and documents from tools are gathered and sent
    // in one user message right after the run of results.
    let mut media: Vec<Value> = Vec::new();
    for m in history {
        if m.role != Role::Tool && !media.is_empty() {
            messages.push(media_message(std::mem::take(&mut media)));
        }
        messages.push(match m.role {
            Role::System => json!({ "role": "system", "content": m.content }),
            Role::User => match &m.name {
                Some(name) => json!({ "role": "user", "content": m.content, "name": name }),
                None => json!({ "role": "user", "content": m.content }),
            },
            Role::Assistant if m.tool_calls.is_empty() => {
                json!({ "role": "assistant", "content": m.content })
            }
            Role::Assistant => json!({
                "role": "assistant",
                "content": if m.content.is_empty() { Value::Null } else { Value::from(m.content.as_str()) },
                "tool_calls": m.tool_calls.iter().map(|c| json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })).collect::<Vec<_>>(),
            }),
            Role::Tool => {
                media.extend(media_parts(m));
                json!({
                    "role": "tool",
                    "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": m.content,
                })
            }
        });
    }
    if !media.is_empty() {
        messages.push(media_message(media));
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !tools.is_empty() {
        body["tools"] = function_tools(tools);
    }
    body
}

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

fn media_message(parts: Vec<Value>) -> Value {
    json!({ "role": "user", "content": parts })
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
