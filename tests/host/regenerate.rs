//! Regenerate (rpc `regenerate`, the AI SDK's `regenerate-message`): the previous answer stays
//! for clients but failed, the model answers the last user message again without it, and a
//! thread that is writing an answer refuses.

use std::rc::Rc;

use serde_json::json;

use edgent::api::ops::ThreadOp;
use edgent::engine::store::Order;
use edgent::prelude::*;
use edgent::testing::{reply_events, TestHost};

const T0: i64 = 1_700_000_000_000;

fn host() -> Rc<TestHost> {
    let echo =
        Tool::new("Echoes.").handler(|_flow: FlowState| async { CallToolResult::text("echoed") });
    let registry = edgent::tool::Registry::build(vec![("echo", echo)]).unwrap();
    TestHost::new(registry, T0).into_rc()
}

fn op(method: &str) -> ThreadOp {
    ThreadOp::from_rpc(method, &json!({ "content": "What is new?" })).unwrap()
}

/// `(role, content, status)` of every top-level message, oldest first.
fn stored(h: &TestHost) -> Vec<(String, String, String)> {
    let page = h.thread().messages(100, 0, Order::Asc, false).unwrap();
    page.messages
        .iter()
        .map(|m| {
            (
                m.role.as_str().to_owned(),
                m.content.clone(),
                m.status.as_str().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_old_answer_and_its_tool_results_stay_failed_and_the_model_answers_again_without_them() {
    let h = host();
    let rt = h.runtime();
    h.script(Ok(reply_events("Let me look.", &[("c1", "echo", "{}")])));
    h.script(Ok(reply_events("First answer.", &[])));
    h.run(rt.apply(op("send_message"))).unwrap();
    h.run_spawned();
    assert_eq!(stored(&h).len(), 4, "{:?}", stored(&h));

    h.script(Ok(reply_events("Second answer.", &[])));
    h.run(rt.apply(op("regenerate"))).unwrap();
    h.run_spawned();

    let roles_status: Vec<(String, String)> = stored(&h)
        .into_iter()
        .map(|(role, _, status)| (role, status))
        .collect();
    let expect = |r: &str, s: &str| (r.to_owned(), s.to_owned());
    assert_eq!(
        roles_status,
        [
            expect("user", "completed"),
            expect("assistant", "failed"),
            expect("tool", "failed"),
            expect("assistant", "failed"),
            expect("assistant", "completed"),
        ]
    );
    assert_eq!(stored(&h)[4].1, "Second answer.");
    // The third model request saw the user message and nothing of the retracted answer (the
    // history cache was told: it would otherwise still hold them).
    let requests = h.model_requests();
    let third = requests[2]["messages"].to_string();
    assert!(third.contains("What is new?"), "{third}");
    for gone in ["Let me look.", "echoed", "First answer.", "c1"] {
        assert!(!third.contains(gone), "{gone:?} sent again: {third}");
    }
    // A second regenerate retracts only the newest answer.
    h.script(Ok(reply_events("Third answer.", &[])));
    h.run(rt.apply(op("regenerate"))).unwrap();
    h.run_spawned();
    let last = stored(&h);
    assert_eq!(last[4].2, "failed");
    assert_eq!(
        (last[5].1.as_str(), last[5].2.as_str()),
        ("Third answer.", "completed")
    );
}

#[test]
fn a_thread_writing_an_answer_or_stopped_refuses_to_regenerate() {
    let h = host();
    let rt = h.runtime();
    h.script_endless(reply_events("and on", &[]));
    h.run(rt.apply(op("send_message"))).unwrap();
    let busy = h.run(rt.apply(op("regenerate"))).unwrap_err();
    assert_eq!((busy.status, busy.code), (409, "conflict"));
    h.run(rt.apply(ThreadOp::Stop)).unwrap();
    h.run_spawned();
    let stopped = h.run(rt.apply(op("regenerate"))).unwrap_err();
    assert_eq!(stopped.code, "thread_stopped");
}

#[test]
fn an_answer_holding_what_the_server_added_is_not_regenerated() {
    let h = host();
    let rt = h.runtime();
    h.script(Ok(reply_events("An answer.", &[])));
    h.run(rt.apply(op("send_message"))).unwrap();
    h.run_spawned();
    let inject = ThreadOp::from_rpc(
        "inject_message",
        &json!({ "role": "system", "content": "Refunds are suspended for this account." }),
    )
    .unwrap();
    h.run(rt.apply(inject)).unwrap();
    let refused = h.run(rt.apply(op("regenerate"))).unwrap_err();
    assert_eq!((refused.status, refused.code), (409, "conflict"));
    assert!(
        refused.message.contains("server added"),
        "{}",
        refused.message
    );
    // Nothing was retracted: the injected message and the answer stand.
    assert!(stored(&h)
        .iter()
        .all(|(_, _, status)| status == "completed"));
}
