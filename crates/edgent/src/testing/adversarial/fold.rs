//! The provider-neutral fold ([`Completion`]) and what the engine stores of it: any sequence
//! of stream events folds without a panic into a reply within the limits, and a stored reply's
//! tool calls have ids unique in the thread.

use std::collections::HashSet;

use super::input::Input;
use crate::engine::thread::Action;
use crate::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};
use crate::testing::TestHost;
use crate::tool::Registry;
use crate::values::limits::{MAX_REPLY_BYTES, MAX_TOOL_CALLS_PER_REPLY};

/// Ids a provider might send: empty, repeated in one reply, reused across replies.
const IDS: &[&str] = &["", "call_1", "call_2", "toolu_01", "call_1", "0"];
/// Tool names, including none and one no registry has.
const NAMES: &[&str] = &["", "get_weather", "lookup_customer", "no_such_tool"];
/// Finish reasons as providers spell them.
const REASONS: &[&str] = &[
    "stop",
    "end_turn",
    "tool_calls",
    "tool_use",
    "length",
    "max_tokens",
    "content_filter",
    "something_new",
];

/// Text of up to 32 bytes, repeated a few times or (one time in eight) up to 2^20 times (kept
/// under 1.5 MiB), so a few input bytes can reach the reply limit.
pub(super) fn text_piece(input: &mut Input<'_>) -> String {
    let text = input.text(32);
    let reps = if input.one_in(8) {
        1usize << input.below(21)
    } else {
        1 + input.below(4)
    };
    let cap = 1_500_000 / text.len().max(1);
    text.repeat(reps.min(cap).max(1))
}

/// A call index: mostly small, sometimes past the per-reply limit or far out of range.
pub(super) fn call_index(input: &mut Input<'_>) -> usize {
    match input.below(8) {
        6 => 100 + input.below(200),
        7 => usize::from(input.u16()),
        _ => input.below(4),
    }
}

/// One id from [`IDS`], or (one time in four) any short text.
pub(super) fn call_id(input: &mut Input<'_>) -> String {
    if input.one_in(4) {
        return input.text(12);
    }
    input.pick(IDS).unwrap_or_default().to_owned()
}

/// One name from [`NAMES`].
pub(super) fn call_name(input: &mut Input<'_>) -> String {
    input.pick(NAMES).unwrap_or_default().to_owned()
}

/// A finish reason as a provider spells it.
pub(super) fn reason(input: &mut Input<'_>) -> &'static str {
    input.pick(REASONS).unwrap_or("stop")
}

/// One stream event read from the input.
fn event(input: &mut Input<'_>) -> StreamEvent {
    match input.below(8) {
        0 | 1 => StreamEvent::TextDelta(text_piece(input)),
        2..=4 => StreamEvent::ToolCallStart {
            index: call_index(input),
            id: call_id(input),
            name: call_name(input),
        },
        5 | 6 => StreamEvent::ToolCallDelta {
            index: call_index(input),
            arguments: text_piece(input),
        },
        _ => match input.below(3) {
            0 => StreamEvent::Usage {
                input_tokens: input.u64(),
                output_tokens: input.u64(),
            },
            1 => StreamEvent::Finish(FinishReason::parse(reason(input))),
            _ => StreamEvent::Done,
        },
    }
}

/// Events until the input ends (at most 512), with now and then a burst of calls numbered
/// from 0 to around the per-reply limit.
fn events(input: &mut Input<'_>) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    while !input.is_empty() && out.len() < 512 {
        if input.one_in(32) {
            let id = call_id(input);
            for index in 0..MAX_TOOL_CALLS_PER_REPLY - 8 + input.below(16) {
                let name = "get_weather".to_owned();
                let id = format!("{id}{index}");
                out.push(StreamEvent::ToolCallStart { index, id, name });
            }
        } else {
            out.push(event(input));
        }
    }
    out
}

fn reply_bytes(c: &Completion) -> usize {
    c.text.len()
        + c.tool_calls
            .iter()
            .map(|t| t.arguments.len())
            .sum::<usize>()
}

/// Folds `events` as the engine does (stopping at the first error), checking after every
/// event that the reply is within [`MAX_TOOL_CALLS_PER_REPLY`] and [`MAX_REPLY_BYTES`], and
/// that an error is one the fold may give: a malformed stream or a reply too large (whose
/// calls are then dropped, so none runs).
pub(super) fn fold(
    events: impl IntoIterator<Item = StreamEvent>,
) -> (Completion, Option<ProviderError>) {
    let mut c = Completion::default();
    for ev in events {
        let applied = c.apply(&ev);
        assert!(
            c.tool_calls.len() <= MAX_TOOL_CALLS_PER_REPLY,
            "{} tool calls in one reply",
            c.tool_calls.len()
        );
        assert!(
            reply_bytes(&c) <= MAX_REPLY_BYTES,
            "a reply of {} bytes",
            reply_bytes(&c)
        );
        if let Err(e) = applied {
            match &e {
                ProviderError::TooLarge(_) => {
                    assert!(
                        c.tool_calls.is_empty(),
                        "the calls of a refused reply are kept"
                    )
                }
                ProviderError::Malformed(_) => {}
                other => panic!("the fold gave {other:?}"),
            }
            return (c, Some(e));
        }
    }
    (c, None)
}

/// [`Completion::validate`] on a folded reply: when it passes, every call has a name, an id
/// and argument text.
pub(super) fn check_validated(mut c: Completion) {
    if c.validate().is_ok() {
        for call in &c.tool_calls {
            assert!(!call.name.is_empty(), "a call without a name passed");
            assert!(!call.id.is_empty(), "a call without an id passed");
            assert!(
                !call.arguments.trim().is_empty(),
                "a call without arguments"
            );
        }
    }
}

/// Input: stream events, each read from a kind byte and its fields.
///
/// Any sequence folds without a panic; after every event the reply has at most
/// [`MAX_TOOL_CALLS_PER_REPLY`] calls and [`MAX_REPLY_BYTES`] of text and arguments; an error
/// is `Malformed` or `TooLarge` (which drops the calls); a reply that validates has a name, an
/// id and arguments for every call.
pub fn reply_fold(data: &[u8]) {
    let mut input = Input::new(data);
    let (c, error) = fold(events(&mut input));
    if error.is_none() {
        check_validated(c);
    }
}

/// Input: up to three replies' stream events (a length before each).
///
/// The engine stores whatever a model streams: each reply is fed to a model call of a real
/// thread (the test host, SQLite with the Durable Object's length limit) and finished or
/// failed as the runtime does, without an error; between replies the thread runs the calls
/// (to unknown tools: error results). Every tool call the thread holds has an id of its own
/// (providers repeat and reuse them), no stored reply has more than
/// [`MAX_TOOL_CALLS_PER_REPLY`] calls or more than [`MAX_REPLY_BYTES`], and every call the
/// thread ran has exactly one result.
pub fn stored_reply(data: &[u8]) {
    let mut input = Input::new(data);
    let registry = Registry::build(Vec::new()).unwrap_or_default();
    let host = TestHost::new(registry, 1_800_000_000_000).into_rc();
    #[allow(clippy::expect_used)] // a property body: a failure is a found defect
    host.thread()
        .post_user_message(host.now(), "hello")
        .expect("post a message");
    for _ in 0..3 {
        let Action::CallModel(mut call) = host.drive(0.5) else {
            break;
        };
        let bytes = input.bytes(4096);
        let events = events(&mut Input::new(bytes));
        let mut thread = host.thread();
        let mut failed = None;
        for ev in events {
            if let Err(e) = thread.on_model_event(&mut call, ev) {
                failed = Some(e);
                break;
            }
        }
        let stored = match &failed {
            None => thread.finish_model_call(host.now(), call),
            Some(e) => thread.fail_model_call(host.now(), call, e),
        };
        assert!(stored.is_ok(), "storing the reply failed: {stored:?}");
        host.keep_frames(&mut thread);
        check_thread(&host);
        host.advance(1_000);
    }
}

/// The stored thread's invariants (see [`stored_reply`]).
fn check_thread(host: &TestHost) {
    #[allow(clippy::expect_used)] // a property body: a failure is a found defect
    let history = host.store().model_history().expect("read the history");
    let mut ids = HashSet::new();
    let mut results: Vec<&str> = Vec::new();
    for m in &history {
        assert!(
            m.tool_calls.len() <= MAX_TOOL_CALLS_PER_REPLY,
            "a stored reply with {} calls",
            m.tool_calls.len()
        );
        let size = m.content.len()
            + m.tool_calls
                .iter()
                .map(|c| c.arguments.len())
                .sum::<usize>();
        assert!(size <= MAX_REPLY_BYTES, "a stored reply of {size} bytes");
        for c in &m.tool_calls {
            assert!(!c.id.is_empty(), "a stored call without an id");
            assert!(ids.insert(c.id.clone()), "call id {:?} stored twice", c.id);
        }
        if let Some(id) = m.tool_call_id.as_deref() {
            results.push(id);
        }
    }
    let mut seen = HashSet::new();
    for id in results {
        assert!(seen.insert(id), "call {id:?} has two results");
        assert!(
            ids.contains(id),
            "a result for call {id:?}, which was never made"
        );
    }
}
