//! The thread utilities (`queue_tool`, `inject_message`, `get_messages`, `emit_thread_event`,
//! `force_turn`, the context) through a tool's flow, against real SQLite in virtual time.

use std::rc::Rc;

use edgent::engine::store::{CallOrigin, Order, Side, ThreadStatus};
use edgent::engine::thread::{Action, InjectMessage, ModelCall, Thread};
use edgent::llm::openai::build_request;
use edgent::llm::stream::{FinishReason, StreamEvent};
use edgent::prelude::*;
use edgent::tool::ToolError;
use edgent::values::message::{Message, Role};
use edgent::values::protocol::ServerFrame;
use serde_json::json;

use crate::flow_host::{block_on, TestHost, WithThread};

const T0: i64 = 1_795_300_162_000;
const MAX_STEPS: u32 = 10;

fn model_call(t: &mut Thread<'_>) -> ModelCall {
    match t.next_action(T0, MAX_STEPS).unwrap() {
        Action::CallModel(c) => c,
        other => panic!("expected a model call, got {other:?}"),
    }
}

/// Completes a model call with text and/or tool calls `(id, name, args)`.
fn reply(t: &mut Thread<'_>, mut call: ModelCall, text: &str, calls: &[(&str, &str, &str)]) {
    if !text.is_empty() {
        t.on_model_event(&mut call, StreamEvent::TextDelta(text.into()))
            .unwrap();
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        for ev in [
            StreamEvent::ToolCallStart {
                index: i,
                id: (*id).into(),
                name: (*name).into(),
            },
            StreamEvent::ToolCallDelta {
                index: i,
                arguments: (*args).into(),
            },
        ] {
            t.on_model_event(&mut call, ev).unwrap();
        }
    }
    let reason = if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    for ev in [StreamEvent::Finish(reason), StreamEvent::Done] {
        t.on_model_event(&mut call, ev).unwrap();
    }
    t.finish_model_call(T0, call).unwrap();
}

/// Runs every queued tool through the registry, returning the names in run order.
fn run_queue(host: &Rc<TestHost>) -> Vec<String> {
    let mut ran = Vec::new();
    loop {
        let mut t = host.thread();
        let Action::RunTool(call) = t.next_action(T0, MAX_STEPS).unwrap() else {
            return ran;
        };
        t.start_tool(T0, &call, true).unwrap();
        let tool = host.registry.get(&call.call.name).unwrap();
        let result = block_on(tool.call(host.flow(&call.call.id), &call.call.arguments));
        assert!(!result.is_error(), "{}: {result:?}", call.call.name);
        t.finish_tool(T0, &call, &result).unwrap();
        ran.push(call.call.name);
    }
}

fn drain(t: &mut Thread<'_>) -> Vec<ServerFrame> {
    std::iter::from_fn(|| t.poll_frame()).collect()
}

#[test]
fn queue_tool_refuses_unknown_names_and_bad_arguments_at_queue_time() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("call_0");
    let err = queue_tool(&flow, "no_such_tool", json!({})).unwrap_err();
    assert!(
        err.to_string().contains("unknown tool \"no_such_tool\""),
        "{err}"
    );
    assert!(
        err.to_string().contains("get_current_time"),
        "lists the tools: {err}"
    );
    let err = queue_tool(
        &flow,
        "send_notification",
        json!({"channel": "pigeon", "to": "x", "message": "m"}),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid arguments for `send_notification`"),
        "{err}"
    );
    assert!(
        err.to_string().contains("unknown variant `pigeon`"),
        "{err}"
    );
    let err = queue_tool(&flow, "lookup_customer", json!({})).unwrap_err();
    assert!(
        err.to_string()
            .contains("either customer_id or email is required"),
        "{err}"
    );
    // Nothing was stored by the refused calls.
    assert_eq!(host.thread().summary().unwrap().message_count, 0);
    assert!(host.take_frames().is_empty());
}

#[test]
fn a_tool_queued_on_an_idle_thread_runs_without_a_model_call() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("client");
    let id = queue_tool(&flow, "get_current_time", json!({})).unwrap();
    let frames = host.take_frames();
    assert!(
        matches!(&frames[0], ServerFrame::Message { message } if message.role == Role::Assistant && message.tool_calls[0].id == id)
    );
    assert!(matches!(&frames[1], ServerFrame::Tool { status, .. } if status == "queued"));
    assert!(matches!(&frames[2], ServerFrame::Status { state, .. } if state == "running"));

    let mut t = host.thread();
    match t.next_action(T0, MAX_STEPS).unwrap() {
        Action::RunTool(c) => assert_eq!(
            (c.call.id.as_str(), c.origin),
            (id.as_str(), CallOrigin::Queue)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(run_queue(&host), ["get_current_time"]);
    let mut t = host.thread();
    assert!(matches!(
        t.next_action(T0, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let s = t.summary().unwrap();
    assert_eq!(
        (s.status, s.turn_count),
        (ThreadStatus::Idle, 0),
        "no model call, no turn"
    );
    let page = t.messages(10, 0, Order::Asc, false).unwrap();
    let roles: Vec<Role> = page.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::Assistant, Role::Tool]);
}

#[test]
fn queued_tools_run_after_the_current_one_in_order_before_the_next_model_call() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "order two shirts").unwrap();
    let call = model_call(&mut t);
    let order = r#"{"customer_id":"cus_1001","items":[{"sku":"TSHIRT","quantity":2}],"shipping":{"method":"standard"},"confirmation_email":"ada@example.com"}"#;
    reply(
        &mut t,
        call,
        "",
        &[
            ("call_a", "process_order", order),
            ("call_b", "get_current_time", "{}"),
        ],
    );
    // process_order queues send_notification: it runs after call_b, which was queued first.
    assert_eq!(
        run_queue(&host),
        ["process_order", "get_current_time", "send_notification"]
    );
    let frames = host.take_frames();
    assert!(frames.iter().any(|f| matches!(f, ServerFrame::Event { event, data, .. }
        if event == "notification" && data["to"] == "ada@example.com" && data["channel"] == "email")));

    let mut t = host.thread();
    let call = model_call(&mut t);
    let roles: Vec<Role> = call.history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant,
            Role::Tool
        ],
        "every result follows its call, the queued call included"
    );
    assert!(call.history[2].content.contains("\"status\":\"confirmed\""));
    assert!(call.history[5]
        .content
        .contains("notification sent by email"));
    // The order is in the thread's own table.
    let rows = host
        .thread()
        .summary()
        .map(|_| {
            edgent::values::sql::Sql::exec(&host.db, "SELECT units FROM example_orders", &[])
                .unwrap()
        })
        .unwrap();
    assert_eq!(rows[0].int(0).unwrap(), 2);
}

#[test]
fn force_turn_calls_the_model_after_the_queue_even_without_a_message() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("client");
    queue_tool(&flow, "get_current_time", json!({})).unwrap();
    force_turn(&flow, Side::B).unwrap();
    let status = host.take_frames().into_iter().rev().find_map(|f| match f {
        ServerFrame::Status { side, state, .. } => Some((side, state)),
        _ => None,
    });
    assert_eq!(status, Some(("b".into(), "running".into())));
    assert_eq!(run_queue(&host), ["get_current_time"]);
    let mut t = host.thread();
    let call = model_call(&mut t);
    reply(&mut t, call, "It is late.", &[]);
    assert!(matches!(
        t.next_action(T0, MAX_STEPS).unwrap(),
        Action::Idle
    ));
    let s = t.summary().unwrap();
    assert_eq!((s.turn_count, s.current_side), (1, Side::B));
}

#[test]
fn a_user_message_during_a_model_call_is_answered_in_the_same_turn() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "first").unwrap();
    let call = model_call(&mut t);
    t.post_user_message(T0, "second, while streaming").unwrap();
    reply(&mut t, call, "answer to first", &[]);
    let call = model_call(&mut t);
    assert_eq!(
        call.history.last().unwrap().content,
        "second, while streaming"
    );
}

#[test]
fn silent_messages_are_kept_for_clients_and_hidden_from_the_model() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("call_1");
    let mut t = host.thread();
    t.post_user_message(T0, "hello").unwrap();
    drain(&mut t);
    let silent = inject_message(
        &flow,
        InjectMessage::new(Role::System, "audit: hello seen").silent(),
    )
    .unwrap();
    assert!(silent.silent);
    assert!(
        host.take_frames().is_empty(),
        "silent messages are not broadcast"
    );
    inject_message(&flow, InjectMessage::new(Role::System, "be brief")).unwrap();
    assert!(
        matches!(&host.take_frames()[..], [ServerFrame::Message { message }] if message.content == "be brief")
    );

    let visible = t.messages(10, 0, Order::Asc, false).unwrap();
    assert_eq!((visible.total, visible.messages.len()), (2, 2));
    let all = t.messages(10, 0, Order::Asc, true).unwrap();
    assert_eq!(all.total, 3);
    assert!(all.messages.iter().any(|m| m.id == silent.id));

    let call = model_call(&mut t);
    let contents: Vec<&str> = call.history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["hello", "be brief"]);
}

#[test]
fn before_message_id_inserts_in_history_order() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("c");
    let mut t = host.thread();
    let first = t.post_user_message(T0, "one").unwrap();
    let third = t.post_user_message(T0, "three").unwrap();
    let mut two = InjectMessage::new(Role::User, "two");
    two.before_message_id = Some(third.id.clone());
    two.id = Some("my-id:2".into());
    assert_eq!(inject_message(&flow, two).unwrap().id, "my-id:2");
    // Many inserts at one spot stay in order (positions are halved, then renumbered).
    for i in 0..70 {
        let mut m = InjectMessage::new(Role::User, format!("zero.{i}"));
        m.before_message_id = Some(first.id.clone());
        inject_message(&flow, m).unwrap();
    }
    let page = t.messages(200, 0, Order::Asc, false).unwrap();
    let contents: Vec<&str> = page.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(&contents[..2], ["zero.0", "zero.1"]);
    assert_eq!(&contents[70..], ["one", "two", "three"]);

    let err = |m: InjectMessage| inject_message(&flow, m).unwrap_err().to_string();
    let mut m = InjectMessage::new(Role::User, "x");
    m.before_message_id = Some("nope".into());
    assert!(err(m).contains("is not a message of this thread"));
    let mut m = InjectMessage::new(Role::User, "x");
    m.id = Some("my-id:2".into());
    assert!(err(m).contains("already exists"));
    let mut m = InjectMessage::new(Role::User, "x");
    m.id = Some("bad id with spaces".into());
    assert!(err(m).contains("must be 1-128 characters"));
    assert!(err(InjectMessage::new(Role::Tool, "x")).contains("needs tool_call_id"));
    assert!(err(InjectMessage::new(Role::User, "x".repeat(40_000))).contains("limit"));
}

#[test]
fn inject_message_parses_the_wire_form_strictly() {
    crate::install_app();
    let m: InjectMessage =
        serde_json::from_value(json!({"content": "hi", "silent": true})).unwrap();
    assert_eq!((m.role, m.silent), (Role::User, true));
    assert!(
        serde_json::from_value::<InjectMessage>(json!({"content": "hi", "colour": 1})).is_err()
    );
    assert!(
        serde_json::from_value::<InjectMessage>(json!({"content": "hi", "role": "robot"})).is_err()
    );
}

#[test]
fn events_and_context() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let flow = host.flow("c");
    emit_thread_event(&flow, "progress", json!({"pct": 50})).unwrap();
    match &host.take_frames()[..] {
        [ServerFrame::Event {
            event,
            data,
            timestamp,
        }] => {
            assert_eq!(
                (event.as_str(), data["pct"].as_i64(), *timestamp),
                ("progress", Some(50), T0)
            );
        }
        other => panic!("{other:?}"),
    }
    let e: ToolError = emit_thread_event(&flow, "", json!(null)).unwrap_err();
    assert!(e.to_string().contains("1 to 64 characters"));

    flow.context.set("lang", &"pt").unwrap();
    flow.context.set("n", &3).unwrap();
    assert_eq!(flow.context.get("lang").unwrap(), Some(json!("pt")));
    assert_eq!(
        flow.context.all().unwrap(),
        json!({"lang": "pt", "n": 3}).as_object().unwrap().clone()
    );
    flow.context.remove("lang").unwrap();
    assert_eq!(flow.context.get("lang").unwrap(), None);
    assert_eq!(flow.secret("TEST_SECRET").as_deref(), Some("s3cret"));
}

#[test]
fn get_messages_pages_for_tools() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    for i in 0..7 {
        t.post_user_message(T0 + i, &format!("m{i}")).unwrap();
    }
    let flow = host.flow("c");
    let page = get_messages(&flow, 3, 0, Order::Desc).unwrap();
    let contents: Vec<&str> = page.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        (contents, page.total, page.has_more),
        (vec!["m6", "m5", "m4"], 7, true)
    );
    let page = get_messages(&flow, 3, 6, Order::Asc).unwrap();
    assert_eq!((page.messages.len(), page.has_more), (1, false));
}

#[test]
fn update_context_and_conversation_stats_tools() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "remember I speak Portuguese")
        .unwrap();
    let call = model_call(&mut t);
    reply(
        &mut t,
        call,
        "",
        &[
            ("c1", "update_context", r#"{"set": {"language": "pt"}}"#),
            ("c2", "conversation_stats", r#"{"last": null}"#),
        ],
    );
    assert_eq!(run_queue(&host), ["update_context", "conversation_stats"]);
    let flow = host.flow("c");
    assert_eq!(flow.context.get("language").unwrap(), Some(json!("pt")));
    let page = get_messages(&flow, 10, 0, Order::Asc).unwrap();
    let system = page
        .messages
        .iter()
        .find(|m| m.role == Role::System)
        .unwrap();
    assert!(
        system.content.contains("language = \"pt\""),
        "{}",
        system.content
    );
    let stats = page
        .messages
        .iter()
        .rev()
        .find(|m| m.name.as_deref() == Some("conversation_stats"))
        .unwrap();
    // user, assistant, update_context result, system note: the stats call's own result is
    // not stored yet while it runs.
    assert!(
        stats.content.contains("\"messages\":4"),
        "{}",
        stats.content
    );
}

#[test]
fn media_from_tools_reaches_openai_as_a_user_message_after_the_results() {
    crate::install_app();
    let call = |id: &str| edgent::values::message::ToolCall {
        id: id.into(),
        name: "chart".into(),
        arguments: "{}".into(),
    };
    let assistant = Message {
        tool_calls: vec![call("c1"), call("c2")],
        ..Message::new(Role::Assistant, "", T0)
    };
    let image = Message {
        parts: vec![
            Content::text("here"),
            Content::Image {
                source: Source::base64("image/png", "AAA"),
            },
        ],
        ..Message::tool_result(&call("c1"), "here\n\n[image: image/png]", T0)
    };
    let pdf = Message {
        parts: vec![Content::Document {
            source: Source::base64("application/pdf", "JVBE"),
        }],
        ..Message::tool_result(&call("c2"), "[document: application/pdf]", T0)
    };
    let body = build_request(
        "m",
        "",
        &[
            Message::new(Role::User, "chart?", T0),
            assistant,
            image,
            pdf,
        ],
        &[],
    );
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
    let parts = msgs[4]["content"].as_array().unwrap();
    assert!(parts
        .iter()
        .any(|p| p["type"] == "image_url" && p["image_url"]["url"] == "data:image/png;base64,AAA"));
    assert!(parts.iter().any(
        |p| p["type"] == "file" && p["file"]["file_data"] == "data:application/pdf;base64,JVBE"
    ));
    assert_eq!(msgs[2]["content"], "here\n\n[image: image/png]");
}

#[test]
fn a_tool_that_keeps_killing_the_worker_is_abandoned_not_retried_forever() {
    crate::install_app();
    let host = TestHost::with_thread(T0);
    let mut t = host.thread();
    t.post_user_message(T0, "hi").unwrap();
    let call = model_call(&mut t);
    reply(&mut t, call, "", &[("c1", "get_current_time", "{}")]);
    // Three starts that never finish (the process dies each time), then recovery gives up.
    for attempt in 1..=edgent::engine::thread::MAX_TOOL_INTERRUPTIONS {
        let mut t = host.thread();
        let Action::RunTool(c) = t.next_action(T0, MAX_STEPS).unwrap() else {
            panic!("attempt {attempt}: expected the tool to run again")
        };
        t.start_tool(T0, &c, true).unwrap();
    }
    let mut t = host.thread();
    let call = model_call(&mut t);
    let result = call.history.last().unwrap();
    assert_eq!(result.role, Role::Tool);
    assert!(
        result.content.contains("interrupted 3 times"),
        "{}",
        result.content
    );
}

#[test]
fn tools_without_arguments_describe_an_empty_object() {
    crate::install_app();
    let spec = &host_registry_spec("get_current_time");
    assert_eq!(
        spec,
        &json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

fn host_registry_spec(name: &str) -> serde_json::Value {
    let host = TestHost::with_thread(T0);
    host.registry.get(name).unwrap().parameters().clone()
}

#[test]
fn a_flow_knows_its_execution_its_root_and_what_the_model_sees() {
    let host = TestHost::with_thread(T0);
    let flow = host.flow("call-1");
    assert_eq!(flow.flow_id, format!("{}:call-1", flow.thread_id));
    assert_ne!(
        host.flow("call-2").flow_id,
        flow.flow_id,
        "one id per execution"
    );
    let config = edgent::testing::agent(&[]);
    let sub = flow.sub_flow("call-9", "msg-3", &config);
    assert_eq!(sub.flow_id, format!("{}/call-9", flow.flow_id));
    assert_eq!(sub.depth, 1);
    assert_eq!(
        sub.root().tool_call_id,
        "call-1",
        "the root is the top-level call's flow"
    );
    assert_eq!(
        sub.sub_flow("call-10", "msg-4", &config)
            .root()
            .tool_call_id,
        "call-1"
    );
    assert_eq!(sub.parent_message_id.as_deref(), Some("msg-3"));
    assert_eq!(
        (flow.root_thread_id.as_str(), sub.root_thread_id.as_str()),
        (flow.thread_id.as_str(), flow.thread_id.as_str()),
        "a thread a client created is its own root"
    );
    // A child thread (an agent called as a tool) knows the thread at the top of its chain.
    let parent = edgent::engine::thread::ParentLink {
        thread_id: "the-parent",
        root_thread_id: "the-root",
        nesting: 2,
    };
    host.thread().link(Some(parent), None).unwrap();
    let child = host.flow("call-11");
    assert_eq!(child.root_thread_id, "the-root");
    let summary = host.thread().summary().unwrap();
    assert_eq!(
        (
            summary.parent_thread_id.as_deref(),
            summary.root_thread_id.as_deref()
        ),
        (Some("the-parent"), Some("the-root"))
    );

    // The model's view: the newest messages within the budget, paired, oldest first.
    for i in 0..6 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let msg = InjectMessage::new(role, format!("m{i} {}", "x".repeat(40)));
        inject_message(&flow, msg).unwrap();
    }
    let all = flow.model_messages().unwrap();
    assert_eq!(all.len(), 6);
    let tight = flow.message_history.model_view(40).unwrap();
    assert!(tight.len() < 6 && !tight.is_empty(), "{}", tight.len());
    assert!(tight.last().is_some_and(|m| m.content.starts_with("m5")));
}
