//! What a turn costs in SQLite statements, run by the shipped runtime (`edgent::runtime`) the
//! way the Worker runs it: the `send_message` operation stores the message and starts the
//! turn, the turn loop (configuration from the cache, `step_wanted`, `next_action_for`, the
//! model's scripted reply, the request log, tool calls) runs to idle and sets the alarm.
//! Counted on real SQLite.

use std::rc::Rc;

use edgent::api::ops::ThreadOp;
use edgent::runtime::ThreadRuntime;
use edgent::testing::{reply_events, TestHost};

use crate::flow_host::WithThread;

const T0: i64 = 1_795_300_162_000;

/// One turn; `calls` are the model's tool calls in its first reply (then it answers with
/// text). Returns the statements run, in order.
fn turn(host: &Rc<TestHost>, rt: &Rc<ThreadRuntime>, calls: &[(&str, &str, &str)]) -> Vec<String> {
    if !calls.is_empty() {
        host.script(Ok(reply_events("", calls)));
    }
    host.script(Ok(reply_events("It is noon.", &[])));
    statements_of_turn(host, rt)
}

/// Sends a user message and runs the turn it starts to idle, as the Worker does (the model's
/// replies already scripted). Returns the statements run, in order.
pub(crate) fn statements_of_turn(host: &Rc<TestHost>, rt: &Rc<ThreadRuntime>) -> Vec<String> {
    let send = serde_json::json!({ "content": "what time is it?" });
    let op = ThreadOp::from_rpc("send_message", &send).unwrap();
    host.db.record();
    host.run(rt.apply(op)).unwrap();
    host.run_spawned();
    let statements = host.db.recorded();
    assert!(
        host.logged_errors().is_empty(),
        "{:?}",
        host.logged_errors()
    );
    statements
}

#[test]
fn statements_per_turn_stay_under_their_ceilings() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    turn(&host, &rt, &[]); // the first turn of an instance has its own one-time costs
    let text = turn(&host, &rt, &[]);
    let tool = turn(&host, &rt, &[("c1", "get_current_time", "{}")]);
    for (name, s) in [("text", &text), ("tool", &tool)] {
        eprintln!("{name} turn: {} statements", s.len());
        for st in s.iter() {
            eprintln!("   {}", &st[..st.len().min(150)]);
        }
    }
    // Ceilings, so a change that adds statements to every turn is noticed (the measured
    // counts on 2026-11-24; lower them as they fall). The frame log (resumable sockets) added
    // one `INSERT … RETURNING seq` per flush of frames: +5 to a text turn (9 → 14: the user
    // message and status, the pending reply, its chunks, the final reply, the idle status) and
    // +9 to a tool turn (20 → 29); compaction runs inside those inserts (a trigger) and pruning
    // only every 256 frames, which these turns do not reach. A stored reply's frames wait for
    // the next step's flush when nothing is awaited between them (2026-11-24): 14 → 13 and
    // 29 → 28. Then (2026-11-24, later): a reply's last read is not flushed on its own (the
    // chain only reads the body's end after `Done`, for at most a second), an answer that
    // leaves nothing owed ends the turn in its own step (`finish_turn_if_settled`: no row
    // read at the next), tool runs flush once
    // their calls started (with the step's frames) and leave the last outcome's frames to the
    // loop, and a reply's stored calls are not read back: 13 → 11 and 28 → 23; the row the
    // user message's write returned is handed to the turn it starts: 11 → 10, 23 → 22.
    // Then (2026-11-25): a model's calls owe the model another call in the statement that
    // queues them (trigger `model_call_owes_model`), whose RETURNING reads the row; and the
    // statement that closes the last open call reads the row for the next step: 22 → 20.
    assert!(
        text.len() <= 10,
        "a text turn ran {} statements",
        text.len()
    );
    assert!(
        tool.len() <= 20,
        "a tool turn ran {} statements",
        tool.len()
    );
}

/// The row a user message's write returned is handed to the turn it starts only while nothing
/// else has opened the thread: a stop that lands between the message and the turn is seen, so
/// the model is never called for a stopped thread.
#[test]
fn a_row_handed_to_the_turn_is_dropped_when_another_operation_comes_first() {
    let host = TestHost::with_thread(T0);
    let rt = host.runtime();
    host.script(Ok(reply_events("It is noon.", &[])));
    let send = serde_json::json!({ "content": "what time is it?" });
    host.run(rt.apply(ThreadOp::from_rpc("send_message", &send).unwrap()))
        .unwrap();
    let stop = ThreadOp::from_rpc("stop", &serde_json::json!({})).unwrap();
    host.run(rt.apply(stop)).unwrap();
    host.run_spawned();
    assert!(
        host.model_requests().is_empty(),
        "the model was asked {} time(s) on a stopped thread",
        host.model_requests().len()
    );
    let summary = host.thread().summary().unwrap();
    assert_eq!(summary.status, edgent::engine::store::ThreadStatus::Stopped);
}
