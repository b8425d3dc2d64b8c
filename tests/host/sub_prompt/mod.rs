//! Sub-prompts on the shipped engine (`engine::thread::sub_prompt`): a prompt called as a tool
//! runs at depth 1 in the same thread. The test performs what the Worker's driver performs
//! (model replies, tool runs) and checks what the engine decides and stores: the answer, tool
//! calls run or refused, a resumed run that does not ask the model again, the step limit, a
//! stop, and hooks seeing depth-1 messages. What it does not prove: the model chain's I/O
//! (tests/e2e/engine_nested.test.mjs runs sub-prompts against the scripted model server).

use edgent::config::PromptConfig;
use edgent::engine::store::{Store, StoredToolCall};
use edgent::engine::thread::{
    Action, InjectMessage, SubCallRun, SubPromptSpec, SubStep, SubToolCall, Thread,
    SUB_PROMPT_MAX_STEPS,
};
use edgent::llm::stream::{Completion, FinishReason, ProviderError, StreamEvent};
use edgent::tool::{CallToolResult, FlowState, Registry, Tool};
use edgent::values::message::{Message, Role};
use serde_json::json;

use crate::sqlite::Sqlite;

const T0: i64 = 1_795_400_000_000;

mod nested;

fn prompt(tools: &[&str], include_chat: bool) -> PromptConfig {
    serde_json::from_value(json!({
        "name": "summarize", "model": "default", "system": "Summarize.",
        "tools": tools, "include_chat": include_chat,
    }))
    .unwrap()
}

/// A prompt to run as a sub-prompt that names no other prompt.
fn spec(prompt: &PromptConfig, has_model: bool) -> SubPromptSpec<'_> {
    SubPromptSpec {
        prompt,
        has_model,
        history_budget: 10_000,
        is_prompt: &|_| false,
    }
}

fn refusal(call: &SubToolCall) -> String {
    match &call.run {
        SubCallRun::Refused(r) => r.to_model_text(),
        other => panic!("refused, not {other:?}"),
    }
}

fn registry() -> Registry {
    let count = Tool::new("Counts words.")
        .handler(|_f: FlowState| async { CallToolResult::text("3 words") });
    let refund = Tool::new("Refunds.")
        .handler(|_f: FlowState| async { CallToolResult::text("refunded") })
        .needs_approval();
    Registry::build(vec![("count_words", count), ("refund", refund)]).unwrap()
}

fn text(t: &str) -> Completion {
    let mut c = Completion::default();
    for ev in [
        StreamEvent::TextDelta(t.to_owned()),
        StreamEvent::Finish(FinishReason::Stop),
        StreamEvent::Done,
    ] {
        c.apply(&ev).unwrap();
    }
    c
}

fn calling(calls: &[(&str, &str)]) -> Completion {
    let mut c = Completion::default();
    for (index, (id, name)) in calls.iter().enumerate() {
        c.apply(&StreamEvent::ToolCallStart {
            index,
            id: (*id).to_owned(),
            name: (*name).to_owned(),
        })
        .unwrap();
        c.apply(&StreamEvent::ToolCallDelta {
            index,
            arguments: "{}".into(),
        })
        .unwrap();
    }
    c.apply(&StreamEvent::Finish(FinishReason::ToolCalls))
        .unwrap();
    c.apply(&StreamEvent::Done).unwrap();
    c
}

/// A thread whose model called the `summarize` prompt with `arguments`: the stored call.
fn delegated(db: &Sqlite, arguments: &str) -> StoredToolCall {
    let mut t = Thread::open(db).unwrap();
    t.create(T0, "thread-1", "support", &[]).unwrap();
    t.post_user_message(T0, "summarize our chat").unwrap();
    let Action::CallModel(mut call) = t.next_action(T0, 10).unwrap() else {
        panic!("the model is owed a call");
    };
    for ev in [
        StreamEvent::TextDelta("Let me ask.".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_sum".into(),
            name: "summarize".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: arguments.into(),
        },
        StreamEvent::Finish(FinishReason::ToolCalls),
        StreamEvent::Done,
    ] {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.finish_model_call(T0, call).unwrap();
    Store::new(db).tool_call("call_sum").unwrap().unwrap()
}

/// The app installed and a thread whose model called `summarize` with `arguments`: its
/// database, the stored call and the tools a sub-prompt may run.
fn delegation(arguments: &str) -> (Sqlite, StoredToolCall, Registry) {
    crate::install_app();
    let db = Sqlite::memory();
    let call = delegated(&db, arguments);
    (db, call, registry())
}

fn done(step: SubStep) -> CallToolResult {
    match step {
        SubStep::Done(r) => r,
        other => panic!("expected the sub-prompt to be done, got {other:?}"),
    }
}

fn depth_1(db: &Sqlite) -> Vec<Message> {
    Store::new(db).sub_messages("call_sum").unwrap()
}

#[test]
fn a_reply_without_tool_calls_is_the_answer_stored_at_depth_1() {
    let (db, call, tools) = delegation(r#"{"input":"the chat"}"#);
    let mut t = Thread::open_migrated(&db);
    let (mut sub, step) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&[], true), true))
        .unwrap();
    let SubStep::CallModel { history } = step else {
        panic!("the model is asked first");
    };
    // The parent chat up to the message holding the call, then the sub-prompt's input.
    let roles: Vec<(Role, &str)> = history
        .iter()
        .map(|m| (m.role, m.content.as_str()))
        .collect();
    assert_eq!(
        roles,
        [(Role::User, "summarize our chat"), (Role::User, "the chat")]
    );
    let answer = done(
        sub.handle_reply(&mut t, T0 + 1, Ok(text("A short chat.")), &tools)
            .unwrap(),
    );
    assert_eq!(answer, CallToolResult::text("A short chat."));
    let stored = depth_1(&db);
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|m| m.depth == 1
        && m.parent_tool_call_id.as_deref() == Some("call_sum")
        && m.parent_message_id.as_deref() == Some(call.message_id.as_str())));
}

#[test]
fn listed_tools_run_and_others_are_refused_with_a_reason() {
    let (db, call, tools) = delegation(r#"{"input":"count"}"#);
    let mut t = Thread::open_migrated(&db);
    let p = prompt(&["count_words", "refund"], false);
    let (mut sub, _) = t.start_sub_prompt(T0, &call, spec(&p, true)).unwrap();
    let reply = calling(&[("c1", "count_words"), ("c2", "refund"), ("c3", "launch")]);
    let SubStep::RunTools(calls) = sub.handle_reply(&mut t, T0, Ok(reply), &tools).unwrap() else {
        panic!("the reply's calls run next");
    };
    assert_eq!(calls.len(), 3);
    assert!(matches!(calls[0].run, SubCallRun::Tool));
    let approval = refusal(&calls[1]);
    assert!(approval.contains("needs a person's approval"), "{approval}");
    let unknown = refusal(&calls[2]);
    assert!(
        unknown.contains("unknown tool \"launch\"") && unknown.contains("count_words, refund"),
        "{unknown}"
    );
    for c in &calls {
        let result = match &c.run {
            SubCallRun::Refused(r) => r.clone(),
            _ => CallToolResult::text("3 words"),
        };
        sub.handle_tool_result(&mut t, T0, &c.call, result).unwrap();
    }
    let SubStep::CallModel { history } = sub.next(&t).unwrap() else {
        panic!("the model sees the results");
    };
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.tool_call_id.as_deref().unwrap_or_default())
        .collect();
    // The calls got ids of ours (the provider's may repeat or collide); each is paired.
    let calls: Vec<&str> = history
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    assert_eq!(results, calls, "every call paired with its result");
    assert!(calls
        .iter()
        .all(|id| id.starts_with("call_") && id.len() == 37));
}

/// Found by a review: a sub-prompt reply with repeated ids lost a result (the second call's
/// was shown for the first, the first's replaced by "interrupted"), and an id like `a.b` could
/// not go to another provider. The calls now get ids of ours.
#[test]
fn a_sub_prompt_reply_with_repeated_or_odd_ids_keeps_every_result() {
    let (db, call, tools) = delegation(r#"{"input":"count"}"#);
    let mut t = Thread::open_migrated(&db);
    let p = prompt(&["count_words"], false);
    let (mut sub, _) = t.start_sub_prompt(T0, &call, spec(&p, true)).unwrap();
    let reply = calling(&[
        ("dup", "count_words"),
        ("dup", "count_words"),
        ("a.b", "count_words"),
    ]);
    let SubStep::RunTools(calls) = sub.handle_reply(&mut t, T0, Ok(reply), &tools).unwrap() else {
        panic!("the calls run");
    };
    for (i, c) in calls.iter().enumerate() {
        sub.handle_tool_result(&mut t, T0, &c.call, CallToolResult::text(format!("r{i}")))
            .unwrap();
    }
    let SubStep::CallModel { history } = sub.next(&t).unwrap() else {
        panic!("the model sees the results");
    };
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        results,
        ["r0", "r1", "r2"],
        "each call keeps its own result"
    );
}

#[test]
fn a_rerun_after_a_restart_returns_the_stored_answer_without_the_model() {
    let (db, call, tools) = delegation(r#"{"input":"x"}"#);
    {
        let mut t = Thread::open_migrated(&db);
        let (mut sub, _) = t
            .start_sub_prompt(T0, &call, spec(&prompt(&[], false), true))
            .unwrap();
        done(
            sub.handle_reply(&mut t, T0, Ok(text("Stored.")), &tools)
                .unwrap(),
        );
    }
    // The Worker died before the call's result was stored; the call runs again.
    let mut t = Thread::open_migrated(&db);
    let (_, step) = t
        .start_sub_prompt(T0 + 5, &call, spec(&prompt(&[], false), true))
        .unwrap();
    assert_eq!(done(step), CallToolResult::text("Stored."));
    assert_eq!(depth_1(&db).len(), 2, "nothing stored twice");
}

#[test]
fn bad_input_a_missing_model_a_failed_chain_and_a_stop_end_it_with_an_error() {
    let (db, call, tools) = delegation(r#"{"question":"x"}"#);
    let mut t = Thread::open_migrated(&db);
    let (_, step) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&[], false), true))
        .unwrap();
    assert!(done(step).to_model_text().contains("invalid arguments"));

    let db = Sqlite::memory();
    let call = delegated(&db, r#"{"input":"x"}"#);
    let mut t = Thread::open_migrated(&db);
    let (_, step) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&[], false), false))
        .unwrap();
    assert!(done(step).to_model_text().contains("missing from D1"));

    let (mut sub, _) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&[], false), true))
        .unwrap();
    let failed = done(
        sub.handle_reply(&mut t, T0, Err(ProviderError::Truncated), &tools)
            .unwrap(),
    );
    assert!(failed
        .to_model_text()
        .contains("prompt \"summarize\" failed"));

    t.stop(T0, "user").unwrap();
    assert_eq!(
        done(sub.next(&t).unwrap()).to_model_text(),
        CallToolResult::error("the thread was stopped").to_model_text()
    );
}

#[test]
fn a_sub_prompt_that_never_answers_stops_after_its_steps() {
    let (db, call, tools) = delegation(r#"{"input":"loop"}"#);
    let mut t = Thread::open_migrated(&db);
    let (mut sub, mut step) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&["count_words"], false), true))
        .unwrap();
    let mut model_calls = 0;
    loop {
        step = match step {
            SubStep::CallModel { .. } => {
                model_calls += 1;
                let id = format!("c{model_calls}");
                sub.handle_reply(&mut t, T0, Ok(calling(&[(&id, "count_words")])), &tools)
                    .unwrap()
            }
            SubStep::RunTools(calls) => {
                for c in calls {
                    sub.handle_tool_result(&mut t, T0, &c.call, CallToolResult::text("3"))
                        .unwrap();
                }
                sub.next(&t).unwrap()
            }
            SubStep::Done(r) => {
                assert!(r.to_model_text().contains("model calls without answering"));
                break;
            }
        };
    }
    assert_eq!(model_calls, SUB_PROMPT_MAX_STEPS);
}

#[test]
fn hooks_see_sub_prompt_messages_at_depth_1() {
    let (db, call, tools) = delegation(r#"{"input":"mail ada@example.com"}"#);
    let mut t = Thread::open_migrated(&db);
    t.set_hook_config("support", ["redact_emails"]).unwrap();
    let (mut sub, _) = t
        .start_sub_prompt(T0, &call, spec(&prompt(&[], false), true))
        .unwrap();
    done(
        sub.handle_reply(&mut t, T0, Ok(text("ok")), &tools)
            .unwrap(),
    );
    let input = &depth_1(&db)[0];
    assert_eq!(input.role, Role::User);
    assert!(
        !input.content.contains("ada@example.com"),
        "redact_emails runs on the sub-prompt's user message: {}",
        input.content
    );
}

#[test]
fn a_message_a_tool_injects_inside_a_sub_prompt_reaches_that_sub_prompts_model() {
    let (db, call, tools) = delegation(r#"{"input":"count"}"#);
    let mut t = Thread::open_migrated(&db);
    let p = prompt(&["count_words"], false);
    let (mut sub, _) = t.start_sub_prompt(T0, &call, spec(&p, true)).unwrap();
    let reply = calling(&[("c1", "count_words")]);
    let SubStep::RunTools(calls) = sub.handle_reply(&mut t, T0, Ok(reply), &tools).unwrap() else {
        panic!("the reply's calls run next");
    };
    // What `inject_message` does from the tool's flow (depth 1, under the reply that called it).
    let injected = t
        .inject_message_under(
            T0,
            InjectMessage::new(Role::User, "note from the tool: count only nouns"),
            1,
            Some(calls[0].message_id.as_str()),
        )
        .unwrap();
    assert_eq!(injected.parent_tool_call_id.as_deref(), Some("call_sum"));
    sub.handle_tool_result(&mut t, T0, &calls[0].call, CallToolResult::text("3 words"))
        .unwrap();
    let SubStep::CallModel { history } = sub.next(&t).unwrap() else {
        panic!("the model is asked again");
    };
    assert!(
        history
            .iter()
            .any(|m| m.content == "note from the tool: count only nouns"),
        "{history:?}"
    );
    // The top-level model never sees it.
    let top = Store::new(&db).model_history_within(u64::MAX).unwrap();
    assert!(top
        .iter()
        .all(|m| !m.content.starts_with("note from the tool")));
}
