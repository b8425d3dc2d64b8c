//! Chat-completions request bodies, written from borrowed parts: the JSON text that is sent
//! ([`request_body`]) and the same body as a `serde_json::Value` for callers and tests that
//! look into it ([`build_request_for`], [`build_request`]).
//!
//! Built as a `Value` tree, a body cost every model call a copy of each message's text and of
//! every tool's schema into map nodes, then their serialisation and their drop (a quarter of a
//! turn's time in `bench/ab.mjs`, with a 200-turn history); these structs borrow instead.

use serde::Serialize;
use serde_json::Value;

use super::request::media_parts;
use crate::llm::request::ToolSpec;
use crate::llm::ModelRequest;
use crate::values::json_schema::strict_compatible;
use crate::values::message::{Message, Role};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    /// `None` in the text that is sent: [`request_body`] appends the messages itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<Vec<Msg<'a>>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<FunctionTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
}

/// `{"type": "json_schema", "json_schema": {name, schema, strict}}`.
#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchema<'a>,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<Call<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Null(Option<()>),
    Parts(Vec<Value>),
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

fn plain<'a>(role: &'static str, content: &'a str) -> Msg<'a> {
    Msg {
        role,
        content: Content::Text(content),
        name: None,
        tool_calls: None,
        tool_call_id: None,
    }
}

/// The streaming request body for a model row, as the JSON text that is sent: the messages
/// and tools, plus the row's output limit and the prompt's tool settings.
///
/// `history` must already be model-ready (no silent or failed messages, every tool call
/// paired with its result); see [`crate::engine::thread::repair_history`].
pub fn request_body(req: &ModelRequest) -> String {
    // Serialising borrowed strings, numbers and `Value`s cannot fail.
    let mut text = serde_json::to_string(&body_for(req, false)).unwrap_or_default();
    // The messages go last, written here: those a memo kept are copied, not written again.
    text.pop(); // the body's closing brace
    text.push_str(",\"messages\":[");
    match req.memo {
        Some(memo) => memo.memo.write_with(
            "openai",
            memo.version,
            req.history,
            memoable,
            |m| serde_json::to_string(&message(m, &mut Vec::new())).unwrap_or_default(),
            |written| write_messages(&mut text, req, written),
        ),
        None => write_messages(&mut text, req, &[]),
    }
    text.push_str("]}");
    text
}

/// Whether a message's JSON stands alone (a tool result with media also adds to the user
/// message after its run of results): only those are kept in a memo.
fn memoable(m: &Message) -> bool {
    m.role != Role::Tool || m.parts.iter().all(|p| p.is_text())
}

/// Appends the request's messages to `text`, comma-separated: `written[i]` where the memo
/// gave the JSON of `history[i]`, else written now.
fn write_messages(text: &mut String, req: &ModelRequest, written: &[Option<&str>]) {
    let mut first = true;
    for m in messages(req.system, req.history, written) {
        if !first {
            text.push(',');
        }
        first = false;
        match m {
            Out::Written(json) => text.push_str(json),
            Out::Fresh(msg) => text.push_str(&serde_json::to_string(&msg).unwrap_or_default()),
        }
    }
}

/// [`request_body`] as a `Value`.
pub fn build_request_for(req: &ModelRequest) -> Value {
    serde_json::to_value(body_for(req, true)).unwrap_or_default()
}

/// A streaming request body with the server's defaults for tool choice, parallel calls and
/// output length, as a `Value`.
pub fn build_request(model: &str, system: &str, history: &[Message], tools: &[ToolSpec]) -> Value {
    serde_json::to_value(body(model, system, history, tools, true)).unwrap_or_default()
}

/// Tools in the chat-completions `{"type": "function", "function": …}` shape (also what
/// Workers AI takes).
pub fn function_tools(tools: &[ToolSpec]) -> Value {
    let tools: Vec<FunctionTool> = tools.iter().map(function_tool).collect();
    serde_json::to_value(tools).unwrap_or_default()
}

/// `with_messages`: false for the text that is sent (see [`request_body`]).
fn body_for<'a>(req: &ModelRequest<'a>, with_messages: bool) -> Body<'a> {
    let mut body = body(
        req.target.model,
        req.system,
        req.history,
        req.tools,
        with_messages,
    );
    if !req.tools.is_empty() {
        // Sent only alongside tools: several servers reject tool settings without any tools.
        body.tool_choice = Some(req.tool_choice.as_str());
        body.parallel_tool_calls = Some(req.parallel_tool_calls);
    }
    // `max_tokens` rather than OpenAI's newer `max_completion_tokens`: it is the one field
    // every compatible server (vLLM, llama.cpp, Groq, OpenRouter) understands.
    body.max_tokens = req.target.max_output_tokens;
    // On every call of the prompt, tools or not: the model calls tools as before, and its
    // answer without calls is JSON of the schema. Strict (the server constrains the output)
    // when the schema fits OpenAI's strict subset; otherwise asked for, and checked here.
    body.response_format = req.output.map(|output| ResponseFormat {
        kind: "json_schema",
        json_schema: JsonSchema {
            name: output.name,
            schema: output.schema,
            strict: strict_compatible(output.schema),
        },
    });
    body
}

fn body<'a>(
    model: &'a str,
    system: &'a str,
    history: &'a [Message],
    tools: &'a [ToolSpec],
    with_messages: bool,
) -> Body<'a> {
    let messages = with_messages.then(|| {
        messages(system, history, &[])
            .into_iter()
            .filter_map(|m| match m {
                Out::Fresh(msg) => Some(msg),
                Out::Written(_) => None,
            })
            .collect()
    });
    Body {
        model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: (!tools.is_empty()).then(|| tools.iter().map(function_tool).collect()),
        tool_choice: None,
        parallel_tool_calls: None,
        max_tokens: None,
        response_format: None,
    }
}

/// A message of a body: to write now, or its JSON as a memo kept it.
enum Out<'a> {
    Fresh(Msg<'a>),
    Written(&'a str),
}

/// The body's messages: the system text, then the history, with `written[i]` standing for
/// `history[i]` where it is `Some` (a kept message adds no media: see `memoable`).
fn messages<'a>(
    system: &'a str,
    history: &'a [Message],
    written: &[Option<&'a str>],
) -> Vec<Out<'a>> {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !system.is_empty() {
        messages.push(Out::Fresh(plain("system", system)));
    }
    // Chat completions accepts only text in `tool` messages, and nothing may come between the
    // results of one assistant message: images and documents from tools are gathered and sent
    // in one user message right after the run of results.
    let mut media: Vec<Value> = Vec::new();
    for (i, m) in history.iter().enumerate() {
        if m.role != Role::Tool && !media.is_empty() {
            messages.push(Out::Fresh(media_message(std::mem::take(&mut media))));
        }
        messages.push(match written.get(i).copied().flatten() {
            Some(json) => Out::Written(json),
            None => Out::Fresh(message(m, &mut media)),
        });
    }
    if !media.is_empty() {
        messages.push(Out::Fresh(media_message(media)));
    }
    messages
}

fn message<'a>(m: &'a Message, media: &mut Vec<Value>) -> Msg<'a> {
    match m.role {
        Role::System => plain("system", &m.content),
        Role::User => Msg {
            name: m.name.as_deref(),
            ..plain("user", &m.content)
        },
        Role::Assistant if m.tool_calls.is_empty() => plain("assistant", &m.content),
        Role::Assistant => Msg {
            content: if m.content.is_empty() {
                Content::Null(None)
            } else {
                Content::Text(&m.content)
            },
            tool_calls: Some(
                m.tool_calls
                    .iter()
                    .map(|c| Call {
                        id: &c.id,
                        kind: "function",
                        function: CallFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            ),
            ..plain("assistant", "")
        },
        Role::Tool => {
            media.extend(media_parts(m));
            Msg {
                tool_call_id: Some(m.tool_call_id.as_deref().unwrap_or_default()),
                ..plain("tool", &m.content)
            }
        }
    }
}

fn media_message<'a>(parts: Vec<Value>) -> Msg<'a> {
    Msg {
        content: Content::Parts(parts),
        ..plain("user", "")
    }
}

fn function_tool(t: &ToolSpec) -> FunctionTool<'_> {
    FunctionTool {
        kind: "function",
        function: Function {
            name: &t.name,
            description: &t.description,
            parameters: &t.parameters,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::request::{Target, ToolChoice};
    use crate::llm::Provider;
    use crate::values::message::ToolCall;
    use crate::values::tool_result::{Content as Part, Source};

    /// The bodies the `json!`-built tree gave for the requests below, before these structs
    /// replaced it: the text sent and the `Value` must both still be exactly these.
    const EXPECTED: [&str; 2] = [
        r##"{"max_tokens":512,"messages":[{"content":"You help.","role":"system"},{"content":"be brief","role":"system"},{"content":"hi\nthere 😀","role":"user"},{"content":"from B","name":"side_b","role":"user"},{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"q\":\"a \\\"quoted\\\" ünï\"}","name":"lookup"},"id":"c1","type":"function"}]},{"content":"found","role":"tool","tool_call_id":"c1"},{"content":"let me look","role":"assistant","tool_calls":[{"function":{"arguments":"{\"q\":\"a \\\"quoted\\\" ünï\"}","name":"lookup"},"id":"c1","type":"function"}]},{"content":"a chart","role":"tool","tool_call_id":"c1"},{"content":[{"text":"Image 1 from `lookup`:","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"},{"text":"Document 2 from `lookup` (application/pdf): https://example.com/a.pdf","type":"text"}],"role":"user"},{"content":"done","role":"assistant"}],"model":"gpt-test","parallel_tool_calls":true,"stream":true,"stream_options":{"include_usage":true},"tool_choice":"required","tools":[{"function":{"description":"Looks things up.","name":"lookup","parameters":{"properties":{"q":{"type":"string"}},"type":"object"}},"type":"function"}]}"##,
        r##"{"messages":[{"content":"be brief","role":"system"},{"content":"hi\nthere 😀","role":"user"},{"content":"from B","name":"side_b","role":"user"},{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"q\":\"a \\\"quoted\\\" ünï\"}","name":"lookup"},"id":"c1","type":"function"}]},{"content":"found","role":"tool","tool_call_id":"c1"},{"content":"let me look","role":"assistant","tool_calls":[{"function":{"arguments":"{\"q\":\"a \\\"quoted\\\" ünï\"}","name":"lookup"},"id":"c1","type":"function"}]},{"content":"a chart","role":"tool","tool_call_id":"c1"},{"content":[{"text":"Image 1 from `lookup`:","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"},{"text":"Document 2 from `lookup` (application/pdf): https://example.com/a.pdf","type":"text"}],"role":"user"},{"content":"done","role":"assistant"}],"model":"gpt-test","stream":true,"stream_options":{"include_usage":true}}"##,
    ];

    fn same_json(req: &ModelRequest, expected: &str) {
        let expected: Value = serde_json::from_str(expected).expect("valid expected JSON");
        let text = request_body(req);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed, expected, "{text}");
        assert_eq!(build_request_for(req), expected);
    }

    #[test]
    fn every_message_shape_is_written_as_before() {
        let call = ToolCall {
            id: "c1".into(),
            name: "lookup".into(),
            arguments: r#"{"q":"a \"quoted\" ünï"}"#.into(),
        };
        let mut named = Message::new(Role::User, "from B", 1);
        named.name = Some("side_b".into());
        let mut with_calls = Message::new(Role::Assistant, "", 2);
        with_calls.tool_calls = vec![call.clone()];
        let mut talking_calls = Message::new(Role::Assistant, "let me look", 3);
        talking_calls.tool_calls = vec![call.clone()];
        let mut media = Message::tool_result(&call, "a chart", 4);
        media.name = Some("lookup".into());
        media.parts = vec![
            Part::Image {
                source: Source::base64("image/png", "iVBORw0KGgo="),
            },
            Part::Document {
                source: Source::url("application/pdf", "https://example.com/a.pdf"),
            },
        ];
        let history = vec![
            Message::new(Role::System, "be brief", 0),
            Message::new(Role::User, "hi\nthere \u{1F600}", 0),
            named,
            with_calls,
            Message::tool_result(&call, "found", 3),
            talking_calls,
            media,
            Message::new(Role::Assistant, "done", 5),
        ];
        let tools = [ToolSpec {
            name: "lookup".into(),
            description: "Looks things up.".into(),
            parameters:
                serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}})
                    .into(),
            returns: None,
        }];
        for (expected, (system, tools, limit, choice, parallel)) in EXPECTED.iter().zip([
            (
                "You help.",
                &tools[..],
                Some(512),
                ToolChoice::Required,
                true,
            ),
            ("", &[][..], None, ToolChoice::Auto, false),
        ]) {
            let req = ModelRequest {
                target: Target {
                    provider: Provider::OpenAi,
                    model: "gpt-test",
                    base_url: "http://127.0.0.1:9",
                    max_output_tokens: limit,
                },
                system,
                history: &history,
                tools,
                tool_choice: choice,
                parallel_tool_calls: parallel,
                output: None,
                memo: None,
            };
            same_json(&req, expected);
        }
    }
}
