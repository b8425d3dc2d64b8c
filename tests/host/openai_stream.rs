//! Conformance of the OpenAI streaming parser on raw SSE bytes, split every way a network can.

use edgent::llm::openai::{build_request, OpenAiStream};
use edgent::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};

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
    use edgent::config::ToolSpec;
    use edgent::values::message::{Message, MessageStatus, Role, ToolCall};
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
        structured: None,
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
        parameters: serde_json::json!({"type":"object"}).into(),
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

// ---- the OpenAI body with a model row, and provider dispatch ----

mod provider {
    use edgent::config::{ModelConfig, Provider, ToolChoice, ToolSpec};
    use edgent::llm::openai::build_request_for;
    use edgent::llm::stream::{Completion, ProviderError};
    use edgent::llm::{
        auth_headers, build_request, endpoint, error_message, ModelRequest, StreamParser,
    };
    use edgent::values::message::{Message, Role};
    use serde_json::json;

    fn model(provider: &str, base_url: &str) -> ModelConfig {
        serde_json::from_value(json!({
            "name": "m", "provider": provider, "model": "the-model", "base_url": base_url,
        }))
        .unwrap()
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}).into(),
            returns: None,
        }]
    }

    fn request<'a>(
        model: &'a ModelConfig,
        history: &'a [Message],
        tools: &'a [ToolSpec],
        tool_choice: ToolChoice,
        parallel_tool_calls: bool,
    ) -> ModelRequest<'a> {
        ModelRequest {
            target: model.target(),
            system: "sys",
            history,
            tools,
            tool_choice,
            parallel_tool_calls,
            output: None,
            memo: None,
        }
    }

    #[test]
    fn openai_body_sends_tool_settings_only_with_tools_and_the_output_limit() {
        let mut m = model("openai", "https://api.openai.com/v1");
        let h = [Message::with_id("i".into(), Role::User, "hi", 0)];
        let t = tools();
        let b = build_request_for(&request(&m, &h, &t, ToolChoice::Required, false));
        assert_eq!(b["model"], "the-model");
        assert_eq!(b["tool_choice"], "required");
        assert_eq!(b["parallel_tool_calls"], false);
        assert!(b.get("max_tokens").is_none());
        for (choice, wire) in [(ToolChoice::Auto, "auto"), (ToolChoice::None, "none")] {
            let b = build_request_for(&request(&m, &h, &t, choice, true));
            assert_eq!(b["tool_choice"], wire);
            assert_eq!(b["parallel_tool_calls"], true);
        }
        m.max_output_tokens = Some(256);
        let b = build_request_for(&request(&m, &h, &[], ToolChoice::Required, false));
        assert_eq!(b["max_tokens"], 256);
        assert!(b.get("tool_choice").is_none());
        assert!(b.get("parallel_tool_calls").is_none());
        assert!(b.get("tools").is_none());
        // The rest is the same body the four-argument builder makes.
        let mut plain = edgent::llm::openai::build_request("the-model", "sys", &h, &[]);
        plain["max_tokens"] = json!(256);
        assert_eq!(b, plain);
    }

    #[test]
    fn dispatch_picks_each_wire_format() {
        let h = [Message::with_id("i".into(), Role::User, "hi", 0)];
        let openai = model("openai", "https://api.openai.com/v1/");
        let b = build_request(&request(&openai, &h, &[], ToolChoice::Auto, true));
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["messages"][0]["role"], "system");
        let anthropic = model("anthropic", "https://api.anthropic.com/v1");
        let b = build_request(&request(&anthropic, &h, &[], ToolChoice::Auto, true));
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], 4096);
        assert_eq!(b["messages"][0]["content"][0]["type"], "text");
        let workers = model("workers_ai", "");
        let b = build_request(&request(&workers, &h, &[], ToolChoice::Auto, true));
        assert_eq!(b["stream"], false);
        assert!(b.get("model").is_none());

        assert_eq!(
            endpoint(&openai.target()).as_deref(),
            Some("https://api.openai.com/v1/chat/completions")
        );
        assert_eq!(
            endpoint(&anthropic.target()).as_deref(),
            Some("https://api.anthropic.com/v1/messages")
        );
        assert_eq!(endpoint(&workers.target()), None);

        // Which parser each gets is checked by what it parses (the next test).
        assert!(StreamParser::new(Provider::OpenAi).is_some());
        assert!(StreamParser::new(Provider::Anthropic).is_some());
        assert!(StreamParser::new(Provider::WorkersAi).is_none());
    }

    #[test]
    fn stream_parser_runs_the_chosen_format() {
        let anthropic = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let openai = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        for (provider, body) in [(Provider::Anthropic, anthropic), (Provider::OpenAi, openai)] {
            let mut p = StreamParser::new(provider).unwrap();
            let mut c = Completion::default();
            for ev in p.feed(body.as_bytes()).unwrap() {
                c.apply(&ev).unwrap();
            }
            for ev in p.finish().unwrap() {
                c.apply(&ev).unwrap();
            }
            c.validate().unwrap();
            assert_eq!(c.text, "ok", "{provider:?}");
            // Each format's end marker means nothing to the other parser.
            let other = if provider == Provider::OpenAi {
                Provider::Anthropic
            } else {
                Provider::OpenAi
            };
            let mut q = StreamParser::new(other).unwrap();
            let fed = q.feed(body.as_bytes());
            assert!(
                fed.is_err() || q.finish() == Err(ProviderError::Truncated),
                "{other:?}"
            );
        }
    }

    #[test]
    fn auth_headers_carry_only_the_key_in_the_right_header() {
        let key = "sk-secret-123";
        let openai = auth_headers(model("openai", "https://x.test/v1").provider, key);
        assert_eq!(
            openai,
            [("authorization", format!("Bearer {key}"))].to_vec()
        );
        let anthropic = auth_headers(model("anthropic", "https://x.test/v1").provider, key);
        assert_eq!(
            anthropic,
            [
                ("x-api-key", key.to_owned()),
                ("anthropic-version", "2023-06-01".to_owned())
            ]
            .to_vec()
        );
        assert!(auth_headers(model("workers_ai", "").provider, key).is_empty());
        for (headers, expected) in [(openai, "authorization"), (anthropic, "x-api-key")] {
            let holding: Vec<_> = headers
                .iter()
                .filter(|(k, v)| k.contains(key) || v.contains(key))
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(holding, [expected], "{headers:?}");
        }
    }

    #[test]
    fn error_messages_are_read_from_either_format() {
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        for provider in [Provider::OpenAi, Provider::Anthropic, Provider::WorkersAi] {
            assert_eq!(
                error_message(provider, openai),
                "Incorrect API key provided"
            );
            assert_eq!(error_message(provider, anthropic), "Overloaded");
            assert_eq!(
                error_message(
                    provider,
                    r#"{"errors":[{"code":7000,"message":"No route for that URI"}],"success":false}"#
                ),
                "No route for that URI"
            );
            assert_eq!(
                error_message(provider, r#"{"error":"model not loaded"}"#),
                "model not loaded"
            );
            assert_eq!(error_message(provider, "  Bad Gateway \n"), "Bad Gateway");
            assert_eq!(error_message(provider, ""), "");
            let long = "x".repeat(5000);
            assert_eq!(error_message(provider, &long).len(), 300);
            // Multi-byte text is cut on a character boundary.
            let wide = "\u{e9}".repeat(1000);
            assert_eq!(error_message(provider, &wide).chars().count(), 300);
        }
        // An Anthropic error with an empty message still says what kind it was.
        assert_eq!(
            error_message(
                Provider::Anthropic,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":""}}"#
            ),
            "rate_limit_error"
        );
    }
}

/// Chunks of unusual shape, each fed alone to a new parser: what each gives (its events, or
/// its error). A field of an unexpected type is read as absent, not as an error; only text
/// that is not one JSON value fails the chunk. Pinned so that a faster reading of chunks
/// (a typed parse was tried on 2026-12-02) cannot change what a provider's odd chunk does.
const ODD_CHUNKS: &[(&str, &str)] = &[
    (
        r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
        r#"Ok([TextDelta("hi")])"#,
    ),
    (
        r#"{"choices":[{"delta":{"content":"a\"b\u00e9"}}]}"#,
        r#"Ok([TextDelta("a\"bé")])"#,
    ),
    (
        r#"{"choices":[{"delta":{"content":""},"finish_reason":null}]}"#,
        r#"Ok([])"#,
    ),
    (r#"{"choices":[{"delta":{"content":7}}]}"#, r#"Ok([])"#),
    (r#"{"choices":[{"delta":["hi"]}]}"#, r#"Ok([])"#),
    (r#"{"choices":[["x"]]}"#, r#"Ok([])"#),
    (
        r#"{"choices":[null,{"delta":{"content":"second"}}]}"#,
        r#"Ok([])"#,
    ),
    (
        r#"{"choices":[{"delta":{"content":"first"}},7]}"#,
        r#"Ok([TextDelta("first")])"#,
    ),
    (r#"{"choices":{"delta":{"content":"x"}}}"#, r#"Ok([])"#),
    (r#"{"choices":null,"usage":null}"#, r#"Ok([])"#),
    (
        r#"{"choices":[],"usage":{}}"#,
        r#"Ok([Usage { input_tokens: 0, output_tokens: 0 }])"#,
    ),
    (
        r#"{"usage":{"prompt_tokens":1.5,"completion_tokens":2}}"#,
        r#"Ok([Usage { input_tokens: 0, output_tokens: 2 }])"#,
    ),
    (
        r#"{"usage":{"prompt_tokens":-1,"completion_tokens":null}}"#,
        r#"Ok([Usage { input_tokens: 0, output_tokens: 0 }])"#,
    ),
    (r#"{"usage":[1,2]}"#, r#"Ok([])"#),
    (
        r#"{"error":null,"choices":[{"delta":{"content":"ok"}}]}"#,
        r#"Ok([TextDelta("ok")])"#,
    ),
    (
        r#"{"error":{"message":"over capacity"}}"#,
        r#"Err(Stream("over capacity"))"#,
    ),
    (
        r#"{"error":{"code":500}}"#,
        r#"Err(Stream("unknown error"))"#,
    ),
    (r#"{"error":"boom"}"#, r#"Err(Stream("unknown error"))"#),
    (r#"{"error":["boom"]}"#, r#"Err(Stream("unknown error"))"#),
    (
        r#"{"error":{"message":42}}"#,
        r#"Err(Stream("unknown error"))"#,
    ),
    (r#"[{"message":"boom"}]"#, r#"Ok([])"#),
    (r#""text""#, r#"Ok([])"#),
    (
        r#"{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}"#,
        r#"Ok([TextDelta("b")])"#,
    ),
    (
        r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}"#,
        r#"Ok([TextDelta("x"), Finish(Length)])"#,
    ),
    (
        r#"{"choices":[{"delta":{},"finish_reason":7}]}"#,
        r#"Ok([])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
        r#"Ok([ToolCallStart { index: 0, id: "c1", name: "f" }, ToolCallDelta { index: 0, arguments: "{\"a\"" }])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"name":"f"}}]}}]}"#,
        r#"Ok([ToolCallStart { index: 0, id: "", name: "f" }])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":[{"index":2.0,"id":"","function":{"name":null,"arguments":""}}]}}]}"#,
        r#"Ok([ToolCallStart { index: 0, id: "", name: "" }])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":[{"function":["f"]}]}}]}"#,
        r#"Ok([ToolCallStart { index: 0, id: "", name: "" }])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":{"index":0}}}]}"#,
        r#"Ok([])"#,
    ),
    (
        r#"{"choices":[{"delta":{"tool_calls":[7]}}]}"#,
        r#"Ok([ToolCallStart { index: 0, id: "", name: "" }])"#,
    ),
    (r#"{"created":1e999}"#, r#"MALFORMED"#),
    (
        r#"{"choices":[{"delta":{"content":"x"}}]} trailing"#,
        r#"MALFORMED"#,
    ),
];

#[test]
fn chunks_of_unusual_shape_give_the_events_they_always_gave() {
    for (chunk, expected) in ODD_CHUNKS {
        let mut s = OpenAiStream::new();
        let got = s.feed(format!("data: {chunk}\n\n").as_bytes());
        let got = match got {
            Err(ProviderError::Malformed(_)) => "MALFORMED".to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(&got, expected, "chunk {chunk}");
    }
}
