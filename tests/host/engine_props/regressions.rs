//! Regressions: each case the property found, as a plain test, and the harness's own wake test.

use super::*;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use edgent::tool::{BoxFuture, FlowHost};

/// A case's setup with every option at its plainest and `tools` as the palette.
fn plain(tools: &[&str]) -> Setup {
    Setup {
        dual: false,
        parallel: false,
        budget: None,
        max_steps: 4,
        max_turns: 1_000,
        stop_tool: false,
        palette: tools
            .iter()
            .map(|t| u8::try_from(TOOLS.iter().position(|n| n == t).unwrap()).unwrap())
            .collect(),
        finale: 0,
    }
}

/// A reply calling the palette's first tool once per id, with `{"n": 0}`.
fn calling(ids: &[IdKind]) -> Op {
    Op::Reply(ReplySpec {
        text: Size::Empty,
        calls: ids
            .iter()
            .map(|&id| CallSpec {
                id,
                tool: 0,
                args: Args::Good(0),
            })
            .collect(),
        fan_out: None,
        end: End::Whole,
    })
}

/// A view of `w`'s thread as a new instance of the object sees it (its memory empty).
fn new_instance(w: &World) -> Thread<'_> {
    Thread::open_migrated(&*w.storage).with_cache(Rc::default())
}

#[test]
fn a_reply_a_stop_cut_short_is_not_left_pending_by_a_crash() {
    // Stopped while the model streams, then the object dies before the stream ends: the reply
    // stayed `pending` for good (a stopped thread took no step to fail it).
    let mut w = new_world(&plain(&["echo"]));
    for op in [Op::User(Size::Short(0)), Op::Step, Op::Stop, Op::Crash] {
        w.apply(&op);
    }
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["pending"]
    );
    let now = w.now();
    let mut t = new_instance(&w);
    assert!(
        t.wants_step(now).unwrap(),
        "the watchdog must step the stopped thread once"
    );
    assert!(matches!(t.next_action(now, 4).unwrap(), Action::Idle));
    drop(t);
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["failed"]
    );
    assert!(
        !new_instance(&w).wants_step(now).unwrap(),
        "and then never again"
    );
    // The other order: a crash mid-stream, then a stop from a new instance.
    run_case(
        &plain(&["echo"]),
        &[Op::User(Size::Short(0)), Op::Step, Op::Crash, Op::Stop],
    );
}

#[test]
fn a_call_a_crash_cut_short_on_a_stopped_thread_gets_its_result() {
    // The Worker dies while a call runs, and the next request is a stop: the call stayed
    // `running` for good, without a result.
    let mut w = new_world(&plain(&["crashy"]));
    for op in [
        Op::Queue {
            tool: 0,
            args: Args::Good(0),
        },
        Op::Step,
        Op::Stop,
    ] {
        w.apply(&op);
    }
    assert_eq!(w.strings("SELECT status FROM tool_calls"), ["running"]);
    let now = w.now();
    let mut t = new_instance(&w);
    assert!(t.wants_step(now).unwrap());
    assert!(matches!(t.next_action(now, 4).unwrap(), Action::Idle));
    drop(t);
    let results = w.strings("SELECT content FROM messages WHERE role = 'tool'");
    assert_eq!(
        results,
        ["Error: cancelled: the thread was stopped (by user)"]
    );
    w.check();
}

#[test]
fn a_queued_call_is_stored_with_its_message_or_not_at_all() {
    // A failing statement between the message holding a queued call and the call's row left
    // the message without its call: a call the history shows that never runs.
    for n in 0..4 {
        let mut w = new_world(&plain(&["echo"]));
        w.apply(&Op::CrashDuring(
            n,
            Box::new(Op::Queue {
                tool: 0,
                args: Args::Good(0),
            }),
        ));
        w.check();
        run_case(
            &plain(&["echo"]),
            &[Op::CrashDuring(
                n,
                Box::new(Op::Queue {
                    tool: 0,
                    args: Args::Good(0),
                }),
            )],
        );
    }
}

#[test]
fn a_result_is_stored_with_its_call_closed_or_not_at_all() {
    // A failing statement between a call's result message and the update closing the call
    // left a result on a call still `running`, which ran again and got a second result.
    for n in 0..12 {
        run_case(
            &plain(&["echo"]),
            &[
                Op::Queue {
                    tool: 0,
                    args: Args::Good(0),
                },
                Op::CrashDuring(n, Box::new(Op::Step)),
            ],
        );
    }
}

#[test]
fn an_approval_is_stored_with_its_wake_up_or_not_at_all() {
    // A failing statement after the decision was stored but before the call was made due
    // left the call waiting for good, and a second decision was refused (not pending).
    for (n, yes) in (0..7).flat_map(|n| [(n, true), (n, false)]) {
        let setup = plain(&["guarded"]);
        let mut w = new_world(&setup);
        w.apply(&Op::Queue {
            tool: 0,
            args: Args::Good(0),
        });
        w.apply(&Op::Step);
        assert_eq!(w.strings("SELECT approval FROM tool_calls"), ["pending"]);
        w.apply(&Op::CrashDuring(n, Box::new(Op::Approve { pick: 0, yes })));
        w.check();
        let decided = w.strings("SELECT approval FROM tool_calls");
        if decided != ["pending"] {
            let due = w.strings("SELECT id FROM tool_calls WHERE wake_at IS NOT NULL");
            assert_eq!(
                due.len(),
                1,
                "decided ({decided:?}) but not due (crash at {n})"
            );
        }
        w.settle();
    }
}

#[test]
fn a_rate_limited_call_that_wakes_to_a_full_window_waits_for_the_next() {
    // Three calls of a tool allowed once a minute: the second and third park until the window
    // frees; when it does, the second takes the slot and the third, gated again, kept its
    // old wake time (already passed), so the driver stepped it without end for a minute.
    let mut w = new_world(&plain(&["limited"]));
    for op in [
        Op::User(Size::Short(0)),
        Op::Step,
        calling(&[IdKind::Fresh, IdKind::Fresh, IdKind::Fresh]),
        Op::Step,
        Op::Step,
        Op::Step,
    ] {
        w.apply(&op);
    }
    let wakes = |w: &World| {
        w.strings(
            "SELECT id || ' ' || status || ' ' || (wake_at - 1795300162000) FROM tool_calls
             WHERE status = 'rate_limited' ORDER BY seq",
        )
    };
    assert_eq!(wakes(&w).len(), 2, "{:?}", wakes(&w));
    w.clock.set(T0 + 60_000);
    w.apply(&Op::Step); // the second call takes the freed slot
    w.apply(&Op::Step); // the third is gated again
    let third = wakes(&w);
    assert_eq!(third.len(), 1);
    assert!(third[0].ends_with(" rate_limited 120000"), "{third:?}");
    let mut t = w.client();
    assert!(matches!(t.next_action(w.now(), 4).unwrap(), Action::Wait));
    drop(t);
    w.settle();
}

#[test]
fn provider_ids_that_some_wire_cannot_carry_are_replaced_by_ours() {
    // `a.b` and `a_b` were kept as they came; the Messages API allows neither `.` nor ` `, the
    // body mapped both to `a_b`, and every later request of the thread was refused (two
    // tool_use blocks with one id). A 1 MB id was kept too (and repeated in its result, whose
    // row a 1 MB result took past the limit).
    let mut w = new_world(&plain(&["echo"]));
    for op in [
        Op::User(Size::Short(0)),
        Op::Step,
        calling(&[
            IdKind::Odd(0),
            IdKind::Odd(1),
            IdKind::Odd(2),
            IdKind::Long(LONG_ID),
            IdKind::Long(41),
        ]),
    ] {
        w.apply(&op);
        w.check();
    }
    let ids = w.strings("SELECT id FROM tool_calls ORDER BY seq");
    assert_eq!(ids.len(), 5);
    assert_eq!(ids[1], "a_b", "an id every wire takes is kept");
    for id in [&ids[0], &ids[2], &ids[3], &ids[4]] {
        assert!(
            id.starts_with("call_") && id.len() == 37,
            "replaced: {}",
            &id[..id.len().min(50)]
        );
    }
    run_case(
        &plain(&["echo"]),
        &[
            Op::User(Size::Short(0)),
            Op::Step,
            calling(&[IdKind::Odd(7), IdKind::Odd(0)]),
            Op::User(Size::Short(0)),
        ],
    );
}

#[test]
fn a_tool_name_longer_than_any_tool_fails_the_reply_once() {
    // An unknown tool name of 1 MB: its error result repeated it (name and text) past the row
    // limit, the result could not be stored, the call ran again after each "interruption" and
    // ended as "interrupted 3 times" (the false error of issue 13 #5).
    let mut w = new_world(&plain(&["echo"]));
    let long = u8::try_from(TOOLS.len()).unwrap();
    w.apply(&Op::User(Size::Short(0)));
    w.apply(&Op::Reply(ReplySpec {
        text: Size::Short(3),
        calls: vec![CallSpec {
            id: IdKind::Fresh,
            tool: long,
            args: Args::Good(0),
        }],
        fan_out: None,
        end: End::Whole,
    }));
    w.check();
    assert_eq!(
        w.strings("SELECT status FROM messages WHERE role = 'assistant'"),
        ["failed"]
    );
    assert!(w.call_ids().is_empty(), "none of its calls is stored");
    let summary = w.host.thread().summary().unwrap();
    assert_eq!(summary.status, ThreadStatus::Idle);
    assert!(summary
        .last_error
        .unwrap()
        .contains("tool names have at most 64"));
    w.settle();
}

/// A set of futures polled only once woken, as `join_all` over more than 30 futures polls.
struct PolledWhenWoken(Vec<(BoxFuture<'static, ()>, Arc<Woken>)>);

struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Future for PolledWhenWoken {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.0.retain_mut(|(future, woken)| {
            if !woken.0.swap(false, Ordering::SeqCst) {
                return true;
            }
            let waker = Waker::from(woken.clone());
            future
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        });
        if self.0.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn the_harness_wakes_a_sleep_when_the_clock_reaches_it() {
    // The harness moved the clock to a sleep's deadline but never woke the sleep: a combinator
    // that polls only woken futures (`join_all` over more than 30 of them, when the engine ran
    // a parallel reply's calls all at once) waited for good ("the work waits for something
    // that never comes").
    let w = new_world(&plain(&["echo"]));
    let sleeps = (0..40)
        .map(|i| {
            (
                w.host.sleep(1_000 + i),
                Arc::new(Woken(AtomicBool::new(true))),
            )
        })
        .collect();
    w.host.run(PolledWhenWoken(sleeps));
    assert_eq!(w.now(), T0 + 1_039);
}
