//! Conformance of the Anthropic Messages parser on raw SSE bytes, split every way a network
//! can, and the shape of the request bodies built from edgent history.

use edgent::config::{ModelConfig, ToolChoice, ToolSpec};
use edgent::llm::anthropic::{build_request, AnthropicStream, LEADING_USER_PLACEHOLDER};
use edgent::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};
use edgent::llm::ModelRequest;
use edgent::tool::{Content, Source};
use edgent::values::message::{Message, Role, ToolCall};
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

// ---- request bodies ----

fn model(max_output_tokens: Option<u32>) -> ModelConfig {
    let mut m: ModelConfig = serde_json::from_value(json!({
        "name": "claude",
        "provider": "anthropic",
        "model": "claude-x",
        "base_url": "https://api.anthropic.com/v1",
    }))
    .unwrap();
    m.max_output_tokens = max_output_tokens;
    m
}

fn msg(role: Role, content: &str) -> Message {
    Message::with_id("i".into(), role, content, 0)
}

fn assistant_calling(content: &str, calls: &[(&str, &str, &str)]) -> Message {
    let mut m = msg(Role::Assistant, content);
    m.tool_calls = calls
        .iter()
        .map(|(id, name, args)| ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: (*args).into(),
        })
        .collect();
    m
}

fn result(id: &str, content: &str) -> Message {
    let mut m = msg(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m.name = Some("t".into());
    m
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} does things"),
        parameters: json!({"type":"object","properties":{"x":{"type":"string"}}}),
        returns: None,
    }
}

fn body_with(
    model: &ModelConfig,
    history: &[Message],
    tools: &[ToolSpec],
    tool_choice: ToolChoice,
    parallel_tool_calls: bool,
) -> Value {
    build_request(&ModelRequest {
        target: model.target(),
        system: "be brief",
        history,
        tools,
        tool_choice,
        parallel_tool_calls,
        output: None,
    })
}

fn body(history: &[Message]) -> Value {
    body_with(&model(None), history, &[], ToolChoice::Auto, true)
}

#[test]
fn request_has_model_system_stream_and_a_default_output_limit() {
    let b = body(&[msg(Role::User, "hi")]);
    assert_eq!(b["model"], "claude-x");
    assert_eq!(b["system"], "be brief");
    assert_eq!(b["stream"], true);
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(
        b["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"hi"}]}])
    );
    assert!(b.get("tools").is_none());
    assert!(b.get("tool_choice").is_none());
    let b = body_with(
        &model(Some(1000)),
        &[msg(Role::User, "hi")],
        &[],
        ToolChoice::Auto,
        true,
    );
    assert_eq!(b["max_tokens"], 1000);
    // An empty system text is left out.
    let m = model(None);
    let b = build_request(&ModelRequest {
        target: m.target(),
        system: "",
        history: &[msg(Role::User, "hi")],
        tools: &[],
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        output: None,
    });
    assert!(b.get("system").is_none());
}

#[test]
fn history_alternates_with_results_and_notes_merged_into_the_next_user_turn() {
    let history = [
        msg(Role::User, "weather in Paris and Oslo?"),
        assistant_calling(
            "Checking.",
            &[
                ("c1", "get_weather", "{\"city\":\"Paris\"}"),
                ("c2", "get_weather", "{\"city\": Oslo"),
            ],
        ),
        result("c1", "18C"),
        result(
            "c2",
            "Error: invalid arguments: the arguments are not valid JSON",
        ),
        msg(Role::System, "The user is in a hurry."),
        msg(Role::User, "thanks"),
        msg(Role::Assistant, "You're welcome."),
    ];
    let b = body(&history);
    assert_eq!(
        b["messages"],
        json!([
            {"role":"user","content":[{"type":"text","text":"weather in Paris and Oslo?"}]},
            {"role":"assistant","content":[
                {"type":"text","text":"Checking."},
                {"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}},
                // Arguments that are not a JSON object go as an empty object.
                {"type":"tool_use","id":"c2","name":"get_weather","input":{}},
            ]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"c1","content":"18C"},
                {"type":"tool_result","tool_use_id":"c2",
                 "content":"Error: invalid arguments: the arguments are not valid JSON","is_error":true},
                {"type":"text","text":"<system>\nThe user is in a hurry.\n</system>"},
                {"type":"text","text":"thanks"},
            ]},
            {"role":"assistant","content":[{"type":"text","text":"You're welcome."}]},
        ])
    );
}

#[test]
fn roles_strictly_alternate_whatever_the_history() {
    let history = [
        msg(Role::User, "a"),
        msg(Role::Assistant, ""),
        msg(Role::User, "b"),
        msg(Role::System, " \n"),
        msg(Role::User, "c"),
        assistant_calling("", &[("c1", "t", "[1]")]),
        result("c1", ""),
        msg(Role::Assistant, "x"),
        msg(Role::Assistant, "\n"),
        msg(Role::Assistant, "y"),
    ];
    let b = body(&history);
    let messages = b["messages"].as_array().unwrap();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(
        messages[0]["content"],
        json!([{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}])
    );
    assert_eq!(
        messages[1]["content"],
        json!([{"type":"tool_use","id":"c1","name":"t","input":{}}])
    );
    // An empty result leaves `content` out rather than sending an empty text.
    assert_eq!(
        messages[2]["content"],
        json!([{"type":"tool_result","tool_use_id":"c1"}])
    );
    assert_eq!(
        messages[3]["content"],
        json!([{"type":"text","text":"x"},{"type":"text","text":"y"}])
    );
    for m in messages {
        assert!(!m["content"].as_array().unwrap().is_empty());
    }
}

#[test]
fn a_history_starting_with_the_model_gets_a_user_turn_first() {
    let b = body(&[
        msg(Role::Assistant, "Hello! How can I help?"),
        msg(Role::User, "hi"),
    ]);
    assert_eq!(
        b["messages"][0],
        json!({"role":"user","content":[{"type":"text","text":LEADING_USER_PLACEHOLDER}]})
    );
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert_eq!(b["messages"][2]["role"], "user");
    // An empty history still sends one user turn (the API rejects an empty list).
    let b = body(&[]);
    assert_eq!(b["messages"].as_array().unwrap().len(), 1);
    assert_eq!(b["messages"][0]["role"], "user");
}

#[test]
fn tool_result_media_become_image_and_document_blocks() {
    let mut r = result("c1", "chart:\n\n[image: image/png]");
    r.parts = vec![
        Content::text("chart:"),
        Content::Image {
            source: Source::base64("image/png", "iVBORw0KGgo="),
        },
        Content::Image {
            source: Source::url("image/jpeg", "https://example.com/a.jpg"),
        },
        Content::Document {
            source: Source::base64("application/pdf", "JVBERi0x"),
        },
        Content::Document {
            source: Source::url("application/pdf", "https://example.com/a.pdf"),
        },
        Content::Document {
            source: Source::base64("text/csv", "YSxiCjEsMg=="),
        },
        Content::Document {
            source: Source::base64("application/zip", "UEsDBA=="),
        },
    ];
    let history = [
        msg(Role::User, "plot it"),
        assistant_calling("", &[("c1", "t", "{}")]),
        r,
    ];
    let b = body(&history);
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"type":"tool_result","tool_use_id":"c1","content":[
            {"type":"text","text":"chart:"},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
            {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
            {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}},
            {"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"a,b\n1,2"}},
            {"type":"text","text":"[document: application/zip (this format cannot be shown to the model)]"},
        ]})
    );
}

#[test]
fn tool_choice_and_parallel_calls_map_onto_the_messages_api() {
    let m = model(None);
    let h = [msg(Role::User, "hi")];
    let tools = [tool("a"), tool("b")];
    let cases = [
        (ToolChoice::Auto, true, json!({"type":"auto"})),
        (
            ToolChoice::Auto,
            false,
            json!({"type":"auto","disable_parallel_tool_use":true}),
        ),
        (ToolChoice::Required, true, json!({"type":"any"})),
        (
            ToolChoice::Required,
            false,
            json!({"type":"any","disable_parallel_tool_use":true}),
        ),
        (ToolChoice::None, true, json!({"type":"none"})),
        (ToolChoice::None, false, json!({"type":"none"})),
    ];
    for (choice, parallel, expected) in cases {
        let b = body_with(&m, &h, &tools, choice, parallel);
        assert_eq!(b["tool_choice"], expected, "{choice:?} parallel={parallel}");
    }
    let b = body_with(&m, &h, &tools, ToolChoice::Auto, true);
    assert_eq!(
        b["tools"][0],
        json!({"name":"a","description":"a does things",
               "input_schema":{"type":"object","properties":{"x":{"type":"string"}}}})
    );
    assert_eq!(b["tools"].as_array().unwrap().len(), 2);
    // Without tools, no tool settings at all.
    let b = body_with(&m, &h, &[], ToolChoice::Required, false);
    assert!(b.get("tools").is_none());
    assert!(b.get("tool_choice").is_none());
}

#[test]
fn call_ids_from_other_providers_are_made_valid_on_both_sides() {
    let history = [
        msg(Role::User, "go"),
        assistant_calling("", &[("call:1.a", "t", "{}")]),
        result("call:1.a", "ok"),
    ];
    let b = body(&history);
    assert_eq!(b["messages"][1]["content"][0]["id"], "call_1_a");
    assert_eq!(b["messages"][2]["content"][0]["tool_use_id"], "call_1_a");
}
