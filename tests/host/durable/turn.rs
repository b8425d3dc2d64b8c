//! Parked calls and the turn around them, each tool's status, bindings, and the engine's timers
//! and work checks (what the driver sets its one alarm to).

use super::*;

// ---- 11. the turn around parked calls -----------------------------------------------------------

#[test]
fn a_model_reply_waits_for_its_parked_call_and_then_calls_the_model() {
    crate::install_app();
    let clock = clock();
    let (woke, quick) = (counter(), counter());
    let h = host(
        &clock,
        vec![("nap", napper(30, &woke)), ("quick", ok_tool(&quick))],
    );
    model_calls(&h, &[("n1", "nap", "{}"), ("q1", "quick", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    assert_eq!(h.call("n1").status, "sleeping");
    assert_eq!(h.record("q1").status, "success");
    assert_eq!(quick.get(), 1);
    assert!(h.store().has_pending_model_calls().unwrap());
    assert_eq!(h.status(), ThreadStatus::Running);
    // Asking again changes nothing: no model call while a call of its reply is parked.
    assert!(matches!(
        h.thread().next_action(h.now(), MAX_STEPS).unwrap(),
        Action::Wait
    ));

    h.set_now(T0 + 30_000);
    let next = expect_model(&h);
    assert_eq!(woke.get(), 1);
    let results: Vec<(&str, &str)> = next
        .history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_str()))
        .collect();
    assert_eq!(results, [("n1", "rested"), ("q1", "done")]);
}

#[test]
fn a_parked_queued_workflow_does_not_hold_up_the_conversation() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(30, &woke))]);
    let id = h.queue("nap", json!({}));
    drive_idle(&h);
    assert_eq!(h.status(), ThreadStatus::Idle);
    assert_eq!(h.call(&id).status, "sleeping");

    h.set_now(T0 + 1000);
    h.thread().post_user_message(h.now(), "hello").unwrap();
    let call = expect_model(&h);
    assert!(
        call.history
            .iter()
            .all(|m| m.tool_calls.iter().all(|c| c.id != id)
                && m.tool_call_id.as_deref() != Some(id.as_str())),
        "the parked call is hidden from the model"
    );
    assert_eq!(call.history.len(), 1);
    assert_eq!(call.history[0].content, "hello");
    reply(&h, call, "hi!", &[]);
    drive_idle(&h);

    // Due on an idle thread: it starts a turn of its own.
    h.set_now(T0 + 30_000);
    let mut t = h.thread();
    let Action::RunTool(due) = t.next_action(h.now(), MAX_STEPS).unwrap() else {
        panic!("expected the parked call to run")
    };
    assert_eq!(due.call.id, id);
    assert_eq!(t.summary().unwrap().status, ThreadStatus::Running);
    h.run_tools(&mut t, vec![due], 0.5);
    drop(t);
    drive_idle(&h);
    assert_eq!(woke.get(), 1);
    assert_eq!(result_of(&h, &id), "rested");

    h.thread().post_user_message(h.now(), "and now?").unwrap();
    let call = expect_model(&h);
    assert!(call
        .history
        .iter()
        .any(|m| m.tool_call_id.as_deref() == Some(id.as_str()) && m.content == "rested"));
}

#[test]
fn stopping_the_thread_cancels_parked_calls() {
    crate::install_app();
    let clock = clock();
    let (woke, approved) = (counter(), counter());
    let h = host(
        &clock,
        vec![
            ("nap", napper(30, &woke)),
            ("refund", ok_tool(&approved).needs_approval()),
        ],
    );
    let nap = h.queue("nap", json!({}));
    let refund = h.queue("refund", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&refund).status, "waiting");
    assert_eq!(h.next_wake(), Some(T0 + 30_000));

    h.thread().stop(h.now(), "user").unwrap();
    for id in [&nap, &refund] {
        let record = h.record(id);
        assert_eq!(record.status, "error");
        assert_eq!(
            record.result.as_deref(),
            Some("Error: cancelled: the thread was stopped (by user)")
        );
    }
    assert_eq!(h.next_wake(), None);
    assert!(h.store().pending_tool_call_ids().unwrap().is_empty());
    h.set_now(T0 + 30_000);
    assert!(matches!(drive(&h, 0.5), Action::Idle));
    assert_eq!((woke.get(), approved.get()), (0, 0));
}

#[test]
fn an_approval_cannot_be_decided_once_the_call_is_cancelled() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("refund", ok_tool(&runs).needs_approval())]);
    let id = h.queue("refund", json!({}));
    drive_idle(&h);
    assert_eq!(h.call(&id).approval.map(|a| a.as_str()), Some("pending"));
    h.thread().stop(h.now(), "user").unwrap();
    assert_eq!(h.call(&id).status, "error");
    assert!(matches!(
        h.thread().decide_approval(h.now(), &id, true, None),
        Err(ThreadError::Conflict(_))
    ));
    assert_eq!(runs.get(), 0);
}

#[test]
fn a_call_interrupted_three_times_is_abandoned() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("crashy", ok_tool(&runs))]);
    let id = h.queue("crashy", json!({}));
    for run in 0..3 {
        let mut t = h.thread();
        let Action::RunTool(call) = t.next_action(h.now(), MAX_STEPS).unwrap() else {
            panic!("run {run}: expected the call to run")
        };
        assert_eq!(h.call(&id).interruptions, run);
        // The Worker dies while the call runs.
        t.start_tool(h.now(), &call, true).unwrap();
    }
    assert!(matches!(
        h.thread().next_action(h.now(), MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let record = h.record(&id);
    assert_eq!(record.status, "error");
    assert_eq!(record.interruptions, 3);
    let result = record.result.unwrap();
    assert!(result.contains("interrupted 3 times"), "result: {result}");
    assert_eq!(runs.get(), 0);
}

// ---- 12. tool status -------------------------------------------------------------------------

#[test]
fn tool_status_reports_busy_rate_limited_error_and_available() {
    crate::install_app();
    let clock = clock();
    let (woke, limited, failing) = (counter(), counter(), counter());
    let h = host(
        &clock,
        vec![
            ("nap", napper(30, &woke)),
            (
                "limited",
                ok_tool(&limited).rate_limit(RateLimit::per_minute(1)),
            ),
            (
                "failing",
                step_tool(&failing, |_| Err(ToolError::fatal("broken"))),
            ),
        ],
    );
    let status = |name: &str| tool_status(&h.store(), name, &h.policy(name), h.now()).unwrap();
    for name in ["nap", "limited", "failing"] {
        assert_eq!(status(name), "available", "{name} before any call");
    }

    h.queue("nap", json!({}));
    h.queue("limited", json!({}));
    h.queue("failing", json!({}));
    drive_idle(&h);
    assert_eq!(status("nap"), "busy");
    assert_eq!(status("limited"), "rate_limited");
    assert_eq!(status("failing"), "error");

    h.set_now(T0 + 60_000);
    assert_eq!(status("limited"), "available", "the window moved on");
    drive_idle(&h);
    assert_eq!(status("nap"), "available");
}

// ---- 13. bindings ----------------------------------------------------------------------------

#[test]
fn queued_bindings_are_stored_with_the_call_and_reach_the_tool() {
    crate::install_app();
    let clock = clock();
    let tool = Tool::new("Echoes its bindings.")
        .handler(|flow: FlowState| async move { CallToolResult::json(&flow.bindings) });
    let h = host(&clock, vec![("echo", tool)]);
    let mut bindings = Map::new();
    bindings.insert("account".into(), json!("acme"));
    let mut t = h.thread();
    let with = t
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&bindings))
        .unwrap();
    let empty = t
        .queue_tool_with_bindings(h.now(), &h.registry, "echo", json!({}), Some(&Map::new()))
        .unwrap();
    let without = t
        .queue_tool(h.now(), &h.registry, "echo", json!({}))
        .unwrap();
    drop(t);

    let stored = h.call(&with).bindings.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&stored).unwrap(),
        json!({ "account": "acme" })
    );
    assert_eq!(h.call(&empty).bindings, None);
    assert_eq!(h.call(&without).bindings, None);
    assert!(h
        .store()
        .pending_tool_calls()
        .unwrap()
        .iter()
        .any(|c| c.call.id == with && c.bindings.as_deref() == Some(stored.as_str())));

    drive_idle(&h);
    assert_eq!(result_of(&h, &with), r#"{"account":"acme"}"#);
    assert_eq!(result_of(&h, &without), "{}");
}

#[test]
fn the_cache_key_is_the_canonical_arguments_plus_the_bindings() {
    crate::install_app();
    let call = |args: &str, bindings: Option<&str>| StoredToolCall {
        call: edgent::values::message::ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: args.into(),
        },
        message_id: "m".into(),
        status: CallStatus::Queued,
        origin: edgent::engine::store::CallOrigin::Queue,
        attempts: 0,
        interruptions: 0,
        wake_at: None,
        approval: None,
        bindings: bindings.map(str::to_owned),
        deadline_at: None,
        version: None,
    };
    assert_eq!(
        cache_key(&call(r#"{ "b": 2, "a": 1 }"#, None)),
        cache_key(&call(r#"{"a":1,"b":2}"#, None))
    );
    assert_ne!(
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"acme"}"#))),
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"globex"}"#))),
        "two accounts never share a cached answer"
    );
    assert_ne!(
        cache_key(&call(r#"{"a":1}"#, None)),
        cache_key(&call(r#"{"a":1}"#, Some(r#"{"account":"acme"}"#)))
    );
}

// ---- the engine's timers and work checks (what the driver sets its one alarm to) ----------

#[test]
fn the_engine_wakes_the_thread_at_its_earliest_parked_call_and_never_when_stopped() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(
        &clock,
        vec![("short", napper(10, &woke)), ("long", napper(90, &woke))],
    );
    let t = h.thread();
    assert_eq!(t.poll_timeout().unwrap(), None, "nothing parked: no alarm");
    assert!(
        !t.wants_step(h.now()).unwrap(),
        "an idle thread with nothing due"
    );
    assert!(!t.has_work(h.now()).unwrap());
    drop(t);

    h.queue("long", json!({}));
    h.queue("short", json!({}));
    assert!(
        h.thread().wants_step(h.now()).unwrap(),
        "queued calls are due at once"
    );
    drive_idle(&h);
    let t = h.thread();
    assert_eq!(t.poll_timeout().unwrap(), Some(T0 + 10_000));
    assert!(!t.wants_step(T0 + 9_999).unwrap());
    assert!(!t.has_work(T0 + 9_999).unwrap());
    assert!(
        t.wants_step(T0 + 10_000).unwrap(),
        "a due parked call starts a turn"
    );
    assert!(t.has_work(T0 + 10_000).unwrap());
    drop(t);

    h.set_now(T0 + 10_000);
    drive_idle(&h);
    assert_eq!(woke.get(), 1);
    assert_eq!(h.thread().poll_timeout().unwrap(), Some(T0 + 90_000));

    h.thread().stop(h.now(), "user").unwrap();
    let t = h.thread();
    assert_eq!(
        t.poll_timeout().unwrap(),
        None,
        "a stopped thread parks nothing"
    );
    assert!(!t.wants_step(T0 + 90_000).unwrap());
    assert!(!t.has_work(T0 + 90_000).unwrap());
}

#[test]
fn a_running_thread_has_work_unless_its_reply_waits_on_a_parked_call() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(30, &woke))]);
    let mut t = h.thread();
    t.post_user_message(h.now(), "hi").unwrap();
    assert!(t.wants_step(h.now()).unwrap());
    assert!(t.has_work(h.now()).unwrap(), "the model is owed a call");
    drop(t);

    // The model's reply calls a workflow that parks: the turn waits, nothing to start.
    let call = expect_model(&h);
    reply(&h, call, "", &[("n1", "nap", "{}")]);
    assert!(matches!(drive(&h, 0.5), Action::Wait));
    let t = h.thread();
    assert_eq!(t.summary().unwrap().status, ThreadStatus::Running);
    assert!(
        !t.has_work(T0 + 29_999).unwrap(),
        "blocked on the parked call"
    );
    assert!(t.has_work(T0 + 30_000).unwrap(), "the parked call is due");
    assert_eq!(t.poll_timeout().unwrap(), Some(T0 + 30_000));
}

#[test]
fn a_configuration_failure_fails_the_turn_and_defers_due_parked_calls_a_minute() {
    crate::install_app();
    let clock = clock();
    let woke = counter();
    let h = host(&clock, vec![("nap", napper(10, &woke))]);
    let id = h.queue("nap", json!({}));
    drive_idle(&h);
    let due = T0 + 10_000;
    h.set_now(due);
    let mut t = h.thread();
    assert!(t.wants_step(due).unwrap());
    t.post_user_message(due, "hi").unwrap();
    t.handle_config_failure(due, "no agent named \"support\"".into())
        .unwrap();
    h.keep_frames(&mut t);
    let summary = t.summary().unwrap();
    assert_eq!(
        summary.status,
        ThreadStatus::Idle,
        "the thread stays usable"
    );
    assert!(summary
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("no agent named")));
    // The due call waits a minute, so an idle thread does not loop on a failing config.
    let later = due + CONFIG_RETRY_MS;
    assert_eq!(h.call(&id).wake_at, Some(later));
    assert_eq!(t.poll_timeout().unwrap(), Some(later));
    assert!(!t.wants_step(later - 1).unwrap());
    assert!(!t.has_work(later - 1).unwrap());
    assert!(t.wants_step(later).unwrap());
    assert_eq!(woke.get(), 0);
}

#[test]
fn a_configuration_failure_defers_queued_calls_too_so_the_thread_does_not_spin() {
    crate::install_app();
    let clock = clock();
    let runs = counter();
    let h = host(&clock, vec![("ok", ok_tool(&runs))]);
    let id = h.queue("ok", json!({}));
    let mut t = h.thread();
    assert!(t.has_work(T0).unwrap(), "a queued call is due at once");
    t.handle_config_failure(T0, "no agent named \"support\"".into())
        .unwrap();
    // Without a wake time the queued call would be due again at once, and the driver would
    // reschedule the failing load immediately, forever.
    let later = T0 + CONFIG_RETRY_MS;
    assert!(!t.has_work(T0 + 1).unwrap());
    assert!(!t.wants_step(later - 1).unwrap());
    assert_eq!(t.poll_timeout().unwrap(), Some(later));
    assert!(t.wants_step(later).unwrap());
    drop(t);
    h.set_now(later);
    drive_idle(&h);
    assert_eq!(runs.get(), 1, "it runs once the configuration loads");
    assert_eq!(h.record(&id).status, "success");
    assert_eq!(h.next_wake(), None, "a started call keeps no wake time");
}

#[test]
fn the_alarm_after_a_loop_wakes_parked_work_keeps_an_idle_thread_s_watchdog_and_else_goes() {
    use edgent::engine::wake::{
        alarm_after_loop, watchdog_due, AlarmChange, KnownAlarm, LoopEnd, WATCHDOG_MS,
    };
    let watchdog = KnownAlarm::Watchdog(T0 + WATCHDOG_MS);
    // Something to wake for always sets the alarm, however the loop stopped and whatever
    // was set.
    for end in [LoopEnd::Idle, LoopEnd::Other] {
        for known in [watchdog, KnownAlarm::Unset, KnownAlarm::Unknown] {
            assert_eq!(
                alarm_after_loop(Some(T0 + 90_000), end, known, T0),
                AlarmChange::Set(T0 + 90_000)
            );
        }
    }
    // Nothing to wake for: an idle thread's watchdog still ahead runs out on its own.
    assert_eq!(
        alarm_after_loop(None, LoopEnd::Idle, watchdog, T0),
        AlarmChange::Keep
    );
    // A running thread that waits (an approval) deletes it: fired, it would step and arm it
    // again every time.
    assert_eq!(
        alarm_after_loop(None, LoopEnd::Other, watchdog, T0),
        AlarmChange::Delete
    );
    // An alarm that fired is gone: nothing to delete.
    for end in [LoopEnd::Idle, LoopEnd::Other] {
        assert_eq!(
            alarm_after_loop(None, end, KnownAlarm::Unset, T0),
            AlarmChange::Keep
        );
    }
    // A watchdog that has run out, or an alarm not known, is deleted.
    assert_eq!(
        alarm_after_loop(None, LoopEnd::Idle, watchdog, T0 + WATCHDOG_MS),
        AlarmChange::Delete
    );
    assert_eq!(
        alarm_after_loop(None, LoopEnd::Idle, KnownAlarm::Unknown, T0),
        AlarmChange::Delete
    );
    // Armed again once half of it has run out, and whenever it is not known to be armed.
    assert!(!watchdog_due(watchdog, T0 + WATCHDOG_MS / 2));
    assert!(watchdog_due(watchdog, T0 + WATCHDOG_MS / 2 + 1));
    assert!(watchdog_due(KnownAlarm::Unknown, T0));
    assert!(watchdog_due(KnownAlarm::Unset, T0));
}
