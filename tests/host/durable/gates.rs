//! What may hold a call back before it runs: approval, rate limits (per thread and per
//! deployment), the result cache and the whole-run deadline.

use super::*;

// ---- 7. approval -----------------------------------------------------------------------------

#[test]
fn a_call_needing_approval_waits_and_runs_once_approved() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    model_calls(&h, &[("r1", "refund", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    let call = h.call("r1");
    assert_eq!(call.status, "waiting");
    assert_eq!(call.approval.map(|a| a.as_str()), Some("pending"));
    assert_eq!(call.wake_at, None);
    assert_eq!(
        h.record("r1").waiting_for,
        Some(json!({ "approval": "pending" }))
    );
    assert_eq!(h.next_wake(), None, "no alarm for an approval");
    assert_eq!(runs.get(), 0);

    let mut t = h.thread();
    assert!(matches!(
        t.decide_approval(h.now(), "nope", true, None),
        Err(ThreadError::Invalid(_))
    ));
    h.set_now(T0 + 5000);
    t.decide_approval(h.now(), "r1", true, None).unwrap();
    assert!(matches!(
        t.decide_approval(h.now(), "r1", false, None),
        Err(ThreadError::Conflict(_))
    ));
    drop(t);

    let next = expect_model(&h);
    assert_eq!(runs.get(), 1);
    let record = h.record("r1");
    assert_eq!(record.status, "success");
    assert_eq!(record.result.as_deref(), Some("done"));
    // The approved run is the call's first attempt, logged like any other.
    assert_eq!(record.attempts, 1);
    assert_eq!(record.attempt_log.len(), 1);
    assert_eq!(record.attempt_log[0].started_at, T0 + 5000);
    assert_eq!(record.attempt_log[0].outcome.as_deref(), Some("success"));
    assert!(next.history.iter().any(|m| m.content == "done"));
}

/// Found in use: a person was asked to approve a call whose arguments its tool refuses, and
/// the approved call then failed on them. The arguments are checked first: such a call ends
/// with the `invalid arguments` result its run would give, and no approval is asked.
#[test]
fn a_call_with_invalid_arguments_is_refused_before_anyone_is_asked_to_approve_it() {
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Refund {
        /// Cents to refund.
        amount: u32,
    }
    async fn refund(_flow: FlowState, r: Refund) -> Result<String, ToolError> {
        Ok(format!("refunded {}", r.amount))
    }
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Refunds.").handler(refund).needs_approval();
    let h = host(&clock, vec![("refund", tool)]);
    model_calls(
        &h,
        &[
            ("bad", "refund", r#"{"amount": "lots"}"#),
            ("broken", "refund", "{not json"),
            ("good", "refund", r#"{"amount": 500}"#),
        ],
    );
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    for id in ["bad", "broken"] {
        let call = h.call(id);
        assert_eq!(call.status, "error", "{id}");
        assert_eq!(call.approval, None, "{id}: nobody was asked");
        let result = h.record(id).result.unwrap();
        assert!(
            result.starts_with("Error: invalid arguments: ")
                && result.ends_with("Fix the arguments and call the tool again."),
            "{id}: {result}"
        );
    }
    assert!(h.record("bad").result.unwrap().contains("amount"));
    // A call with good arguments still waits for its approval.
    let good = h.call("good");
    assert_eq!(good.status, "waiting");
    assert_eq!(good.approval.map(|a| a.as_str()), Some("pending"));
}

#[test]
fn an_approved_call_that_fails_gets_its_full_attempts() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |n| Err(ToolError::new(format!("fail {n}")))).needs_approval();
    let h = host(&clock, vec![("refund", tool)]);
    let id = h.queue("refund", json!({}));
    drive_idle(&h);
    h.thread()
        .decide_approval(h.now(), &id, true, None)
        .unwrap();
    for _ in 0..4 {
        drive_idle(&h);
        if let Some(w) = h.call(&id).wake_at {
            h.set_now(w);
        }
    }
    let record = h.record(&id);
    assert_eq!(runs.get(), 3, "max_attempts counts the approved run");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: fail 3 (gave up after 3 attempts)")
    );
    assert_eq!(record.attempt_log.len(), 3);
    // The result closes the last attempt with the call's outcome and the stored text.
    let last = &record.attempt_log[2];
    assert_eq!(last.attempt, 3);
    assert_eq!(last.outcome.as_deref(), Some("error"));
    assert_eq!(last.error.as_deref(), record.result.as_deref());
    assert!(last.finished_at.is_some());
    assert!(record.attempt_log[..2]
        .iter()
        .all(|a| a.finished_at.is_some()));
}

#[test]
fn a_rejected_call_gets_an_error_result_with_the_reason() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    model_calls(&h, &[("r1", "refund", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    h.thread()
        .decide_approval(h.now(), "r1", false, Some("too expensive"))
        .unwrap();
    let next = expect_model(&h);
    assert_eq!(runs.get(), 0);
    let record = h.record("r1");
    assert_eq!(record.status, "error");
    let result = record.result.unwrap();
    assert!(result.contains("rejected"), "result: {result}");
    assert!(result.contains("too expensive"), "result: {result}");
    assert!(next.history.iter().any(|m| m.content == result));
    assert!(matches!(
        h.thread().decide_approval(h.now(), "r1", true, None),
        Err(ThreadError::Conflict(_))
    ));
}

// ---- 8. rate limits --------------------------------------------------------------------------

#[test]
fn a_call_over_the_rate_limit_waits_for_room_in_the_window() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(2));
    let h = host(&clock, vec![("limited", tool)]);
    let first = h.queue("limited", json!({}));
    drive_idle(&h);
    h.set_now(T0 + 1000);
    h.queue("limited", json!({}));
    drive_idle(&h);
    h.set_now(T0 + 2000);
    let third = h.queue("limited", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    let parked = h.call(&third);
    assert_eq!(parked.status, "rate_limited");
    assert_eq!(
        parked.wake_at,
        Some(h.record(&first).started_at.unwrap() + 60_000)
    );
    assert_eq!(parked.wake_at, Some(T0 + 60_000));
    assert_eq!(
        h.record(&third).waiting_for,
        Some(json!({ "rate_limit": { "per_minute": 2, "scope": "thread" } }))
    );
    assert_eq!(h.record(&third).attempts, 0, "waiting is not an attempt");

    h.set_now(T0 + 59_999);
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    h.set_now(T0 + 60_000);
    drive_idle(&h);
    assert_eq!(runs.get(), 3);
    let record = h.record(&third);
    assert_eq!(record.status, "success");
    assert_eq!(record.attempts, 1);
    assert_eq!(record.attempt_log[0].started_at, T0 + 60_000);
}

#[test]
fn a_failing_rate_limit_answers_with_an_error_saying_when_to_retry() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(2).fail());
    let h = host(&clock, vec![("limited", tool)]);
    model_calls(
        &h,
        &[
            ("l1", "limited", "{}"),
            ("l2", "limited", "{}"),
            ("l3", "limited", "{}"),
        ],
    );
    expect_model(&h);
    assert_eq!(runs.get(), 2);
    let record = h.record("l3");
    assert_eq!(record.status, "error");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: rate limited: this tool allows 2 calls per minute per thread; try again in 60 s")
    );
    assert_eq!(record.attempts, 0);
}

#[test]
fn the_deployment_gate_follows_the_shared_window() {
    crate::install_app();
    let policy = ok_tool(&counter())
        .rate_limit(RateLimit::per_minute(3).per_deployment())
        .policy()
        .clone();
    let full = Window {
        used: 3,
        frees_at: T0 + 4000,
    };
    assert_eq!(
        deployment_gate(&policy, Some(full), T0),
        Some(Gate::Suspend(Suspension {
            status: CallStatus::RateLimited,
            wake_at: Some(T0 + 4000),
            detail: json!({ "rate_limit": { "per_minute": 3, "scope": "deployment" } }),
        }))
    );
    let room = Window { used: 2, ..full };
    assert_eq!(deployment_gate(&policy, Some(room), T0), None);
    assert_eq!(
        deployment_gate(&policy, None, T0),
        None,
        "no counter: no objection"
    );
    let thread_only = ok_tool(&counter())
        .rate_limit(RateLimit::per_minute(3))
        .policy()
        .clone();
    assert_eq!(deployment_gate(&thread_only, Some(full), T0), None);
}

#[test]
fn the_engine_asks_the_deployment_counter_and_follows_its_answer() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(3).per_deployment());
    let h = host(&clock, vec![("shared", tool)]);

    // The counter cannot be reached: the call runs (the thread's own window still applies).
    let first = h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!((h.limiter_asked(), runs.get()), (1, 1));
    assert_eq!(h.record(&first).status, "success");

    // Room in the shared window: it runs.
    h.set_limiter(Some(Window {
        used: 2,
        frees_at: T0 + 4000,
    }));
    h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!((h.limiter_asked(), runs.get()), (2, 2));

    // A full shared window: parked until it frees, not counted as an attempt, one alarm.
    h.set_limiter(Some(Window {
        used: 3,
        frees_at: T0 + 4000,
    }));
    let third = h.queue("shared", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    let parked = h.call(&third);
    assert_eq!(parked.status, "rate_limited");
    assert_eq!(parked.wake_at, Some(T0 + 4000));
    assert_eq!(h.next_wake(), Some(T0 + 4000));
    assert_eq!(h.record(&third).attempts, 0);
    assert_eq!(
        h.record(&third).waiting_for,
        Some(json!({ "rate_limit": { "per_minute": 3, "scope": "deployment" } }))
    );

    // At the wake time with room again, the parked call runs.
    h.set_limiter(Some(Window {
        used: 0,
        frees_at: T0 + 4000,
    }));
    h.set_now(T0 + 4000);
    drive_idle(&h);
    assert_eq!(runs.get(), 3);
    assert_eq!(h.record(&third).status, "success");
}

#[test]
fn a_call_cancelled_while_the_counter_answers_never_runs() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = ok_tool(&runs).rate_limit(RateLimit::per_minute(3).per_deployment());
    let h = host(&clock, vec![("shared", tool)]);
    let id = h.queue("shared", json!({}));
    // A stop lands during the round trip to the shared counter.
    h.before_limiter_answer(Box::new(|t: &mut Thread<'_>| {
        t.stop(T0, "user").unwrap();
    }));
    assert!(matches!(drive(&h, 0.5), Action::Idle));
    assert_eq!(h.limiter_asked(), 1);
    assert_eq!(runs.get(), 0, "a cancelled call must not run");
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.attempts, 0);
    assert_eq!(
        record.result.as_deref(),
        Some("Error: cancelled: the thread was stopped (by user)")
    );
}

#[test]
fn prompt_bindings_win_over_the_callers_and_are_fixed_at_the_first_start() {
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Echoes its bindings.")
        .handler(|flow: FlowState| async move { CallToolResult::json(&flow.bindings) });
    let h = host(&clock, vec![("echo", tool)]);
    // The caller tries to choose another account than the operator's and adds a key of its own.
    let mut own = Map::new();
    own.insert("account".into(), json!("someone-else"));
    own.insert("ticket".into(), json!("T-1"));
    let id = h
        .thread()
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&own))
        .unwrap();
    let call = h.call(&id);
    let prompt = json!({ "account": "acme", "region": "eu" });
    let mut t = h.thread();
    let Admission::Run(run) = t
        .handle_due_call(h.now(), call, h.policy("echo"), Some(&prompt), &h.registry)
        .unwrap()
    else {
        panic!("a plain call is admitted at once");
    };
    let fixed = json!({ "account": "acme", "region": "eu", "ticket": "T-1" });
    assert_eq!(
        serde_json::from_str::<Value>(run.call.bindings.as_deref().unwrap()).unwrap(),
        fixed
    );
    assert_eq!(
        serde_json::from_str::<Value>(h.call(&id).bindings.as_deref().unwrap()).unwrap(),
        fixed,
        "stored with the call, so later runs and the cache see the same"
    );
    // The start is stored; the run that follows (here the rerun of that start, as after a
    // crash) sees the stored bindings, whatever the prompt's are by then.
    drop(t);
    drive_idle(&h);
    assert_eq!(
        serde_json::from_str::<Value>(&result_of(&h, &id)).unwrap(),
        fixed
    );
}

// ---- 9. cache --------------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct Pair {
    a: i64,
    b: i64,
}

#[test]
fn cached_results_answer_the_same_arguments_until_the_ttl_passes() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let counted = runs.clone();
    let tool = Tool::new("Adds.")
        .handler(move |_flow: FlowState, p: Pair| {
            let runs = counted.clone();
            async move {
                runs.set(runs.get() + 1);
                Ok::<_, ToolError>(format!("{} (run {})", p.a + p.b, runs.get()))
            }
        })
        .cache_results(Duration::from_secs(60));
    let h = host(&clock, vec![("add", tool)]);
    model_calls(&h, &[("k1", "add", r#"{"a":1,"b":2}"#)]);
    let call = expect_model(&h);
    assert_eq!(result_of(&h, "k1"), "3 (run 1)");

    h.set_now(T0 + 59_000);
    reply(&h, call, "", &[("k2", "add", r#"{ "b": 2, "a": 1 }"#)]);
    let call = expect_model(&h);
    assert_eq!(runs.get(), 1, "answered from the cache");
    assert_eq!(result_of(&h, "k2"), "3 (run 1)");
    assert_eq!(h.record("k2").status, "success");
    assert_eq!(h.record("k2").attempts, 0);

    reply(&h, call, "", &[("k3", "add", r#"{"a":1,"b":3}"#)]);
    let call = expect_model(&h);
    assert_eq!(result_of(&h, "k3"), "4 (run 2)", "other arguments run");

    h.set_now(T0 + 60_001);
    reply(&h, call, "", &[("k4", "add", r#"{"b":2,"a":1}"#)]);
    expect_model(&h);
    assert_eq!(result_of(&h, "k4"), "3 (run 3)", "expired: runs again");
    assert_eq!(runs.get(), 3);
}

#[test]
fn error_results_are_not_cached() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool =
        step_tool(&runs, |_| Err(ToolError::fatal("nope"))).cache_results(Duration::from_secs(60));
    let h = host(&clock, vec![("failing", tool)]);
    let first = h.queue("failing", json!({}));
    drive_idle(&h);
    let second = h.queue("failing", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 2);
    assert_eq!(result_of(&h, &first), result_of(&h, &second));
}

// ---- 10. deadline ----------------------------------------------------------------------------

#[test]
fn a_workflow_deadline_caps_its_sleep_and_stops_it_on_time() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let tool = napper(60, &woke).deadline(Duration::from_secs(10));
    let h = host(&clock, vec![("slow", tool)]);
    let id = h.queue("slow", json!({}));
    drive_idle(&h);
    let call = h.call(&id);
    assert_eq!(call.status, "sleeping");
    assert_eq!(call.deadline_at, Some(T0 + 10_000));
    assert_eq!(call.wake_at, Some(T0 + 10_000), "woken at the deadline");
    assert_eq!(h.next_wake(), Some(T0 + 10_000));

    h.set_now(T0 + 10_000);
    drive_idle(&h);
    assert_eq!(woke.get(), 0, "never ran past its sleep");
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(
        record.result.as_deref(),
        Some("Error: the workflow did not finish within its time limit (10 s) and was stopped")
    );
    assert_eq!(h.next_wake(), None);
}

#[test]
fn a_retry_that_would_wake_after_the_deadline_ends_the_call() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let tool = step_tool(&runs, |_| {
        Err(ToolError::retry_after("later", Duration::from_secs(20)))
    })
    .deadline(Duration::from_secs(10));
    let h = host(&clock, vec![("late", tool)]);
    let id = h.queue("late", json!({}));
    drive_idle(&h);
    assert_eq!(runs.get(), 1);
    assert!(result_of(&h, &id).contains("time limit (10 s)"));
}
