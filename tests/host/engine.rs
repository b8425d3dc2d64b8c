//! The agent engine's rules in virtual time: dual-AI alternation and views, max_turns, stop
//! tools, stop_on_response, parallel tool batches, history budgets.

use edgent::config::AgentKind;
use edgent::engine::store::{Side, ThreadStatus};
use edgent::engine::thread::{view_for_side, Action, ModelCall, Thread, TurnRules};
use edgent::tool::CallToolResult;
use edgent::values::message::{Message, Role, ToolCall};

use crate::sqlite::Sqlite;

const T0: i64 = 1_795_300_162_000;

fn thread(db: &Sqlite, rules: TurnRules) -> Thread<'_> {
    let mut t = Thread::open(db).unwrap();
    t.create(T0, "thread-1", "agent", &[]).unwrap();
    t.set_rules(rules);
    t
}

fn dual(max_turns: u32) -> TurnRules {
    TurnRules {
        kind: AgentKind::DualAi,
        max_turns,
        ..TurnRules::default()
    }
}

/// Completes a model call with text and these tool calls (name, arguments).
fn reply(t: &mut Thread<'_>, mut call: ModelCall, text: &str, calls: &[(&str, &str)]) {
    let ids: Vec<String> = (0..calls.len())
        .map(|i| format!("call{}_{i}", call.message_id.len() + i))
        .collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .zip(&ids)
        .map(|((name, args), id)| (id.as_str(), *name, *args))
        .collect();
    for ev in edgent::testing::reply_events(text, &calls) {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.finish_model_call(T0, call).unwrap();
}

#[test]
fn dual_ai_sides_alternate_see_each_other_as_users_and_end_at_max_turns() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(&db, dual(4));
    t.post_user_message(T0, "Negotiate the price of 10 chairs.")
        .unwrap();
    let mut said = Vec::new();
    let mut sides = Vec::new();
    loop {
        match t.next_action(T0, 10).unwrap() {
            Action::CallModel(call) => {
                let side = t.summary().unwrap().current_side;
                sides.push(side);
                if said.len() == 1 {
                    // Side B's first call: A's words arrive as a user message.
                    let last = call.history.last().unwrap();
                    assert_eq!((last.role, last.content.as_str()), (Role::User, "offer 0"));
                }
                let text = format!("offer {}", said.len());
                said.push(text.clone());
                reply(&mut t, call, &text, &[]);
            }
            Action::Continue => {}
            Action::Idle => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(sides, vec![Side::A, Side::B, Side::A, Side::B]);
    let s = t.summary().unwrap();
    assert_eq!(s.status, ThreadStatus::Stopped);
    assert_eq!(s.stopped_by.as_deref(), Some("max_turns"));
    assert_eq!(s.turn_count, 4);
    assert_eq!(s.result.as_deref(), Some("offer 3"));
    assert!(
        t.post_user_message(T0, "more?").is_err(),
        "an ended conversation takes no messages"
    );
}

#[test]
fn a_dual_ai_stop_tool_ends_the_conversation_with_its_property_as_the_answer() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut rules = dual(25);
    rules.stop_tool = Some("accept_offer".into());
    rules.stop_tool_response_property = Some("price".into());
    let mut t = thread(&db, rules);
    t.post_user_message(T0, "go").unwrap();
    let mut model_calls = 0;
    loop {
        match t.next_action(T0, 10).unwrap() {
            Action::CallModel(call) => {
                model_calls += 1;
                if model_calls == 2 {
                    reply(
                        &mut t,
                        call,
                        "deal",
                        &[("accept_offer", r#"{"price": 420}"#)],
                    );
                } else {
                    reply(&mut t, call, "my offer", &[]);
                }
            }
            Action::RunTool(c) => {
                assert_eq!(c.call.name, "accept_offer");
                t.finish_tool(T0, &c, &CallToolResult::text("accepted"))
                    .unwrap();
            }
            Action::Continue => {}
            Action::Idle => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(model_calls, 2, "no model call after the stop tool");
    let s = t.summary().unwrap();
    assert_eq!(
        (s.status, s.stopped_by.as_deref(), s.result.as_deref()),
        (ThreadStatus::Stopped, Some("stop_tool"), Some("420"))
    );
}

#[test]
fn an_ai_human_stop_tool_ends_the_turn_and_stop_on_response_false_keeps_the_model_going() {
    crate::install_app();
    let db = Sqlite::memory();
    let rules = TurnRules {
        stop_on_response: false,
        stop_tool: Some("respond".into()),
        ..TurnRules::default()
    };
    let mut t = thread(&db, rules);
    t.post_user_message(T0, "hi").unwrap();
    let mut model_calls = 0;
    loop {
        match t.next_action(T0, 10).unwrap() {
            Action::CallModel(call) => {
                model_calls += 1;
                match model_calls {
                    1 => reply(&mut t, call, "thinking out loud", &[]),
                    _ => reply(&mut t, call, "", &[("respond", r#"{"text":"Hello!"}"#)]),
                }
            }
            Action::RunTool(c) => {
                t.finish_tool(T0, &c, &CallToolResult::text("sent"))
                    .unwrap();
            }
            Action::Idle => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        model_calls, 2,
        "an answer without tools did not end the turn; the stop tool did"
    );
    let s = t.summary().unwrap();
    assert_eq!((s.status, s.turn_count), (ThreadStatus::Idle, 1));
    assert_eq!(s.result.as_deref(), Some("sent"));
}

#[test]
fn ai_human_threads_stop_after_max_turns() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(
        &db,
        TurnRules {
            max_turns: 2,
            ..TurnRules::default()
        },
    );
    for i in 0..2 {
        t.post_user_message(T0, &format!("q{i}")).unwrap();
        let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
            panic!("expected a model call")
        };
        reply(&mut t, call, "a", &[]);
        assert!(matches!(t.next_action(T0, 10).unwrap(), Action::Idle));
    }
    let s = t.summary().unwrap();
    assert_eq!(
        (s.status, s.stopped_by.as_deref()),
        (ThreadStatus::Stopped, Some("max_turns"))
    );
}

#[test]
fn parallel_calls_of_one_reply_come_as_one_batch_in_call_order() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(
        &db,
        TurnRules {
            parallel_tool_calls: true,
            ..TurnRules::default()
        },
    );
    t.post_user_message(T0, "both").unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    reply(&mut t, call, "", &[("a", "{}"), ("b", "{}"), ("c", "{}")]);
    let Action::RunTools(batch) = t.next_action(T0, 10).unwrap() else {
        panic!("expected a batch")
    };
    let names: Vec<&str> = batch.iter().map(|c| c.call.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    for c in &batch {
        t.start_tool(T0, c, true).unwrap();
    }
    for c in &batch {
        t.finish_tool(T0, c, &CallToolResult::text(c.call.name.clone()))
            .unwrap();
    }
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    let results: Vec<&str> = call
        .history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(results, ["a", "b", "c"]);
}

#[test]
fn sequential_prompts_get_one_call_at_a_time() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(&db, TurnRules::default());
    t.post_user_message(T0, "both").unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    reply(&mut t, call, "", &[("a", "{}"), ("b", "{}")]);
    assert!(matches!(t.next_action(T0, 10).unwrap(), Action::RunTool(c) if c.call.name == "a"));
}

#[test]
fn the_history_budget_drops_the_oldest_and_never_splits_a_call_from_its_result() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(
        &db,
        TurnRules {
            max_history_tokens: 60,
            ..TurnRules::default()
        },
    );
    // An old exchange with a tool call, then enough newer text to push it out of budget.
    t.post_user_message(T0, &"old question ".repeat(10))
        .unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    reply(&mut t, call, "", &[("lookup", r#"{"q":"x"}"#)]);
    let Action::RunTool(c) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    t.finish_tool(T0, &c, &CallToolResult::text("r".repeat(80)))
        .unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    reply(&mut t, call, "answer", &[]);
    t.next_action(T0, 10).unwrap();
    t.post_user_message(T0, "new question").unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    let roles: Vec<Role> = call.history.iter().map(|m| m.role).collect();
    assert_eq!(
        call.history.last().unwrap().content,
        "new question",
        "the newest message is always sent"
    );
    assert!(!roles.contains(&Role::Tool) || roles.contains(&Role::Assistant));
    for (i, m) in call.history.iter().enumerate() {
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_deref().unwrap();
            assert!(
                call.history[..i]
                    .iter()
                    .any(|a| a.tool_calls.iter().any(|tc| tc.id == id)),
                "every result follows its call"
            );
        }
    }
    assert!(
        !call
            .history
            .iter()
            .any(|m| m.content.starts_with("old question")),
        "the oldest message went first"
    );
}

#[test]
fn the_other_sides_tool_traffic_is_hidden_and_its_words_are_user_messages() {
    crate::install_app();
    let mk = |role, side, content: &str| Message {
        side: Some(side),
        ..Message::new(role, content, T0)
    };
    let mut call_msg = mk(Role::Assistant, Side::B, "let me check");
    call_msg.tool_calls = vec![ToolCall {
        id: "c".into(),
        name: "t".into(),
        arguments: "{}".into(),
    }];
    let mut result = mk(Role::Tool, Side::B, "42");
    result.tool_call_id = Some("c".into());
    let history = vec![
        Message::new(Role::User, "topic", T0),
        mk(Role::Assistant, Side::A, "I propose 10"),
        call_msg,
        result,
        mk(Role::Assistant, Side::B, "I counter with 12"),
    ];
    let view = view_for_side(history, Side::A, Some("Buyer"));
    let shown: Vec<(Role, &str, Option<&str>)> = view
        .iter()
        .map(|m| (m.role, m.content.as_str(), m.name.as_deref()))
        .collect();
    assert_eq!(
        shown,
        vec![
            (Role::User, "topic", None),
            (Role::Assistant, "I propose 10", None),
            (Role::User, "let me check", Some("Buyer")),
            (Role::User, "I counter with 12", Some("Buyer")),
        ]
    );
    assert!(view.iter().all(|m| m.tool_calls.is_empty()));
}

#[test]
fn declared_hooks_run_at_their_points_and_unknown_ones_are_reported_not_fatal() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(&db, TurnRules::default());
    t.set_hook_config(
        "support",
        [
            "redact_emails",
            "tag_tool_errors",
            "hide_system_messages",
            "no_such_hook",
        ],
    )
    .unwrap();
    let m = t
        .post_user_message(T0, "mail me at ada@example.com please")
        .unwrap();
    assert_eq!(m.content, "mail me at [email redacted] please");
    let failures = t.take_hook_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].hook, "no_such_hook");

    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    assert_eq!(
        call.history[0].content, "mail me at [email redacted] please",
        "the model never sees the address"
    );
    reply(&mut t, call, "", &[("lookup", "{}")]);
    let Action::RunTool(c) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    let stored = t
        .finish_tool(T0, &c, &CallToolResult::error("no such customer"))
        .unwrap();
    assert!(
        stored.content.contains("lookup failed: "),
        "after_tool_call_failure rewrote the result: {}",
        stored.content
    );

    t.inject_message(
        T0,
        edgent::engine::thread::InjectMessage::new(Role::System, "note"),
        0,
    )
    .unwrap();
    let page = t
        .messages(50, 0, edgent::engine::store::Order::Asc, false)
        .unwrap();
    assert!(
        page.messages.iter().all(|m| m.role != Role::System),
        "filter_messages hid the system message from clients"
    );
}

#[test]
fn a_budget_smaller_than_the_newest_exchange_still_sends_that_exchange_whole() {
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(
        &db,
        TurnRules {
            max_history_tokens: 15,
            ..TurnRules::default()
        },
    );
    t.post_user_message(T0, "what time is it, please?").unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    reply(&mut t, call, "", &[("get_current_time", "{}")]);
    let Action::RunTool(c) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    t.finish_tool(
        T0,
        &c,
        &CallToolResult::text("2026-11-22T10:00:00Z, a long answer"),
    )
    .unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    let roles: Vec<Role> = call.history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::Assistant, Role::Tool],
        "the call and its result, nothing older"
    );
}

#[test]
fn a_reply_with_many_calls_runs_them_in_batches_of_the_concurrency_cap() {
    use edgent::values::limits::MAX_CONCURRENT_TOOL_RUNS;
    crate::install_app();
    let db = Sqlite::memory();
    let mut t = thread(
        &db,
        TurnRules {
            parallel_tool_calls: true,
            ..TurnRules::default()
        },
    );
    t.post_user_message(T0, "many").unwrap();
    let Action::CallModel(call) = t.next_action(T0, 10).unwrap() else {
        panic!()
    };
    let names: Vec<String> = (0..MAX_CONCURRENT_TOOL_RUNS + 4)
        .map(|i| format!("t{i:02}"))
        .collect();
    let calls: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "{}")).collect();
    reply(&mut t, call, "", &calls);
    let mut seen = Vec::new();
    for expected in [MAX_CONCURRENT_TOOL_RUNS, 4] {
        let Action::RunTools(batch) = t.next_action(T0, 10).unwrap() else {
            panic!("expected a batch")
        };
        assert_eq!(batch.len(), expected);
        for c in &batch {
            t.start_tool(T0, c, true).unwrap();
        }
        for c in &batch {
            t.finish_tool(T0, c, &CallToolResult::text("ok")).unwrap();
            seen.push(c.call.name.clone());
        }
    }
    assert_eq!(seen, names, "every call ran once, in call order");
    assert!(matches!(
        t.next_action(T0, 10).unwrap(),
        Action::CallModel(_)
    ));
}
