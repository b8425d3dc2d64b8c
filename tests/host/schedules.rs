//! Schedules through the shipped runtime in virtual time: made by an operation, kept in the
//! thread's SQLite, the alarm set to the earliest due time, fired by the alarm as a message
//! (or a queued call), once per due time, at most once after downtime, never on a stopped
//! thread; a fresh runtime (a restarted object) over the same storage keeps them.

use std::rc::Rc;

use serde_json::{json, Value};

use edgent::api::ops::ThreadOp;
use edgent::engine::store::{Order, ThreadStatus};
use edgent::engine::wake::WATCHDOG_MS;
use edgent::runtime::ThreadRuntime;
use edgent::testing::{reply_events, TestHost};
use edgent::values::protocol::ServerFrame;
use edgent::values::schedule::{ScheduleSpec, When};

use crate::flow_host::WithThread;

/// Tuesday 2026-11-24 18:00:00 UTC.
const T0: i64 = 1_795_543_200_000;
const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;

fn op(method: &str, params: Value) -> ThreadOp {
    ThreadOp::from_rpc(method, &params).unwrap()
}

fn create(h: &Rc<TestHost>, rt: &Rc<ThreadRuntime>, spec: Value) -> Value {
    let answer = h.run(rt.apply(op("create_schedule", spec))).unwrap();
    h.run_spawned();
    answer["schedule"].clone()
}

/// Why `spec` is refused, whether decoding the request or storing it refuses it.
fn refused(h: &Rc<TestHost>, rt: &Rc<ThreadRuntime>, spec: Value) -> String {
    let e = match ThreadOp::from_rpc("create_schedule", &spec) {
        Ok(op) => h.run(rt.apply(op)).unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(e.status, 400, "{e:?}");
    e.message
}

/// The user messages of the thread, oldest first.
fn user_messages(h: &TestHost) -> Vec<String> {
    h.thread()
        .messages(100, 0, Order::Asc, false)
        .unwrap()
        .messages
        .into_iter()
        .filter(|m| m.role.as_str() == "user")
        .map(|m| m.content)
        .collect()
}

/// Moves the clock to `at` and fires the alarm there, as the platform would.
fn alarm_at(h: &Rc<TestHost>, rt: &Rc<ThreadRuntime>, at: i64) {
    h.set_now(at);
    // The platform removes an alarm it fires; one set for later (a test firing early) stays.
    if h.alarm_at().is_some_and(|set| set <= at) {
        h.take_alarm();
    }
    h.run(rt.alarm());
    h.run_spawned();
}

#[test]
fn a_bad_schedule_is_refused_with_the_field_that_is_wrong() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    for (spec, says) in [
        (
            json!({ "message": "hi" }),
            "exactly one of at, delay_seconds",
        ),
        (
            json!({ "delay_seconds": 5, "cron": "* * * * *", "message": "hi" }),
            "exactly one of at",
        ),
        (
            json!({ "delay_seconds": 5 }),
            "exactly one of message, tool",
        ),
        (
            json!({ "every_seconds": 0, "message": "hi" }),
            "every_seconds: at least 1 s",
        ),
        (
            json!({ "cron": "61 * * * *", "message": "hi" }),
            "cron: not a cron expression",
        ),
        (
            json!({ "cron": "every day", "message": "hi" }),
            "cron: not a cron expression",
        ),
        (
            json!({ "at": "tomorrow", "message": "hi" }),
            "at: not an RFC 3339 instant",
        ),
        (
            json!({ "delay_seconds": 5, "message": "  " }),
            "message: must not be empty",
        ),
        (
            json!({ "delay_seconds": 5, "message": "hi", "arguments": {} }),
            "arguments: only with tool",
        ),
        (
            json!({ "delay_seconds": 5, "message": "hi", "when": 1 }),
            "unknown field",
        ),
    ] {
        let message = refused(&h, &rt, spec.clone());
        assert!(message.contains(says), "{spec}: {message}");
    }
    let e = h
        .run(rt.apply(op(
            "create_schedule",
            json!({ "delay_seconds": 5, "tool": "no_such_tool" }),
        )))
        .unwrap_err();
    assert!(e.message.contains("unknown tool"), "{e:?}");
    let e = h
        .run(rt.apply(op(
            "create_schedule",
            json!({ "delay_seconds": 5, "tool": "get_weather", "arguments": { "town": "x" } }),
        )))
        .unwrap_err();
    assert!(e.message.contains("arguments"), "{e:?}");
    assert!(
        h.store().schedules(true).unwrap().is_empty(),
        "nothing stored"
    );
}

#[test]
fn a_delayed_message_arms_the_alarm_fires_once_and_is_answered() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    let s = create(
        &h,
        &rt,
        json!({ "delay_seconds": 90, "message": "Time for the standup.", "name": "standup" }),
    );
    assert_eq!(s["next_at"], T0 + 90_000);
    assert_eq!(s["status"], "active");
    assert_eq!(s["created_by"], "server");
    assert_eq!(
        h.alarm_at(),
        Some(T0 + 90_000),
        "the alarm follows the schedule"
    );
    assert_eq!(
        h.thread().summary().unwrap().next_schedule_at,
        Some(T0 + 90_000)
    );

    // Early: nothing fires.
    alarm_at(&h, &rt, T0 + 89_999);
    assert!(user_messages(&h).is_empty());

    h.script(Ok(reply_events("Standup: nothing blocks.", &[])));
    alarm_at(&h, &rt, T0 + 90_000);
    assert_eq!(user_messages(&h), ["Time for the standup."]);
    let summary = h.thread().summary().unwrap();
    assert_eq!(
        (summary.status, summary.turn_count),
        (ThreadStatus::Idle, 1)
    );
    assert_eq!(summary.next_schedule_at, None);
    assert_eq!(
        h.alarm_at(),
        Some(T0 + 90_000 + WATCHDOG_MS),
        "nothing left to wake for but the turn's watchdog, left to run out"
    );
    let stored = h.store().schedules(true).unwrap();
    assert_eq!(
        (
            stored[0].status.as_str(),
            stored[0].fired_count,
            stored[0].next_at
        ),
        ("done", 1, None)
    );
    assert!(h
        .frames()
        .iter()
        .any(|f| matches!(f, ServerFrame::Schedule { schedule } if schedule.status == "done")));

    // The same due time never fires again: the watchdog finds nothing and arms nothing.
    alarm_at(&h, &rt, T0 + 90_000 + WATCHDOG_MS);
    assert_eq!(user_messages(&h).len(), 1);
    assert_eq!(h.alarm_at(), None);
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn an_interval_keeps_its_rhythm_and_catches_up_once_after_downtime() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    create(&h, &rt, json!({ "every_seconds": 600, "message": "tick" }));
    assert_eq!(h.alarm_at(), Some(T0 + 10 * MIN));

    h.script(Ok(reply_events("ok", &[])));
    alarm_at(&h, &rt, T0 + 10 * MIN + 250);
    assert_eq!(user_messages(&h), ["tick"]);
    // The grid, not the firing time: the next is at +20 min, not +20 min 250 ms.
    assert_eq!(h.alarm_at(), Some(T0 + 20 * MIN));

    // Asleep for an hour: six due times passed; one message, then the grid after now.
    h.script(Ok(reply_events("ok", &[])));
    alarm_at(&h, &rt, T0 + 75 * MIN);
    assert_eq!(user_messages(&h), ["tick", "tick"]);
    assert_eq!(h.alarm_at(), Some(T0 + 80 * MIN));
    let s = &h.store().schedules(false).unwrap()[0];
    assert_eq!((s.fired_count, s.next_at), (2, Some(T0 + 80 * MIN)));
}

#[test]
fn a_cron_schedule_fires_at_its_utc_times() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    // Weekdays at 09:00 UTC; T0 is Tuesday 18:00, so Wednesday 09:00 first.
    let s = create(
        &h,
        &rt,
        json!({ "cron": "0 9 * * 1-5", "message": "Daily summary, please." }),
    );
    assert_eq!(s["next_at"], T0 + 15 * HOUR);
    assert_eq!(h.alarm_at(), Some(T0 + 15 * HOUR));
    h.script(Ok(reply_events("Summary: all quiet.", &[])));
    alarm_at(&h, &rt, T0 + 15 * HOUR);
    assert_eq!(user_messages(&h), ["Daily summary, please."]);
    assert_eq!(h.alarm_at(), Some(T0 + 39 * HOUR), "Thursday 09:00");

    // The arithmetic on its own: Friday 09:00 is followed by Monday 09:00.
    let friday = T0 + 63 * HOUR;
    let when = When::Cron("0 9 * * 1-5".into());
    assert_eq!(
        when.next_due(friday, friday).unwrap(),
        Some(friday + 72 * HOUR)
    );
}

#[test]
fn a_schedule_can_queue_a_tool_call() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    create(
        &h,
        &rt,
        json!({ "delay_seconds": 1, "tool": "get_current_time", "arguments": {} }),
    );
    alarm_at(&h, &rt, T0 + 1_000);
    let calls = h
        .store()
        .tool_call_page(10, 0, Order::Asc)
        .unwrap()
        .tool_calls;
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].tool.as_str(), calls[0].status.as_str()),
        ("get_current_time", "success")
    );
    assert!(h.model_requests().is_empty(), "a queued call asks no model");
}

#[test]
fn a_stopped_thread_fires_nothing_and_sets_no_alarm() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    create(&h, &rt, json!({ "delay_seconds": 60, "message": "later" }));
    h.run(rt.apply(op("stop", json!({})))).unwrap();
    h.run_spawned();
    alarm_at(&h, &rt, T0 + 2 * MIN);
    assert!(user_messages(&h).is_empty());
    assert_eq!(h.thread().poll_timeout().unwrap(), None);
    assert_eq!(h.alarm_at(), None, "the driver left no alarm");
    let e = h
        .run(rt.apply(op(
            "create_schedule",
            json!({ "delay_seconds": 60, "message": "x" }),
        )))
        .unwrap_err();
    assert_eq!(e.status, 409, "{e:?}");
}

#[test]
fn schedules_are_listed_cancelled_and_kept_across_a_restart() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    let a = create(
        &h,
        &rt,
        json!({ "every_seconds": 3600, "message": "hourly" }),
    );
    let b = create(&h, &rt, json!({ "delay_seconds": 120, "message": "once" }));
    let list = h.run(rt.apply(op("list_schedules", json!({})))).unwrap();
    let ids: Vec<&str> = list["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a["id"].as_str().unwrap(), b["id"].as_str().unwrap()]);

    let cancelled = h
        .run(rt.apply(op("cancel_schedule", json!({ "schedule_id": b["id"] }))))
        .unwrap();
    assert_eq!(cancelled["schedule"]["status"], "cancelled");
    let again = h
        .run(rt.apply(op("cancel_schedule", json!({ "schedule_id": b["id"] }))))
        .unwrap_err();
    assert_eq!((again.status, again.code), (409, "conflict"), "{again:?}");
    assert!(again.message.contains("cancelled already"), "{again:?}");
    let unknown = h
        .run(rt.apply(op(
            "cancel_schedule",
            json!({ "schedule_id": "no-such-id" }),
        )))
        .unwrap_err();
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(
        h.thread().summary().unwrap().next_schedule_at,
        Some(T0 + HOUR),
        "the row follows the cancellation"
    );
    let all = h
        .run(rt.apply(op("list_schedules", json!({ "ended": true }))))
        .unwrap();
    assert_eq!(all["schedules"].as_array().unwrap().len(), 2);

    // A new object over the same storage (a restart) fires what is due.
    let restarted = h.runtime();
    h.script(Ok(reply_events("ok", &[])));
    alarm_at(&h, &restarted, T0 + HOUR);
    assert_eq!(user_messages(&h), ["hourly"]);
}

#[test]
fn a_thread_holds_a_bounded_number_of_schedules() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    for _ in 0..edgent::values::schedule::MAX_SCHEDULES_PER_THREAD {
        create(&h, &rt, json!({ "every_seconds": 3600, "message": "x" }));
    }
    let e = h
        .run(rt.apply(op(
            "create_schedule",
            json!({ "every_seconds": 3600, "message": "x" }),
        )))
        .unwrap_err();
    assert_eq!(e.status, 409, "{e:?}");
    assert!(e.message.contains("active schedules"), "{e:?}");
}

#[test]
fn a_tool_makes_a_schedule_through_its_flow() {
    let h = TestHost::with_thread(T0);
    let flow = h.flow("call-1");
    let s = flow
        .schedule(&ScheduleSpec::cron("0 18 * * *", "Write today's summary."))
        .unwrap();
    assert_eq!(s.created_by, "tool");
    assert_eq!(
        s.next_at,
        Some(T0 + 24 * HOUR),
        "18:00 is now: the next is tomorrow's"
    );
    let e = flow
        .schedule(&ScheduleSpec::every(0, "too often"))
        .unwrap_err();
    assert!(e.to_string().contains("every_seconds"), "{e}");
}

#[test]
fn a_tool_run_again_gets_the_schedule_it_made_not_a_second_one() {
    let h = TestHost::with_thread(T0);
    // Two runs of the same call (a crash between them, or a workflow waking): each makes
    // two schedules, in the same order.
    let mut made = Vec::new();
    for _ in 0..2 {
        let flow = h.flow("call-1");
        let a = flow.schedule(&ScheduleSpec::every(3600, "a")).unwrap();
        let b = flow.schedule(&ScheduleSpec::every(7200, "b")).unwrap();
        made.push((a.id, b.id));
    }
    assert_eq!(made[0], made[1]);
    assert_ne!(made[0].0, made[0].1);
    assert_eq!(h.store().schedules(true).unwrap().len(), 2);
    // Another call makes its own.
    h.flow("call-2")
        .schedule(&ScheduleSpec::every(3600, "a"))
        .unwrap();
    assert_eq!(h.store().schedules(true).unwrap().len(), 3);
}

#[test]
fn ended_schedules_are_kept_for_the_list_the_fifty_that_ended_last() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    // Made first, ended last: it must stay listed.
    let first = create(
        &h,
        &rt,
        json!({ "every_seconds": 3600, "message": "first" }),
    );
    let first = first["id"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for _ in 0..55 {
        let s = create(&h, &rt, json!({ "every_seconds": 3600, "message": "x" }));
        let id = s["id"].as_str().unwrap().to_owned();
        h.run(rt.apply(op("cancel_schedule", json!({ "schedule_id": id }))))
            .unwrap();
        ids.push(id);
        h.advance(1);
    }
    h.run(rt.apply(op("cancel_schedule", json!({ "schedule_id": first }))))
        .unwrap();
    let kept: Vec<String> = h
        .store()
        .schedules(true)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(kept.len(), 50);
    assert!(kept.contains(&first), "the one that ended last is kept");
    assert_eq!(kept[1..], ids[6..], "then the newest 49 others");
}

#[test]
fn ended_schedules_are_kept_for_the_list_only_the_newest_fifty() {
    let h = TestHost::with_thread(T0);
    let rt = h.runtime();
    let mut ids = Vec::new();
    for _ in 0..60 {
        let s = create(&h, &rt, json!({ "every_seconds": 3600, "message": "x" }));
        let id = s["id"].as_str().unwrap().to_owned();
        h.run(rt.apply(op("cancel_schedule", json!({ "schedule_id": id }))))
            .unwrap();
        ids.push(id);
    }
    let kept: Vec<String> = h
        .store()
        .schedules(true)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(kept, ids[10..], "the newest fifty, oldest first");
}
