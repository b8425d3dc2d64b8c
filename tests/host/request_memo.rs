//! A request body written with a [`HistoryMemo`] is the body written without one, byte for
//! byte, in both formats that keep one (chat completions and Anthropic's Messages, whose
//! turns merge several stored messages), over a thread's calls: the history growing, its
//! front cut by the budget, a tool result with media (never kept), a new history version, a
//! message that changed under the same id (the fingerprint's guard), and one memo passed
//! from one format to the other (a fallback model). What it does not show: that the engine
//! hands a memo only to verbatim histories (`tests/host/history_cache.rs` does).

use edgent::llm::memo::{HistoryMemo, MemoUse};
use edgent::llm::{request_body, ModelRequest, Provider, Target, ToolChoice, ToolSpec};
use edgent::values::message::{Message, Role, ToolCall};
use edgent::values::tool_result::{Content, Source};
use serde_json::json;

/// The formats that keep a memo, and how each writes an image.
const FORMATS: [(Provider, &str); 2] = [
    (Provider::OpenAi, "image_url"),
    (Provider::Anthropic, r#""type":"image""#),
];

fn request<'a>(
    provider: Provider,
    history: &'a [Message],
    tools: &'a [ToolSpec],
    memo: Option<MemoUse<'a>>,
) -> ModelRequest<'a> {
    ModelRequest {
        target: Target {
            provider,
            model: "gpt-test",
            base_url: "http://127.0.0.1:9",
            max_output_tokens: Some(256),
        },
        system: "You help.",
        history,
        tools,
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        output: None,
        memo,
    }
}

/// The body in `provider`'s format written with `memo` at `version`.
fn memo_body(
    provider: Provider,
    history: &[Message],
    tools: &[ToolSpec],
    memo: &HistoryMemo,
    version: i64,
) -> String {
    request_body(&request(
        provider,
        history,
        tools,
        Some(MemoUse { memo, version }),
    ))
}

/// [`memo_body`], checked against the body without a memo.
fn same_body(
    provider: Provider,
    history: &[Message],
    tools: &[ToolSpec],
    memo: &HistoryMemo,
    version: i64,
) -> String {
    let fresh = request_body(&request(provider, history, tools, None));
    let kept = memo_body(provider, history, tools, memo, version);
    assert_eq!(kept, fresh, "{provider:?}");
    serde_json::from_str::<serde_json::Value>(&kept).expect("the body is JSON");
    kept
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "lookup".into(),
        arguments: r#"{"q":"a \"quoted\" ünï"}"#.into(),
    }
}

fn message(id: &str, role: Role, content: &str) -> Message {
    Message::with_id(id.into(), role, content, 0)
}

/// A turn of the thread: a user message, a reply calling a tool, its result, the answer.
fn turn(n: usize) -> Vec<Message> {
    let c = call(&format!("call_{n}"));
    let mut asking = message(&format!("a{n}"), Role::Assistant, "");
    asking.tool_calls = vec![c.clone()];
    let mut result = Message::tool_result(&c, format!("result {n}\n\t\u{1}"), 0);
    result.id = format!("r{n}");
    vec![
        message(
            &format!("u{n}"),
            Role::User,
            &format!("question {n} \"quoted\" 😀"),
        ),
        asking,
        result,
        message(&format!("b{n}"), Role::Assistant, &format!("answer {n}")),
    ]
}

#[test]
fn a_growing_history_is_written_as_without_a_memo() {
    let tools = [ToolSpec {
        name: "lookup".into(),
        description: "Looks things up.".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}).into(),
        returns: None,
    }];
    for (provider, _) in FORMATS {
        let memo = HistoryMemo::default();
        let mut history: Vec<Message> = Vec::new();
        for n in 0..6 {
            for m in turn(n) {
                history.push(m);
                same_body(provider, &history, &tools, &memo, 7);
                assert_eq!(memo.len(), history.len());
            }
        }
        // The budget cuts the front: the rest lines up with what was kept. (For Anthropic
        // the window starts with the model's message: a placeholder user turn goes first.)
        let window = &history[9..];
        same_body(provider, window, &tools, &memo, 7);
        assert_eq!(memo.len(), window.len());
        same_body(provider, &history[12..], &[], &memo, 7);
    }
}

#[test]
fn turns_that_merge_and_messages_left_out_are_written_as_without_a_memo() {
    // Anthropic's turns merge what chat completions sends apart: two results of one reply, a
    // system note after a user message; a blank user message is left out by both.
    let mut asking = message("a0", Role::Assistant, "Two lookups.");
    asking.tool_calls = vec![call("call_a"), call("call:b")];
    let mut results: Vec<Message> = asking
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = Message::tool_result(c, format!("Error: result {i}"), 0);
            r.id = format!("r{i}");
            r
        })
        .collect();
    let mut history = vec![
        message("s0", Role::System, "Be brief."),
        message("u0", Role::User, "  "),
        asking,
    ];
    history.append(&mut results);
    history.push(message("s1", Role::System, "The user is back."));
    history.push(message("u1", Role::User, "And now?"));
    history.push(message("b0", Role::Assistant, "Done."));
    for (provider, _) in FORMATS {
        let memo = HistoryMemo::default();
        for end in 1..=history.len() {
            same_body(provider, &history[..end], &[], &memo, 3);
            same_body(provider, &history[end - 1..end], &[], &memo, 3);
        }
    }
}

#[test]
fn one_memo_passed_between_formats_is_written_as_without_one() {
    // A fallback model of the other format answers a call: the memo starts over for it, and
    // again when the first format comes back.
    let memo = HistoryMemo::default();
    let mut history = Vec::new();
    for n in 0..4 {
        history.extend(turn(n));
        for (provider, _) in FORMATS {
            same_body(provider, &history, &[], &memo, 1);
            assert_eq!(memo.len(), history.len());
        }
    }
}

#[test]
fn a_result_with_media_is_written_each_time_and_the_rest_still_kept() {
    for (provider, image) in FORMATS {
        let memo = HistoryMemo::default();
        let mut history = turn(0);
        history[2].parts = vec![Content::Image {
            source: Source::base64("image/png", "iVBORw0KGgo="),
        }];
        history.extend(turn(1));
        let body = same_body(provider, &history, &[], &memo, 1);
        assert!(body.contains(image), "{body}");
        assert_eq!(memo.len(), history.len() - 1);
        history.extend(turn(2));
        same_body(provider, &history, &[], &memo, 1);
        assert_eq!(memo.len(), history.len() - 1);
    }
}

#[test]
fn a_message_changed_under_its_id_is_written_again() {
    for (provider, _) in FORMATS {
        let memo = HistoryMemo::default();
        let mut history = turn(0);
        same_body(provider, &history, &[], &memo, 1);
        // A rewrite moves the history version: nothing kept is used.
        history[0].content = "edited".into();
        let body = same_body(provider, &history, &[], &memo, 2);
        assert!(body.contains("edited"), "{body}");
        // A caller that (wrongly) kept the version: the fingerprint still sees the change.
        history[3].content = "a longer answer than before".into();
        let body = same_body(provider, &history, &[], &memo, 2);
        assert!(body.contains("a longer answer"), "{body}");
        history[1].tool_calls.push(call("call_extra"));
        same_body(provider, &history, &[], &memo, 2);
        assert_eq!(memo.len(), history.len());
    }
}

#[test]
fn what_a_memo_kept_is_copied_not_written_again() {
    for (provider, _) in FORMATS {
        let memo = HistoryMemo::default();
        let mut history = turn(0);
        same_body(provider, &history, &[], &memo, 1);
        // Same id, same lengths, same version: the caller promised the message is as stored,
        // so the memo's copy is sent. (This is why a memo is only for verbatim stored
        // messages.)
        history[3].content = "ANSWER 0".into();
        let kept = memo_body(provider, &history, &[], &memo, 1);
        assert!(
            kept.contains("answer 0") && !kept.contains("ANSWER 0"),
            "{kept}"
        );
    }
}
