//! Messages API request bodies.
//!
//! The Messages API is stricter than chat completions about history: roles must alternate
//! user/assistant starting with user, tool results are content blocks of the next user turn
//! and there is no `system` or `tool` role. [`request_body`] folds edgent's history into
//! that shape.

use serde::Serialize;
use serde_json::{json, Value};

use crate::llm::request::{OutputFormat, ToolChoice};
use crate::llm::ModelRequest;
use crate::values::message::{Message, Role};
use crate::values::tool_result::{Content, Source, SourceKind};

/// Output limit sent when the model row sets none (the Messages API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// First user turn sent when the history starts with the model's own message (a thread
/// opened by the agent, or one whose first user message fell out of the history budget):
/// the Messages API rejects a conversation that does not start with a user turn.
pub const LEADING_USER_PLACEHOLDER: &str = "(The conversation so far follows.)";

/// How [`Message::content`] of a tool result marks an error; see
/// [`crate::tool::CallToolResult::to_model_text`].
const ERROR_PREFIX: &str = "Error:";

/// Builds a streaming Messages request body, as a `Value`: the text [`request_body`] sends,
/// parsed (one way of writing the history, so the two cannot differ).
///
/// `history` must already be model-ready (no silent or failed messages, every tool call
/// paired with its result); see [`crate::engine::thread::repair_history`].
pub fn build_request(req: &ModelRequest) -> Value {
    serde_json::from_str(&request_body(req)).unwrap_or_default()
}

/// The streaming request body as the JSON text that is sent, `messages` written last. With a
/// memo (see [`crate::llm::memo`]) each stored message's content blocks are written once per
/// thread, not on every call; the turns they merge into are assembled around them.
pub fn request_body(req: &ModelRequest) -> String {
    let mut text = head(req);
    text.pop(); // the closing brace
    text.push_str(",\"messages\":[");
    match req.memo {
        Some(memo) => memo.memo.write_with(
            "anthropic",
            memo.version,
            req.history,
            memoable,
            blocks_json,
            |written| write_turns(&mut text, req.history, written),
        ),
        None => write_turns(&mut text, req.history, &[]),
    }
    text.push_str("]}");
    text
}

/// Whether a memo keeps a message's blocks: not a result with media, whose base64 the memo
/// would hold a second time for the object's life (it is written on each call instead).
fn memoable(m: &Message) -> bool {
    m.parts.iter().all(|p| p.is_text())
}

/// Every field of the body but `messages`, in the order `Value` wrote them when the head was
/// a `json!` tree (sorted keys). Borrowed: the tools' schemas are written from the registry's
/// shared values instead of being copied into a tree per call.
#[derive(Serialize)]
struct Head<'a> {
    max_tokens: u32,
    model: &'a str,
    stream: bool,
    // An empty system text is left out rather than sent as "", which says nothing.
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
}

/// One entry of `tools` (keys sorted, as above).
#[derive(Serialize)]
struct WireTool<'a> {
    description: &'a str,
    input_schema: &'a Value,
    name: &'a str,
}

fn head(req: &ModelRequest) -> String {
    let mut head = Head {
        max_tokens: req.target.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        model: req.target.model,
        stream: true,
        system: req.system,
        tool_choice: None,
        tools: None,
    };
    if !req.tools.is_empty() || req.output.is_some() {
        let mut tools: Vec<WireTool> = req
            .tools
            .iter()
            .map(|t| WireTool {
                description: &t.description,
                input_schema: &t.parameters,
                name: &t.name,
            })
            .collect();
        tools.extend(req.output.map(|o| WireTool {
            description: OutputFormat::ANSWER_TOOL_DESCRIPTION,
            input_schema: o.schema,
            name: o.name,
        }));
        head.tools = Some(tools);
        head.tool_choice = Some(match req.output {
            None => tool_choice(req.tool_choice, req.parallel_tool_calls),
            Some(output) => answer_choice(req, output.name),
        });
    }
    // Borrowed strings and values only: serialising them cannot fail.
    serde_json::to_string(&head).unwrap_or_default()
}

/// With an answer tool, the model never ends with plain text: it must call a tool, and the
/// answer tool's input is the answer. With other tools it may call (`auto`), any tool
/// (`{"type": "any"}`); otherwise (no other tool, or `none`) the answer tool itself.
fn answer_choice(req: &ModelRequest, answer: &str) -> Value {
    let mut v = if !req.tools.is_empty() && req.tool_choice == ToolChoice::Auto {
        json!({ "type": "any" })
    } else {
        json!({ "type": "tool", "name": answer })
    };
    if !req.parallel_tool_calls {
        v["disable_parallel_tool_use"] = Value::Bool(true);
    }
    v
}

fn tool_choice(choice: ToolChoice, parallel: bool) -> Value {
    let mut v = match choice {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::Required => json!({ "type": "any" }),
        // `none` takes no other field: with no calls there is nothing to serialise.
        ToolChoice::None => return json!({ "type": "none" }),
    };
    if !parallel {
        v["disable_parallel_tool_use"] = Value::Bool(true);
    }
    v
}

/// The wire role a message's blocks go under.
fn wire_role(m: &Message) -> &'static str {
    match m.role {
        Role::Assistant => "assistant",
        Role::User | Role::System | Role::Tool => "user",
    }
}

/// A message's content blocks (none: it is left out).
fn blocks(m: &Message) -> Vec<Value> {
    match m.role {
        // A participant name has no field here; user text goes as it is.
        Role::User => text_block(&m.content).into_iter().collect(),
        // The only system slot is the top-level `system`, fixed before the whole
        // conversation; moving a mid-conversation note there would lose where it was said.
        // It stays in place as user text, tagged so the model can tell it from the user.
        Role::System if m.content.trim().is_empty() => Vec::new(),
        Role::System => vec![text(format!("<system>\n{}\n</system>", m.content))],
        Role::Assistant => assistant_blocks(m),
        Role::Tool => vec![tool_result(m)],
    }
}

/// A message's content blocks as JSON, comma-separated (empty: it is left out).
fn blocks_json(m: &Message) -> String {
    let blocks: Vec<String> = blocks(m).iter().map(Value::to_string).collect();
    blocks.join(",")
}

/// Appends the history to `out` as strictly alternating turns that start with a user turn:
/// consecutive messages of one wire role merge into a turn, messages without blocks are left
/// out (the API rejects empty content; merging their neighbours keeps the alternation), and a
/// history that does not start with a user turn gets a placeholder first. `written[i]`, where
/// present, is `history[i]`'s [`blocks_json`] from a memo.
fn write_turns(out: &mut String, history: &[Message], written: &[Option<&str>]) {
    // A turn is `{"content":[…],"role":…}`, the keys in the order `Value` writes them.
    let mut open: Option<&'static str> = None;
    for (i, m) in history.iter().enumerate() {
        let fresh;
        let json = match written.get(i).copied().flatten() {
            Some(json) => json,
            None => {
                fresh = blocks_json(m);
                fresh.as_str()
            }
        };
        if json.is_empty() {
            continue;
        }
        let role = wire_role(m);
        match open {
            Some(current) if current == role => out.push(','),
            Some(current) => {
                close_turn(out, current);
                out.push_str(",{\"content\":[");
            }
            None => {
                if role != "user" {
                    placeholder_turn(out);
                    out.push(',');
                }
                out.push_str("{\"content\":[");
            }
        }
        out.push_str(json);
        open = Some(role);
    }
    match open {
        Some(role) => close_turn(out, role),
        None => placeholder_turn(out),
    }
}

fn close_turn(out: &mut String, role: &str) {
    out.push_str("],\"role\":\"");
    out.push_str(role);
    out.push_str("\"}");
}

fn placeholder_turn(out: &mut String) {
    let turn = json!({ "role": "user", "content": [text(LEADING_USER_PLACEHOLDER.to_owned())] });
    out.push_str(&turn.to_string());
}

fn text(s: String) -> Value {
    json!({ "type": "text", "text": s })
}

/// A text block, or nothing for blank text (the API rejects text blocks without
/// non-whitespace text).
fn text_block(s: &str) -> Option<Value> {
    (!s.trim().is_empty()).then(|| text(s.to_owned()))
}

fn assistant_blocks(m: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = text_block(&m.content).into_iter().collect();
    for call in &m.tool_calls {
        // `input` must be an object. Arguments that are not one (malformed JSON from the
        // model) were already answered with an error result telling the model so; sending an
        // empty object keeps that exchange in the history instead of failing the request.
        let input = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({}),
        };
        blocks.push(json!({
            "type": "tool_use",
            "id": wire_id(&call.id),
            "name": call.name,
            "input": input,
        }));
    }
    blocks
}

/// A call id the Messages API accepts (`^[a-zA-Z0-9_-]+$`). Ids from other providers (a
/// fallback model may have made the call) can hold other characters; the same mapping is
/// applied to the call and to its result, so they still pair up.
fn wire_id(id: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.is_empty() {
        return "call".to_owned();
    }
    id.chars().map(|c| if ok(c) { c } else { '_' }).collect()
}

fn tool_result(m: &Message) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": wire_id(m.tool_call_id.as_deref().unwrap_or_default()),
    });
    // With media, `parts` holds every item in order and `content` only their text rendering.
    let content = if m.parts.is_empty() {
        (!m.content.trim().is_empty()).then(|| Value::from(m.content.as_str()))
    } else {
        let blocks: Vec<Value> = m.parts.iter().filter_map(part_block).collect();
        (!blocks.is_empty()).then_some(Value::Array(blocks))
    };
    if let Some(content) = content {
        block["content"] = content;
    }
    if m.content.starts_with(ERROR_PREFIX) {
        block["is_error"] = Value::Bool(true);
    }
    block
}

/// One tool-result item as a content block; `None` for empty text.
fn part_block(part: &Content) -> Option<Value> {
    match part {
        Content::Text { text: t } => text_block(t),
        Content::Image { source } => {
            Some(json!({ "type": "image", "source": source_json(source) }))
        }
        Content::Document { source } => Some(document_block(source)),
    }
}

fn source_json(source: &Source) -> Value {
    match source.kind {
        SourceKind::Base64 => {
            json!({ "type": "base64", "media_type": source.media_type, "data": source.data })
        }
        SourceKind::Url => json!({ "type": "url", "url": source.data }),
    }
}

/// Inline documents must be PDF (base64) or plain text (sent as text, not base64); other
/// inline formats are named for the model instead of failing the whole request.
fn document_block(source: &Source) -> Value {
    let inline_text = source.kind == SourceKind::Base64
        && (source.media_type.starts_with("text/") || source.media_type == "application/json");
    if inline_text {
        let decoded = decode_base64(&source.data).and_then(|b| String::from_utf8(b).ok());
        return match decoded {
            Some(data) => json!({ "type": "document", "source": {
                "type": "text", "media_type": "text/plain", "data": data,
            }}),
            None => text(format!(
                "[document: {} (its bytes are not valid base64 UTF-8 text)]",
                source.media_type
            )),
        };
    }
    if source.kind == SourceKind::Base64 && source.media_type != "application/pdf" {
        return text(format!(
            "[document: {} (this format cannot be shown to the model)]",
            source.media_type
        ));
    }
    json!({ "type": "document", "source": source_json(source) })
}

/// Decodes standard or URL-safe base64, with or without padding; `None` on other characters.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 3);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            b'\r' | b'\n' | b' ' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVs\nbG8h").unwrap(), b"hello!");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode_base64("a*b"), None);
    }

    #[test]
    fn wire_ids_keep_valid_ids_and_fix_others() {
        assert_eq!(wire_id("toolu_01A-b"), "toolu_01A-b");
        assert_eq!(wire_id("call:1.2"), "call_1_2");
        assert_eq!(wire_id(""), "call");
    }
}
