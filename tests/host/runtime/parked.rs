//! Calls parked by a durable step (a tool sleeping a minute) across the turns around them: the
//! thread's alarm keeps naming the parked call after a text turn, and a turn that ends the
//! conversation cancels it and leaves no alarm.

use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use edgent::api::ops::ThreadOp;
use edgent::engine::store::{Order, ThreadStatus};
use edgent::prelude::*;
use edgent::testing::{reply_events, TestHost};

use super::{host, record, send, transcript, T0};

fn napper() -> Tool {
    Tool::new("Sleeps a minute, then answers.").handler(|flow: FlowState| async move {
        flow.sleep("nap", Duration::from_secs(60)).await?;
        Ok::<_, ToolError>("rested".to_owned())
    })
}

fn queue(name: &str) -> ThreadOp {
    ThreadOp::from_rpc("queue_tool", &json!({ "name": name, "args": {} })).unwrap()
}

/// Parks `napper` (queued by a client) and returns its wake time.
fn park_a_nap(h: &Rc<TestHost>, rt: &Rc<edgent::runtime::ThreadRuntime>) -> i64 {
    let queued: Value = h.run(rt.apply(queue("napper"))).unwrap();
    h.run_spawned();
    let id = queued["tool_call_id"].as_str().unwrap().to_owned();
    let call = h.store().tool_call(&id).unwrap().unwrap();
    assert_eq!(record(h, &id).status, "sleeping");
    let wake = call.wake_at.expect("a wake time");
    assert_eq!(h.alarm_at(), Some(wake));
    wake
}

#[test]
fn a_call_parked_before_a_text_turn_keeps_its_alarm_after_it() {
    // The alarm after the turn comes from the calls the last step read (no second query):
    // it must still name the parked call.
    let h = host(vec![("napper", napper())]);
    let rt = h.runtime();
    let wake = park_a_nap(&h, &rt);

    h.script(Ok(reply_events("Still napping.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(transcript(&h).last().unwrap().1, "Still napping.");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert_eq!(
        h.alarm_at(),
        Some(wake),
        "the parked call still wakes the thread"
    );
}

#[test]
fn a_turn_that_ends_the_conversation_cancels_the_parked_call_and_leaves_only_the_watchdog() {
    let mut agent = edgent::testing::agent(&["napper"]);
    agent.agent.max_turns = 1;
    let registry = edgent::tool::Registry::build(vec![("napper", napper())]).unwrap();
    let h = TestHost::new(registry, T0).with_agent(agent).into_rc();
    let rt = h.runtime();
    park_a_nap(&h, &rt);

    h.script(Ok(reply_events("Goodbye.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Stopped);
    let page = h.store().tool_call_page(10, 0, Order::Asc).unwrap();
    assert_eq!(page.tool_calls[0].status, "error", "cancelled by the stop");
    // A stopped thread parks nothing: its alarm is the watchdog, which finds nothing to do.
    super::watchdog::only_the_watchdog_left(&h, &rt);
}
