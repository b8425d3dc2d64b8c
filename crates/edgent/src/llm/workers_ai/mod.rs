//! Cloudflare Workers AI through the `AI` binding (`env.AI.run(model, input)`), without
//! streaming: the binding answers with one JSON value, which [`parse_response`] turns into the
//! same [`StreamEvent`]s a streaming provider would produce.
//!
//! Models answer in one of two shapes: the original `{response, tool_calls, usage}` and, for
//! newer models, an OpenAI chat-completion object. Both are accepted.

use serde_json::{json, Value};

use crate::llm::format::{StreamDecoder, WireFormat};
use crate::llm::request::ToolChoice;
use crate::llm::stream::{FinishReason, ProviderError, StreamEvent};
use crate::llm::ModelRequest;
use crate::values::message::{Message, Role};

/// The Workers AI format: spoken through the `AI` binding, not over HTTP, and not streamed.
#[derive(Debug, Clone, Copy)]
pub struct WorkersAi;

impl WireFormat for WorkersAi {
    fn build_request(&self, req: &ModelRequest) -> Value {
        build_request(req)
    }

    fn endpoint(&self, _base_url: &str) -> Option<String> {
        None
    }

    /// The binding needs no key.
    fn auth_headers(&self, _key: &str) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn stream_decoder(&self) -> Option<Box<dyn StreamDecoder>> {
        None
    }
}

/// Builds the `input` object for `env.AI.run(model, input)`.
///
/// Messages are text-only in the OpenAI chat shape: most Workers AI models take no content
/// arrays, so images and documents from tools reach the model as the text rendering already
/// stored in [`Message::content`] (e.g. `[image: image/png]`).
pub fn build_request(req: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(req.history.len() + 1);
    if !req.system.is_empty() {
        messages.push(json!({ "role": "system", "content": req.system }));
    }
    messages.extend(req.history.iter().map(message));
    let mut input = json!({ "messages": messages, "stream": false });
    // The binding has no `tool_choice`; leaving the tools out is the only way to be sure of
    // "none". "required" cannot be enforced and is sent like "auto".
    if !req.tools.is_empty() && req.tool_choice != ToolChoice::None {
        input["tools"] = crate::llm::openai::function_tools(req.tools);
    }
    if let Some(limit) = req.target.max_output_tokens {
        input["max_tokens"] = Value::from(limit);
    }
    // Workers AI's JSON mode: the schema itself under `json_schema` (no name, no `strict`).
    if let Some(output) = req.output {
        input["response_format"] = json!({ "type": "json_schema", "json_schema": output.schema });
    }
    input
}

fn message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.content,
        }),
        // Content stays a string even next to tool calls: several models' input schemas
        // reject a null content.
        Role::Assistant if !m.tool_calls.is_empty() => json!({
            "role": "assistant",
            "content": m.content,
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "type": "function",
                "function": { "name": c.name, "arguments": c.arguments },
            })).collect::<Vec<_>>(),
        }),
        role => json!({ "role": role.as_str(), "content": m.content }),
    }
}

/// A fresh, unguessable tool call id (`call_` and 32 hex digits) for models that give none.
pub fn new_call_id() -> String {
    format!("call_{}", crate::values::ids::new_id().replace('-', ""))
}

/// Turns the binding's answer into the events of a whole reply, ending with
/// [`StreamEvent::Done`].
pub fn parse_response(v: &Value) -> Result<Vec<StreamEvent>, ProviderError> {
    if !v.is_object() {
        return Err(malformed(format!(
            "expected a JSON object, got {}",
            kind(v)
        )));
    }
    let (text, calls, reason) = if let Some(choices) = v.get("choices") {
        let choice = choices
            .as_array()
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("\"choices\" is not a non-empty list".into()))?;
        let message = &choice["message"];
        (
            text_of(&message["content"]),
            tool_calls(message.get("tool_calls"))?,
            choice["finish_reason"].as_str(),
        )
    } else if v.get("response").is_some() || v.get("tool_calls").is_some() {
        (
            text_of(&v["response"]),
            tool_calls(v.get("tool_calls"))?,
            None,
        )
    } else {
        return Err(malformed(
            "the answer has none of \"response\", \"tool_calls\" or \"choices\"".into(),
        ));
    };

    let mut out = Vec::with_capacity(calls.len() * 2 + 4);
    if !text.is_empty() {
        out.push(StreamEvent::TextDelta(text));
    }
    let has_calls = !calls.is_empty();
    for (index, (id, name, arguments)) in calls.into_iter().enumerate() {
        out.push(StreamEvent::ToolCallStart { index, id, name });
        if !arguments.is_empty() {
            out.push(StreamEvent::ToolCallDelta { index, arguments });
        }
    }
    if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
        out.push(StreamEvent::Usage {
            input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
            output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        });
    }
    let finish = match reason.map(FinishReason::parse) {
        // Models often say "stop" after calling tools; the calls are what the turn acts on.
        None | Some(FinishReason::Stop) if has_calls => FinishReason::ToolCalls,
        Some(given) => given,
        None => FinishReason::Stop,
    };
    out.push(StreamEvent::Finish(finish));
    out.push(StreamEvent::Done);
    Ok(out)
}

/// An answer the binding should not have given.
fn malformed(m: String) -> ProviderError {
    ProviderError::Malformed(format!("Workers AI: {m}"))
}

/// Reply text: a string as it is; JSON-mode models answer with an object, kept as its JSON
/// text; null or missing is no text.
fn text_of(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `(id, name, arguments)` of each call, in order.
///
/// A call is `{name, arguments, id?}` or, from OpenAI-shaped models (which some return even
/// inside the original shape), `{id?, type, function: {name, arguments}}`.
fn tool_calls(v: Option<&Value>) -> Result<Vec<(String, String, String)>, ProviderError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(malformed(format!(
                "\"tool_calls\" is {}, not a list",
                kind(other)
            )))
        }
    };
    list.iter()
        .enumerate()
        .map(|(i, call)| {
            if !call.is_object() {
                return Err(malformed(format!(
                    "tool call {i} is {}, not an object",
                    kind(call)
                )));
            }
            let f = call
                .get("function")
                .filter(|f| f.is_object())
                .unwrap_or(call);
            let name = f["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| malformed(format!("tool call {i} has no name")))?;
            // Arguments are kept as JSON text, as a streaming model would have written them;
            // anything but an object is refused later by argument validation, with a reason
            // the model can act on, rather than failing the whole reply here.
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            let id = call["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .map_or_else(new_call_id, str::to_owned);
            Ok((id, name.to_owned(), arguments))
        })
        .collect()
}

/// The JSON type of `v`, for error messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
