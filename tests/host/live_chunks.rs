//! The chunks of a reply still streaming (`edgent::engine::frame_log::LiveChunks`), on real
//! SQLite: a flush of chunks alone takes its seqs from a reserved block and stays in the
//! object's memory, so a streamed reply costs no statement per chunk (and its first block, reserved
//! with its pending message, none at all); a socket resuming in the
//! same instance gets them merged in seq order with the logged frames; a restart loses them
//! without ever reusing their seqs; the memory bound turns a resume from before dropped chunks
//! into a reset; pruning is checked per 256 frames logged, whatever gaps the reserved seqs leave.

use std::rc::Rc;

use serde_json::{json, Value};

use crate::flow_host::WithThread;
use edgent::engine::frame_log::{self, Replay, LIVE_CHUNKS_MAX_BYTES, PRUNE_EVERY};
use edgent::engine::thread::{Action, ModelCall};
use edgent::llm::stream::{FinishReason, StreamEvent};
use edgent::runtime::CHUNK_WINDOW_MS;
use edgent::testing::{reply_events, TestHost};
use edgent::tool::emit_thread_event;
use edgent::values::message::{Message, MessageStatus, Role};
use edgent::values::protocol::ServerFrame;
use edgent::values::sql::Sql;

const T0: i64 = 1_795_300_162_000;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn seq_of(text: &str) -> i64 {
    parse(text)["seq"].as_i64().unwrap()
}

fn kind_of(text: &str) -> String {
    parse(text)["type"].as_str().unwrap().to_owned()
}

fn chunk_rows(host: &TestHost) -> i64 {
    let rows = host
        .db
        .exec(
            "SELECT COUNT(*) FROM frame_log WHERE body LIKE '{\"type\":\"message_chunk\"%'",
            &[],
        )
        .unwrap();
    rows[0].int(0).unwrap()
}

fn event(name: &str) -> ServerFrame {
    ServerFrame::event(name, json!(null), T0).unwrap()
}

fn replay(host: &TestHost, after: i64) -> Replay {
    frame_log::replay(&host.live_chunks, &host.db, Some(after)).unwrap()
}

/// A thread whose user message is stored and whose model call has started (its pending
/// message frame logged), the way the runtime gets there.
fn streaming(host: &Rc<TestHost>) -> ModelCall {
    let mut t = host.thread();
    t.post_user_message(T0, "Hello?").unwrap();
    host.keep_frames(&mut t);
    drop(t);
    let Action::CallModel(call) = host.drive(0.5) else {
        panic!("the model is called")
    };
    call
}

/// Streams `pieces` into `call`, one flush per piece (one network read each).
fn stream(host: &Rc<TestHost>, call: &mut ModelCall, pieces: &[&str]) {
    let mut t = host.thread();
    for piece in pieces {
        t.on_model_event(call, StreamEvent::TextDelta((*piece).into()))
            .unwrap();
        host.keep_frames(&mut t);
    }
}

fn finish(host: &Rc<TestHost>, mut call: ModelCall) {
    let mut t = host.thread();
    for ev in [StreamEvent::Finish(FinishReason::Stop), StreamEvent::Done] {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.finish_model_call(T0 + 5, call).unwrap();
    host.keep_frames(&mut t);
}

#[test]
fn a_streamed_reply_costs_no_statement_per_chunk_and_its_first_block_none_at_all() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    let turn = |events: Vec<StreamEvent>| {
        // Each turn starts with the last one's watchdog run out, so that none of them
        // re-arms it midway (when it does depends on how far the clock moved, which the
        // thread index's background writes move too).
        while host.fire_alarm(&rt).is_some() {}
        // One read per piece, each past the chunk window: one flush per piece.
        host.script_paced(events, CHUNK_WINDOW_MS);
        crate::statements::statements_of_turn(&host, &rt)
    };
    turn(reply_events("warm-up", &[])); // an instance's first turn has one-time costs
    let one = turn(reply_events("Noon.", &[]));
    host.take_sent();
    // A reply streamed as `pieces`, one text delta each.
    let streamed = |pieces: &[String]| -> Vec<StreamEvent> {
        let deltas = pieces.iter().map(|p| StreamEvent::TextDelta(p.clone()));
        deltas
            .chain([StreamEvent::Finish(FinishReason::Stop), StreamEvent::Done])
            .collect()
    };
    let pieces: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let forty = turn(streamed(&pieces));
    let pieces_100: Vec<String> = (0..100).map(|i| format!("x{i} ")).collect();
    host.take_sent();
    let hundred = turn(streamed(&pieces_100));
    let counted = |s: &[String], prefix: &str| s.iter().filter(|q| q.starts_with(prefix)).count();
    // The reply's first block (64 seqs) is reserved by the insert of its pending message, so
    // up to 64 flushes of chunks cost no statement: one chunk and 40 cost what a reply that
    // arrives whole costs. 100 chunks: one `UPDATE` for the next block (128 seqs).
    assert_eq!(counted(&one, "UPDATE sqlite_sequence"), 0, "{one:#?}");
    assert_eq!(counted(&forty, "UPDATE sqlite_sequence"), 0, "{forty:#?}");
    assert_eq!(
        counted(&hundred, "UPDATE sqlite_sequence"),
        1,
        "{hundred:#?}"
    );
    assert_eq!(
        counted(&forty, "INSERT INTO frame_log"),
        counted(&one, "INSERT INTO frame_log"),
        "{forty:#?}\n{one:#?}"
    );
    assert_eq!(forty.len(), one.len(), "{forty:#?}\n{one:#?}");
    assert_eq!(hundred.len(), one.len() + 1, "{hundred:#?}\n{one:#?}");
    assert!(one.len() <= 10, "{one:#?}");

    let sent = host.take_sent();
    let seqs: Vec<i64> = sent.iter().map(|t| seq_of(t)).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let chunks: Vec<String> = sent
        .iter()
        .filter(|t| kind_of(t) == "message_chunk")
        .map(|t| parse(t)["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        chunks.concat(),
        pieces_100.concat(),
        "every piece was sent, in order"
    );
    // The first chunk is numbered right after its pending message (the statement counts above
    // show its block came with that message, not with a write of its own).
    let pending = sent
        .iter()
        .position(|t| kind_of(t) == "message" && parse(t)["message"]["status"] == "pending")
        .expect("the pending reply was sent");
    assert_eq!(kind_of(&sent[pending + 1]), "message_chunk");
    assert_eq!(seq_of(&sent[pending + 1]), seq_of(&sent[pending]) + 1);
    // Settled: nothing of the reply's chunks is stored, in the log or in memory.
    assert_eq!(chunk_rows(&host), 0);
    let last = parse(sent.last().unwrap());
    assert_eq!(last["type"], "status");
    let r = replay(&host, seqs[0]);
    assert!(r.frames.iter().all(|t| kind_of(t) != "message_chunk"));
    assert_eq!(r.newest, *seqs.last().unwrap());
}

#[test]
fn a_socket_resuming_mid_stream_gets_kept_chunks_and_logged_frames_in_seq_order() {
    let host = TestHost::with_thread(T0);
    let mut call = streaming(&host);
    stream(&host, &mut call, &["Hel", "lo, "]);
    // A tool's event between two chunks is logged; the chunk after it needs a greater seq.
    emit_thread_event(&host.flow("call-1"), "tick", json!(null)).unwrap();
    stream(&host, &mut call, &["wor", "ld!"]);
    let sent = host.take_sent();
    let seqs: Vec<i64> = sent.iter().map(|t| seq_of(t)).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(chunk_rows(&host), 0, "chunks flushed alone are not logged");

    let first_chunk = sent
        .iter()
        .position(|t| kind_of(t) == "message_chunk")
        .unwrap();
    for cut in first_chunk..sent.len() {
        let after = seq_of(&sent[cut]);
        let expected: Vec<String> = sent[cut + 1..].to_vec();
        let r = replay(&host, after);
        assert!(!r.reset);
        assert_eq!(r.frames, expected, "resumed after {after}");
        assert_eq!(r.newest, *seqs.last().unwrap());
    }
    finish(&host, call);
    let r = replay(&host, seq_of(&sent[first_chunk]));
    let kinds: Vec<String> = r.frames.iter().map(|t| kind_of(t)).collect();
    assert!(!kinds.contains(&"message_chunk".to_owned()), "{kinds:?}");
    let finals: Vec<Value> = r
        .frames
        .iter()
        .map(|t| parse(t))
        .filter(|f| f["type"] == "message")
        .collect();
    assert_eq!(
        finals.last().unwrap()["message"]["content"],
        "Hello, world!"
    );
}

#[test]
fn a_restart_mid_stream_loses_the_kept_chunks_but_never_reuses_their_seqs() {
    let host = TestHost::with_thread(T0);
    let mut call = streaming(&host);
    stream(&host, &mut call, &["Hel", "lo"]);
    let sent = host.take_sent();
    let before_chunks = seq_of(&sent[sent.len() - 3]);
    let last_chunk = seq_of(sent.last().unwrap());
    assert_eq!(kind_of(sent.last().unwrap()), "message_chunk");
    drop(call);

    let registry = crate::registry().unwrap();
    let host = host.restarted(registry);
    // The chunks were in the old instance's memory: a resume from before them gets nothing
    // (no frame was logged after them), and `hello`'s seq still covers the chunks seen, so a
    // socket that saw them is not told about a seq below what it holds.
    let r = replay(&host, before_chunks);
    assert!(!r.reset);
    assert_eq!(r.frames, Vec::<String>::new(), "the chunks are gone");
    assert!(
        r.newest >= last_chunk,
        "hello's seq {} < {last_chunk}",
        r.newest
    );
    // Whatever the new instance sends comes after every seq the old one sent.
    emit_thread_event(&host.flow("call-1"), "after", json!(null)).unwrap();
    let mut call = match host.drive(0.5) {
        Action::CallModel(call) => call,
        other => panic!("the reply is asked again after the restart: {other:?}"),
    };
    stream(&host, &mut call, &["Hi"]);
    let sent = host.take_sent();
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|t| seq_of(t) > last_chunk),
        "seqs after the restart: {:?}, the old instance's last: {last_chunk}",
        sent.iter().map(|t| seq_of(t)).collect::<Vec<_>>()
    );
    // A socket that saw the lost chunk resumes from it: it gets what came after.
    let r = replay(&host, last_chunk);
    assert_eq!(r.frames, sent);
}

#[test]
fn chunks_past_the_memory_bound_make_a_resume_from_before_them_a_reset_until_settled() {
    let host = TestHost::with_thread(T0);
    let mut call = streaming(&host);
    // Small pieces (as a model streams them): the frames' JSON outweighs the text, so the
    // frames pass the bound long before the reply passes its own limit.
    let piece = "y".repeat(20);
    let pieces: Vec<&str> = (0..LIVE_CHUNKS_MAX_BYTES / 100)
        .map(|_| piece.as_str())
        .collect();
    stream(&host, &mut call, &pieces);
    let sent = host.take_sent();
    let chunks: Vec<i64> = sent
        .iter()
        .filter(|t| kind_of(t) == "message_chunk")
        .map(|t| seq_of(t))
        .collect();
    assert_eq!(chunks.len(), pieces.len());
    assert!(
        replay(&host, chunks[0] - 1).reset,
        "the first chunk is gone"
    );
    let late = replay(&host, chunks[chunks.len() - 2]);
    assert!(!late.reset);
    assert_eq!(late.frames, [sent.last().unwrap().clone()]);
    // Once the message settles, its final frame replaces every chunk: no reset needed.
    finish(&host, call);
    let r = replay(&host, chunks[0] - 1);
    assert!(!r.reset);
    let content = r
        .frames
        .iter()
        .map(|t| parse(t))
        .find(|f| f["type"] == "message")
        .unwrap()["message"]["content"]
        .as_str()
        .unwrap()
        .len();
    assert_eq!(content, piece.len() * pieces.len());
}

/// Whether the last recorded statements include the prune check (a scan of the log).
fn prune_checked(host: &TestHost) -> bool {
    host.db
        .recorded()
        .iter()
        .any(|s| s.starts_with("SELECT MAX(seq)"))
}

#[test]
fn pruning_is_checked_once_per_256_logged_frames_whatever_gaps_reserved_seqs_leave() {
    let host = TestHost::with_thread(T0);
    let mut call = streaming(&host);
    let logged_before = host
        .take_sent()
        .iter()
        .filter(|t| parse(t)["seq"].is_i64())
        .count();
    // A long streamed reply: chunks kept in memory, seqs jumping by reserved blocks of up to
    // 256 (several multiples of 256 passed), and no check, since nothing reached the log.
    let pieces: Vec<String> = (0..600).map(|i| format!("p{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    host.db.record();
    stream(&host, &mut call, &pieces);
    let chunk = seq_of(host.take_sent().last().unwrap());
    assert!(
        chunk > 2 * PRUNE_EVERY,
        "the seqs passed multiples of 256: {chunk}"
    );
    assert!(!prune_checked(&host));
    // Logged frames are counted, not seqs: the check comes with this instance's 256th.
    let mut logged = logged_before;
    loop {
        host.db.record();
        frame_log::append(&host.live_chunks, &host.db, &[event("e")]);
        logged += 1;
        if prune_checked(&host) {
            break;
        }
        assert!(logged < 1_000, "the check never ran");
    }
    assert_eq!(i64::try_from(logged).unwrap(), PRUNE_EVERY);
    // A new instance counts from the newest seq (its predecessor's unchecked frames are
    // fewer): past 256 it checks at its first logged flush, then not at its second.
    let host = host.restarted(crate::registry().unwrap());
    for check in [true, false] {
        host.db.record();
        frame_log::append(&host.live_chunks, &host.db, &[event("after")]);
        assert_eq!(prune_checked(&host), check);
    }
}

#[test]
fn the_first_frames_of_a_thread_are_logged_even_when_they_are_chunks() {
    let host = TestHost::with_thread(T0);
    let chunk = chunk_of("m1", "first");
    // No frame logged yet: no counter to reserve from, so the chunk is logged as a row.
    let out = frame_log::append(&host.live_chunks, &host.db, std::slice::from_ref(&chunk));
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(seq_of(&out.texts[0]), 1);
    assert_eq!(chunk_rows(&host), 1);
    // From then on chunks flushed alone are kept in memory.
    let out = frame_log::append(&host.live_chunks, &host.db, &[chunk]);
    assert_eq!(seq_of(&out.texts[0]), 2);
    assert_eq!(chunk_rows(&host), 1);
    assert_eq!(replay(&host, 0).frames.len(), 2);
}

/// The thread's SQLite, refusing the reservation of seqs (a platform that would not let
/// `sqlite_sequence` be written).
struct NoReservation<'a>(&'a dyn Sql, std::cell::Cell<u32>);

impl Sql for NoReservation<'_> {
    fn exec(
        &self,
        statement: &str,
        params: &[edgent::values::sql::SqlValue],
    ) -> Result<Vec<edgent::values::sql::Row>, edgent::values::sql::SqlError> {
        if statement.starts_with("UPDATE sqlite_sequence") {
            self.1.set(self.1.get() + 1);
            return Err(edgent::values::sql::SqlError("not authorized".into()));
        }
        self.0.exec(statement, params)
    }

    fn batch(
        &self,
        statements: &[(&str, &[edgent::values::sql::SqlValue])],
    ) -> Result<Vec<Vec<edgent::values::sql::Row>>, edgent::values::sql::SqlError> {
        self.0.batch(statements)
    }
}

#[test]
fn a_refused_reservation_logs_the_chunks_as_before_and_is_not_tried_again() {
    let host = TestHost::with_thread(T0);
    let refusing = NoReservation(&host.db, std::cell::Cell::new(0));
    frame_log::append(&host.live_chunks, &refusing, &[event("first")]);
    for (i, delta) in ["a", "b", "c"].into_iter().enumerate() {
        let out = frame_log::append(&host.live_chunks, &refusing, &[chunk_of("m1", delta)]);
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(seq_of(&out.texts[0]), 2 + i as i64);
    }
    assert_eq!(refusing.1.get(), 1, "one refusal, then no more attempts");
    let why = host
        .live_chunks
        .take_refusal()
        .expect("the refusal is kept for the log");
    assert!(why.0.contains("not authorized"), "{why:?}");
    assert!(host.live_chunks.take_refusal().is_none(), "logged once");
    assert_eq!(chunk_rows(&host), 3, "the chunks were logged");
    assert_eq!(replay(&host, 1).frames.len(), 3);
    // Nor is a block reserved ahead with a reply's pending message: its chunk is logged too.
    let pending = frame_log::append(&host.live_chunks, &refusing, &[pending_reply("m2")]);
    let out = frame_log::append(&host.live_chunks, &refusing, &[chunk_of("m2", "d")]);
    assert_eq!(seq_of(&out.texts[0]), seq_of(&pending.texts[0]) + 1);
    assert_eq!(chunk_rows(&host), 4);
}

/// The `message` frame of reply `id` about to stream (pending, from the assistant).
pub(crate) fn pending_reply(id: &str) -> ServerFrame {
    let mut message = Message::new(Role::Assistant, "", T0);
    message.id = id.into();
    message.status = MessageStatus::Pending;
    ServerFrame::Message { message }
}

/// A streamed piece of reply `message_id`.
pub(crate) fn chunk_of(message_id: &str, delta: &str) -> ServerFrame {
    ServerFrame::MessageChunk {
        message_id: message_id.into(),
        delta: delta.into(),
    }
}

/// A reply's pending message in a thread's very first flush (no counter yet) still reserves
/// the reply's block: its chunks are kept, numbered right after it, with no statement.
#[test]
fn a_reply_opening_a_threads_log_reserves_its_block_from_an_empty_counter() {
    let host = TestHost::with_thread(T0);
    let first = frame_log::append(&host.live_chunks, &host.db, &[pending_reply("m1")]);
    assert_eq!(seq_of(&first.texts[0]), 1);
    host.db.record();
    let out = frame_log::append(&host.live_chunks, &host.db, &[chunk_of("m1", "Hi")]);
    assert_eq!(host.db.recorded(), Vec::<String>::new());
    assert_eq!(seq_of(&out.texts[0]), 2);
    assert_eq!(chunk_rows(&host), 0, "kept in memory");
    let counter = host
        .db
        .exec(
            "SELECT seq FROM sqlite_sequence WHERE name = 'frame_log'",
            &[],
        )
        .unwrap();
    assert_eq!(counter[0].int(0).unwrap(), 1 + 64, "the block is durable");
}
