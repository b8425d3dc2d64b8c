//! How the runtime runs a reply's tool calls: a parallel batch's outcomes stored as each ends,
//! a stopped thread's leftovers settled, and a call of a tool the prompt does not offer failing
//! at once.

use super::*;

/// A call of a parallel batch that finished is stored at once, while its sibling still runs:
/// a crash then cannot run it again (its outcome no longer waits for the whole batch).
#[test]
fn a_finished_call_of_a_parallel_batch_is_stored_while_its_sibling_still_runs() {
    let seen = Rc::new(std::cell::RefCell::new(None));
    let saw = seen.clone();
    let fast =
        Tool::new("Fast.").handler(|_flow: FlowState| async { CallToolResult::text("quick") });
    let slow = Tool::new("Slow.").handler(move |flow: FlowState| {
        let saw = saw.clone();
        async move {
            flow.host().sleep(1_000).await;
            let store = edgent::engine::store::Store::new(flow.host().sql());
            *saw.borrow_mut() = store.tool_call("c_fast").unwrap().map(|c| c.status);
            CallToolResult::text("late")
        }
    });
    let h = host(vec![("fast", fast), ("slow", slow)]);
    let rt = h.runtime();
    h.script(Ok(reply_events(
        "",
        &[("c_slow", "slow", "{}"), ("c_fast", "fast", "{}")],
    )));
    h.script(Ok(reply_events("Both done.", &[])));
    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();

    assert_eq!(
        seen.borrow().map(|s| s.as_str()),
        Some("success"),
        "stored before the batch ended"
    );
    assert_eq!(transcript(&h).last().unwrap().1, "Both done.");
    // The model reads the results in call order all the same.
    let second = h.model_requests()[1]["messages"].clone();
    let ids: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids, ["c_slow", "c_fast"]);
}

/// Found by a review: calls a crash left open on a stopped thread were settled only once the
/// agent's configuration loaded; with the agent deleted they stayed open for good.
#[test]
fn a_stopped_threads_leftover_calls_are_settled_without_its_agent() {
    use edgent::tool::FlowHost;
    let h = TestHost::new(
        edgent::tool::Registry::build(vec![("echo", echo())]).unwrap(),
        T0,
    )
    .with_agent(edgent::testing::agent(&["echo"]))
    .into_rc();
    let id = h
        .thread()
        .queue_tool(T0, &h.registry, "echo", json!({}))
        .unwrap();
    // A crash left the call open on a stopped thread; its agent was deleted since.
    h.store().set_stopped(T0, "user").unwrap();
    h.sql()
        .exec("UPDATE thread SET agent_id = 'deleted_agent'", &[])
        .unwrap();
    let rt = h.runtime();
    h.run(rt.alarm());
    h.run_spawned();
    let call = record(&h, &id);
    assert_eq!(call.status, "error");
    assert_eq!(
        call.result.as_deref(),
        Some("Error: cancelled: the thread was stopped (by user)")
    );
    assert!(
        errors(&h).is_empty(),
        "no configuration error: {:?}",
        errors(&h)
    );
}

#[test]
fn a_model_call_of_a_tool_its_prompt_does_not_offer_fails_at_once_without_asking_approval() {
    let guarded = Tool::new("Needs a person's yes.")
        .needs_approval()
        .handler(|_flow: FlowState| async { CallToolResult::text("done") });
    let registry =
        edgent::tool::Registry::build(vec![("echo", echo()), ("guarded", guarded)]).unwrap();
    let h = TestHost::new(registry, T0)
        .with_agent(edgent::testing::agent(&["echo"]))
        .into_rc();
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "guarded", "{}")])));
    h.script(Ok(reply_events("I cannot do that.", &[])));
    h.run(rt.apply(send("Do the guarded thing"))).unwrap();
    h.run_spawned();
    let call = record(&h, "c1");
    assert_eq!(call.status, "error", "{call:?}");
    assert!(
        call.result
            .as_deref()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{call:?}"
    );
    assert!(
        !h.frames()
            .iter()
            .any(|f| matches!(f, ServerFrame::Tool { status, .. } if status.as_str() == "waiting")),
        "no approval was asked for a call that could never run"
    );
    assert_eq!(transcript(&h).last().unwrap().1, "I cannot do that.");
}
