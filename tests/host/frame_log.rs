//! The frame log behind resumable sockets (`edgent::engine::frame_log`), on real SQLite:
//! every broadcast frame is numbered and logged before it is sent; a replay after a seq is what
//! was sent after it (less what compaction replaced); the bound prunes the oldest frames and
//! remembers the floor, below which a resume is a reset; ephemeral events are neither numbered
//! nor logged; storage failures still send frames (without `seq`).
//!
//! What they do not prove: that the Worker sends the replay before any live frame (the
//! Durable Object's single thread and `accept_socket`; `tests/e2e/resume.test.mjs` does).

use serde_json::{json, Value};

use crate::flow_host::{TestHost, WithThread};
use crate::live_chunks::{chunk_of, pending_reply};
use edgent::api::ops::ThreadOp;
use edgent::engine::frame_log::{
    self, replay, with_seq, Replay, MAX_KEPT_FRAME_BYTES, RESERVE_FIRST,
};
use edgent::engine::thread::Action;
use edgent::llm::stream::StreamEvent;
use edgent::testing::reply_events;
use edgent::tool::{emit_ephemeral_event, emit_thread_event};
use edgent::values::limits::{FRAME_LOG_MAX_BYTES, FRAME_LOG_MAX_FRAMES};
use edgent::values::protocol::ServerFrame;
use edgent::values::sql::Sql;

const T0: i64 = 1_795_300_162_000;

fn seq_of(text: &str) -> Option<i64> {
    serde_json::from_str::<Value>(text).unwrap()["seq"].as_i64()
}

fn kind_of(text: &str) -> String {
    serde_json::from_str::<Value>(text).unwrap()["type"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn event(i: usize, data: Value) -> ServerFrame {
    ServerFrame::event(&format!("e{i}"), data, T0).unwrap()
}

fn rows(host: &TestHost) -> i64 {
    let rows = host.db.exec("SELECT COUNT(*) FROM frame_log", &[]).unwrap();
    rows[0].int(0).unwrap()
}

/// What the log holds after `after`, per the replay (panics on a reset).
fn replayed(host: &TestHost, after: i64) -> Vec<String> {
    let r = replay(&host.live_chunks, &host.db, Some(after)).unwrap();
    assert!(!r.reset, "no reset expected after {after}");
    r.frames
}

#[test]
fn a_turn_sends_every_frame_numbered_in_order_with_type_first_and_seq_last() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    host.script(Ok(reply_events("", &[("c1", "get_current_time", "{}")])));
    host.script(Ok(reply_events("It is noon.", &[])));
    let op = ThreadOp::from_rpc("send_message", &json!({ "content": "time?" })).unwrap();
    host.run(rt.apply(op)).unwrap();
    host.run_spawned();
    assert!(
        host.logged_errors().is_empty(),
        "{:?}",
        host.logged_errors()
    );
    let sent = host.take_sent();
    assert!(sent.len() >= 8, "a tool turn sends its frames: {sent:?}");
    let seqs: Vec<i64> = sent.iter().map(|t| seq_of(t).unwrap()).collect();
    // Seqs run 1, 2, 3…, except after a reply's pending message: the seqs reserved with it for
    // the reply's chunks, unused by a reply that arrived whole, are skipped.
    for (pair, texts) in seqs.windows(2).zip(sent.windows(2)) {
        let opens_a_reply = texts[0].contains(r#""role":"assistant""#)
            && texts[0].contains(r#""status":"pending""#);
        let step = if opens_a_reply { RESERVE_FIRST + 1 } else { 1 };
        assert_eq!(pair[1], pair[0] + step, "{seqs:?}\n{texts:#?}");
    }
    assert_eq!(seqs[0], 1);
    for (text, seq) in sent.iter().zip(&seqs) {
        assert!(text.starts_with(r#"{"type":""#), "{text}");
        assert!(text.ends_with(&format!(r#","seq":{seq}}}"#)), "{text}");
    }
    // The rows that reserved each reply's seqs are gone (a replay never meets them).
    let reservations = host
        .db
        .exec("SELECT COUNT(*) FROM frame_log WHERE bytes < 0", &[])
        .unwrap();
    assert_eq!(reservations[0].int(0).unwrap(), 0);
    // hello's seq: the newest one.
    let r = rt.replay(None).unwrap();
    assert_eq!(
        (r.newest, r.frames.len(), r.reset),
        (*seqs.last().unwrap(), 0, false)
    );
    // Resuming after the first frame: the log holds every later frame but what the settled
    // messages replaced (their chunks and pending frames), byte for byte as sent.
    let again = replayed(&host, seqs[0]);
    let mut expected = sent[1..].to_vec();
    expected.retain(|t| again.contains(t));
    assert_eq!(again, expected, "a replay is what was sent, in order");
    let dropped: Vec<String> = sent[1..]
        .iter()
        .filter(|t| !again.contains(t))
        .map(|t| kind_of(t))
        .collect();
    assert!(
        dropped
            .iter()
            .all(|k| k == "message" || k == "message_chunk"),
        "only replaced message frames are compacted: {dropped:?}"
    );
    assert!(dropped.iter().any(|k| k == "message_chunk"), "{dropped:?}");
    assert!(again.iter().all(|t| kind_of(t) != "message_chunk"));
}

#[test]
fn a_reply_cut_mid_stream_is_resumed_from_the_chunks_then_the_final_message() {
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "Hello?").unwrap();
    host.keep_frames(&mut t);
    drop(t);
    let Action::CallModel(mut call) = host.drive(0.5) else {
        panic!("the model is called")
    };
    let mut t = host.thread();
    let pieces = ["Hel", "lo, ", "wor", "ld!"];
    for piece in pieces {
        t.on_model_event(&mut call, StreamEvent::TextDelta(piece.into()))
            .unwrap();
        host.keep_frames(&mut t); // one flush per network read, as the runtime does
    }
    let before_cut = host.take_sent();
    let chunks: Vec<&String> = before_cut
        .iter()
        .filter(|t| kind_of(t) == "message_chunk")
        .collect();
    assert_eq!(chunks.len(), 4);
    // The socket saw up to the second chunk, then was cut.
    let last_seen = seq_of(chunks[1]).unwrap();
    let seen_text: String = chunks[..2]
        .iter()
        .map(|t| {
            serde_json::from_str::<Value>(t).unwrap()["delta"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    // While the reply streams, a replay is exactly what was sent after the cut.
    let sent_after: Vec<String> = before_cut
        .iter()
        .filter(|t| seq_of(t).unwrap() > last_seen)
        .cloned()
        .collect();
    assert_eq!(replayed(&host, last_seen), sent_after);

    for ev in [
        StreamEvent::Finish(edgent::llm::stream::FinishReason::Stop),
        StreamEvent::Done,
    ] {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.finish_model_call(T0 + 5, call).unwrap();
    host.keep_frames(&mut t);
    // Settled: the chunks and the pending frame are replaced by the final message; a client
    // that had "Hello, " gets the whole reply.
    let again = replayed(&host, last_seen);
    assert!(
        again.iter().all(|t| kind_of(t) != "message_chunk"),
        "{again:?}"
    );
    let finals: Vec<Value> = again
        .iter()
        .map(|t| serde_json::from_str::<Value>(t).unwrap())
        .filter(|v| v["type"] == "message")
        .collect();
    assert_eq!(finals.len(), 1, "{again:?}");
    assert_eq!(finals[0]["message"]["content"], "Hello, world!");
    assert_eq!(finals[0]["message"]["status"], "completed");
    assert_eq!(seen_text, "Hello, ");
    let stored = host
        .store()
        .message(finals[0]["message"]["id"].as_str().unwrap());
    assert_eq!(stored.unwrap().unwrap().content, "Hello, world!");
}

#[test]
fn the_bound_prunes_the_oldest_frames_and_a_resume_below_the_floor_is_a_reset() {
    let host = TestHost::with_thread(T0);
    let frames: Vec<ServerFrame> = (0..2_304).map(|i| event(i, json!(i))).collect();
    for batch in frames.chunks(64) {
        let out = frame_log::append(&host.live_chunks, &host.db, batch);
        assert!(out.error.is_none(), "{:?}", out.error);
    }
    // Checked with every 256th frame logged, the last flush's included: the newest 2,000 stay.
    assert_eq!(rows(&host), FRAME_LOG_MAX_FRAMES);
    let floor = 2_304 - FRAME_LOG_MAX_FRAMES;
    let (newest, found_floor) = frame_log::newest_and_floor(&host.db).unwrap();
    assert_eq!((newest, found_floor), (2_304, floor));
    let reset = replay(&host.live_chunks, &host.db, Some(floor - 1)).unwrap();
    assert_eq!(
        reset,
        Replay {
            newest: 2_304,
            frames: Vec::new(),
            reset: true
        }
    );
    assert!(replay(&host.live_chunks, &host.db, Some(0)).unwrap().reset);
    let all = replayed(&host, floor);
    assert_eq!(all.len() as i64, FRAME_LOG_MAX_FRAMES);
    assert_eq!(seq_of(&all[0]), Some(floor + 1));
    // At or past the newest: nothing, and no reset.
    assert!(replayed(&host, 2_304).is_empty());
    assert!(replayed(&host, 1_000_000).is_empty());
    // Between checks the log grows past the bound by less than 256 frames, then is cut again.
    for i in 0..255 {
        frame_log::append(&host.live_chunks, &host.db, &[event(i, json!(i))]);
    }
    assert_eq!(rows(&host), FRAME_LOG_MAX_FRAMES + 255);
    frame_log::append(&host.live_chunks, &host.db, &[event(0, json!(0))]);
    assert_eq!(rows(&host), FRAME_LOG_MAX_FRAMES);
    assert_eq!(frame_log::newest_and_floor(&host.db).unwrap(), (2_560, 560));
}

#[test]
fn the_byte_bound_prunes_large_frames_and_the_floor_never_falls() {
    let host = TestHost::with_thread(T0);
    let big = "x".repeat(40 * 1024);
    for i in 0..200 {
        frame_log::append(&host.live_chunks, &host.db, &[event(i, json!(big))]);
        let bytes = host
            .db
            .exec("SELECT COALESCE(SUM(bytes), 0) FROM frame_log", &[])
            .unwrap()[0]
            .int(0)
            .unwrap();
        // Each frame is over the 16 KiB that makes a flush check the bound.
        assert!(bytes <= FRAME_LOG_MAX_BYTES, "{bytes} bytes after {i}");
    }
    let (newest, floor) = frame_log::newest_and_floor(&host.db).unwrap();
    assert_eq!(newest, 200);
    assert!(
        floor > 90 && floor < 110,
        "about 100 frames of 40 KiB fit: floor {floor}"
    );
    assert!(
        replay(&host.live_chunks, &host.db, Some(floor - 1))
            .unwrap()
            .reset
    );
    assert_eq!(replayed(&host, floor).len() as i64, newest - floor);
}

#[test]
fn a_frame_too_large_to_keep_is_sent_numbered_and_a_replay_over_it_is_a_reset() {
    let host = TestHost::with_thread(T0);
    let huge = "y".repeat(MAX_KEPT_FRAME_BYTES);
    let out = frame_log::append(
        &host.live_chunks,
        &host.db,
        &[
            event(1, json!("small")),
            event(2, json!(huge)),
            event(3, json!(3)),
        ],
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    let seqs: Vec<Option<i64>> = out.texts.iter().map(|t| seq_of(t)).collect();
    assert_eq!(seqs, [Some(1), Some(2), Some(3)]);
    assert!(out.texts[1].len() > MAX_KEPT_FRAME_BYTES);
    assert!(replay(&host.live_chunks, &host.db, Some(1)).unwrap().reset);
    assert_eq!(replayed(&host, 2), [out.texts[2].clone()]);
}

#[test]
fn one_flush_is_one_insert_per_24_frames_within_the_bound_parameter_limit() {
    let host = TestHost::with_thread(T0);
    // The Durable Object binds at most 100 parameters per statement.
    host.db
        .0
        .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 100);
    let frames: Vec<ServerFrame> = (0..60).map(|i| event(i, json!(i))).collect();
    host.db.record();
    let out = frame_log::append(&host.live_chunks, &host.db, &frames);
    let statements = host.db.recorded();
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(statements.len(), 3, "{statements:?}");
    assert!(statements
        .iter()
        .all(|s| s.starts_with("INSERT INTO frame_log")));
    let seqs: Vec<i64> = out.texts.iter().map(|t| seq_of(t).unwrap()).collect();
    assert_eq!(seqs, (1..=60).collect::<Vec<_>>());
    // Each text is its own frame, in the order given.
    for (i, text) in out.texts.iter().enumerate() {
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap()["event"],
            format!("e{i}")
        );
    }
    // No prune check until a multiple of 256 is crossed: one statement per flush.
    host.db.record();
    frame_log::append(&host.live_chunks, &host.db, &[event(0, json!(0))]);
    assert_eq!(host.db.recorded().len(), 1);

    // 50 frames, the last a reply's pending message: 24, 24 and 2 frames per insert (25 and 25
    // would bind 101 parameters in the last, which also reserves the reply's seqs), and the
    // reply's first chunk needs no statement.
    let mut frames: Vec<ServerFrame> = (0..49).map(|i| event(i, json!(i))).collect();
    frames.push(pending_reply("m1"));
    host.db.record();
    let out = frame_log::append(&host.live_chunks, &host.db, &frames);
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(host.db.recorded().len(), 3);
    let last = seq_of(out.texts.last().unwrap()).unwrap();
    assert_eq!(last, 61 + 50);
    host.db.record();
    let out = frame_log::append(&host.live_chunks, &host.db, &[chunk_of("m1", "Hel")]);
    assert_eq!(host.db.recorded(), Vec::<String>::new());
    assert_eq!(seq_of(&out.texts[0]), Some(last + 1));
}

#[test]
fn ephemeral_events_are_sent_unnumbered_and_never_replayed() {
    let host = TestHost::with_thread(T0);
    let flow = host.flow("call-1");
    emit_thread_event(&flow, "kept", json!({ "n": 1 })).unwrap();
    emit_ephemeral_event(&flow, "typing", json!({ "n": 2 })).unwrap();
    flow.stream
        .emit_ephemeral("progress", &json!({ "n": 3 }))
        .unwrap();
    let sent = host.take_sent();
    assert_eq!(sent.len(), 3);
    assert_eq!(seq_of(&sent[0]), Some(1));
    assert_eq!((seq_of(&sent[1]), seq_of(&sent[2])), (None, None));
    assert!(sent[1].contains(r#""event":"typing""#));
    assert_eq!(rows(&host), 1);
    assert_eq!(replayed(&host, 0), [sent[0].clone()]);
    // A bad event type is refused either way.
    assert!(emit_ephemeral_event(&flow, "", json!(null)).is_err());
}

#[test]
fn frames_that_cannot_be_logged_are_still_sent_without_seq() {
    let host = TestHost::with_thread(T0);
    frame_log::append(&host.live_chunks, &host.db, &[event(0, json!(0))]);
    host.db.exec("DROP TABLE frame_log", &[]).unwrap();
    let out = frame_log::append(
        &host.live_chunks,
        &host.db,
        &[event(1, json!(1)), event(2, json!(2))],
    );
    assert!(out.error.is_some());
    assert_eq!(out.texts.len(), 2);
    assert!(out.texts.iter().all(|t| seq_of(t).is_none()));
    assert!(out.texts[0].contains(r#""event":"e1""#));
    // Through the runtime, the failure is logged for the operator and the frames still go out.
    let rt = host.runtime();
    let op = ThreadOp::from_rpc("stop", &json!({})).unwrap();
    host.run(rt.apply(op)).unwrap();
    assert!(host
        .logged_errors()
        .iter()
        .any(|e| e.contains("frames sent without seq")));
    assert!(host.take_sent().iter().any(|t| kind_of(t) == "status"));
    assert!(
        rt.replay(Some(0)).is_err(),
        "a log that cannot be read is a 500"
    );
}

#[test]
fn seq_goes_last_in_the_object() {
    assert_eq!(
        with_seq(r#"{"type":"pong"}"#.into(), 3),
        r#"{"type":"pong","seq":3}"#
    );
    assert_eq!(with_seq("{}".into(), 1), r#"{"seq":1}"#);
}

#[test]
fn an_answer_starts_at_the_first_running_status_since_the_thread_was_last_idle() {
    let host = TestHost::with_thread(T0);
    let status = |state: &str| ServerFrame::Status {
        state: state.into(),
        turn: 0,
        side: "a".into(),
    };
    assert_eq!(frame_log::answer_start(&host.db).unwrap(), None);
    let frames = [
        status("running"), // 1: the first answer
        event(0, json!(0)),
        status("idle"),    // 3
        status("running"), // 4: the answer in progress starts here
        event(1, json!(1)),
        status("running"), // 6: a message sent mid-answer says `running` again
        event(2, json!(2)),
    ];
    assert!(frame_log::append(&host.live_chunks, &host.db, &frames)
        .error
        .is_none());
    assert_eq!(frame_log::answer_start(&host.db).unwrap(), Some(4));
}

#[test]
fn a_calls_output_parts_are_numbered_logged_and_bounded() {
    let host = TestHost::with_thread(T0);
    let flow = host.flow("call-7");
    flow.output().text("Working").unwrap();
    flow.output()
        .data("progress", &json!({ "done": 1 }))
        .unwrap();
    let sent = host.take_sent();
    let parts: Vec<Value> = sent
        .iter()
        .map(|t| serde_json::from_str::<Value>(t).unwrap())
        .collect();
    assert_eq!(parts[0]["event"], "tool-output");
    assert_eq!(parts[0]["data"]["part"], 0);
    assert_eq!(parts[0]["data"]["text"], "Working");
    assert_eq!(parts[0]["data"]["tool_call_id"], "call-7");
    assert_eq!(parts[1]["data"]["part"], 1);
    assert_eq!(parts[1]["data"]["kind"], "progress");
    assert_eq!(parts[1]["data"]["data"]["done"], 1);
    assert_eq!((seq_of(&sent[0]), seq_of(&sent[1])), (Some(1), Some(2)));
    assert_eq!(
        replayed(&host, 0).len(),
        2,
        "logged for a socket that resumes"
    );
    // Too large, or a kind out of bounds: refused, nothing sent, the numbering unchanged.
    let big = "x".repeat(edgent::tool::MAX_PART_BYTES);
    assert!(flow.output().text(&big).is_err());
    assert!(flow.output().data("", &1).is_err());
    assert!(host.take_sent().is_empty());
    flow.output().text("done").unwrap();
    let last: Value = serde_json::from_str(&host.take_sent()[0]).unwrap();
    assert_eq!(last["data"]["part"], 2);
}
