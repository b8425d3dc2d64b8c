//! The chat-completions request body written straight to JSON text from borrowed parts.
//!
//! [`super::build_request_for`] builds the same body as a `serde_json::Value` tree, which is
//! what tests and the conformance suite compare. Sending that tree cost every model call a
//! copy of each message's text and of every tool's schema into map nodes, then their
//! serialisation and their drop (a tenth of a text turn's CPU in the Worker's profile, with
//! a 200-message history). This writes the same JSON from references instead; a unit test
//! holds the two equal.

use serde::Serialize;
use serde_json::Value;

use super::request::media_parts;
use crate::llm::request::ToolSpec;
use crate::llm::ModelRequest;
use crate::values::message::{Message, Role};

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Msg<'a>>,
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

/// The body of [`super::build_request_for`], as JSON text.
pub fn request_body(req: &ModelRequest) -> String {
    let mut messages = Vec::with_capacity(req.history.len() + 1);
    if !req.system.is_empty() {
        messages.push(plain("system", req.system));
    }
    // As in `build_request`: media from tool results go in one user message after the run of
    // results.
    let mut media: Vec<Value> = Vec::new();
    for m in req.history {
        if m.role != Role::Tool && !media.is_empty() {
            messages.push(media_message(std::mem::take(&mut media)));
        }
        messages.push(message(m, &mut media));
    }
    if !media.is_empty() {
        messages.push(media_message(media));
    }
    let with_tools = !req.tools.is_empty();
    let body = Body {
        model: req.target.model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: with_tools.then(|| req.tools.iter().map(function_tool).collect()),
        tool_choice: with_tools.then(|| req.tool_choice.as_str()),
        parallel_tool_calls: with_tools.then_some(req.parallel_tool_calls),
        max_tokens: req.target.max_output_tokens,
    };
    // Serialising borrowed strings, numbers and `Value`s cannot fail.
    serde_json::to_string(&body).unwrap_or_default()
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

    fn same_json(req: &ModelRequest) {
        let text = request_body(req);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed, super::super::build_request_for(req), "{text}");
    }

    #[test]
    fn the_text_is_the_json_the_tree_builds() {
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
            parameters: serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            returns: None,
        }];
        for (system, tools, limit, choice, parallel) in [
            (
                "You help.",
                &tools[..],
                Some(512),
                ToolChoice::Required,
                true,
            ),
            ("", &[][..], None, ToolChoice::Auto, false),
        ] {
            same_json(&ModelRequest {
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
            });
        }
    }
}
