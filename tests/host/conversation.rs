//! Whole conversations through the thread state machine, in virtual time, including a crash
//! at each step and failing models. The driver here is what the Durable Object does, minus I/O.

use crate::flow_host::{block_on, TestHost, WithThread};
use crate::sqlite::Sqlite;
use edgent::engine::store::{Order, ThreadStatus};
use edgent::engine::thread::{Action, ModelCall, Thread};
use edgent::llm::openai::OpenAiStream;
use edgent::llm::stream::{ProviderError, StreamEvent};
use edgent::values::message::{MessageStatus, Role};
use edgent::values::protocol::ServerFrame;

const T0: i64 = 1_795_300_162_000;
const MAX_STEPS: u32 = 10;

fn text_sse(text: &str) -> String {
    let mut s = String::new();
    for piece in text.as_bytes().chunks(4) {
        let piece = String::from_utf8_lossy(piece);
        s += &format!(
            "data: {}\n\n",
            serde_json::json!({"choices":[{"index":0,"delta":{"content":piece}}]})
        );
    }
    s + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
}

fn tool_sse(id: &str, name: &str) -> String {
    format!(
        "data: {}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n",
        serde_json::json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":id,"type":"function","function":{"name":name,"arguments":"{}"}}]}}]})
    )
}

fn frames(t: &mut Thread<'_>) -> Vec<ServerFrame> {
    std::iter::from_fn(|| t.poll_frame()).collect()
}

fn new_thread(db: &Sqlite) -> Thread<'_> {
    let mut t = Thread::open(db).unwrap();
    t.create(T0, "thread-1", "support", &[]).unwrap();
    t
}

/// Feeds raw SSE bytes as the model's reply and completes (or fails) the call.
fn answer(t: &mut Thread<'_>, now: i64, mut call: ModelCall, sse: &str) {
    let mut parser = OpenAiStream::new();
    let result = (|| {
        for chunk in sse.as_bytes().chunks(7) {
            for ev in parser.feed(chunk)? {
                t.on_model_event(&mut call, ev)?;
            }
        }
        for ev in parser.finish()? {
            t.on_model_event(&mut call, ev)?;
        }
        Ok::<_, ProviderError>(())
    })();
    match result {
        Ok(()) => t.finish_model_call(now, call).unwrap(),
        Err(e) => t.fail_model_call(now, call, &e).unwrap(),
    }
}

fn expect_model(t: &mut Thread<'_>, now: i64) -> ModelCall {
    match t.next_action(now, MAX_STEPS).unwrap() {
        Action::CallModel(c) => c,
        other => panic!("expected a model call, got {other:?}"),
    }
}

#[test]
fn a_text_turn_streams_chunks_and_stores_the_reply() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    let user = t.post_user_message(T0 + 1, "Hello?").unwrap();
    let f = frames(&mut t);
    assert!(matches!(&f[0], ServerFrame::Message { message } if message.id == user.id));
    assert!(matches!(&f[1], ServerFrame::Status { state, .. } if state == "running"));

    let call = expect_model(&mut t, T0 + 2);
    assert_eq!(call.history.len(), 1);
    assert_eq!(call.history[0].content, "Hello?");
    let reply_id = call.message_id.clone();
    frames(&mut t);
    answer(&mut t, T0 + 3, call, &text_sse("Hi there, human."));
    let f = frames(&mut t);
    let chunks: String = f
        .iter()
        .filter_map(|fr| match fr {
            ServerFrame::MessageChunk { message_id, delta } if *message_id == reply_id => {
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(chunks, "Hi there, human.");
    let chunk_frames = f
        .iter()
        .filter(|fr| matches!(fr, ServerFrame::MessageChunk { .. }))
        .count();
    assert_eq!(
        chunk_frames, 1,
        "text of one read goes out in one frame: {f:?}"
    );
    // The stored reply, then the turn's end: an answer that leaves nothing owed ends the turn
    // in its own step.
    let [.., stored, ended] = &f[..] else {
        panic!("frames: {f:?}")
    };
    assert!(
        matches!(stored, ServerFrame::Message { message } if message.status == MessageStatus::Completed && message.content == "Hi there, human.")
    );
    assert!(
        matches!(ended, ServerFrame::Status { state, turn: 1, .. } if state == "idle"),
        "{ended:?}"
    );

    assert!(matches!(
        t.next_action(T0 + 4, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let s = t.summary().unwrap();
    assert_eq!(
        (s.status, s.turn_count, s.message_count),
        (ThreadStatus::Idle, 1, 2)
    );
    assert!(
        frames(&mut t).is_empty(),
        "the next step finds the turn ended"
    );
}

#[test]
fn a_tool_call_round_trip_feeds_the_result_back() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "What time is it?").unwrap();
    let call = expect_model(&mut t, T0);
    answer(&mut t, T0, call, &tool_sse("call_1", "get_current_time"));

    let Action::RunTool(tc) = t.next_action(T0 + 5, MAX_STEPS).unwrap() else {
        panic!("expected a tool run")
    };
    assert_eq!(tc.call.name, "get_current_time");
    t.start_tool(T0 + 5, &tc, true).unwrap();
    host.set_now(T0 + 5);
    let flow = host.flow(&tc.call.id);
    let result = block_on(
        host.registry
            .get(&tc.call.name)
            .unwrap()
            .call(flow, &tc.call.arguments),
    );
    assert!(!result.is_error());
    let stored = t.finish_tool(T0 + 6, &tc, &result).unwrap();
    assert_eq!(stored.content, "2026-11-21T22:29:22.005Z");

    let call = expect_model(&mut t, T0 + 7);
    let roles: Vec<Role> = call.history.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    assert_eq!(call.history[2].tool_call_id.as_deref(), Some("call_1"));
    answer(&mut t, T0 + 8, call, &text_sse("It is 22:29 UTC."));
    assert!(matches!(
        t.next_action(T0 + 9, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    assert_eq!(t.summary().unwrap().message_count, 4);
}

#[test]
fn a_crash_mid_stream_retries_the_model_call_and_loses_nothing() {
    crate::install_app();
    let db = Sqlite::memory();
    {
        let mut t = new_thread(&db);
        t.post_user_message(T0, "Hello").unwrap();
        let mut call = expect_model(&mut t, T0);
        let mut p = OpenAiStream::new();
        for ev in p
            .feed(text_sse("partial answer").as_bytes())
            .unwrap()
            .into_iter()
            .take(2)
        {
            t.on_model_event(&mut call, ev).unwrap();
        }
        // The process dies here: `call` and `t` vanish, the pending message stays in SQLite.
    }
    let mut t = Thread::open(&db).unwrap();
    let call = expect_model(&mut t, T0 + 100);
    let f = frames(&mut t);
    assert!(f.iter().any(|fr| matches!(fr, ServerFrame::Message { message } if message.status == MessageStatus::Failed)));
    assert_eq!(
        call.history.len(),
        1,
        "the abandoned reply is not sent to the model"
    );
    answer(&mut t, T0 + 101, call, &text_sse("Hello again"));
    assert!(matches!(
        t.next_action(T0 + 102, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let page = t.messages(50, 0, Order::Asc, false).unwrap();
    let statuses: Vec<_> = page.messages.iter().map(|m| (m.role, m.status)).collect();
    assert_eq!(
        statuses,
        [
            (Role::User, MessageStatus::Completed),
            (Role::Assistant, MessageStatus::Failed),
            (Role::Assistant, MessageStatus::Completed)
        ]
    );
}

#[test]
fn a_crash_while_a_tool_runs_runs_it_again() {
    crate::install_app();
    let db = Sqlite::memory();
    {
        let mut t = new_thread(&db);
        t.post_user_message(T0, "time?").unwrap();
        let call = expect_model(&mut t, T0);
        answer(&mut t, T0, call, &tool_sse("call_9", "get_current_time"));
        let Action::RunTool(tc) = t.next_action(T0, MAX_STEPS).unwrap() else {
            panic!()
        };
        t.start_tool(T0, &tc, true).unwrap();
        // Crash before the result is stored.
    }
    let mut t = Thread::open(&db).unwrap();
    let Action::RunTool(tc) = t.next_action(T0 + 1, MAX_STEPS).unwrap() else {
        panic!("the interrupted call must run again")
    };
    assert_eq!(tc.call.id, "call_9");
    assert_eq!(tc.status, "running");
}

#[test]
fn a_failing_model_reports_an_error_and_the_thread_stays_usable() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0, "hi").unwrap();
    let call = expect_model(&mut t, T0);
    frames(&mut t);
    let err = ProviderError::Http {
        status: 500,
        message: "boom".into(),
        retry_after_ms: None,
    };
    t.fail_model_call(T0 + 1, call, &err).unwrap();
    let f = frames(&mut t);
    assert!(f.iter().any(|fr| matches!(fr, ServerFrame::Error { code, message, .. } if code == "model_http_error" && message.contains("boom"))));
    let s = t.summary().unwrap();
    assert_eq!(s.status, ThreadStatus::Idle);
    assert!(s.last_error.unwrap().contains("500"));

    // Truncated stream: same treatment.
    t.post_user_message(T0 + 2, "again").unwrap();
    let call = expect_model(&mut t, T0 + 2);
    answer(
        &mut t,
        T0 + 3,
        call,
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
    );
    assert!(frames(&mut t).iter().any(
        |fr| matches!(fr, ServerFrame::Error { code, .. } if code == "model_stream_truncated")
    ));

    // And the next message works.
    t.post_user_message(T0 + 4, "third time").unwrap();
    let call = expect_model(&mut t, T0 + 4);
    assert_eq!(
        call.history.iter().filter(|m| m.role == Role::User).count(),
        3
    );
    answer(&mut t, T0 + 5, call, &text_sse("ok"));
    assert!(matches!(
        t.next_action(T0 + 6, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    assert_eq!(t.summary().unwrap().turn_count, 1);
}

#[test]
fn a_model_that_loops_on_tools_is_cut_off_at_max_steps() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0, "loop").unwrap();
    let mut model_calls = 0;
    loop {
        match t.next_action(T0, 3).unwrap() {
            Action::CallModel(call) => {
                model_calls += 1;
                answer(
                    &mut t,
                    T0,
                    call,
                    &tool_sse(&format!("c{model_calls}"), "get_current_time"),
                );
            }
            Action::RunTool(tc) => {
                t.finish_tool(T0, &tc, &edgent::tool::CallToolResult::text("now"))
                    .unwrap();
            }
            Action::Idle => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(model_calls, 3);
    assert_eq!(
        t.summary().unwrap().steps,
        3,
        "steps counts model calls made, not refused"
    );
    assert!(frames(&mut t)
        .iter()
        .any(|f| matches!(f, ServerFrame::Error { code, .. } if code == "max_steps")));
    assert_eq!(t.summary().unwrap().status, ThreadStatus::Idle);
}

#[test]
fn a_stopped_thread_refuses_messages_and_does_no_work() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0, "hi").unwrap();
    t.stop(T0 + 1, "user").unwrap();
    assert!(matches!(
        t.next_action(T0 + 2, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    assert_eq!(
        t.post_user_message(T0 + 3, "more").unwrap_err(),
        edgent::engine::thread::ThreadError::Stopped
    );
    let s = t.summary().unwrap();
    assert_eq!(
        (s.status, s.stopped_by.as_deref()),
        (ThreadStatus::Stopped, Some("user"))
    );
}

#[test]
fn unknown_threads_and_double_creation() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = Thread::open(&db).unwrap();
    assert_eq!(
        t.summary().unwrap_err(),
        edgent::engine::thread::ThreadError::NotFound
    );
    assert!(matches!(
        t.next_action(T0, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    t.create(T0, "a", "support", &["x".into()]).unwrap();
    assert_eq!(
        t.create(T0, "a", "support", &[]).unwrap_err(),
        edgent::engine::thread::ThreadError::AlreadyExists
    );
}

#[test]
fn messages_posted_during_a_turn_are_answered_in_the_same_turn() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0, "first").unwrap();
    let call = expect_model(&mut t, T0);
    t.post_user_message(T0 + 1, "second, while streaming")
        .unwrap();
    answer(&mut t, T0 + 2, call, &text_sse("answer to first"));
    let call = expect_model(&mut t, T0 + 3);
    assert_eq!(
        call.history.last().unwrap().content,
        "second, while streaming"
    );
    answer(&mut t, T0 + 4, call, &text_sse("answer to second"));
    assert!(matches!(
        t.next_action(T0 + 5, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    assert_eq!(t.summary().unwrap().turn_count, 1);
}

#[test]
fn probing_an_object_without_a_thread_writes_nothing() {
    crate::install_app();
    let db = Sqlite::memory();
    assert_eq!(
        Thread::open_existing(&db).err(),
        Some(edgent::engine::thread::ThreadError::NotFound)
    );
    let tables =
        db.0.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap();
    assert_eq!(tables, 0);
    new_thread(&db);
    assert!(Thread::open_existing(&db).unwrap().summary().is_ok());
}

#[test]
fn a_stop_mid_stream_keeps_what_was_said_and_runs_nothing() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0, "tell me a story").unwrap();
    let mut call = expect_model(&mut t, T0);
    let mut p = OpenAiStream::new();
    for ev in p
        .feed(text_sse("Once upon a time").as_bytes())
        .unwrap()
        .into_iter()
        .take(2)
    {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.stop(T0 + 1, "user").unwrap();
    t.finish_model_call(T0 + 2, call).unwrap();
    let f = frames(&mut t);
    assert!(
        !f.iter().any(|fr| matches!(fr, ServerFrame::Error { .. })),
        "a stop is not an error"
    );
    let last = t
        .messages(1, 0, Order::Desc, false)
        .unwrap()
        .messages
        .remove(0);
    assert_eq!(
        (last.role, last.status, last.content.as_str()),
        (Role::Assistant, MessageStatus::Completed, "Once upo")
    );
    assert!(matches!(
        t.next_action(T0 + 3, MAX_STEPS).unwrap(),
        Action::Idle
    ));
}

#[test]
fn text_from_separate_reads_goes_out_in_separate_chunks() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = new_thread(&db);
    t.post_user_message(T0 + 1, "Hello?").unwrap();
    let mut call = expect_model(&mut t, T0 + 2);
    frames(&mut t);
    let mut sent = Vec::new();
    for read in ["Hi", " there,", " human."] {
        t.on_model_event(&mut call, StreamEvent::TextDelta(read.into()))
            .unwrap();
        // The driver drains the frames after each network read.
        sent.extend(frames(&mut t));
    }
    let deltas: Vec<String> = sent
        .into_iter()
        .filter_map(|fr| match fr {
            ServerFrame::MessageChunk { delta, .. } => Some(delta),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hi", " there,", " human."]);
}
