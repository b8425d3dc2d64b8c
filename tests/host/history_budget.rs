//! Property tests of the history budget (`Store::model_history_within` + `repair_history`) over
//! random histories on real SQLite: text, tool calls with their results (some results late,
//! after user messages), injected `tool` messages naming calls that never existed, and any
//! budget. Fixed case count, so `cargo test` runs them the same every time.

use std::collections::HashSet;

use proptest::prelude::*;

use edgent::engine::store::{estimate_tokens, Store};
use edgent::engine::thread::{repair_history, Thread};
use edgent::testing::Sqlite;
use edgent::values::message::{Message, Role, ToolCall};

const T0: i64 = 1_795_300_162_000;

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    /// An assistant reply with `calls` tool calls, then their results (each `size` long).
    Calls {
        calls: usize,
        size: usize,
    },
    /// A `tool` message whose call never existed (injected by a client or a hook).
    Orphan(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1usize..400).prop_map(Step::User),
        (1usize..400).prop_map(Step::Assistant),
        (1usize..4, 1usize..300).prop_map(|(calls, size)| Step::Calls { calls, size }),
        (1usize..200).prop_map(Step::Orphan),
    ]
}

/// Stores the steps; returns how many messages were stored.
fn store(db: &Sqlite, steps: &[Step]) -> usize {
    Thread::open(db).unwrap();
    let store = Store::new(db);
    store.create_thread(T0, "t", "support", &[]).unwrap();
    let mut n = 0;
    let mut append = |m: Message| {
        store.append_message(&m).unwrap();
        n += 1;
    };
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::User(len) => append(Message::new(Role::User, "u".repeat(*len), T0)),
            Step::Assistant(len) => append(Message::new(Role::Assistant, "a".repeat(*len), T0)),
            Step::Calls { calls, size } => {
                let calls: Vec<ToolCall> = (0..*calls)
                    .map(|c| ToolCall {
                        id: format!("call_{i}_{c}"),
                        name: "lookup".into(),
                        arguments: "{}".into(),
                    })
                    .collect();
                let mut reply = Message::new(Role::Assistant, "", T0);
                reply.tool_calls = calls.clone();
                append(reply);
                for c in &calls {
                    append(Message::tool_result(c, "r".repeat(*size), T0));
                }
            }
            Step::Orphan(len) => {
                let mut m = Message::new(Role::Tool, "o".repeat(*len), T0);
                m.tool_call_id = Some(format!("ghost_{i}"));
                append(m);
            }
        }
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_budgeted_history_is_valid_bounded_and_keeps_the_newest(
        steps in proptest::collection::vec(step(), 1..120),
        budget in 1u64..3000,
    ) {
        let db = Sqlite::memory();
        let stored = store(&db, &steps);
        let read = Store::new(&db).model_history_within(budget).unwrap();
        // Never more than what fits, plus the bounded search for the calls of results it took.
        let whole = Store::new(&db).model_history_within(u64::MAX).unwrap();
        prop_assert_eq!(whole.len(), stored);
        let fits = whole.iter().rev().scan(0u64, |used, m| {
            *used += estimate_tokens(m);
            Some(*used <= budget)
        }).take_while(|ok| *ok).count();
        prop_assert!(read.len() <= fits.max(1) + 129, "{} messages read, {} fit", read.len(), fits);
        // The newest message is always there.
        prop_assert_eq!(read.last().map(|m| m.id.clone()), whole.last().map(|m| m.id.clone()));
        // After repair, every result follows its call and every call has its result.
        let sent = repair_history(read);
        let mut seen_calls = HashSet::new();
        let mut answered = HashSet::new();
        for m in &sent {
            for c in &m.tool_calls {
                seen_calls.insert(c.id.clone());
            }
            if m.role == Role::Tool {
                let id = m.tool_call_id.clone().unwrap_or_default();
                prop_assert!(seen_calls.contains(&id), "result {} before or without its call", id);
                answered.insert(id);
            }
        }
        for id in &seen_calls {
            prop_assert!(answered.contains(id), "call {} without a result", id);
        }
    }
}

#[test]
fn one_orphan_result_does_not_make_every_later_request_send_the_whole_history() {
    let db = Sqlite::memory();
    let mut steps = vec![Step::User(400); 600];
    steps.push(Step::Orphan(10));
    steps.extend(vec![Step::User(40); 5]);
    store(&db, &steps);
    let read = Store::new(&db).model_history_within(2_000).unwrap();
    assert!(read.len() < 200, "{} of 606 messages sent", read.len());
}
