//! The shipped runtime (`edgent::runtime`) over the test host as its platform: whole turns in
//! virtual time, from the operation that stored the work to the alarm left behind. The model is
//! scripted per attempt; sleeps (retry delays, timeouts) move the virtual clock.

use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use edgent::api::ops::ThreadOp;
use edgent::engine::store::{Order, ThreadStatus};
use edgent::engine::wake::WATCHDOG_MS;
use edgent::llm::stream::{ProviderError, StreamEvent};
use edgent::prelude::*;
use edgent::testing::{reply_events, TestHost};
use edgent::values::message::Role;
use edgent::values::protocol::ServerFrame;

const T0: i64 = 1_700_000_000_000;

mod budgets;
mod calls;
mod config_check;
mod create;
mod mcp_state;
mod nested_prompts;
mod parked;
mod replies;
mod structured;
mod tool_selection;
mod watchdog;

use watchdog::only_the_watchdog_left;

fn host(tools: Vec<(&'static str, Tool)>) -> Rc<TestHost> {
    let registry = edgent::tool::Registry::build(tools).unwrap();
    TestHost::new(registry, T0).into_rc()
}

fn send(text: &str) -> ThreadOp {
    ThreadOp::from_rpc("send_message", &json!({ "content": text })).unwrap()
}

fn echo() -> Tool {
    Tool::new("Echoes.").handler(|_flow: FlowState| async { CallToolResult::text("echoed") })
}

/// The top-level messages, oldest first, as `(role, text)`.
fn transcript(h: &TestHost) -> Vec<(String, String)> {
    let page = h.thread().messages(100, 0, Order::Asc, false).unwrap();
    page.messages
        .iter()
        .map(|m| (m.role.as_str().to_owned(), m.content.clone()))
        .collect()
}

fn record(h: &TestHost, id: &str) -> edgent::engine::tool_records::ToolCallRecord {
    let page = h.store().tool_call_page(100, 0, Order::Asc).unwrap();
    page.tool_calls.into_iter().find(|c| c.id == id).unwrap()
}

fn errors(h: &TestHost) -> Vec<(String, String)> {
    h.frames()
        .into_iter()
        .filter_map(|f| match f {
            ServerFrame::Error { code, message, .. } => Some((code, message)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_message_starts_its_turn_in_the_same_invocation_and_its_watchdog_runs_out_idle() {
    let h = host(vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events("Hello there!", &[])));

    let answer = h.run(rt.apply(send("Hi")));
    assert!(answer.unwrap()["message_id"].is_string());
    // Stored and armed before anything ran: a crash from here on is resumed by the alarm.
    assert_eq!(h.alarm_at(), Some(T0 + WATCHDOG_MS));
    assert!(
        h.model_requests().is_empty(),
        "the turn runs after the answer"
    );

    h.run_spawned();
    assert_eq!(
        transcript(&h),
        [
            ("user".into(), "Hi".into()),
            ("assistant".into(), "Hello there!".into())
        ]
    );
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (Some(T0 + WATCHDOG_MS), 1),
        "the watchdog is left to run out, not deleted"
    );
    let sent = h.frames().len();
    assert_eq!(h.fire_alarm(&rt), Some(T0 + WATCHDOG_MS));
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (None, 1),
        "fired on an idle thread, it arms nothing and deletes nothing (it is gone)"
    );
    assert_eq!(
        (h.model_requests().len(), h.frames().len()),
        (1, sent),
        "and it runs and sends nothing"
    );
    let chunked = h
        .frames()
        .iter()
        .any(|f| matches!(f, ServerFrame::MessageChunk { delta, .. } if delta == "Hello there!"));
    assert!(chunked, "the reply streams to sockets: {:?}", h.frames());
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn a_failed_attempt_is_retried_after_the_chains_delay_and_logged_twice() {
    let h = host(vec![]);
    let rt = h.runtime();
    let unavailable = ProviderError::Http {
        status: 503,
        message: "overloaded".into(),
        retry_after_ms: None,
    };
    h.script(Err(unavailable));
    h.script(Ok(reply_events("Second time lucky.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(transcript(&h)[1].1, "Second time lucky.");
    assert_eq!(h.model_requests().len(), 2);
    assert!(
        h.now() >= T0 + 500,
        "the retry waited its delay on the clock"
    );
    let retries = errors(&h);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].0, "model_retry");
    assert!(retries[0].1.contains("overloaded"), "{}", retries[0].1);
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    let statuses: Vec<&str> = log.logs.iter().map(|l| l.status.as_str()).collect();
    assert_eq!(log.logs.len(), 2, "{statuses:?}");
    assert_eq!(log.logs[0].http_status, Some(503));
}

#[test]
fn a_request_error_gives_up_at_once_and_leaves_the_thread_usable() {
    let h = host(vec![]);
    let rt = h.runtime();
    h.script(Err(ProviderError::Http {
        status: 400,
        message: "bad tools".into(),
        retry_after_ms: None,
    }));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(
        h.model_requests().len(),
        1,
        "a request error is not retried"
    );
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Idle);
    assert!(summary.last_error.unwrap_or_default().contains("bad tools"));
    only_the_watchdog_left(&h, &rt);

    // The next message gets a fresh turn.
    h.script(Ok(reply_events("Better now.", &[])));
    h.run(rt.apply(send("Again"))).unwrap();
    h.run_spawned();
    assert_eq!(transcript(&h).last().unwrap().1, "Better now.");
}

#[test]
fn a_tool_turn_runs_the_call_and_sends_its_result_to_the_model() {
    let h = host(vec![("echo", echo())]);
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "echo", "{}")])));
    h.script(Ok(reply_events("It said echoed.", &[])));

    h.run(rt.apply(send("Use the tool"))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1]["messages"].to_string();
    assert!(second.contains("echoed"), "the result goes back: {second}");
    assert_eq!(transcript(&h).last().unwrap().1, "It said echoed.");
    assert_eq!(record(&h, "c1").status, "success");
    only_the_watchdog_left(&h, &rt);
}

#[test]
fn a_tool_that_never_answers_times_out_on_the_virtual_clock_and_the_alarm_names_its_retry() {
    let stuck = Tool::new("Never answers.")
        .handler(|_flow: FlowState| async {
            std::future::pending::<()>().await;
            CallToolResult::text("unreachable")
        })
        .timeout(Duration::from_secs(2));
    let h = host(vec![("stuck", stuck)]);
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "stuck", "{}")])));

    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();

    let record = record(&h, "c1");
    assert_eq!(record.status, "retrying", "{record:?}");
    assert!(h.now() >= T0 + 2_000, "the timeout passed on the clock");
    let wake = h
        .store()
        .tool_call("c1")
        .unwrap()
        .unwrap()
        .wake_at
        .expect("a retry time");
    assert_eq!(
        h.alarm_at(),
        Some(wake),
        "the one alarm wakes the parked call"
    );
    assert_eq!(
        h.model_requests().len(),
        1,
        "the model waits for the call's result"
    );
}

#[test]
fn a_full_deployment_window_parks_the_call_until_it_frees() {
    let limited = echo().rate_limit(RateLimit {
        scope: LimitScope::Deployment,
        ..RateLimit::per_minute(1)
    });
    let h = host(vec![("limited", limited)]);
    h.set_limiter(Some(edgent::engine::durable::Window {
        used: 1,
        frees_at: T0 + 30_000,
    }));
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "limited", "{}")])));

    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();

    assert_eq!(h.limiter_asked(), 1);
    assert_eq!(record(&h, "c1").status, "rate_limited");
    assert_eq!(h.alarm_at(), Some(T0 + 30_000));
}

#[test]
fn operations_answer_like_the_api_and_bad_ones_change_nothing() {
    let h = host(vec![("echo", echo())]);
    let rt = h.runtime();
    let side_b = ThreadOp::from_rpc("force_turn", &json!({ "side": "b" })).unwrap();
    let refused = h.run(rt.apply(side_b)).unwrap_err();
    assert_eq!((refused.status, refused.code), (400, "invalid_request"));
    assert!(refused.message.contains("no side b"), "{}", refused.message);

    let unknown = ThreadOp::from_rpc("queue_tool", &json!({ "name": "nope", "args": {} })).unwrap();
    let e = h.run(rt.apply(unknown)).unwrap_err();
    assert_eq!((e.status, e.code), (400, "unknown_tool"));

    let webhook = h.run(rt.webhook(&"ab".repeat(32), b"{}")).unwrap_err();
    assert_eq!(webhook.status, 404);

    assert!(transcript(&h).is_empty());
    assert_eq!(
        h.alarm_at(),
        None,
        "nothing was stored, so nothing was armed"
    );
    let summary: Value = h.run(rt.apply(ThreadOp::Summary)).unwrap();
    assert_eq!(summary["status"], "idle");
}

#[test]
fn a_reply_left_pending_by_a_dead_instance_is_failed_and_asked_again_by_the_next() {
    let h = host(vec![]);
    // An instance stores the message and starts the model call, then dies mid-stream.
    let mut t = h.thread();
    t.post_user_message(T0, "Hi").unwrap();
    let edgent::testing::Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!("the model is owed a call");
    };
    drop(call);
    drop(t);

    // The next instance (a runtime with its own, empty cache) is woken by the watchdog.
    let rt = h.runtime();
    h.script(Ok(reply_events("Back again.", &[])));
    h.run(rt.alarm());

    let page = h.thread().messages(100, 0, Order::Asc, false).unwrap();
    let replies: Vec<(&str, &str)> = page
        .messages
        .iter()
        .filter(|m| m.role.as_str() == "assistant")
        .map(|m| (m.status.as_str(), m.content.as_str()))
        .collect();
    assert_eq!(replies, [("failed", ""), ("completed", "Back again.")]);
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
}

#[test]
fn a_message_to_a_stopped_thread_is_refused_and_not_stored() {
    let h = host(vec![]);
    let rt = h.runtime();
    h.script(Ok(reply_events("Hello.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();
    let stop = ThreadOp::from_rpc("stop", &json!({})).unwrap();
    h.run(rt.apply(stop)).unwrap();
    let before = transcript(&h);

    let refused = h.run(rt.apply(send("Anyone there?"))).unwrap_err();
    assert_eq!((refused.status, refused.code), (409, "thread_stopped"));
    assert_eq!(transcript(&h), before, "nothing stored");
    h.run_spawned();
    assert_eq!(h.model_requests().len(), 1, "no model call for it");
}

/// An agent whose model names `secret` and calls `base_url`, as a row written into D1 without
/// the API (or before the operator tightened the policy) would.
fn host_with_model(base_url: &str, secret: &str) -> Rc<TestHost> {
    let registry = edgent::tool::Registry::build(vec![]).unwrap();
    let mut agent = edgent::testing::agent(&[]);
    agent.models[0].base_url = base_url.into();
    agent.models[0].api_key_secret = Some(secret.into());
    TestHost::new(registry, T0)
        .with_agent(agent)
        .secret("EDGENT_API_KEY", "server-key-never-sent")
        .secret("WEATHER_API_KEY", "weather-key")
        .into_rc()
}

#[test]
fn a_model_the_operator_does_not_allow_fails_the_turn_without_a_request() {
    for (base_url, secret, why) in [
        (
            "https://collector.example/v1",
            "EDGENT_API_KEY",
            "never sent",
        ),
        (
            "https://collector.example/v1",
            "WEATHER_API_KEY",
            "MODEL_SECRETS",
        ),
        ("http://collector.example/v1", "OPENAI_API_KEY", "https"),
    ] {
        let h = host_with_model(base_url, secret);
        let rt = h.runtime();
        h.script(Ok(reply_events("should not be asked", &[])));
        h.run(rt.apply(send("Hi"))).unwrap();
        h.run_spawned();
        assert!(h.model_requests().is_empty(), "{secret} went to {base_url}");
        let summary = h.thread().summary().unwrap();
        assert_eq!(summary.status, ThreadStatus::Idle);
        let error = summary.last_error.unwrap_or_default();
        assert!(error.contains(why), "{error}");
        assert!(!error.contains("server-key-never-sent") && !error.contains("weather-key"));
        assert!(
            errors(&h).iter().any(|(code, _)| code == "model_config"),
            "{:?}",
            errors(&h)
        );
    }
}

#[test]
fn in_a_dual_ai_thread_both_sides_see_a_queued_call_and_its_result() {
    use edgent::config::AgentKind;
    use edgent::engine::thread::view_for_side;
    use edgent::values::Side;
    let mut agent = edgent::testing::agent(&["echo"]);
    agent.agent.kind = AgentKind::DualAi;
    agent.agent.side_b = Some(agent.agent.side_a.clone());
    let registry = edgent::tool::Registry::build(vec![("echo", echo())]).unwrap();
    let h = TestHost::new(registry, T0).with_agent(agent).into_rc();
    let rt = h.runtime();
    let op = ThreadOp::from_rpc("queue_tool", &json!({ "name": "echo" })).unwrap();
    h.run(rt.apply(op)).unwrap();
    h.run_spawned();

    let history = h.store().model_history_within(u64::MAX).unwrap();
    let call = history.iter().find(|m| !m.tool_calls.is_empty()).unwrap();
    let result = history.iter().find(|m| m.tool_call_id.is_some()).unwrap();
    assert_eq!(
        (call.side, result.side),
        (None, None),
        "the conversation's, not a side's"
    );
    assert_eq!(result.content, "echoed");
    for side in [Side::A, Side::B] {
        let view = view_for_side(history.clone(), side, None);
        assert!(
            view.iter()
                .any(|m| m.tool_calls.iter().any(|c| c.name == "echo"))
                && view.iter().any(|m| m.content == "echoed"),
            "side {side:?} sees the queued call and its result: {view:?}"
        );
    }
}

#[test]
fn the_first_contact_with_a_new_instance_resumes_a_turn_a_crash_cut_short() {
    let h = host(vec![]);
    // A previous instance stored the message and died before its turn ran (the state a kill
    // between the two leaves): the thread is running, the model owed a call.
    {
        let mut t = h.thread();
        t.post_user_message(T0, "Are you there?").unwrap();
        assert_eq!(t.summary().unwrap().status, ThreadStatus::Running);
    }
    // A new instance: the first request (any: a page of messages, a socket frame) resumes it,
    // long before the watchdog.
    let rt = h.runtime();
    h.script(Ok(reply_events("Yes, back.", &[])));
    rt.on_contact();
    h.run_spawned();
    assert_eq!(transcript(&h).last().unwrap().1, "Yes, back.");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    assert_eq!(h.now(), T0, "no time passed: no alarm was waited for");

    // Later contacts of the same instance check nothing more; an idle thread has no work.
    let rt2 = h.runtime();
    rt2.on_contact();
    h.run_spawned();
    assert_eq!(h.model_requests().len(), 1);
}

/// A tool a sub-prompt's model calls runs under that tool's own rate limit (shared with the
/// thread's top-level calls) and is logged under the call that ran the sub-prompt.
#[test]
fn a_sub_prompts_tool_calls_count_against_the_tools_rate_limit_and_are_logged() {
    use edgent::config::{Delegate, PromptConfig};
    let runs = Rc::new(std::cell::Cell::new(0));
    let counted = runs.clone();
    let limited = Tool::new("Limited.")
        .rate_limit(RateLimit::per_minute(2).fail())
        .handler(move |_flow: FlowState| {
            let runs = counted.clone();
            async move {
                runs.set(runs.get() + 1);
                CallToolResult::text("ran")
            }
        });
    let registry = edgent::tool::Registry::build(vec![("limited", limited)]).unwrap();
    let mut config = edgent::testing::agent(&["limited", "summarize"]);
    let sub: PromptConfig = serde_json::from_value(json!({
        "name": "summarize", "model": "default", "system": "Summarize.", "tools": ["limited"],
    }))
    .unwrap();
    let models = config.models.clone();
    config.delegates = vec![(Delegate::Prompt(sub), models)];
    let h = TestHost::new(registry, T0).with_agent(config).into_rc();
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "limited", "{}")])));
    h.script(Ok(reply_events(
        "",
        &[("c2", "summarize", r#"{"input":"go"}"#)],
    )));
    // The sub-prompt's model: two calls; the window (2 a minute) has room for one.
    h.script(Ok(reply_events(
        "",
        &[("s1", "limited", "{}"), ("s2", "limited", "{}")],
    )));
    h.script(Ok(reply_events("Summarized.", &[])));
    h.script(Ok(reply_events("All done.", &[])));

    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();

    assert_eq!(
        runs.get(),
        2,
        "one top-level run and one nested: the third is refused"
    );
    assert_eq!(transcript(&h).last().unwrap().1, "All done.");
    let sub_results: Vec<String> = h
        .store()
        .sub_messages("c2")
        .unwrap()
        .into_iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content)
        .collect();
    assert_eq!(
        sub_results,
        vec![
            "ran".to_owned(),
            "Error: rate limited: tool \"limited\" allows 2 calls per minute per thread; try \
             again in 60 s"
                .to_owned()
        ]
    );
    let nested = record(&h, "c2").nested;
    assert_eq!(nested.len(), 1);
    // Keyed by the sub-prompt call's id (one of ours: the provider's `s1` is replaced).
    assert!(nested[0].key.starts_with("c2/call_"), "{}", nested[0].key);
    assert_eq!(nested[0].tool, "limited");
    assert_eq!(nested[0].attempt.outcome.as_deref(), Some("success"));
}

/// An agent tool in a thread already at the deepest nesting answers with an error result
/// naming the limit, and no child thread is asked for (an agent that calls itself ends).
#[test]
fn an_agent_tool_past_the_nesting_limit_is_an_error_result_and_starts_no_child() {
    use edgent::config::{AgentDef, Delegate};
    use edgent::engine::thread::ParentLink;
    use edgent::values::limits::MAX_THREAD_NESTING;
    let mut config = edgent::testing::agent(&["looper"]);
    let looper: AgentDef = serde_json::from_value(json!({
        "id": "looper", "kind": "dual_ai", "expose_as_tool": true,
        "side_a": { "prompt": "support" }, "side_b": { "prompt": "support" },
    }))
    .unwrap();
    config.delegates = vec![(Delegate::Agent(looper), Vec::new())];
    let h = TestHost::new(edgent::tool::Registry::build(vec![]).unwrap(), T0)
        .with_agent(config)
        .into_rc();
    let parent = ParentLink {
        thread_id: "the-parent",
        root_thread_id: "the-root",
        nesting: MAX_THREAD_NESTING,
    };
    h.thread().link(Some(parent), None).unwrap();
    assert_eq!(h.thread().nesting().unwrap(), MAX_THREAD_NESTING);
    let rt = h.runtime();
    h.script(Ok(reply_events(
        "",
        &[("c1", "looper", r#"{"input":"again"}"#)],
    )));
    h.script(Ok(reply_events("I will answer myself.", &[])));

    h.run(rt.apply(send("Loop"))).unwrap();
    h.run_spawned();

    let result = record(&h, "c1").result.unwrap();
    assert_eq!(
        result,
        format!(
            "Error: agent \"looper\" failed: its child thread would be more than \
             {MAX_THREAD_NESTING} child threads deep; an agent that calls itself (directly or \
             through other agents) must answer without calling again at that depth"
        )
    );
    assert_eq!(transcript(&h).last().unwrap().1, "I will answer myself.");
    // The thread never recorded a child: its `child_threads` table was never even created.
    let children = edgent::tool::FlowHost::sql(&*h)
        .exec(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'child_threads'",
            &[],
        )
        .unwrap();
    assert_eq!(children[0].int(0).unwrap(), 0, "no child was recorded");
}
