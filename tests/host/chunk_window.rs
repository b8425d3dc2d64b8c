//! The chunk window (`edgent::runtime::CHUNK_WINDOW_MS`), run by the shipped runtime in virtual
//! time: a reply's first text goes out at once; text arriving within the window of the last
//! chunk sent goes out as one frame when the window ends, even if the model then pauses; text
//! further apart than the window streams piece by piece. Every piece arrives, in order.

use std::rc::Rc;

use serde_json::Value;

use edgent::llm::stream::{FinishReason, StreamEvent};
use edgent::runtime::{ThreadRuntime, CHUNK_WINDOW_MS};
use edgent::testing::TestHost;

use crate::flow_host::WithThread;

const T0: i64 = 1_795_300_162_000;

/// A reply of `pieces`, each arriving the given ms after the one before, then its end.
fn timed(pieces: &[(i64, &str)]) -> Vec<(i64, StreamEvent)> {
    pieces
        .iter()
        .map(|(gap, p)| (*gap, StreamEvent::TextDelta((*p).to_owned())))
        .chain([
            (0, StreamEvent::Finish(FinishReason::Stop)),
            (0, StreamEvent::Done),
        ])
        .collect()
}

/// Runs one turn whose reply streams as `events`; returns the deltas of the `message_chunk`
/// frames it sent, in order (one entry per frame).
fn chunks_of_turn(
    host: &Rc<TestHost>,
    rt: &Rc<ThreadRuntime>,
    events: Vec<(i64, StreamEvent)>,
) -> Vec<String> {
    host.script_timed(events);
    host.take_sent();
    crate::statements::statements_of_turn(host, rt);
    host.take_sent()
        .iter()
        .map(|t| serde_json::from_str::<Value>(t).unwrap())
        .filter(|f| f["type"] == "message_chunk")
        .map(|f| f["delta"].as_str().unwrap().to_owned())
        .collect()
}

fn setup() -> (Rc<TestHost>, Rc<ThreadRuntime>) {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    (host, rt)
}

#[test]
fn text_within_the_window_of_the_first_chunk_goes_out_as_one_frame() {
    let (host, rt) = setup();
    let pieces: Vec<(i64, String)> = (0..10).map(|i| (1, format!("p{i} "))).collect();
    let refs: Vec<(i64, &str)> = pieces.iter().map(|(g, p)| (*g, p.as_str())).collect();
    let chunks = chunks_of_turn(&host, &rt, timed(&refs));
    // Ten pieces 1 ms apart: the first at once, the other nine (within 20 ms) in one frame,
    // with the stored reply.
    assert_eq!(chunks, ["p0 ", "p1 p2 p3 p4 p5 p6 p7 p8 p9 "], "{chunks:?}");
}

#[test]
fn held_text_goes_out_when_its_window_ends_even_if_the_model_pauses() {
    let (host, rt) = setup();
    // "b" arrives 1 ms after "a" was sent, then the model is quiet for half a second: "b"
    // goes out when the window ends, not with "c".
    let chunks = chunks_of_turn(&host, &rt, timed(&[(0, "a"), (1, "b"), (500, "c")]));
    assert_eq!(chunks, ["a", "b", "c"], "{chunks:?}");
}

#[test]
fn text_further_apart_than_the_window_streams_piece_by_piece() {
    let (host, rt) = setup();
    let gap = CHUNK_WINDOW_MS + 5;
    let chunks = chunks_of_turn(
        &host,
        &rt,
        timed(&[(gap, "one "), (gap, "two "), (gap, "three "), (gap, "four")]),
    );
    assert_eq!(chunks, ["one ", "two ", "three ", "four"], "{chunks:?}");
}

#[test]
fn a_piece_after_the_window_goes_out_at_once_with_what_was_held() {
    let (host, rt) = setup();
    // "b" (1 ms after "a") and "c" (2 ms after "b") are held and go out together when the
    // window ends at 20 ms; "d" arrives 30 ms after "c", past that window: it goes out at once.
    let chunks = chunks_of_turn(
        &host,
        &rt,
        timed(&[(0, "a"), (1, "b"), (2, "c"), (30, "d")]),
    );
    assert_eq!(chunks, ["a", "bc", "d"], "{chunks:?}");
}
