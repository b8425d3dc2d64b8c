//! The watchdog alarm through the shipped runtime, in virtual time: turns that follow each
//! other arm it once, a message stored under a kept watchdog is resumed by it after a crash,
//! an arming overtaken by the loop's own change claims nothing, and a thread that waits for a
//! person keeps no alarm.

use std::rc::Rc;

use edgent::engine::store::ThreadStatus;
use edgent::engine::wake::WATCHDOG_MS;
use edgent::prelude::*;
use edgent::testing::{reply_events, TestHost};

use super::{host, record, send, transcript, T0};

/// Asserts that the alarm left is the watchdog of the turn that just ended, and that it then
/// runs out with nothing to do: it runs, arms and deletes nothing.
pub(super) fn only_the_watchdog_left(h: &Rc<TestHost>, rt: &edgent::runtime::ThreadRuntime) {
    let at = h.alarm_at().expect("the watchdog is left to run out");
    assert!(
        at > h.now() && at <= h.now() + WATCHDOG_MS,
        "not a watchdog: {at}"
    );
    let (requests, writes) = (h.model_requests().len(), h.alarm_writes());
    h.fire_alarm(rt);
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (None, writes),
        "the watchdog armed and deleted nothing when it ran out"
    );
    assert_eq!(h.model_requests().len(), requests, "nothing ran");
}

#[test]
fn turns_that_follow_each_other_arm_the_watchdog_once_and_a_crash_between_them_resumes() {
    let h = host(vec![]);
    let rt = h.runtime();
    // Two turns, the second while more than half the watchdog is left: one alarm write.
    for (at, text) in [(0, "One"), (WATCHDOG_MS / 4, "Two")] {
        h.set_now(T0 + at);
        h.script(Ok(reply_events("ok", &[])));
        h.run(rt.apply(send(text))).unwrap();
        h.run_spawned();
    }
    assert_eq!(transcript(&h).len(), 4);
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (Some(T0 + WATCHDOG_MS), 1)
    );

    // A third message while more than half is still left is stored without arming it; the
    // instance dies before its turn starts, and the watchdog the first turn armed resumes it.
    h.set_now(T0 + WATCHDOG_MS / 2 - 1);
    h.run(rt.apply(send("Three"))).unwrap();
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (Some(T0 + WATCHDOG_MS), 1),
        "stored without an alarm write"
    );
    drop(rt);
    let h = h.restarted(edgent::tool::Registry::build(vec![]).unwrap());
    let rt = h.runtime();
    h.script(Ok(reply_events("Resumed.", &[])));
    assert_eq!(h.fire_alarm(&rt), Some(T0 + WATCHDOG_MS));
    assert_eq!(transcript(&h).last().unwrap().1, "Resumed.");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Idle);
    only_the_watchdog_left(&h, &rt);

    // Less than half left: the next message arms it again before anything runs.
    let now = h.now() + WATCHDOG_MS / 2 + 1;
    h.set_now(now);
    let writes = h.alarm_writes();
    h.script(Ok(reply_events("ok", &[])));
    h.run(rt.apply(send("Four"))).unwrap();
    assert_eq!(
        (h.alarm_at(), h.alarm_writes()),
        (Some(now + WATCHDOG_MS), writes + 1)
    );
    h.run_spawned();
}

#[test]
fn a_heartbeat_arming_overtaken_by_the_loop_s_own_change_claims_no_watchdog() {
    use edgent::tool::FlowHost;
    let h = host(vec![]);
    let rt = h.runtime();
    // Alarm writes answer a second after they are issued (and apply in the order issued).
    h.alarm_write_ms.set(1_000);
    // The model opens 4.5 s after the loop asks: the watchdog fires during that long step.
    h.model_open_ms.set(4_500);
    h.script(Ok(reply_events("Slow but here.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    assert_eq!(h.now(), T0 + 1_000, "the handler waited for its arming");
    assert_eq!(h.alarm_at(), Some(T0 + WATCHDOG_MS));

    // At 5 s the watchdog fires while the step runs: the heartbeat arms it again (answered
    // at 6 s). At 5.5 s the reply arrives and the loop, stopping, deletes the alarm (issued
    // after the heartbeat's write, so it lands after it).
    let fire = async {
        FlowHost::sleep(&*h, 4_000).await;
        assert_eq!(h.take_alarm(), Some(T0 + WATCHDOG_MS));
        rt.alarm().await;
    };
    h.run_spawned_with(fire);
    assert_eq!(transcript(&h).last().unwrap().1, "Slow but here.");
    assert_eq!(h.alarm_at(), None, "the loop's delete landed last");

    // The next message must not take the heartbeat's arming for a watchdog still in place.
    h.set_now(T0 + 7_000);
    h.script(Ok(reply_events("ok", &[])));
    h.run(rt.apply(send("Again"))).unwrap();
    assert_eq!(
        h.alarm_at(),
        Some(T0 + 7_000 + WATCHDOG_MS),
        "stored work is covered by an alarm"
    );
    h.run_spawned();
}

#[test]
fn a_turn_that_waits_for_an_approval_right_after_another_leaves_no_alarm() {
    let guarded = Tool::new("Needs a person's yes.")
        .needs_approval()
        .handler(|_flow: FlowState| async { CallToolResult::text("done") });
    let registry = edgent::tool::Registry::build(vec![("guarded", guarded)]).unwrap();
    let h = TestHost::new(registry, T0)
        .with_agent(edgent::testing::agent(&["guarded"]))
        .into_rc();
    let rt = h.runtime();
    h.script(Ok(reply_events("Hello.", &[])));
    h.run(rt.apply(send("Hi"))).unwrap();
    h.run_spawned();
    assert_eq!(
        h.alarm_at(),
        Some(T0 + WATCHDOG_MS),
        "the first turn's watchdog"
    );

    // The next turn starts under that watchdog and stops waiting for a person: a running
    // thread. Left armed, the watchdog would wake it every few seconds while it waits.
    h.set_now(T0 + 1_000);
    h.script(Ok(reply_events("", &[("c1", "guarded", "{}")])));
    h.run(rt.apply(send("Do the guarded thing"))).unwrap();
    h.run_spawned();
    assert_eq!(record(&h, "c1").status, "waiting");
    assert_eq!(h.thread().summary().unwrap().status, ThreadStatus::Running);
    assert_eq!(
        h.alarm_at(),
        None,
        "nothing wakes a thread that waits for a person"
    );
}
