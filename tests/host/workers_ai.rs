//! Workers AI through the `AI` binding: the `input` object we send and both answer shapes the
//! binding returns, folded into a reply exactly like a streamed one.

use std::collections::HashSet;

use edgent::config::{ModelConfig, ToolChoice, ToolSpec};
use edgent::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};
use edgent::llm::workers_ai::{build_request, new_call_id, parse_response};
use edgent::llm::ModelRequest;
use edgent::values::message::{Message, Role, ToolCall};
use serde_json::{json, Value};

/// The answer folded into a checked reply.
fn reply(v: Value) -> Result<Completion, ProviderError> {
    let mut c = Completion::default();
    for ev in parse_response(&v)? {
        c.apply(&ev)?;
    }
    c.validate()?;
    Ok(c)
}

fn is_generated(id: &str) -> bool {
    id.strip_prefix("call_").is_some_and(|hex| {
        hex.len() == 32
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[test]
fn generated_ids_are_prefixed_and_unique() {
    let ids: HashSet<String> = (0..1000).map(|_| new_call_id()).collect();
    assert_eq!(ids.len(), 1000);
    for id in &ids {
        assert!(is_generated(id), "{id}");
    }
}

#[test]
fn original_shape_text_with_usage() {
    let evs = parse_response(&json!({
        "response": "Hello!",
        "tool_calls": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }))
    .unwrap();
    assert_eq!(
        evs,
        [
            StreamEvent::TextDelta("Hello!".into()),
            StreamEvent::Usage {
                input_tokens: 12,
                output_tokens: 3
            },
            StreamEvent::Finish(FinishReason::Stop),
            StreamEvent::Done,
        ]
    );
}

#[test]
fn original_shape_tool_calls_with_object_and_string_arguments() {
    let c = reply(json!({
        "response": null,
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_current_time", "arguments": "{\"tz\":\"UTC\"}"},
            {"name": "no_args"},
        ],
    }))
    .unwrap();
    assert_eq!(c.text, "");
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    let got: Vec<_> = c
        .tool_calls
        .iter()
        .map(|t| (t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("get_weather", "{\"city\":\"Paris\"}"),
            ("get_current_time", "{\"tz\":\"UTC\"}"),
            ("no_args", "{}"),
        ]
    );
    let ids: HashSet<&str> = c.tool_calls.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "every call gets its own id");
    assert!(ids.iter().all(|id| is_generated(id)), "{ids:?}");
    assert_eq!((c.input_tokens, c.output_tokens), (0, 0), "no usage given");
}

#[test]
fn original_shape_keeps_given_ids_and_reads_nested_calls() {
    let c = reply(json!({
        "response": "Let me check.",
        "tool_calls": [
            {"id": "chatcmpl-tool-1", "type": "function",
             "function": {"name": "a", "arguments": "{\"n\":1}"}},
            {"id": "x2", "name": "b", "arguments": {}},
        ],
    }))
    .unwrap();
    assert_eq!(c.text, "Let me check.");
    let got: Vec<_> = c
        .tool_calls
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(
        got,
        [("chatcmpl-tool-1", "a", "{\"n\":1}"), ("x2", "b", "{}")]
    );
}

#[test]
fn openai_shape_text() {
    let c = reply(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 100},
    }))
    .unwrap();
    assert_eq!(c.text, "Hi there");
    assert_eq!(c.finish, Some(FinishReason::Length));
    assert_eq!((c.input_tokens, c.output_tokens), (7, 100));
    assert!(c.tool_calls.is_empty());
}

#[test]
fn openai_shape_tool_calls() {
    let v = json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_given", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
        ]}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9},
    });
    let evs = parse_response(&v).unwrap();
    assert!(matches!(
        &evs[0],
        StreamEvent::ToolCallStart { index: 0, id, name } if id == "call_given" && name == "get_weather"
    ));
    assert!(matches!(&evs[2], StreamEvent::ToolCallStart { index: 1, id, .. } if is_generated(id)));
    let c = reply(v).unwrap();
    // "stop" next to tool calls still means the tools must run.
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(c.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
    assert_eq!(c.tool_calls[1].arguments, "{\"city\":\"Rome\"}");
    assert_eq!((c.input_tokens, c.output_tokens), (20, 9));
}

#[test]
fn no_tool_calls_and_odd_but_valid_answers() {
    for v in [
        json!({"response": "ok"}),
        json!({"response": "ok", "tool_calls": null}),
        json!({"choices": [{"message": {"content": "ok", "tool_calls": []}}]}),
    ] {
        let c = reply(v.clone()).unwrap();
        assert_eq!(c.text, "ok", "{v}");
        assert_eq!(c.finish, Some(FinishReason::Stop), "{v}");
        assert!(c.tool_calls.is_empty());
    }
    // JSON-mode models answer with an object: kept as its JSON text.
    let c = reply(json!({"response": {"a": 1}})).unwrap();
    assert_eq!(c.text, "{\"a\":1}");
    // Arguments that are not an object are passed on for validation to refuse.
    let c = reply(json!({"tool_calls": [{"name": "t", "arguments": [1, 2]}]})).unwrap();
    assert_eq!(c.tool_calls[0].arguments, "[1,2]");
}

#[test]
fn malformed_answers_are_errors_with_a_reason() {
    let cases = [
        (json!(null), "expected a JSON object, got null"),
        (json!("text"), "got a string"),
        (json!([]), "got a list"),
        (json!({}), "none of"),
        (json!({"usage": {"prompt_tokens": 1}}), "none of"),
        (json!({"choices": []}), "\"choices\""),
        (json!({"choices": "x"}), "\"choices\""),
        (
            json!({"response": "", "tool_calls": {"name": "t"}}),
            "not a list",
        ),
        (json!({"tool_calls": [1]}), "tool call 0 is a number"),
        (
            json!({"tool_calls": [{"name": "a"}, {"arguments": {}}]}),
            "tool call 1 has no name",
        ),
        (
            json!({"choices": [{"message": {"tool_calls": [{"function": {"name": ""}}]}}]}),
            "tool call 0 has no name",
        ),
    ];
    for (v, needle) in cases {
        match parse_response(&v) {
            Err(ProviderError::Malformed(m)) => {
                assert!(m.starts_with("Workers AI: "), "{m}");
                assert!(m.contains(needle), "{v}: {m}");
            }
            other => panic!("{v}: {other:?}"),
        }
    }
}

// ---- the input object ----

fn model(max_output_tokens: Option<u32>) -> ModelConfig {
    let mut m: ModelConfig = serde_json::from_value(json!({
        "name": "llama",
        "provider": "workers_ai",
        "model": "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
    }))
    .unwrap();
    m.max_output_tokens = max_output_tokens;
    m
}

fn msg(role: Role, content: &str) -> Message {
    Message::with_id("i".into(), role, content, 0)
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        parameters: json!({"type":"object","properties":{"city":{"type":"string"}}}).into(),
        returns: None,
    }]
}

fn input(m: &ModelConfig, history: &[Message], tools: &[ToolSpec], choice: ToolChoice) -> Value {
    build_request(&ModelRequest {
        target: m.target(),
        system: "be brief",
        history,
        tools,
        tool_choice: choice,
        parallel_tool_calls: true,
        output: None,
        memo: None,
    })
}

#[test]
fn input_has_openai_shaped_messages_and_tools() {
    let mut call = msg(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "get_weather".into(),
        arguments: "{\"city\":\"Oslo\"}".into(),
    }];
    let mut result = msg(Role::Tool, "-3C");
    result.tool_call_id = Some("c1".into());
    result.name = Some("get_weather".into());
    let history = [
        msg(Role::User, "weather?"),
        call,
        result,
        msg(Role::System, "note"),
    ];
    let v = input(&model(Some(512)), &history, &tools(), ToolChoice::Auto);
    assert_eq!(
        v["messages"],
        json!([
            {"role":"system","content":"be brief"},
            {"role":"user","content":"weather?"},
            {"role":"assistant","content":"","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"-3C"},
            {"role":"system","content":"note"},
        ])
    );
    assert_eq!(
        v["tools"],
        json!([{"type":"function","function":{"name":"get_weather","description":"Weather for a city",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])
    );
    assert_eq!(v["max_tokens"], 512);
    assert_eq!(v["stream"], false);
    assert!(
        v.get("model").is_none(),
        "the model id goes to AI.run, not the input"
    );
}

#[test]
fn input_leaves_out_what_is_not_set() {
    let h = [msg(Role::User, "hi")];
    let v = input(&model(None), &h, &[], ToolChoice::Auto);
    assert!(v.get("tools").is_none());
    assert!(v.get("max_tokens").is_none());
    // "none" cannot be asked of the binding; not offering the tools enforces it.
    let v = input(&model(None), &h, &tools(), ToolChoice::None);
    assert!(v.get("tools").is_none());
    let v = input(&model(None), &h, &tools(), ToolChoice::Required);
    assert!(v["tools"].is_array());
}
