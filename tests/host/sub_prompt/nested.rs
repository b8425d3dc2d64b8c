//! Sub-prompts that call prompts, on the engine alone: the answer of a nested level that a
//! restart cut short of its result is recovered instead of asked again, a nested level's
//! inherited conversation is cut to its own budget, and every level under one top-level call
//! shares one budget of model calls.

use super::*;
use edgent::engine::thread::SUB_PROMPT_MAX_CALLS_PER_CALL;

/// The `summarize` prompt, listing the prompt `inner`.
fn outer(include_chat: bool) -> PromptConfig {
    prompt(&["inner"], include_chat)
}

fn inner(include_chat: bool) -> PromptConfig {
    serde_json::from_value(json!({
        "name": "inner", "model": "default", "system": "Answer briefly.",
        "include_chat": include_chat,
    }))
    .unwrap()
}

fn spec_with<'a>(p: &'a PromptConfig, budget: u32) -> SubPromptSpec<'a> {
    SubPromptSpec {
        prompt: p,
        has_model: true,
        history_budget: budget,
        is_prompt: &|n| n == "inner",
    }
}

/// A reply calling `inner` with `input`, under our own call id `id`.
fn calls_inner(id: &str, input: &str) -> Completion {
    calls_inner_n(&[id], input)
}

/// A reply calling `inner` once per id.
fn calls_inner_n(ids: &[&str], input: &str) -> Completion {
    let mut c = Completion::default();
    for (index, id) in ids.iter().enumerate() {
        c.apply(&StreamEvent::ToolCallStart {
            index,
            id: (*id).to_owned(),
            name: "inner".into(),
        })
        .unwrap();
        c.apply(&StreamEvent::ToolCallDelta {
            index,
            arguments: json!({ "input": input }).to_string(),
        })
        .unwrap();
    }
    c.apply(&StreamEvent::Finish(FinishReason::ToolCalls))
        .unwrap();
    c.apply(&StreamEvent::Done).unwrap();
    c
}

fn run_tools(step: SubStep) -> Vec<SubToolCall> {
    match step {
        SubStep::RunTools(calls) => calls,
        other => panic!("expected calls to run, got {other:?}"),
    }
}

fn history(step: SubStep) -> Vec<Message> {
    match step {
        SubStep::CallModel { history } => history,
        other => panic!("expected a model call, got {other:?}"),
    }
}

/// Found by a review: a restart between a nested level's stored answer and its caller storing
/// the call's result threw the answer away (the call was answered as interrupted and the
/// level asked again). The re-run now takes the stored answer as the call's result.
#[test]
fn a_nested_answer_stored_before_a_restart_is_the_calls_result_on_the_rerun() {
    let (db, call, tools) = delegation(r#"{"input":"dig"}"#);
    let (outer_p, inner_p) = (outer(false), inner(false));
    {
        let mut t = Thread::open_migrated(&db);
        let (mut sub, _) = t
            .start_sub_prompt(T0, &call, spec_with(&outer_p, 10_000))
            .unwrap();
        let calls = run_tools(
            sub.handle_reply(&mut t, T0, Ok(calls_inner("x", "deeper")), &tools)
                .unwrap(),
        );
        assert!(matches!(calls[0].run, SubCallRun::Prompt));
        let (mut nested, _) = sub
            .start_nested(&mut t, T0, &calls[0], spec_with(&inner_p, 10_000))
            .unwrap();
        assert_eq!(nested.depth(), 2);
        done(
            nested
                .handle_reply(&mut t, T0, Ok(text("The deep answer.")), &tools)
                .unwrap(),
        );
        // The Worker dies here: depth 2 answered, depth 1 never stored the call's result.
    }
    let mut t = Thread::open_migrated(&db);
    let (_, step) = t
        .start_sub_prompt(T0 + 5, &call, spec_with(&outer_p, 10_000))
        .unwrap();
    let sent = history(step);
    let result = sent
        .iter()
        .find(|m| m.role == Role::Tool)
        .expect("the call has its result");
    assert_eq!(result.content, "The deep answer.");
    assert!(
        !sent.iter().any(|m| m.content.contains("interrupted")),
        "not answered as interrupted"
    );
}

/// Found by a review: a nested level with `include_chat` was sent its caller's whole
/// conversation, whatever its own model's budget. It is cut to the callee's budget, newest
/// first, as a top-level call's chat is.
#[test]
fn a_nested_levels_inherited_conversation_fits_its_own_budget() {
    let long = "word ".repeat(400);
    let (db, call, tools) = delegation(&json!({ "input": long }).to_string());
    let (outer_p, inner_p) = (outer(false), inner(true));
    let mut t = Thread::open_migrated(&db);
    let (mut sub, _) = t
        .start_sub_prompt(T0, &call, spec_with(&outer_p, 10_000))
        .unwrap();
    // A first call of `inner` answers; the outer level calls it again.
    let first = run_tools(
        sub.handle_reply(&mut t, T0, Ok(calls_inner("x1", "first")), &tools)
            .unwrap(),
    );
    let (mut nested, _) = sub
        .start_nested(&mut t, T0, &first[0], spec_with(&inner_p, 10_000))
        .unwrap();
    let answer = done(
        nested
            .handle_reply(&mut t, T0, Ok(text("short")), &tools)
            .unwrap(),
    );
    sub.handle_tool_result(&mut t, T0, &first[0].call, answer)
        .unwrap();
    history(sub.next(&t).unwrap());
    let second = run_tools(
        sub.handle_reply(&mut t, T0, Ok(calls_inner("x2", "second")), &tools)
            .unwrap(),
    );
    let (_, generous) = sub
        .start_nested(&mut t, T0, &second[0], spec_with(&inner_p, 10_000))
        .unwrap();
    let generous = history(generous);
    assert!(
        generous.iter().any(|m| m.content == long),
        "it fits 10,000 tokens"
    );
    let (_, tight) = sub
        .start_nested(&mut t, T0, &second[0], spec_with(&inner_p, 60))
        .unwrap();
    let tight = history(tight);
    assert!(
        !tight.iter().any(|m| m.content == long),
        "the long input does not fit 60 tokens"
    );
    assert!(
        tight.iter().any(|m| m.content == "short"),
        "the newest messages do, the result with its call"
    );
    assert_eq!(tight.last().map(|m| m.content.as_str()), Some("second"));
}

/// Found by a review: each level had its own 10 model calls, and a reply may call prompts
/// many times, so one top-level call could cost (10 x calls per reply)^depth. Every level
/// under one call now draws on one budget.
#[test]
fn every_level_under_one_call_shares_one_budget_of_model_calls() {
    let (db, call, tools) = delegation(r#"{"input":"dig"}"#);
    let (outer_p, inner_p) = (outer(false), inner(false));
    let mut t = Thread::open_migrated(&db);
    let (mut sub, first) = t
        .start_sub_prompt(T0, &call, spec_with(&outer_p, 10_000))
        .unwrap();
    history(first);
    let mut model_calls = 1;
    // Each outer reply calls `inner` three times; each `inner` answers in one model call. The
    // outer level alone would stop at its own 10 calls (40 with the inner ones): the shared
    // budget stops the whole call first.
    let mut refused = None;
    'rounds: for round in 0..SUB_PROMPT_MAX_STEPS {
        let ids: Vec<String> = (0..3).map(|i| format!("x{round}_{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let calls = run_tools(
            sub.handle_reply(&mut t, T0, Ok(calls_inner_n(&ids, "more")), &tools)
                .unwrap(),
        );
        for c in &calls {
            let (mut nested, step) = sub
                .start_nested(&mut t, T0, c, spec_with(&inner_p, 10_000))
                .unwrap();
            let result = match step {
                SubStep::CallModel { .. } => {
                    model_calls += 1;
                    done(
                        nested
                            .handle_reply(&mut t, T0, Ok(text("ok")), &tools)
                            .unwrap(),
                    )
                }
                SubStep::Done(r) => r,
                SubStep::RunTools(_) => unreachable!("inner calls no tool"),
            };
            if result.is_error() {
                refused = Some(result.to_model_text());
                break 'rounds;
            }
            sub.handle_tool_result(&mut t, T0, &c.call, result).unwrap();
        }
        match sub.next(&t).unwrap() {
            SubStep::CallModel { .. } => model_calls += 1,
            SubStep::Done(r) => {
                refused = Some(r.to_model_text());
                break;
            }
            SubStep::RunTools(_) => unreachable!(),
        }
    }
    assert_eq!(model_calls, SUB_PROMPT_MAX_CALLS_PER_CALL);
    let refused = refused.expect("the budget ran out");
    assert!(
        refused.contains(&format!(
            "used their {SUB_PROMPT_MAX_CALLS_PER_CALL} model calls"
        )),
        "{refused}"
    );
}
