//! Conformance of the Anthropic Messages parser on raw SSE bytes, split every way a network
//! can (the request bodies: `anthropic_request.rs`).

use edgent::llm::anthropic::AnthropicStream;
use edgent::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};
use serde_json::{json, Value};

/// Every event of a body fed in the given cuts, `finish` included.
fn events(chunks: &[&[u8]]) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut s = AnthropicStream::new();
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend(s.feed(chunk)?);
    }
    out.extend(s.finish()?);
    Ok(out)
}

/// Raw bytes through the full path (SSE → events → completion).
fn run(chunks: &[&[u8]]) -> Result<Completion, ProviderError> {
    let mut c = Completion::default();
    for ev in events(chunks)? {
        c.apply(&ev)?;
    }
    c.validate()?;
    Ok(c)
}

/// The same body cut at every byte boundary, and fed byte by byte, must give the same events.
fn every_split(body: &str) -> Result<Completion, ProviderError> {
    let b = body.as_bytes();
    let whole = events(&[b]);
    for cut in 1..b.len() {
        assert_eq!(events(&[&b[..cut], &b[cut..]]), whole, "cut at byte {cut}");
    }
    let singles: Vec<&[u8]> = b.chunks(1).collect();
    assert_eq!(events(&singles), whole, "byte by byte");
    run(&[b])
}

/// One SSE frame as Anthropic writes it: the event name, then the same name as `type`.
fn frame(data: Value) -> String {
    let name = data["type"].as_str().unwrap().to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start(input_tokens: u64) -> String {
    frame(json!({"type":"message_start","message":{
        "id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x",
        "stop_reason":null,"stop_sequence":null,
        "usage":{"input_tokens":input_tokens,"output_tokens":1}}}))
}

fn text_start(index: u64) -> String {
    frame(
        json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
    )
}

fn text_delta(index: u64, text: &str) -> String {
    frame(
        json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":text}}),
    )
}

fn tool_start(index: u64, id: &str, name: &str) -> String {
    frame(json!({"type":"content_block_start","index":index,
        "content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}))
}

fn json_delta(index: u64, partial: &str) -> String {
    frame(json!({"type":"content_block_delta","index":index,
        "delta":{"type":"input_json_delta","partial_json":partial}}))
}

fn block_stop(index: u64) -> String {
    frame(json!({"type":"content_block_stop","index":index}))
}

fn message_delta(stop_reason: &str, output_tokens: u64) -> String {
    frame(
        json!({"type":"message_delta","delta":{"stop_reason":stop_reason,"stop_sequence":null},
        "usage":{"output_tokens":output_tokens}}),
    )
}

fn message_stop() -> String {
    frame(json!({"type":"message_stop"}))
}

fn ping() -> String {
    frame(json!({"type":"ping"}))
}

fn text_body() -> String {
    [
        message_start(25),
        text_start(0),
        ping(),
        text_delta(0, "Hel"),
        text_delta(0, "lo, w\u{f6}rld"),
        block_stop(0),
        message_delta("end_turn", 15),
        message_stop(),
    ]
    .concat()
}

#[test]
fn text_stream_with_usage() {
    let c = every_split(&text_body()).unwrap();
    assert_eq!(c.text, "Hello, w\u{f6}rld");
    assert_eq!(c.finish, Some(FinishReason::Stop));
    assert_eq!((c.input_tokens, c.output_tokens), (25, 15));
    assert!(c.tool_calls.is_empty());
    assert!(c.done);
}

#[test]
fn events_come_in_order_and_ping_adds_none() {
    let evs = events(&[text_body().as_bytes()]).unwrap();
    assert_eq!(
        evs,
        [
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo, w\u{f6}rld".into()),
            StreamEvent::Finish(FinishReason::Stop),
            StreamEvent::Usage {
                input_tokens: 25,
                output_tokens: 15
            },
            StreamEvent::Done,
        ]
    );
    let mut s = AnthropicStream::new();
    assert_eq!(s.feed(ping().as_bytes()).unwrap(), []);
    assert_eq!(s.feed(b": comment\n\n").unwrap(), []);
}

#[test]
fn tool_use_arguments_survive_every_split() {
    let body = [
        message_start(40),
        tool_start(0, "toolu_01", "get_weather"),
        json_delta(0, ""),
        json_delta(0, "{\"city\": \"Par"),
        json_delta(0, "is\", \"unit\": \"\u{b0}C\"}"),
        block_stop(0),
        message_delta("tool_use", 30),
        message_stop(),
    ]
    .concat();
    let c = every_split(&body).unwrap();
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].id, "toolu_01");
    assert_eq!(c.tool_calls[0].name, "get_weather");
    assert_eq!(
        c.tool_calls[0].arguments,
        "{\"city\": \"Paris\", \"unit\": \"\u{b0}C\"}"
    );
    // The empty first delta adds nothing.
    let evs = events(&[body.as_bytes()]).unwrap();
    let deltas = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. }))
        .count();
    assert_eq!(deltas, 2);
}

#[test]
fn parallel_calls_after_text_are_numbered_among_calls() {
    let body = [
        message_start(10),
        text_start(0),
        text_delta(0, "Checking both."),
        block_stop(0),
        tool_start(1, "toolu_a", "get_weather"),
        json_delta(1, "{\"city\":"),
        tool_start(2, "toolu_b", "get_current_time"),
        // Deltas addressed by block index, even interleaved, land on the right call.
        json_delta(2, "{\"tz\":\"UTC\"}"),
        json_delta(1, "\"Oslo\"}"),
        block_stop(1),
        block_stop(2),
        message_delta("tool_use", 50),
        message_stop(),
    ]
    .concat();
    let evs = events(&[body.as_bytes()]).unwrap();
    let starts: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStart { index, id, .. } => Some((*index, id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "toolu_a"), (1, "toolu_b")]);
    let c = every_split(&body).unwrap();
    assert_eq!(c.text, "Checking both.");
    let got: Vec<_> = c
        .tool_calls
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("toolu_a", "get_weather", "{\"city\":\"Oslo\"}"),
            ("toolu_b", "get_current_time", "{\"tz\":\"UTC\"}"),
        ]
    );
}

#[test]
fn thinking_and_server_tool_blocks_are_skipped() {
    let body = [
        message_start(10),
        frame(json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})),
        frame(json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}})),
        frame(json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}})),
        block_stop(0),
        frame(json!({"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}})),
        json_delta(1, "{\"query\":\"x\"}"),
        block_stop(1),
        text_start(2),
        text_delta(2, "Done."),
        block_stop(2),
        tool_start(3, "toolu_z", "t"),
        json_delta(3, "{}"),
        block_stop(3),
        frame(json!({"type":"some_future_event","x":1})),
        message_delta("tool_use", 5),
        message_stop(),
    ]
    .concat();
    let c = run(&[body.as_bytes()]).unwrap();
    assert_eq!(c.text, "Done.");
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].id, "toolu_z");
    assert_eq!(c.tool_calls[0].arguments, "{}");
}

#[test]
fn input_given_whole_at_block_start_is_used() {
    // Some proxies put the whole input in content_block_start and send no deltas.
    let body = [
        message_start(1),
        frame(json!({"type":"content_block_start","index":0,
            "content_block":{"type":"tool_use","id":"toolu_p","name":"t","input":{"n":1}}})),
        block_stop(0),
        message_delta("tool_use", 1),
        message_stop(),
    ]
    .concat();
    let c = run(&[body.as_bytes()]).unwrap();
    assert_eq!(c.tool_calls[0].arguments, "{\"n\":1}");
}

#[test]
fn error_event_mid_stream() {
    let body = [
        message_start(5),
        text_start(0),
        text_delta(0, "Hi"),
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_owned(),
    ]
    .concat();
    assert_eq!(
        run(&[body.as_bytes()]),
        Err(ProviderError::Stream("Overloaded".into()))
    );
    let mut s = AnthropicStream::new();
    let err = s.feed(body.as_bytes()).unwrap_err();
    assert!(err.is_retryable());
    // The same event as the very last bytes, without its blank line, is still that error.
    let mut s = AnthropicStream::new();
    assert!(s.feed(body.trim_end().as_bytes()).is_ok());
    assert_eq!(s.finish(), Err(ProviderError::Stream("Overloaded".into())));
}

#[test]
fn missing_message_stop_is_a_truncated_stream() {
    let body = text_body();
    let cut = body.find("event: message_stop").unwrap();
    assert_eq!(
        run(&[&body.as_bytes()[..cut]]),
        Err(ProviderError::Truncated)
    );
    // Cut inside a frame, too.
    let cut = body.find("\"lo, w").unwrap();
    assert_eq!(
        run(&[&body.as_bytes()[..cut]]),
        Err(ProviderError::Truncated)
    );
    // Nothing at all.
    assert_eq!(run(&[b""]), Err(ProviderError::Truncated));
}

#[test]
fn final_frame_without_blank_line_still_counts() {
    let body = text_body();
    let c = run(&[body.trim_end().as_bytes()]).unwrap();
    assert_eq!(c.text, "Hello, w\u{f6}rld");
    assert!(c.done);
}

#[test]
fn usage_counts_cache_tokens_and_prefers_the_final_count() {
    let start = frame(json!({"type":"message_start","message":{"usage":{
        "input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}));
    let body = [start.clone(), message_delta("end_turn", 7), message_stop()].concat();
    let c = run(&[body.as_bytes()]).unwrap();
    assert_eq!((c.input_tokens, c.output_tokens), (1110, 7));
    // A message_delta that repeats the input count wins over message_start's.
    let body = [
        start,
        frame(
            json!({"type":"message_delta","delta":{"stop_reason":"max_tokens"},
            "usage":{"input_tokens":12,"output_tokens":9}}),
        ),
        message_stop(),
    ]
    .concat();
    let c = run(&[body.as_bytes()]).unwrap();
    assert_eq!((c.input_tokens, c.output_tokens), (12, 9));
    assert_eq!(c.finish, Some(FinishReason::Length));
}

#[test]
fn crlf_line_ends_give_the_same_reply() {
    let lf = text_body();
    let crlf = lf.replace('\n', "\r\n");
    assert_eq!(every_split(&crlf), every_split(&lf));
    assert_eq!(events(&[crlf.as_bytes()]), events(&[lf.as_bytes()]));
}

#[test]
fn malformed_events_are_errors_not_panics() {
    for body in [
        "event: message_start\ndata: {not json}\n\n".to_owned(),
        "data: [1,2,\n\n".to_owned(),
        // A tool call that deltas could never be matched to.
        frame(
            json!({"type":"content_block_start","content_block":{"type":"tool_use","id":"x","name":"t"}}),
        ),
    ] {
        assert!(
            matches!(run(&[body.as_bytes()]), Err(ProviderError::Malformed(_))),
            "{body}"
        );
    }
    // A tool call without a name is caught when the reply is checked.
    let body = [
        message_start(1),
        frame(json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"x","input":{}}})),
        message_delta("tool_use", 1),
        message_stop(),
    ]
    .concat();
    assert!(matches!(
        run(&[body.as_bytes()]),
        Err(ProviderError::Malformed(_))
    ));
}

#[test]
fn events_after_message_stop_are_ignored() {
    let body = format!("{}{}", text_body(), text_delta(0, "late"));
    assert_eq!(run(&[body.as_bytes()]).unwrap().text, "Hello, w\u{f6}rld");
}
