//! A turn that finds its agent's configuration older than the freshness bound (a chat at
//! human pace) plans with the cached copy and confirms it while the model request starts
//! (`runtime::config_check`). Proves: the request goes out before the check answers and the
//! turn takes the longer of the two, not their sum; a reload that finds the agent unchanged
//! (the stamp moved for another agent) keeps the request; a configuration that moved meanwhile
//! cancels the request unread and sends it again with the new copy, which the turn's later
//! steps keep, unless the thread was stopped meanwhile; a check that fails fails the call with
//! its cause; a turn whose next step is not a model request (a queued tool call) waits for the
//! check before it plans. Does not prove: the D1 version query
//! itself (`tests/host/config_db`), or the latency in a Worker (`bench/production.mjs`).

use std::cell::Cell;

use edgent::engine::store::Side;
use edgent::testing::{agent, StaleConfig};

use super::*;

/// The system prompt a request body (OpenAI's wire format) carries.
fn system_of(body: &Value) -> &str {
    let first = &body["messages"][0];
    assert_eq!(first["role"], "system", "{body}");
    first["content"].as_str().unwrap_or_default()
}

fn systems(h: &TestHost) -> Vec<String> {
    h.model_requests()
        .iter()
        .map(|b| system_of(b).to_owned())
        .collect()
}

/// `support`'s configuration with another system prompt.
fn changed(tools: &[&str], system: &str) -> edgent::config::AgentConfig {
    let mut config = agent(tools);
    config.prompt.system = system.to_owned();
    config
}

fn stale(
    h: &TestHost,
    tools: &[&str],
    check_ms: u64,
    found: Option<Result<edgent::config::AgentConfig, String>>,
) {
    h.stale_config.replace(Some(StaleConfig {
        cached: Rc::new(agent(tools)),
        check_ms,
        found,
    }));
}

#[test]
fn the_request_goes_out_while_an_old_copy_is_checked() {
    let h = host(vec![]);
    let rt = h.runtime();
    h.model_open_ms.set(40);
    stale(&h, &[], 30, None);
    h.script(Ok(reply_events("Hello there!", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    // Side by side, as the object's event loop runs them: the turn starts at T0.
    h.run_spawned_together();

    assert_eq!(transcript(&h)[1].1, "Hello there!");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(log.logs.len(), 1);
    assert_eq!(
        (log.logs[0].created_at, log.logs[0].latency_ms),
        (T0, 40),
        "the request went out at once and was read when it answered: the check (30 ms) ran \
         meanwhile"
    );
    assert_eq!(systems(&h), ["be helpful"]);
    assert!(h.stale_config.borrow().is_none(), "checked once");
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());

    // A check slower than the model: the reply is read once it answered.
    stale(&h, &[], 90, None);
    h.script(Ok(reply_events("Again.", &[])));
    h.run(rt.apply(send("Once more"))).unwrap();
    h.run_spawned_together();
    assert_eq!(transcript(&h)[3].1, "Again.");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(log.logs[1].latency_ms, 90);
}

#[test]
fn a_reload_that_finds_the_same_configuration_keeps_the_request() {
    // The version stamp moves with any change (another agent's too): the reload finds this
    // agent as it was, and the request already out is read.
    let h = host(vec![]);
    let rt = h.runtime();
    stale(&h, &[], 30, Some(Ok(agent(&[]))));
    h.script(Ok(reply_events("Unchanged.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(transcript(&h)[1].1, "Unchanged.");
    assert_eq!(h.model_requests().len(), 1, "not sent again");
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn a_configuration_that_moved_meanwhile_cancels_the_request_and_sends_it_again() {
    let h = host(vec![("echo", echo())]);
    let rt = h.runtime();
    h.model_open_ms.set(40);
    stale(&h, &["echo"], 30, Some(Ok(changed(&["echo"], "be brief"))));
    // The first answer is never read: its request went out with the old prompt.
    h.script(Ok(reply_events("From the old prompt.", &[])));
    h.script(Ok(reply_events("", &[("call_1", "echo", "{}")])));
    h.script(Ok(reply_events("Brief.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(
        systems(&h),
        ["be helpful", "be brief", "be brief"],
        "sent again with the new prompt, which the turn's next step keeps"
    );
    assert_eq!(transcript(&h).last().unwrap().1, "Brief.");
    let old_seen = h.frames().iter().any(|f| match f {
        ServerFrame::MessageChunk { delta, .. } => delta.contains("old prompt"),
        ServerFrame::Message { message } => message.content.contains("old prompt"),
        _ => false,
    });
    assert!(!old_seen, "no client saw the cancelled reply");
    assert!(errors(&h).is_empty(), "{:?}", errors(&h));
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(log.logs.len(), 2, "the cancelled request is not an attempt");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn the_reply_sent_again_is_stored_under_the_new_copys_rules() {
    let h = host(vec![]);
    let rt = h.runtime();
    // The operator turned `stop_on_response` off (and capped the steps at 2) meanwhile.
    let mut new = changed(&[], "be brief");
    new.agent.side_a.stop_on_response = false;
    new.agent.side_a.max_steps = 2;
    stale(&h, &[], 30, Some(Ok(new)));
    h.script(Ok(reply_events("From the old prompt.", &[])));
    h.script(Ok(reply_events("First.", &[])));
    h.script(Ok(reply_events("Second.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(systems(&h), ["be helpful", "be brief", "be brief"]);
    let said: Vec<String> = transcript(&h).into_iter().map(|(_, text)| text).collect();
    assert_eq!(
        said,
        ["Hi", "First.", "Second."],
        "the answer did not end the turn"
    );
    let codes: Vec<String> = errors(&h).into_iter().map(|(code, _)| code).collect();
    assert_eq!(codes, ["max_steps"]);
}

#[test]
fn a_stop_while_the_check_runs_sends_nothing_again() {
    use edgent::tool::FlowHost;
    let h = host(vec![]);
    let rt = h.runtime();
    h.model_open_ms.set(40);
    stale(&h, &[], 30, Some(Ok(changed(&[], "be brief"))));
    h.script(Ok(reply_events("Never read.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    let stop = ThreadOp::from_rpc("stop", &json!({})).unwrap();
    let later = h.sleep(10);
    h.run_spawned_with(async {
        later.await;
        rt.apply(stop).await
    })
    .unwrap();

    assert_eq!(systems(&h), ["be helpful"], "not sent again after the stop");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Stopped);
    let page = h.thread().messages(10, 0, Order::Asc, false).unwrap();
    let reply = page.messages.last().unwrap();
    assert_eq!(
        (reply.status.as_str(), reply.content.as_str()),
        ("failed", "")
    );
    assert!(
        errors(&h).is_empty(),
        "a stop is no error: {:?}",
        errors(&h)
    );
}

#[test]
fn a_check_that_fails_fails_the_call_with_its_cause_and_the_next_turn_works() {
    let h = host(vec![]);
    let rt = h.runtime();
    let fault = "D1_ERROR: Network connection lost.";
    stale(&h, &[], 30, Some(Err(fault.to_owned())));
    h.script(Ok(reply_events("Never read.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    let failed = errors(&h);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "model_config");
    assert!(failed[0].1.contains(fault), "{}", failed[0].1);
    let page = h.thread().messages(10, 0, Order::Asc, false).unwrap();
    let reply = page.messages.last().unwrap();
    assert_eq!(
        (reply.status.as_str(), reply.content.as_str()),
        ("failed", "")
    );
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);

    h.script(Ok(reply_events("Back again.", &[])));
    h.run(rt.apply(send("Hello?"))).unwrap();
    h.run_spawned();
    assert_eq!(transcript(&h).last().unwrap().1, "Back again.");
}

#[test]
fn a_queued_tool_call_waits_for_the_check() {
    let clock = Rc::new(Cell::new(T0));
    let ran_at = Rc::new(Cell::new(0));
    let (c, r) = (clock.clone(), ran_at.clone());
    let stamp = Tool::new("Notes when it ran.").handler(move |_flow: FlowState| {
        r.set(c.get());
        async { CallToolResult::text("stamped") }
    });
    let registry = edgent::tool::Registry::build(vec![("stamp", stamp)]).unwrap();
    let h = TestHost::with_clock(registry, clock).into_rc();
    let rt = h.runtime();
    stale(
        &h,
        &["stamp"],
        30,
        Some(Ok(changed(&["stamp"], "be brief"))),
    );

    let op = ThreadOp::from_rpc("queue_tool", &json!({ "name": "stamp" })).unwrap();
    h.run(rt.apply(op)).unwrap();
    h.run_spawned_together();

    assert_eq!(
        ran_at.get(),
        T0 + 30,
        "the call started once the check answered"
    );
    assert!(h.stale_config.borrow().is_none(), "checked once");
    assert!(h.model_requests().is_empty());
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

/// A thread's first turn in a new instance (an isolate that starts with no configuration
/// cached): `rt` is dropped and the host restarted with the isolate's cache empty, its first
/// load taking `load_ms`.
fn restarted_cold(h: Rc<TestHost>, load_ms: u64) -> Rc<TestHost> {
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    let h = h.restarted(registry);
    h.cold_config.set(Some(load_ms));
    h
}

/// A thread after one turn, its runtime gone (the instance about to end).
fn after_one_turn() -> Rc<TestHost> {
    let h = host(vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events("First.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();
    h
}

/// The thread's next turn in a new isolate whose load takes 30 ms, the model 40: the host,
/// and when the turn's model request went out, counted from the message.
fn next_turn_in_a_new_isolate(h: Rc<TestHost>) -> (Rc<TestHost>, i64) {
    let h = restarted_cold(h, 30);
    h.model_open_ms.set(40);
    let rt = h.runtime();
    h.script(Ok(reply_events("Second.", &[])));
    let start = h.now();
    h.run(rt.apply(send("Again"))).unwrap();
    h.run_spawned_together();
    assert_eq!(transcript(&h)[3].1, "Second.");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    let sent_after = log.logs[1].created_at - start;
    assert_eq!(
        log.logs[1].latency_ms, 40,
        "read when the model answered, the load (if it overlapped) done by then"
    );
    drop(rt);
    (h, sent_after)
}

#[test]
fn a_new_instance_plans_with_the_copy_the_thread_kept_while_it_is_confirmed() {
    let h = after_one_turn();
    let kept = h.store().config_copy("support", Side::A).unwrap().unwrap();
    assert_eq!(kept.version, 1);
    assert!(kept.body.contains("be helpful"), "{}", kept.body);

    let (h, sent_after) = next_turn_in_a_new_isolate(h);
    assert_eq!(
        sent_after, 0,
        "the request went out at once with the kept copy; the load (30 ms) confirmed it meanwhile"
    );
    assert_eq!(h.config_loads.get(), 1);
    assert_eq!(systems(&h), ["be helpful"], "this instance's one request");
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn a_kept_copy_that_moved_is_sent_again_with_the_new_configuration_and_replaced() {
    let h = after_one_turn();
    // Meanwhile the operator changed the prompt (version 2).
    let h = restarted_cold(h, 30);
    let Ok(h) = Rc::try_unwrap(h) else {
        panic!("the host is shared")
    };
    let h = h.with_agent(changed(&[], "be brief")).into_rc();
    h.config_version.set(2);
    let rt = h.runtime();
    h.script(Ok(reply_events("From the old prompt.", &[])));
    h.script(Ok(reply_events("Brief.", &[])));
    h.run(rt.apply(send("Again"))).unwrap();
    h.run_spawned();

    assert_eq!(
        systems(&h),
        ["be helpful", "be brief"],
        "this instance's requests: the kept copy's, cancelled, then the new one's"
    );
    assert_eq!(transcript(&h)[3].1, "Brief.");
    let kept = h.store().config_copy("support", Side::A).unwrap().unwrap();
    assert_eq!(kept.version, 2);
    assert!(kept.body.contains("be brief"), "{}", kept.body);
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn a_kept_copy_that_no_longer_reads_is_ignored_and_the_load_awaited() {
    let h = after_one_turn();
    let broken = edgent::engine::store::ConfigCopy {
        version: 1,
        body: r#"{"written_by":"another build"}"#.into(),
        kept_at: h.now(),
    };
    h.store()
        .set_config_copy("support", Side::A, &broken)
        .unwrap();

    let (h, sent_after) = next_turn_in_a_new_isolate(h);
    assert_eq!(sent_after, 30, "sent once the load answered");
    let kept = h.store().config_copy("support", Side::A).unwrap().unwrap();
    assert!(kept.body.contains("be helpful"), "rewritten: {}", kept.body);
}

#[test]
fn a_copy_kept_over_an_hour_ago_is_not_used_and_the_load_awaited() {
    let h = after_one_turn();
    h.advance(edgent::config::cache::KEPT_COPY_TTL_MS + 1);
    let before = h.now();

    let (h, sent_after) = next_turn_in_a_new_isolate(h);
    assert_eq!(sent_after, 30, "sent once the load answered");
    let kept = h.store().config_copy("support", Side::A).unwrap().unwrap();
    assert_eq!(kept.kept_at, before + 30, "kept again, once loaded");
}

#[test]
fn an_instance_that_runs_for_hours_keeps_its_copy_young() {
    let h = host(vec![]);
    let rt = h.runtime();
    let turn = |text: &str| {
        h.script(Ok(reply_events("Noted.", &[])));
        h.run(rt.apply(send(text))).unwrap();
        h.run_spawned();
        h.store().config_copy("support", Side::A).unwrap().unwrap()
    };
    let first = turn("one");
    h.advance(60_000);
    assert_eq!(turn("two").kept_at, first.kept_at, "not written every turn");
    h.advance(edgent::config::cache::KEPT_COPY_TTL_MS / 2);
    let later = turn("three");
    assert!(
        later.kept_at > first.kept_at,
        "kept again at half its age limit"
    );
}
