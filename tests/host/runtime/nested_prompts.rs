//! Sub-prompts that call prompts: each level runs one deeper in the same thread, up to
//! `MAX_SUB_PROMPT_DEPTH`, where calling a prompt is an error result the model reads. The
//! driver recursion, the stored messages of each level, the request log's depths, what each
//! level is offered and sees, and the flow a tool gets at the deepest level.

use super::*;
use edgent::config::{Delegate, PromptConfig};
use edgent::values::limits::MAX_SUB_PROMPT_DEPTH;

/// What a tool saw of its flow.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    depth: u32,
    flow_id: String,
    root_call: String,
    root_thread_id: String,
    thread_id: String,
}

/// A prompt `loop` that may call itself and `probe`, behind a top-level prompt listing `loop`.
fn looping_host(seen: &Rc<std::cell::RefCell<Vec<Seen>>>) -> Rc<TestHost> {
    let saw = seen.clone();
    let probe = Tool::new("Reports where it runs.").handler(move |flow: FlowState| {
        let saw = saw.clone();
        async move {
            saw.borrow_mut().push(Seen {
                depth: flow.depth,
                flow_id: flow.flow_id.clone(),
                root_call: flow.root().tool_call_id.clone(),
                root_thread_id: flow.root_thread_id.clone(),
                thread_id: flow.thread_id.clone(),
            });
            CallToolResult::text("probed")
        }
    });
    let registry = edgent::tool::Registry::build(vec![("probe", probe)]).unwrap();
    let mut config = edgent::testing::agent(&["loop"]);
    let looping: PromptConfig = serde_json::from_value(json!({
        "name": "loop", "model": "default", "system": "Dig deeper.",
        "tools": ["loop", "probe"], "include_chat": true,
    }))
    .unwrap();
    let models = config.models.clone();
    config.delegates = vec![(Delegate::Prompt(looping), models)];
    TestHost::new(registry, T0).with_agent(config).into_rc()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The contents of a request's user and tool messages, in order.
fn said(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system" && m["role"] != "assistant")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_sub_prompt_calls_a_prompt_one_level_deeper_to_the_limit_where_the_call_is_refused() {
    assert_eq!(MAX_SUB_PROMPT_DEPTH, 3, "the script below digs to depth 3");
    let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
    let h = looping_host(&seen);
    let rt = h.runtime();
    let dig = |id: &str, input: &str| {
        reply_events("", &[(id, "loop", &format!(r#"{{"input":"{input}"}}"#))])
    };
    h.script(Ok(dig("c1", "L1"))); // top level
    h.script(Ok(dig("d1", "L2"))); // depth 1
    h.script(Ok(dig("d2", "L3"))); // depth 2
    h.script(Ok(reply_events(
        "",
        &[("d3", "loop", r#"{"input":"L4"}"#), ("p3", "probe", "{}")],
    ))); // depth 3: a fourth level is refused, the tool runs
    h.script(Ok(reply_events("answer 3", &[])));
    h.script(Ok(reply_events("answer 2", &[])));
    h.script(Ok(reply_events("answer 1", &[])));
    h.script(Ok(reply_events("All done.", &[])));

    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();

    assert_eq!(transcript(&h).last().unwrap().1, "All done.");
    assert_eq!(record(&h, "c1").result.as_deref(), Some("answer 1"));
    let requests = h.model_requests();
    assert_eq!(requests.len(), 8);
    // Each level is offered the prompt while it may go deeper (registered tools first); the
    // deepest is not.
    assert_eq!(offered(&requests[0]), ["loop"]);
    assert_eq!(offered(&requests[1]), ["probe", "loop"]);
    assert_eq!(offered(&requests[2]), ["probe", "loop"]);
    assert_eq!(offered(&requests[3]), ["probe"]);
    // With include_chat, a level sees its caller's conversation up to the call, then its
    // own input: depth 3 sees the top level's message and each level's input.
    assert_eq!(said(&requests[3]), ["Go", "L1", "L2", "L3"]);

    // Every level's messages sit at its depth, linked to the call it answers.
    let store = h.store();
    for (depth, parent_call) in [(1, "c1"), (2, ""), (3, "")] {
        let page = store.messages_at_depth(depth, 50, 0, Order::Asc).unwrap();
        assert!(!page.messages.is_empty(), "messages at depth {depth}");
        let parents: Vec<&str> = page
            .messages
            .iter()
            .filter_map(|m| m.parent_tool_call_id.as_deref())
            .collect();
        assert_eq!(parents.len(), page.messages.len());
        if !parent_call.is_empty() {
            assert!(parents.iter().all(|p| *p == parent_call), "{parents:?}");
        }
        assert!(page.messages.iter().all(|m| m.depth == depth));
    }
    let deepest = store.messages_at_depth(3, 50, 0, Order::Asc).unwrap();
    let results: Vec<&str> = deepest
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[0].contains("would run more than 3 sub-prompts deep"),
        "{}",
        results[0]
    );
    assert_eq!(results[1], "probed");
    let answers: Vec<(u32, String)> = (1..=3)
        .map(|d| {
            let page = store.messages_at_depth(d, 50, 0, Order::Asc).unwrap();
            (d, page.messages.last().unwrap().content.clone())
        })
        .collect();
    assert_eq!(
        answers,
        [
            (1, "answer 1".to_owned()),
            (2, "answer 2".to_owned()),
            (3, "answer 3".to_owned())
        ]
    );

    // The request log says each attempt's depth.
    let depths: Vec<u32> = h
        .thread()
        .request_log_page(50, 0, Order::Asc)
        .unwrap()
        .logs
        .iter()
        .map(|r| r.depth)
        .collect();
    assert_eq!(depths, [0, 1, 2, 3, 3, 2, 1, 0]);

    // The tool at depth 3 runs three levels below the top-level call, under its root.
    let seen = seen.borrow();
    assert_eq!(seen.len(), 1);
    let probe = &seen[0];
    assert_eq!(probe.depth, 3);
    assert_eq!(probe.root_call, "c1");
    assert_eq!(
        probe.root_thread_id, probe.thread_id,
        "a top-level thread is its root"
    );
    let levels: Vec<&str> = probe.flow_id.split('/').collect();
    assert_eq!(levels.len(), 4, "{}", probe.flow_id);
    assert_eq!(levels[0], format!("{}:c1", probe.thread_id));
}

/// A level whose model fails ends with an error result its caller reads; the deeper level's
/// answer stays stored under its own call.
#[test]
fn a_failing_level_is_an_error_result_for_its_caller_and_deeper_answers_stay_stored() {
    let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
    let h = looping_host(&seen);
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "loop", r#"{"input":"L1"}"#)])));
    h.script(Ok(reply_events("", &[("d1", "loop", r#"{"input":"L2"}"#)])));
    h.script(Ok(reply_events("answer 2", &[])));
    // The depth-1 model fails: the top-level call ends with an error result the model reads.
    h.script(Err(ProviderError::Http {
        status: 400,
        message: "bad request".into(),
        retry_after_ms: None,
    }));
    h.script(Ok(reply_events("Could not dig.", &[])));
    h.run(rt.apply(send("Go"))).unwrap();
    h.run_spawned();
    let result = record(&h, "c1").result.unwrap();
    assert!(
        result.starts_with("Error: prompt \"loop\" failed"),
        "{result}"
    );
    // The depth-2 answer stays stored under its call, at depth 2.
    let store = h.store();
    let deeper = store.messages_at_depth(2, 50, 0, Order::Asc).unwrap();
    assert_eq!(
        deeper.messages.last().map(|m| m.content.as_str()),
        Some("answer 2")
    );
    assert_eq!(h.model_requests().len(), 5);
}
