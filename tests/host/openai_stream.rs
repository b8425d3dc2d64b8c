//! Conformance of the OpenAI streaming parser on raw SSE bytes, split every way a network can.

use edgent::core::openai::{build_request, OpenAiStream};
use edgent::core::stream::{Completion, FinishReason, ProviderError, StreamEvent};

/// Runs raw bytes through the full path (SSE → events → completion), in the given cuts.
fn run(chunks: &[&[u8]]) -> Result<Completion, ProviderError> {
    let mut s = OpenAiStream::new();
    let mut c = Completion::default();
    for chunk in chunks {
        for ev in s.feed(chunk)? {
            c.apply(&ev)?;
        }
    }
    for ev in s.finish()? {
        c.apply(&ev)?;
    }
    c.validate()?;
    Ok(c)
}

/// The same stream cut at every byte boundary must give the same completion.
fn every_split(body: &str) -> Result<Completion, ProviderError> {
    let whole = run(&[body.as_bytes()]);
    let b = body.as_bytes();
    for cut in 1..b.len() {
        assert_eq!(run(&[&b[..cut], &b[cut..]]), whole, "cut at byte {cut}");
    }
    whole
}

const TEXT: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo, w\u{f6}rld\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn text_stream_with_usage() {
    let c = every_split(TEXT).unwrap();
    assert_eq!(c.text, "Hello, w\u{f6}rld");
    assert_eq!(c.finish, Some(FinishReason::Stop));
    assert_eq!((c.input_tokens, c.output_tokens), (12, 3));
    assert!(c.tool_calls.is_empty());
}

#[test]
fn text_deltas_are_emitted_in_order() {
    let mut s = OpenAiStream::new();
    let evs = s.feed(TEXT.as_bytes()).unwrap();
    let texts: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo, w\u{f6}rld"]);
    assert_eq!(evs.last(), Some(&StreamEvent::Done));
}

#[test]
fn tool_call_deltas_join_by_index() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_current_time\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let c = every_split(body).unwrap();
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(c.tool_calls.len(), 2);
    assert_eq!(c.tool_calls[0].id, "call_a");
    assert_eq!(c.tool_calls[0].name, "get_weather");
    assert_eq!(c.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
    assert_eq!(c.tool_calls[1].name, "get_current_time");
    assert_eq!(
        c.tool_calls[1].arguments, "{}",
        "empty arguments become an empty object"
    );
}

#[test]
fn servers_that_reuse_index_zero_are_split_by_id() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"x1\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"n\\\":1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"x2\",\"function\":{\"name\":\"b\",\"arguments\":\"{\\\"n\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"2}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let c = run(&[body.as_bytes()]).unwrap();
    let got: Vec<_> = c
        .tool_calls
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
        .collect();
    assert_eq!(got, [("x1", "a", "{\"n\":1}"), ("x2", "b", "{\"n\":2}")]);
}

#[test]
fn calls_without_ids_get_generated_ids() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let c = run(&[body.as_bytes()]).unwrap();
    assert!(
        c.tool_calls[0].id.starts_with("call_"),
        "{:?}",
        c.tool_calls
    );
}

#[test]
fn missing_done_is_a_truncated_stream() {
    let cut = TEXT
        .find("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},")
        .unwrap();
    assert_eq!(
        run(&[&TEXT.as_bytes()[..cut]]),
        Err(ProviderError::Truncated)
    );
    // Cut in the middle of a frame, too.
    assert_eq!(
        run(&[&TEXT.as_bytes()[..cut + 20]]),
        Err(ProviderError::Truncated)
    );
}

#[test]
fn final_frame_without_blank_line_still_counts() {
    let body = TEXT.trim_end();
    assert_eq!(run(&[body.as_bytes()]).unwrap().text, "Hello, w\u{f6}rld");
}

#[test]
fn error_inside_the_stream() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n";
    assert_eq!(
        run(&[body.as_bytes()]),
        Err(ProviderError::Stream("overloaded".into()))
    );
    assert!(ProviderError::Stream("x".into()).is_retryable());
}

#[test]
fn malformed_chunks_are_errors_not_panics() {
    for body in ["data: {not json}\n\n", "data: [1,2,\n\n"] {
        assert!(
            matches!(run(&[body.as_bytes()]), Err(ProviderError::Malformed(_))),
            "{body}"
        );
    }
    // Comments and keep-alives are ignored.
    let body = format!(": keep-alive\n\n{TEXT}");
    assert_eq!(run(&[body.as_bytes()]).unwrap().text, "Hello, w\u{f6}rld");
}

#[test]
fn retry_classification() {
    let http = |status| ProviderError::Http {
        status,
        message: String::new(),
        retry_after_ms: None,
    };
    for s in [408, 409, 429, 500, 502, 503] {
        assert!(http(s).is_retryable(), "{s}");
    }
    for s in [400, 401, 403, 404, 422] {
        assert!(!http(s).is_retryable(), "{s}");
    }
}

#[test]
fn request_body_has_history_tools_and_streaming() {
    use edgent::core::config::ToolSpec;
    use edgent::core::message::{Message, MessageStatus, Role, ToolCall};
    let m = |role, content: &str| Message {
        id: "i".into(),
        role,
        content: content.into(),
        name: None,
        tool_calls: vec![],
        tool_call_id: None,
        created_at: 0,
        silent: false,
        depth: 0,
        status: MessageStatus::Completed,
        parts: vec![],
        side: None,
        parent_message_id: None,
        parent_tool_call_id: None,
    };
    let mut call = m(Role::Assistant, "");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "t".into(),
        arguments: "{}".into(),
    }];
    let mut result = m(Role::Tool, "42");
    result.tool_call_id = Some("c1".into());
    let tools = [ToolSpec {
        name: "t".into(),
        description: "d".into(),
        parameters: serde_json::json!({"type":"object"}),
        returns: None,
    }];
    let body = build_request(
        "gpt-x",
        "be brief",
        &[m(Role::User, "hi"), call, result],
        &tools,
    );
    assert_eq!(body["model"], "gpt-x");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role":"system","content":"be brief"})
    );
    assert_eq!(
        body["messages"][1],
        serde_json::json!({"role":"user","content":"hi"})
    );
    assert_eq!(body["messages"][2]["content"], serde_json::Value::Null);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        "t"
    );
    assert_eq!(
        body["messages"][3],
        serde_json::json!({"role":"tool","tool_call_id":"c1","content":"42"})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "t");
}
