//! One conformance suite for every wire format: the same scenarios, written as each
//! provider's raw bytes, go through that provider's full parsing path (`llm::StreamParser`,
//! or the Workers AI answer reader) and must give the same provider-neutral result. SSE bodies
//! are fed whole and split at every byte. What this proves: the formats agree on text, tool
//! calls (ids, names, arguments assembled from pieces), finish reasons, usage, in-stream
//! errors and truncation. What it does not: request bodies (the per-format files test those).

use edgent::llm::stream::{Completion, FinishReason, ProviderError};
use edgent::llm::workers_ai::parse_response;
use edgent::llm::{Provider, StreamParser};
use edgent::values::message::ToolCall;

/// A scenario: its name and each SSE format's bytes.
struct Scenario {
    name: &'static str,
    openai: String,
    anthropic: String,
}

fn sse(data: &[&str]) -> String {
    data.iter().map(|d| format!("data: {d}\n\n")).collect()
}

fn events(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect()
}

const START: (&str, &str) = (
    "message_start",
    r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":10,"output_tokens":1}}}"#,
);

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "text then a tool call with its arguments in pieces, and usage",
            openai: sse(&[
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"check."}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz\":"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"UTC\"}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#,
                "[DONE]",
            ]),
            anthropic: events(&[
                START,
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"get_time","input":{}}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"tz\":"}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"UTC\"}"}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":1}"#,
                ),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ]),
        },
        Scenario {
            name: "text only, multi-byte characters across pieces",
            openai: sse(&[
                r#"{"choices":[{"index":0,"delta":{"content":"Grüße, "}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"世界"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#,
                "[DONE]",
            ]),
            anthropic: events(&[
                START,
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Grüße, "}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"世界"}}"#,
                ),
                (
                    "content_block_stop",
                    r#"{"type":"content_block_stop","index":0}"#,
                ),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ]),
        },
    ]
}

/// Feeds `bytes` through `provider`'s parser in the given pieces, then ends the stream.
fn parse(provider: Provider, pieces: &[&[u8]]) -> Result<Completion, ProviderError> {
    let mut parser = StreamParser::new(provider).unwrap();
    let mut completion = Completion::default();
    for piece in pieces {
        for ev in parser.feed(piece)? {
            completion.apply(&ev)?;
        }
    }
    for ev in parser.finish()? {
        completion.apply(&ev)?;
    }
    completion.validate()?;
    Ok(completion)
}

/// Whole, then split once at every byte.
fn every_split(provider: Provider, body: &str) -> Vec<Result<Completion, ProviderError>> {
    let bytes = body.as_bytes();
    let mut out = vec![parse(provider, &[bytes])];
    for at in 1..bytes.len() {
        out.push(parse(provider, &[&bytes[..at], &bytes[at..]]));
    }
    out
}

/// What matters of a completion, the same for every provider.
fn essence(c: &Completion) -> (String, Vec<ToolCall>, Option<FinishReason>, u64, u64) {
    (
        c.text.clone(),
        c.tool_calls.clone(),
        c.finish.clone(),
        c.input_tokens,
        c.output_tokens,
    )
}

#[test]
fn every_format_gives_the_same_completion_whole_and_split_at_every_byte() {
    for s in scenarios() {
        let reference = essence(&parse(Provider::OpenAi, &[s.openai.as_bytes()]).unwrap());
        for (provider, body) in [
            (Provider::OpenAi, &s.openai),
            (Provider::Anthropic, &s.anthropic),
        ] {
            for (at, got) in every_split(provider, body).into_iter().enumerate() {
                let got =
                    got.unwrap_or_else(|e| panic!("{}: {provider:?} split at {at}: {e}", s.name));
                assert_eq!(
                    essence(&got),
                    reference,
                    "{}: {provider:?} split at {at}",
                    s.name
                );
            }
        }
    }
}

#[test]
fn workers_ai_answers_map_to_the_same_completion() {
    let answer = serde_json::json!({
        "response": "Let me check.",
        "tool_calls": [{ "id": "call_1", "name": "get_time", "arguments": { "tz": "UTC" } }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5 },
    });
    let mut c = Completion::default();
    for ev in parse_response(&answer).unwrap() {
        c.apply(&ev).unwrap();
    }
    let first = &scenarios()[0];
    let reference = parse(Provider::OpenAi, &[first.openai.as_bytes()]).unwrap();
    assert_eq!(
        (c.text.as_str(), c.input_tokens, c.output_tokens),
        ("Let me check.", 10, 5)
    );
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].name, reference.tool_calls[0].name);
    let args: serde_json::Value = serde_json::from_str(&c.tool_calls[0].arguments).unwrap();
    let want: serde_json::Value = serde_json::from_str(&reference.tool_calls[0].arguments).unwrap();
    assert_eq!(args, want);
}

#[test]
fn an_error_inside_the_stream_is_a_stream_error_in_every_format() {
    let openai = sse(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
        r#"{"error":{"message":"overloaded, try later"}}"#,
    ]);
    let anthropic = events(&[
        START,
        (
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"overloaded, try later"}}"#,
        ),
    ]);
    for (provider, body) in [(Provider::OpenAi, openai), (Provider::Anthropic, anthropic)] {
        for (at, got) in every_split(provider, &body).into_iter().enumerate() {
            match got {
                Err(ProviderError::Stream(m)) => assert!(m.contains("overloaded"), "{m}"),
                other => {
                    panic!("{provider:?} split at {at}: expected a stream error, got {other:?}")
                }
            }
        }
    }
}

#[test]
fn a_stream_cut_before_its_end_is_truncated_in_every_format() {
    let s = &scenarios()[1];
    let cut = |body: &str, marker: &str| body[..body.find(marker).unwrap()].to_owned();
    let openai = cut(
        &s.openai,
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\"",
    );
    let anthropic = cut(&s.anthropic, "event: message_delta");
    for (provider, body) in [(Provider::OpenAi, openai), (Provider::Anthropic, anthropic)] {
        assert!(
            matches!(
                parse(provider, &[body.as_bytes()]),
                Err(ProviderError::Truncated)
            ),
            "{provider:?}"
        );
    }
}
