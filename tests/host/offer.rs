//! What a prompt offers the model and what a call may run (`edgent::tool::offer`): registered
//! tools, then delegates with their descriptions; the model may run only what its prompt
//! lists, the application may queue any registered tool, and anything else is an error result
//! naming what is available. Over its `max_offered_tools`, a prompt offers its pinned tools,
//! then those ranked best for the latest messages (`edgent::tool::select`), with the example
//! app's tools and the `support` prompt's list; a listed tool left out still runs.

use edgent::config::{AgentDef, Delegate, PromptConfig};
use edgent::engine::store::CallOrigin;
use edgent::testing::agent;
use edgent::tool::offer::{callee, offer, offered, Callee, Offer};
use edgent::values::message::{Message, Role};
use serde_json::json;

fn config() -> edgent::config::AgentConfig {
    let mut c = agent(&["get_current_time", "summarize", "review", "missing"]);
    let summarize: PromptConfig = serde_json::from_value(json!({
        "name": "summarize", "model": "default", "system": "s", "description": "",
    }))
    .unwrap();
    let review: AgentDef = serde_json::from_value(json!({
        "id": "review", "kind": "dual_ai", "description": "A writer and a reviewer.",
        "side_a": { "prompt": "writer" }, "side_b": { "prompt": "reviewer" },
    }))
    .unwrap();
    c.delegates = vec![
        (Delegate::Prompt(summarize), Vec::new()),
        (Delegate::Agent(review), Vec::new()),
    ];
    c
}

#[test]
fn a_prompt_offers_its_registered_tools_then_its_delegates() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    let specs = offered(&registry, &config());
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["get_current_time", "summarize", "review"],
        "unknown names are left out"
    );
    assert_eq!(
        specs[1].description,
        "Asks the \"summarize\" assistant; give it everything it needs in `input`."
    );
    assert_eq!(specs[2].description, "A writer and a reviewer.");
    assert_eq!(specs[1].parameters["required"], json!(["input"]));
}

#[test]
fn what_a_model_is_offered_carries_no_result_schema_and_the_tool_list_does() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    // `process_order` declares what it returns: `GET /api/tools` lists it, a model call (which
    // has no field for it) does not copy it.
    let listed = registry.all_specs();
    let listed = listed.iter().find(|s| s.name == "process_order").unwrap();
    assert!(listed
        .returns
        .as_ref()
        .is_some_and(|r| r["properties"].is_object()));
    let offered = registry.specs(["process_order"]);
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].returns, None);
    assert_eq!(offered[0].parameters, listed.parameters);
}

#[test]
fn the_model_runs_only_what_its_prompt_lists_and_the_application_any_tool() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    let config = config();
    assert!(matches!(
        callee(&registry, &config, "get_current_time", CallOrigin::Model),
        Callee::Tool(_)
    ));
    assert!(matches!(
        callee(&registry, &config, "summarize", CallOrigin::Model),
        Callee::Delegate(Delegate::Prompt(_), _)
    ));
    // Registered but not offered by this prompt: the model may not, the application may.
    let Callee::Unavailable(refused) = callee(&registry, &config, "get_weather", CallOrigin::Model)
    else {
        panic!("an unlisted tool is refused to the model");
    };
    assert_eq!(
        refused.to_model_text(),
        "Error: unknown tool \"get_weather\"; available tools: get_current_time, summarize, review"
    );
    assert!(matches!(
        callee(&registry, &config, "get_weather", CallOrigin::Queue),
        Callee::Tool(_)
    ));
    assert!(matches!(
        callee(&registry, &config, "launch_rockets", CallOrigin::Queue),
        Callee::Unavailable(_)
    ));
}

/// The `support` prompt as `agents/` defines it (its tools, the `summarize` prompt and the
/// `review` agent as delegates), offering at most `max` tools.
fn support(max: Option<u32>, pinned: &[&str]) -> edgent::config::AgentConfig {
    let tools = [
        "get_current_time",
        "lookup_customer",
        "get_weather",
        "process_order",
        "issue_refund",
        "update_context",
        "conversation_stats",
        "summarize",
        "review",
    ];
    let mut c = agent(&tools);
    c.prompt.max_offered_tools = max;
    c.prompt.pinned_tools = pinned.iter().map(|p| (*p).to_owned()).collect();
    let summarize: PromptConfig = serde_json::from_value(json!({
        "name": "summarize", "model": "default",
        "description": "Summarizes the conversation so far in three bullet points. Say what to focus on in `input`.",
    }))
    .unwrap();
    let review: AgentDef = serde_json::from_value(json!({
        "id": "review", "kind": "dual_ai", "expose_as_tool": true,
        "description": "A writer and a reviewer polish a customer reply.",
        "tool_description": "Has a writer draft a customer reply and a reviewer approve it. Put the customer's request and any facts in `input`; returns the approved text.",
        "side_a": { "prompt": "writer" }, "side_b": { "prompt": "reviewer" },
    }))
    .unwrap();
    c.delegates = vec![
        (Delegate::Prompt(summarize), Vec::new()),
        (Delegate::Agent(review), Vec::new()),
    ];
    c
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::new(Role::User, text, 0)]
}

fn names(offer: &Offer) -> Vec<&str> {
    offer.tools.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn over_its_maximum_a_prompt_offers_the_tools_its_latest_messages_are_about() {
    let registry = crate::registry().unwrap();
    let config = support(Some(3), &[]);
    for (task, want) in [
        (
            "what's the weather in Lisbon",
            ["get_current_time", "lookup_customer", "get_weather"],
        ),
        (
            "refund order 1234 for ada@example.com",
            ["get_current_time", "process_order", "issue_refund"],
        ),
        (
            "what time is it",
            ["get_current_time", "lookup_customer", "get_weather"],
        ),
        (
            "summarize this conversation",
            ["update_context", "conversation_stats", "summarize"],
        ),
    ] {
        let offered_now = offer(&registry, &config, &user(task), Vec::new());
        // In the prompt's order; the room a few matches leave is filled in that order too.
        assert_eq!(names(&offered_now), want, "{task}");
        assert_eq!(offered_now.selection.offered, want);
        assert_eq!(offered_now.selection.max, Some(3));
        assert_eq!(
            offered_now.selection.scores.len(),
            9,
            "every candidate is scored"
        );
    }
    let weather = offer(
        &registry,
        &config,
        &user("what's the weather in Lisbon"),
        Vec::new(),
    );
    let best = weather
        .selection
        .scores
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(best.0, "get_weather");
    assert_eq!(weather.selection.score("get_current_time"), Some(0.0));
    // As the request log keeps it: scores to three decimals, keyed by name.
    let logged = weather.selection.to_json();
    assert_eq!(logged["max"], 3);
    assert_eq!(
        logged["offered"],
        json!(["get_current_time", "lookup_customer", "get_weather"])
    );
    let best_logged = logged["scores"]["get_weather"].as_f64().unwrap();
    assert!((best_logged - best.1).abs() < 0.001, "{logged}");
    assert_eq!(logged["scores"].as_object().unwrap().len(), 9);
    // The offered specs are the full ones: schema and all.
    assert_eq!(
        weather.tools[2],
        offered(&registry, &config)
            .into_iter()
            .find(|s| s.name == "get_weather")
            .unwrap()
    );
}

#[test]
fn pinned_tools_are_always_offered_and_the_rest_is_ranked() {
    let registry = crate::registry().unwrap();
    let config = support(Some(2), &["review"]);
    let offered_now = offer(&registry, &config, &user("what time is it"), Vec::new());
    assert_eq!(names(&offered_now), ["get_current_time", "review"]);
    // The log names the pins, so a reader tells them from the ranked.
    assert_eq!(offered_now.selection.pinned, ["review"]);
    assert_eq!(offered_now.selection.to_json()["pinned"], json!(["review"]));
    let config = support(Some(2), &["review", "update_context"]);
    let offered_now = offer(&registry, &config, &user("what time is it"), Vec::new());
    assert_eq!(
        names(&offered_now),
        ["update_context", "review"],
        "pins fill the room"
    );
}

#[test]
fn the_latest_messages_not_only_the_last_one_make_the_query() {
    let registry = crate::registry().unwrap();
    let config = support(Some(2), &[]);
    let mut history = user("what's the weather in Lisbon");
    history.push(Message::new(Role::Assistant, "18 °C and sunny.", 0));
    history.push(Message::new(Role::User, "thanks! and the time?", 0));
    let offered_now = offer(&registry, &config, &history, Vec::new());
    assert_eq!(names(&offered_now), ["get_current_time", "get_weather"]);
    // Only the last user message counts when it is older than the latest four messages.
    let mut history = user("please refund me");
    history.extend((0..4).map(|_| Message::new(Role::Tool, "{\"ok\":true}", 0)));
    let offered_now = offer(&registry, &config, &history, Vec::new());
    assert!(
        names(&offered_now).contains(&"issue_refund"),
        "{:?}",
        names(&offered_now)
    );
}

#[test]
fn without_a_maximum_or_under_it_every_tool_is_offered_and_nothing_is_scored() {
    let registry = crate::registry().unwrap();
    for config in [
        support(None, &[]),
        support(Some(9), &[]),
        support(Some(20), &[]),
    ] {
        let offered_now = offer(&registry, &config, &user("what time is it"), Vec::new());
        assert_eq!(offered_now.tools, offered(&registry, &config));
        assert_eq!(offered_now.selection.offered.len(), 9);
        assert_eq!(offered_now.selection.max, None);
        assert!(offered_now.selection.scores.is_empty());
        let logged = offered_now.selection.to_json();
        assert_eq!(logged.as_object().unwrap().len(), 1, "{logged}");
    }
}

#[test]
fn a_listed_tool_the_selection_left_out_still_runs_when_the_model_calls_it() {
    let registry = crate::registry().unwrap();
    let config = support(Some(1), &[]);
    let offered_now = offer(&registry, &config, &user("what time is it"), Vec::new());
    assert_eq!(names(&offered_now), ["get_current_time"]);
    assert!(matches!(
        callee(&registry, &config, "issue_refund", CallOrigin::Model),
        Callee::Tool(_)
    ));
    assert!(matches!(
        callee(&registry, &config, "review", CallOrigin::Model),
        Callee::Delegate(Delegate::Agent(_), _)
    ));
}

/// A prompt's MCP servers bring their tools into the same selection (they are why a prompt
/// offers more tools than a model should see): an MCP tool that fits the task is offered, the
/// others are left out, and every one is scored.
#[test]
fn mcp_tools_are_candidates_of_the_same_selection() {
    let registry = crate::registry().unwrap();
    let config = support(Some(3), &["get_current_time"]);
    let spec = |name: &str, description: &str| {
        edgent::llm::ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({ "type": "object", "properties": { "query": { "type": "string", "description": "What to look for." } } }).into(),
        returns: None,
    }
    };
    let mcp = vec![
        spec(
            "kb__search_articles",
            "Searches the knowledge base articles about invoices and billing.",
        ),
        spec("kb__delete_page", "Deletes a wiki page."),
    ];
    let offered_now = offer(
        &registry,
        &config,
        &user("find the knowledge base article about invoices"),
        mcp.clone(),
    );
    let names = names(&offered_now);
    assert!(names.contains(&"kb__search_articles"), "{names:?}");
    assert!(names.contains(&"get_current_time"), "pinned: {names:?}");
    assert!(!names.contains(&"kb__delete_page"), "{names:?}");
    assert_eq!(
        offered_now.selection.scores.len(),
        11,
        "9 of the prompt's and 2 of the server's"
    );
    // Without a maximum, every tool is offered, the server's after the prompt's.
    let all = offer(&registry, &support(None, &[]), &user("anything"), mcp);
    assert_eq!(all.tools.len(), 11);
    assert_eq!(
        all.tools.last().map(|s| s.name.as_str()),
        Some("kb__delete_page")
    );
}
