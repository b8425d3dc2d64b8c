//! The runtime's budgets and deadlines: an agent's token and dollar budget (failed attempts'
//! reported usage included) and an attempt's total deadline.

use super::*;

/// A reply with a usage report, as a provider streams it.
fn reply_with_usage(text: &str, calls: &[(&str, &str, &str)], tokens: u64) -> Vec<StreamEvent> {
    let mut events = reply_events(text, calls);
    let done = events.pop();
    events.push(StreamEvent::Usage {
        input_tokens: tokens - 10,
        output_tokens: 10,
    });
    events.extend(done);
    events
}

/// An agent's `max_tokens` budget: once the thread's model calls have used it, the thread
/// stops with `stopped_by: "budget"` before the next model call (a tool turn's second call
/// here), parked work is cancelled, and nothing more is asked of the model.
#[test]
fn a_thread_that_spent_its_token_budget_stops_before_the_next_model_call() {
    let mut config = edgent::testing::agent(&["echo"]);
    config.agent.max_tokens = Some(1_500);
    let h = TestHost::new(
        edgent::tool::Registry::build(vec![("echo", echo())]).unwrap(),
        T0,
    )
    .with_agent(config)
    .into_rc();
    let rt = h.runtime();
    h.script(Ok(reply_with_usage("Hi.", &[], 1_000)));
    h.run(rt.apply(send("Hello"))).unwrap();
    h.run_spawned();
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.tokens_used, 1_000);
    assert_eq!(
        summary.status,
        ThreadStatus::Idle,
        "under budget: an ordinary turn"
    );

    // The second turn's first call takes it to 1,900 tokens: its tool runs, then the call
    // that would send the result is not made.
    h.script(Ok(reply_with_usage("", &[("c1", "echo", "{}")], 900)));
    h.script(Ok(reply_events("never asked", &[])));
    h.run(rt.apply(send("Again"))).unwrap();
    h.run_spawned();

    assert_eq!(h.model_requests().len(), 2);
    let summary = h.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Stopped);
    assert_eq!(summary.stopped_by.as_deref(), Some("budget"));
    assert_eq!(summary.tokens_used, 1_900);
    assert_eq!(
        record(&h, "c1").status,
        "success",
        "the tool's result is kept"
    );
    assert_eq!(
        errors(&h).last().unwrap(),
        &(
            "budget".to_owned(),
            "the thread used 1900 tokens, its agent's budget is 1500 (max_tokens)".to_owned()
        )
    );
    // A stopped thread refuses new messages: no model call, whatever a client sends.
    assert!(h.run(rt.apply(send("More?"))).is_err());
    assert_eq!(h.model_requests().len(), 2);
}

#[test]
fn a_cost_budget_counts_dollars_and_no_budget_never_stops() {
    use edgent::engine::thread::TurnRules;
    let rules = TurnRules {
        max_cost_usd: Some(0.25),
        ..TurnRules::default()
    };
    assert_eq!(rules.over_budget(1_000_000, 0.2499), None);
    assert_eq!(
        rules.over_budget(0, 0.25).as_deref(),
        Some("the thread spent $0.2500, its agent's budget is $0.2500 (max_cost_usd)")
    );
    assert_eq!(TurnRules::default().over_budget(i64::MAX, f64::MAX), None);
}

/// A stream that sends a little and then never ends (a slow drip never trips the stall
/// timeout) is ended by the attempt's overall deadline; the next attempt answers.
#[test]
fn an_attempt_that_never_ends_is_cut_at_its_total_deadline_and_retried() {
    let mut config = edgent::testing::agent(&[]);
    config.models[0].total_timeout_ms = Some(5_000);
    let h = TestHost::new(edgent::tool::Registry::build(vec![]).unwrap(), T0)
        .with_agent(config)
        .into_rc();
    let rt = h.runtime();
    h.script_endless(vec![StreamEvent::TextDelta("drip".into())]);
    h.script(Ok(reply_events("Whole this time.", &[])));

    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();

    assert_eq!(transcript(&h).last().unwrap().1, "Whole this time.");
    assert_eq!(h.model_requests().len(), 2);
    assert!(h.now() >= T0 + 5_000, "the deadline passed on the clock");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(
        log.logs[0].error.as_deref(),
        Some("model timed out: the reply took longer than 5000 ms (total_timeout_ms)")
    );
    let retries = errors(&h);
    assert_eq!(retries[0].0, "model_retry", "{retries:?}");
}

/// Found by a review: failed attempts spent nothing, so a model that reports usage and then
/// fails (a deadline, a cut stream) never reached the budget.
#[test]
fn a_failed_attempts_reported_usage_counts_toward_the_budget() {
    let mut config = edgent::testing::agent(&[]);
    config.models[0].total_timeout_ms = Some(1_000);
    config.agent.max_tokens = Some(1_500);
    let h = TestHost::new(edgent::tool::Registry::build(vec![]).unwrap(), T0)
        .with_agent(config)
        .into_rc();
    let rt = h.runtime();
    for _ in 0..6 {
        h.script_endless(vec![StreamEvent::Usage {
            input_tokens: 1_000,
            output_tokens: 10,
        }]);
    }
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();
    let first = h.model_requests().len();
    let s = h.thread().summary().unwrap();
    assert_eq!(s.tokens_used, 1_010 * first as i64, "every attempt counted");
    // The next message finds the budget spent: the thread stops without asking the model.
    let _ = h.run(rt.apply(send("Again")));
    h.run_spawned();
    assert_eq!(h.model_requests().len(), first);
    let s = h.thread().summary().unwrap();
    assert_eq!(s.stopped_by.as_deref(), Some("budget"));
}
