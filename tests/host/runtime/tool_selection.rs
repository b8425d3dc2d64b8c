//! Tool selection through the shipped runtime: a prompt over its `max_offered_tools` sends the
//! model only its pinned tools and the best ranked for the latest messages, a call of a listed
//! tool it left out still runs, and every attempt's request-log row says what was offered and
//! how it was chosen.
//!
//! What it does not prove: the ranking's quality on other tools (`tool::select`'s unit tests
//! and tests/host/offer.rs), the Worker's log route (tests/e2e/tool_selection.test.mjs).

use super::*;

fn named(description: &'static str, answer: &'static str) -> Tool {
    Tool::new(description)
        .handler(move |_flow: FlowState| async move { CallToolResult::text(answer) })
}

/// Four tools and an agent offering at most `max` of them, `notes` pinned.
fn selecting(max: Option<u32>) -> (edgent::tool::Registry, edgent::config::AgentConfig) {
    let registry = edgent::tool::Registry::build(vec![
        (
            "clock",
            named("Returns the current date and time.", "12:00"),
        ),
        (
            "weather",
            named("Gets the current weather for a city.", "sunny"),
        ),
        ("refund", named("Refunds an order.", "refunded")),
        ("notes", named("Saves a note.", "saved")),
    ])
    .unwrap();
    let mut agent = edgent::testing::agent(&["clock", "weather", "refund", "notes"]);
    agent.prompt.max_offered_tools = max;
    agent.prompt.pinned_tools = vec!["notes".into()];
    (registry, agent)
}

/// Four tools, at most `max` offered, `notes` pinned.
fn selecting_host(max: Option<u32>) -> Rc<TestHost> {
    let (registry, agent) = selecting(max);
    TestHost::new(registry, T0).with_agent(agent).into_rc()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_model_gets_the_pinned_and_best_ranked_tools_and_may_still_call_a_listed_one() {
    let h = selecting_host(Some(2));
    let rt = h.runtime();
    // A 503 first: the retry is a second row of the same call, with the same selection.
    h.script(Err(ProviderError::Http {
        status: 503,
        message: "busy".into(),
        retry_after_ms: None,
    }));
    h.script(Ok(reply_events("", &[("c1", "refund", "{}")])));
    h.script(Ok(reply_events("Refunded.", &[])));

    h.run(rt.apply(send("What's the weather in Lisbon?")))
        .unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_names(&requests[0]), ["weather", "notes"]);
    assert_eq!(tool_names(&requests[1]), ["weather", "notes"]);
    // Not offered, yet listed by the prompt: the call runs.
    assert_eq!(record(&h, "c1").status, "success");
    assert_eq!(transcript(&h).last().unwrap().1, "Refunded.");
    // The question still weighs most after the call (see `last` below).
    assert_eq!(tool_names(&requests[2]), ["weather", "notes"]);

    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    assert_eq!(log.logs.len(), 3);
    for (row, request) in log.logs.iter().zip(&requests) {
        let selection = row.tool_selection.as_ref().unwrap();
        assert_eq!(selection["offered"], json!(tool_names(request)));
        assert_eq!(selection["max"], 2);
        assert_eq!(selection["scores"].as_object().unwrap().len(), 4);
    }
    let score = |row: usize, name: &str| {
        let selection = log.logs[row].tool_selection.as_ref().unwrap();
        selection["scores"][name].as_f64().unwrap()
    };
    assert!(score(0, "weather") > 0.0);
    assert_eq!(score(0, "clock"), 0.0);
    assert_eq!(score(0, "notes"), 0.0, "a pin is offered, not scored up");
    assert_eq!(score(0, "refund"), 0.0);
    // The next call reads the latest messages too: the refund call now counts.
    assert!(score(2, "refund") > 0.0);
    assert!(score(2, "weather") > score(2, "refund"));
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn without_a_maximum_every_tool_is_offered_and_logged_without_scores() {
    let h = selecting_host(None);
    let rt = h.runtime();
    h.script(Ok(reply_events("Hello.", &[])));
    h.run(rt.apply(send("What's the weather in Lisbon?")))
        .unwrap();
    h.run_spawned();

    let all = ["clock", "weather", "refund", "notes"];
    assert_eq!(tool_names(&h.model_requests()[0]), all);
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    let row = serde_json::to_value(&log.logs[0]).unwrap();
    assert_eq!(row["tool_selection"], json!({ "offered": all }));
}

/// [`selecting_host`] whose prompt ranks by the embedding model `embedder` (an OpenAI-compatible
/// row, loaded with the configuration as a turn's load leaves it).
fn embedding_host() -> Rc<TestHost> {
    edgent::runtime::selection::forget_vectors();
    let (registry, mut agent) = selecting(Some(2));
    agent.prompt.tool_selection_model = Some("embedder".into());
    agent.selection_models = vec![serde_json::from_value(json!({
        "name": "embedder", "provider": "openai", "model": "toy", "base_url": "https://embeddings.example/v1",
    }))
    .unwrap()];
    let mut host = TestHost::new(registry, T0).with_agent(agent);
    host.embedder = edgent::testing::ToyEmbedder::with_synonyms(&[("forecast", "weather")]);
    host.into_rc()
}

#[test]
fn with_an_embedding_model_each_call_is_ranked_by_it_and_the_tools_embedded_once() {
    let h = embedding_host();
    let rt = h.runtime();
    h.script(Ok(reply_events("", &[("c1", "weather", "{}")])));
    h.script(Ok(reply_events("Sunny.", &[])));
    h.run(rt.apply(send("Any forecast for Porto?"))).unwrap();
    h.run_spawned();

    let requests = h.model_requests();
    assert_eq!(requests.len(), 2);
    // BM25 finds no word of the question in any tool; the embedder knows "forecast".
    assert_eq!(tool_names(&requests[0]), ["weather", "notes"]);
    let texts = h.embedder.texts();
    assert_eq!(texts.len(), 2, "one embedding request per model call");
    assert_eq!(texts[0].len(), 5, "the query and the four tools");
    assert_eq!(texts[1].len(), 1, "then the query alone");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    for row in &log.logs {
        let selection = row.tool_selection.as_ref().unwrap();
        assert_eq!(selection["method"], "embeddings", "{selection}");
        assert!(selection.get("fallback").is_none());
        assert!(selection["scores"]["weather"].as_f64().unwrap() > 0.0);
    }
    assert!(h.logged_errors().is_empty(), "{:?}", h.logged_errors());
}

#[test]
fn an_embedder_failing_leaves_the_call_to_bm25_and_the_turn_goes_on() {
    let h = embedding_host();
    let rt = h.runtime();
    h.embedder
        .script([edgent::testing::EmbedAnswer::Fail(ProviderError::Http {
            status: 500,
            message: "embedder down".into(),
            retry_after_ms: None,
        })]);
    h.script(Ok(reply_events("Sunny.", &[])));
    h.run(rt.apply(send("What's the weather in Lisbon?")))
        .unwrap();
    h.run_spawned();

    assert_eq!(tool_names(&h.model_requests()[0]), ["weather", "notes"]);
    assert_eq!(transcript(&h).last().unwrap().1, "Sunny.");
    let log = h.thread().request_log_page(10, 0, Order::Asc).unwrap();
    let selection = log.logs[0].tool_selection.as_ref().unwrap();
    assert_eq!(selection["method"], "bm25");
    assert_eq!(
        selection["fallback"],
        "embedding model \"embedder\": model server answered 500: embedder down"
    );
}
