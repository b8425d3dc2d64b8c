//! Hooks: discovery of `agents/hooks/`, resolving names, the four example hooks, and the
//! runners' rules (declared order, failing hooks skipped and reported, other kinds ignored,
//! linkage fields restored).

use std::cell::RefCell;
use std::rc::Rc;

use edgent::hook::{self, HookFailure, HookKind, Hooks};
use edgent::prelude::*;
use edgent_example::hooks::{recent_history, redact_emails};

const T0: i64 = 1_795_300_162_000;

fn ctx() -> HookContext {
    HookContext {
        thread_id: "t1".into(),
        agent_id: "support".into(),
        prompt: "support".into(),
        side: Side::A,
        depth: 0,
    }
}

fn msg(role: Role, content: &str) -> Message {
    Message::new(role, content, T0)
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

fn contents(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.content.as_str()).collect()
}

/// A `before_create_message` hook appending `suffix` to the content.
fn append(suffix: &'static str) -> Hook {
    Hook::before_create_message(move |_ctx, mut m: Message| {
        m.content.push_str(suffix);
        Ok(m)
    })
}

fn hooks(list: Vec<(&str, Hook)>) -> Hooks {
    Hooks::from_list(list.into_iter().map(|(n, h)| (n.to_owned(), h)).collect())
}

// ---- discovery ----------------------------------------------------------------------------

#[test]
fn the_example_hooks_are_discovered_in_alphabetical_order() {
    crate::install_app();
    let expected = [
        "hide_system_messages",
        "recent_history",
        "redact_emails",
        "tag_tool_errors",
    ];
    assert_eq!(hook::names().collect::<Vec<_>>(), expected);
    let table: Vec<&str> = edgent_example::HOOKS.iter().map(|(n, _)| *n).collect();
    assert_eq!(table, expected);

    let kinds: Vec<HookKind> = edgent_example::HOOKS
        .iter()
        .map(|(_, build)| build().kind())
        .collect();
    assert_eq!(
        kinds,
        [
            HookKind::FilterMessages,
            HookKind::PrefilterLlmHistory,
            HookKind::BeforeCreateMessage,
            HookKind::AfterToolCallFailure,
        ]
    );
}

#[test]
fn resolve_builds_the_named_hooks_in_declared_order() {
    crate::install_app();
    let resolved = Hooks::resolve(["tag_tool_errors", "redact_emails"]).unwrap();
    assert_eq!(
        resolved.names().collect::<Vec<_>>(),
        ["tag_tool_errors", "redact_emails"]
    );
    assert!(resolved.has(HookKind::BeforeCreateMessage));
    assert!(!resolved.has(HookKind::FilterMessages));
    assert!(Hooks::resolve([]).unwrap().is_empty());
    assert!(Hooks::none().is_empty());
}

#[test]
fn resolve_runs_a_name_listed_twice_once() {
    crate::install_app();
    // The agent and its prompt may both list a hook; tag_tool_errors twice would tag twice.
    let resolved =
        Hooks::resolve(["tag_tool_errors", "recent_history", "tag_tool_errors"]).unwrap();
    assert_eq!(
        resolved.names().collect::<Vec<_>>(),
        ["tag_tool_errors", "recent_history"]
    );
}

#[test]
fn resolve_names_every_unknown_hook_and_lists_the_known_ones() {
    crate::install_app();
    let err = Hooks::resolve(["redact_emails", "no_such_hook", "also-missing"]).unwrap_err();
    assert_eq!(err.unknown, ["no_such_hook", "also-missing"]);
    assert_eq!(err.known.len(), 4);
    assert_eq!(
        err.to_string(),
        "unknown hooks `no_such_hook`, `also-missing`; known hooks: hide_system_messages, \
         recent_history, redact_emails, tag_tool_errors"
    );
    let one = Hooks::resolve(["nope"]).unwrap_err().to_string();
    assert!(
        one.starts_with("unknown hook `nope`; known hooks: "),
        "{one}"
    );
}

// ---- the examples -------------------------------------------------------------------------

#[test]
fn redact_emails_masks_addresses_in_user_messages_only() {
    crate::install_app();
    let hooks = Hooks::resolve(["redact_emails"]).unwrap();
    let user = msg(
        Role::User,
        "I am jo.doe+shop@example.co.uk, cc ann@mail.example.org.",
    );
    let (stored, failures) = hooks.before_create_message(&ctx(), user.clone());
    assert!(failures.is_empty());
    assert_eq!(
        stored.content,
        "I am [email redacted], cc [email redacted]."
    );
    assert_eq!(stored.id, user.id);

    let reply = msg(Role::Assistant, "write to help@example.com");
    let (stored, _) = hooks.before_create_message(&ctx(), reply.clone());
    assert_eq!(stored, reply);
}

#[test]
fn redact_emails_leaves_things_that_are_not_addresses() {
    crate::install_app();
    let mask = redact_emails::mask_emails;
    for same in [
        "",
        "no address here",
        "user@localhost",
        "ping @alice",
        "trailing@",
        "a@b.c",
        "x@-bad.com",
        "x@bad-.com",
        "x@a..com",
        "version 1.2@3.4",
    ] {
        assert_eq!(mask(same), same);
    }
    assert_eq!(mask("a@b@c.com"), "a@[email redacted]");
    assert_eq!(mask("well ...bob@x.com"), "well ...[email redacted]");
    assert_eq!(
        mask("héllo <jo@ex.com> ü@ü.de ok"),
        "héllo <[email redacted]> ü@ü.de ok"
    );
    assert_eq!(mask("a@x.io b@y.io"), "[email redacted] [email redacted]");
}

#[test]
fn hide_system_messages_drops_system_messages_from_client_pages() {
    crate::install_app();
    let hooks = Hooks::resolve(["hide_system_messages"]).unwrap();
    let page = vec![
        msg(Role::User, "hi"),
        msg(Role::System, "context updated: plan = gold"),
        msg(Role::Assistant, "hello"),
    ];
    let (shown, failures) = hooks.filter_messages(&ctx(), page);
    assert!(failures.is_empty());
    assert_eq!(contents(&shown), ["hi", "hello"]);
}

#[test]
fn recent_history_keeps_the_last_40_without_leading_tool_results() {
    crate::install_app();
    let hooks = Hooks::resolve(["recent_history"]).unwrap();
    let short: Vec<Message> = (0..40).map(|i| msg(Role::User, &i.to_string())).collect();
    let (same, _) = hooks.prefilter_llm_history(&ctx(), short.clone());
    assert_eq!(same, short);

    let long: Vec<Message> = (0..50).map(|i| msg(Role::User, &i.to_string())).collect();
    let (kept, failures) = hooks.prefilter_llm_history(&ctx(), long);
    assert!(failures.is_empty());
    assert_eq!(kept.len(), recent_history::KEEP);
    assert_eq!(kept[0].content, "10");
    assert_eq!(kept[39].content, "49");

    // The slice would start on two results of a call that was cut off: they go too.
    let mut history: Vec<Message> = (0..8).map(|i| msg(Role::User, &i.to_string())).collect();
    history[3].role = Role::Assistant;
    history[4].role = Role::Tool;
    history[5].role = Role::Tool;
    let kept = recent_history::recent(history, 4);
    assert_eq!(contents(&kept), ["6", "7"]);

    let only_results: Vec<Message> = (0..3).map(|_| msg(Role::Tool, "r")).collect();
    assert!(recent_history::recent(only_results, 2).is_empty());
}

#[test]
fn tag_tool_errors_names_the_failed_tool_and_keeps_the_error() {
    crate::install_app();
    let hooks = Hooks::resolve(["tag_tool_errors"]).unwrap();
    let (tagged, failures) = hooks.after_tool_call(
        &ctx(),
        &call("get_weather"),
        CallToolResult::error("city not found"),
    );
    assert!(failures.is_empty());
    assert!(tagged.is_error());
    assert_eq!(
        tagged.to_model_text(),
        "Error: get_weather failed: city not found"
    );

    // Media only: the tag becomes the first item.
    let media = CallToolResult {
        status: ToolStatus::Error,
        content: vec![Content::Image {
            source: Source::url("image/png", "https://example.com/x.png"),
        }],
    };
    let (tagged, _) = hooks.after_tool_call_failure(&ctx(), &call("chart"), media);
    assert!(tagged.is_error());
    assert_eq!(tagged.content.len(), 2);
    assert_eq!(tagged.content[0], Content::text("chart failed"));

    // Successes are another kind: untouched.
    let ok = CallToolResult::text("21 °C");
    let (same, _) = hooks.after_tool_call(&ctx(), &call("get_weather"), ok.clone());
    assert_eq!(same, ok);
}

// ---- runner rules -------------------------------------------------------------------------

#[test]
fn hooks_of_a_kind_run_in_declared_order() {
    crate::install_app();
    let hooks = hooks(vec![
        ("a", append("-a")),
        ("b", append("-b")),
        ("c", append("-c")),
    ]);
    let (m, failures) = hooks.before_create_message(&ctx(), msg(Role::User, "x"));
    assert!(failures.is_empty());
    assert_eq!(m.content, "x-a-b-c");
}

#[test]
fn a_failing_hook_is_skipped_its_input_kept_and_reported() {
    crate::install_app();
    let failing = Hook::before_create_message(|_ctx, mut m: Message| {
        m.content = "half-done".into(); // changed, then failed: the change must not leak
        Err(HookError::from(format!("cannot handle {}", m.id.len())))
    });
    let hooks = hooks(vec![
        ("a", append("-a")),
        ("broken", failing),
        ("c", append("-c")),
    ]);
    let (m, failures) = hooks.before_create_message(&ctx(), msg(Role::User, "x"));
    assert_eq!(m.content, "x-a-c");
    assert_eq!(
        failures,
        [HookFailure {
            hook: "broken".into(),
            kind: "before_create_message",
            error: "cannot handle 36".into(),
        }]
    );
    assert_eq!(
        failures[0].to_string(),
        "hook `broken` (before_create_message): cannot handle 36"
    );

    // The same for every kind that passes data on.
    let drop_all = Hook::filter_messages(|_ctx, _m: Vec<Message>| Err("no".into()));
    let page = vec![msg(Role::User, "hi")];
    let (shown, failures) =
        Hooks::from_list(vec![("f".into(), drop_all)]).filter_messages(&ctx(), page.clone());
    assert_eq!(shown, page);
    assert_eq!(failures[0].kind, "filter_messages");

    let drop_all = Hook::prefilter_llm_history(|_ctx, _m: Vec<Message>| Err("no".into()));
    let (sent, failures) =
        Hooks::from_list(vec![("p".into(), drop_all)]).prefilter_llm_history(&ctx(), page.clone());
    assert_eq!(sent, page);
    assert_eq!(failures[0].kind, "prefilter_llm_history");

    let failing = Hook::after_tool_call_success(|_ctx, _c: &ToolCall, _r| Err("no".into()));
    let result = CallToolResult::text("ok");
    let (kept, failures) = Hooks::from_list(vec![("s".into(), failing)]).after_tool_call_success(
        &ctx(),
        &call("t"),
        result.clone(),
    );
    assert_eq!(kept, result);
    assert_eq!(failures[0].hook, "s");
}

#[test]
fn runners_ignore_hooks_of_other_kinds() {
    crate::install_app();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let observed = Rc::clone(&seen);
    let hooks = hooks(vec![
        (
            "hide",
            Hook::filter_messages(|_ctx, _m: Vec<Message>| Ok(vec![])),
        ),
        (
            "upper",
            Hook::prefilter_llm_history(|_ctx, mut h: Vec<Message>| {
                h.iter_mut()
                    .for_each(|m| m.content = m.content.to_uppercase());
                Ok(h)
            }),
        ),
        ("suffix", append("!")),
        (
            "observe",
            Hook::after_create_message(move |ctx, m: &Message| {
                observed
                    .borrow_mut()
                    .push(format!("{}:{}", ctx.thread_id, m.content));
                Err("only watching".into())
            }),
        ),
        (
            "success",
            Hook::after_tool_call_success(|_ctx, _c: &ToolCall, _r| {
                Ok(CallToolResult::text("rewritten"))
            }),
        ),
    ]);
    let page = vec![msg(Role::User, "hi")];

    let (sent, failures) = hooks.prefilter_llm_history(&ctx(), page.clone());
    assert_eq!(contents(&sent), ["HI"]);
    assert!(failures.is_empty());
    let (shown, _) = hooks.filter_messages(&ctx(), page.clone());
    assert!(shown.is_empty());
    let (stored, _) = hooks.before_create_message(&ctx(), page[0].clone());
    assert_eq!(stored.content, "hi!");

    let failures = hooks.after_create_message(&ctx(), &stored);
    assert_eq!(*seen.borrow(), ["t1:hi!"]);
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].kind, "after_create_message");
    assert_eq!(failures[0].error, "only watching");

    // An error result goes to failure hooks only: the success hook does not see it.
    let error = CallToolResult::error("boom");
    let (same, failures) = hooks.after_tool_call(&ctx(), &call("t"), error.clone());
    assert_eq!(same, error);
    assert!(failures.is_empty());
    let (rewritten, _) = hooks.after_tool_call(&ctx(), &call("t"), CallToolResult::text("x"));
    assert_eq!(rewritten, CallToolResult::text("rewritten"));
}

#[test]
fn before_create_message_restores_id_role_and_tool_linkage() {
    crate::install_app();
    let meddler = Hook::before_create_message(|_ctx, mut m: Message| {
        m.id = "mine".into();
        m.role = Role::User;
        m.tool_call_id = None;
        m.content = "redacted".into();
        m.name = Some("renamed".into());
        Ok(m)
    });
    let meddling = hooks(vec![("meddler", meddler)]);
    let original = Message::tool_result(&call("get_weather"), "secret", T0);
    let (stored, failures) = meddling.before_create_message(&ctx(), original.clone());
    assert_eq!(stored.id, original.id);
    assert_eq!(stored.role, Role::Tool);
    assert_eq!(stored.tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(stored.content, "redacted");
    assert_eq!(stored.name.as_deref(), Some("renamed"));
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].hook, "meddler");
    assert_eq!(
        failures[0].error,
        "changed the id, the role, tool_call_id of the message; hooks may not, so they were \
         restored (its other changes were kept)"
    );

    let assistant = Message {
        tool_calls: vec![
            call("a"),
            ToolCall {
                id: "call_2".into(),
                ..call("b")
            },
        ],
        ..msg(Role::Assistant, "calling")
    };
    let renumber = Hook::before_create_message(|_ctx, mut m: Message| {
        m.tool_calls[0].id = "other".into();
        m.tool_calls[1].arguments = r#"{"x":1}"#.into();
        Ok(m)
    });
    let (stored, failures) = Hooks::from_list(vec![("renumber".into(), renumber)])
        .before_create_message(&ctx(), assistant.clone());
    assert_eq!(stored.tool_calls[0].id, "call_1");
    assert_eq!(stored.tool_calls[1].arguments, r#"{"x":1}"#);
    assert!(
        failures[0].error.starts_with("changed tool call ids"),
        "{}",
        failures[0].error
    );

    let drop_call = Hook::before_create_message(|_ctx, mut m: Message| {
        m.tool_calls.pop();
        Ok(m)
    });
    let (stored, failures) = Hooks::from_list(vec![("drop".into(), drop_call)])
        .before_create_message(&ctx(), assistant.clone());
    assert_eq!(stored.tool_calls, assistant.tool_calls);
    assert!(failures[0]
        .error
        .starts_with("changed the number of tool_calls"));

    // A hook that leaves the linkage alone is not reported.
    let (_, failures) = hooks(vec![("a", append("."))]).before_create_message(&ctx(), assistant);
    assert!(failures.is_empty());
}

#[test]
fn hook_errors_convert_from_text() {
    crate::install_app();
    let e: HookError = "bad".into();
    assert_eq!(e.to_string(), "bad");
    assert_eq!(HookError::from(String::from("worse")).message(), "worse");
    assert_eq!(HookError::new("x"), HookError::from("x"));
    assert_eq!(
        HookKind::AfterToolCallFailure.to_string(),
        "after_tool_call_failure"
    );
}
