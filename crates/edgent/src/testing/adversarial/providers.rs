//! Each provider's whole path from bytes to a reply: OpenAI and Anthropic SSE through their
//! stream decoders, a Workers AI answer through `parse_response`, then the fold.

use serde_json::{json, Map, Value};

use super::fold::{call_id, call_index, call_name, check_validated, fold, reason, text_piece};
use super::input::{any_value, chunks, field, Input};
use crate::llm::stream::{ProviderError, StreamEvent};
use crate::llm::workers_ai::parse_response;
use crate::llm::{Provider, StreamParser};

/// A built body stops growing past this (the reply limit is 1 MiB).
const MAX_BODY: usize = 3 << 20;

/// What a decoder gave for one way of cutting the body: its events, and the first error.
#[derive(Debug, PartialEq)]
struct Decoded {
    events: Vec<StreamEvent>,
    error: Option<ProviderError>,
}

fn decode<'a>(provider: Provider, pieces: impl IntoIterator<Item = &'a [u8]>) -> Decoded {
    #[allow(clippy::expect_used)] // both formats stream
    let mut parser = StreamParser::new(provider).expect("a streaming format");
    let mut events = Vec::new();
    for piece in pieces {
        match parser.feed(piece) {
            Ok(evs) => events.extend(evs),
            Err(e) => {
                return Decoded {
                    events,
                    error: Some(e),
                }
            }
        }
    }
    match parser.finish() {
        Ok(evs) => events.extend(evs),
        Err(e) => {
            return Decoded {
                events,
                error: Some(e),
            }
        }
    }
    Decoded {
        events,
        error: None,
    }
}

fn frame(out: &mut String, event: Option<&str>, data: &str) {
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
}

/// An OpenAI chat-completions stream read from the input: text and tool-call chunks (ids
/// repeated and reused, indexes out of order), finish reasons, usage, in-stream errors,
/// `[DONE]`, comments and garbage.
fn openai_body(input: &mut Input<'_>) -> String {
    let mut out = String::new();
    let ends = input.below(4) != 0;
    while !input.is_empty() && out.len() < MAX_BODY {
        let data = match input.below(24) {
            0..=5 | 21..=23 => json!({"choices": [{"delta": {"content": text_piece(input)}}]}),
            6..=13 => {
                let mut call = Map::new();
                field(&mut call, input, "index", |input| {
                    Value::from(call_index(input))
                });
                field(&mut call, input, "id", |input| Value::from(call_id(input)));
                let mut function = Map::new();
                field(&mut function, input, "name", |input| {
                    Value::from(call_name(input))
                });
                field(&mut function, input, "arguments", |input| {
                    Value::from(text_piece(input))
                });
                call.insert("function".into(), Value::Object(function));
                json!({"choices": [{"delta": {"tool_calls": [call]}}]})
            }
            14 | 15 => json!({"choices": [{"delta": {}, "finish_reason": reason(input)}]}),
            16 => {
                json!({"choices": [], "usage": {"prompt_tokens": input.u16(), "completion_tokens": input.u16()}})
            }
            17 => {
                if input.bool() {
                    json!({"error": {"message": input.text(20)}})
                } else {
                    any_value(input, 0)
                }
            }
            18 => {
                frame(&mut out, None, "[DONE]");
                continue;
            }
            19 => {
                out.push_str(": keep-alive\n\n");
                continue;
            }
            _ => {
                out.push_str("data: {\"choices\n\n");
                out.push_str(&input.text(8));
                continue;
            }
        };
        frame(&mut out, None, &data.to_string());
    }
    if ends {
        frame(
            &mut out,
            None,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        );
        frame(&mut out, None, "[DONE]");
    }
    out
}

/// An Anthropic Messages stream read from the input: every event type, tool_use blocks with
/// and without whole `input`, deltas for unknown blocks, errors, pings and garbage.
fn anthropic_body(input: &mut Input<'_>) -> String {
    let mut out = String::new();
    let ends = input.below(4) != 0;
    while !input.is_empty() && out.len() < MAX_BODY {
        let block = input.below(4);
        let (name, data) = match input.below(24) {
            0 => (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": input.u16()}}}),
            ),
            1 | 2 => (
                "content_block_start",
                json!({"type": "content_block_start", "index": block, "content_block": {"type": "text", "text": text_piece(input)}}),
            ),
            3..=6 => {
                let mut b = Map::new();
                b.insert("type".into(), Value::from("tool_use"));
                field(&mut b, input, "id", |input| Value::from(call_id(input)));
                field(&mut b, input, "name", |input| Value::from(call_name(input)));
                field(&mut b, input, "input", |input| any_value(input, 1));
                let mut v = Map::new();
                v.insert("type".into(), Value::from("content_block_start"));
                field(&mut v, input, "index", |_| Value::from(block));
                v.insert("content_block".into(), Value::Object(b));
                ("content_block_start", Value::Object(v))
            }
            7..=10 => (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": block, "delta": {"type": "text_delta", "text": text_piece(input)}}),
            ),
            11..=15 => (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": text_piece(input)}}),
            ),
            16 | 17 => (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": block}),
            ),
            18 | 19 => (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": reason(input)}, "usage": {"output_tokens": input.u16()}}),
            ),
            20 => ("message_stop", json!({"type": "message_stop"})),
            _ => match input.below(3) {
                0 => (
                    "error",
                    json!({"type": "error", "error": {"type": "overloaded_error", "message": input.text(20)}}),
                ),
                1 => ("ping", json!({"type": "ping"})),
                _ => {
                    out.push_str(&input.text(12));
                    continue;
                }
            },
        };
        let event = input.bool().then_some(name);
        frame(&mut out, event, &data.to_string());
    }
    if ends {
        let stop = r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#;
        frame(&mut out, Some("message_delta"), stop);
        frame(&mut out, Some("message_stop"), r#"{"type":"message_stop"}"#);
    }
    out
}

fn check_stream(provider: Provider, data: &[u8]) {
    let mut input = Input::new(data);
    let seed = input.u64();
    let body: Vec<u8> = if input.one_in(8) {
        input.rest().to_vec()
    } else {
        match provider {
            Provider::Anthropic => anthropic_body(&mut input).into_bytes(),
            _ => openai_body(&mut input).into_bytes(),
        }
    };
    let whole = decode(provider, [body.as_slice()]);
    let pieces = decode(provider, chunks(&body, seed));
    assert_eq!(
        whole.error, pieces.error,
        "the same error however the body is cut"
    );
    if whole.error.is_none() {
        assert_eq!(
            whole.events, pieces.events,
            "the same events however the body is cut"
        );
    } else {
        let (short, long) = if whole.events.len() <= pieces.events.len() {
            (&whole.events, &pieces.events)
        } else {
            (&pieces.events, &whole.events)
        };
        assert!(long.starts_with(short), "events before the error differ");
    }
    if let Some(e) = &whole.error {
        assert!(
            matches!(
                e,
                ProviderError::Malformed(_) | ProviderError::Stream(_) | ProviderError::Truncated
            ),
            "a decoder gave {e:?}"
        );
    }
    let (c, error) = fold(whole.events);

    if error.is_none() && whole.error.is_none() {
        check_validated(c);
    }
}

/// Input: 8 bytes of chunking seed, a mode byte, then either the raw body or the ops that
/// build a plausible one.
///
/// The OpenAI stream decoder gives the same events and the same error whether the body comes
/// whole or cut anywhere; its errors are `Malformed`, `Stream` or `Truncated`; the events fold
/// within the limits (see [`super::reply_fold`]).
pub fn openai_stream(data: &[u8]) {
    check_stream(Provider::OpenAi, data);
}

/// [`openai_stream`] for the Anthropic Messages stream.
pub fn anthropic_stream(data: &[u8]) {
    check_stream(Provider::Anthropic, data);
}

/// A Workers AI answer read from the input: the original shape or the chat-completion one,
/// with up to 300 calls in either call shape, fields missing or of the wrong type.
fn workers_ai_value(input: &mut Input<'_>) -> Value {
    let calls: Vec<Value> = (0..call_index(input).min(300))
        .map(|_| {
            let mut call = Map::new();
            field(&mut call, input, "id", |input| Value::from(call_id(input)));
            let mut f = Map::new();
            field(&mut f, input, "name", |input| Value::from(call_name(input)));
            let args = if input.bool() {
                any_value(input, 1)
            } else {
                Value::from(input.text(24))
            };
            field(&mut f, input, "arguments", |_| args);
            if input.bool() {
                call.insert("function".into(), Value::Object(f));
            } else {
                call.extend(f);
            }
            Value::Object(call)
        })
        .collect();
    let mut v = Map::new();
    if input.bool() {
        let mut message = Map::new();
        field(&mut message, input, "content", |input| {
            Value::from(text_piece(input))
        });
        field(&mut message, input, "tool_calls", |_| Value::from(calls));
        let mut choice = Map::new();
        choice.insert("message".into(), Value::Object(message));
        field(&mut choice, input, "finish_reason", |input| {
            Value::from(reason(input))
        });
        field(&mut v, input, "choices", |_| json!([choice]));
    } else {
        field(&mut v, input, "response", |input| {
            Value::from(text_piece(input))
        });
        field(&mut v, input, "tool_calls", |_| Value::from(calls));
    }
    field(
        &mut v,
        input,
        "usage",
        |input| json!({"prompt_tokens": input.u16(), "completion_tokens": input.u16()}),
    );
    Value::Object(v)
}

/// Input: a mode byte, then raw JSON text or the ops that build a plausible answer.
///
/// `parse_response` never panics; an error is `Malformed`; an answer's events end with a
/// finish and the end marker, number calls 0, 1, 2… and give every call an id; they fold
/// within the limits (a reply with more than 128 calls is refused as too large).
pub fn workers_ai_answer(data: &[u8]) {
    let mut input = Input::new(data);
    let value = if input.one_in(8) {
        match serde_json::from_slice::<Value>(input.rest()) {
            Ok(v) => v,
            Err(_) => return,
        }
    } else {
        workers_ai_value(&mut input)
    };
    match parse_response(&value) {
        Err(e) => assert!(matches!(e, ProviderError::Malformed(_)), "gave {e:?}"),
        Ok(events) => {
            assert!(
                matches!(
                    events.as_slice(),
                    [.., StreamEvent::Finish(_), StreamEvent::Done]
                ),
                "an answer ends with a finish and the end marker"
            );
            let mut next = 0;
            for ev in &events {
                if let StreamEvent::ToolCallStart { index, id, .. } = ev {
                    assert_eq!(*index, next, "calls are numbered in order");
                    assert!(!id.is_empty(), "a call without an id");
                    next += 1;
                }
            }
            let (c, error) = fold(events);
            if error.is_none() {
                check_validated(c);
            }
        }
    }
}
