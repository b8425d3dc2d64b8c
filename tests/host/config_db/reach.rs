//! What a turn's configuration load reaches beyond the side's prompt (the prompts its
//! sub-prompts may call, their embedding models) and tool recommendations, over the same
//! D1-like database.

use super::*;

/// `GET /api/tools/recommend` as the router runs it: every registered tool ranked for a task,
/// or one prompt's tools and delegates with what it would offer; 404 for an unknown prompt.
#[test]
fn tools_are_recommended_for_a_task_from_the_registry_or_a_prompt() {
    use edgent::api::tools::RecommendQuery;
    use edgent::runtime::recommend::recommend as recommend_with;
    let embedder = edgent::testing::ToyEmbedder::default();
    let policy = ModelPolicy::default();
    let recommend = |db: &FakeD1, registry: &edgent::tool::Registry, query: &RecommendQuery| {
        block_on(recommend_with(db, registry, query, &embedder, &policy))
    };
    let db = FakeD1::new();
    let registry = crate::registry().unwrap();
    let tools: Vec<&str> = registry.names().collect();
    let rules = admin::WriteRules {
        tools: &tools,
        schemas: &[],
        models: &policy,
    };
    let set = json!({
        "models": [{ "name": "m", "provider": "openai", "model": "gpt", "base_url": "https://api.openai.com/v1" }],
        "prompts": [
            { "name": "desk", "model": "m", "max_offered_tools": 2, "pinned_tools": ["notes"],
              "tools": ["get_current_time", "notes", "get_weather", "issue_refund", "review"] },
            { "name": "notes", "model": "m", "description": "Takes notes for later." },
            { "name": "writer", "model": "m" },
            { "name": "reviewer", "model": "m", "tools": ["approve_draft"] },
        ],
        "agents": [{ "id": "review", "kind": "dual_ai", "expose_as_tool": true,
                     "tool_description": "Has a writer draft a customer reply and a reviewer approve it.",
                     "side_a": { "prompt": "writer" },
                     "side_b": { "prompt": "reviewer", "stop_tool": "approve_draft" } }],
    });
    block_on(admin::put_config(
        &db,
        set.to_string().as_bytes(),
        rules,
        T0,
    ))
    .unwrap();
    let query = |task: &str, limit: u32, prompt: Option<&str>| RecommendQuery {
        task: task.into(),
        limit,
        prompt: prompt.map(str::to_owned),
    };

    let all = (recommend(
        &db,
        &registry,
        &query("what's the weather in Lisbon", 3, None),
    ))
    .unwrap();
    assert_eq!(all["task"], "what's the weather in Lisbon");
    let ranked = all["tools"].as_array().unwrap();
    assert_eq!(ranked.len(), 3, "{all}");
    assert_eq!(ranked[0]["name"], "get_weather");
    assert!(ranked[0]["score"].as_f64().unwrap() > 0.0);
    assert!(all.get("offered").is_none() && all.get("prompt").is_none());

    let desk = (recommend(
        &db,
        &registry,
        &query("please draft a customer reply", 10, Some("desk")),
    ))
    .unwrap();
    let names: Vec<&str> = desk["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        5,
        "the prompt's tools and delegates only: {desk}"
    );
    assert_eq!(
        names[0], "review",
        "a delegate is ranked by its tool description"
    );
    assert_eq!(desk["prompt"], "desk");
    // The pin, then the best ranked, in the prompt's order.
    assert_eq!(desk["offered"], json!(["notes", "review"]));
    let time = (recommend(&db, &registry, &query("what time is it", 1, Some("desk")))).unwrap();
    assert_eq!(
        time["tools"],
        json!([{ "name": "get_current_time", "score": time["tools"][0]["score"] }])
    );
    assert_eq!(time["offered"], json!(["get_current_time", "notes"]));

    let missing = (recommend(&db, &registry, &query("x", 10, Some("ghost")))).unwrap_err();
    assert_eq!(
        (missing.status, missing.message.as_str()),
        (404, "prompt \"ghost\" does not exist")
    );
}

/// Sub-prompts that call prompts: one load brings every prompt reachable through `tools` to
/// the deepest sub-prompt and one level beyond (a call past the limit is refused by name),
/// with its model chain, and no deeper; the side's prompt calls only those its own tools name.
#[test]
fn a_load_brings_the_prompts_sub_prompts_may_call_down_to_the_deepest_level() {
    use edgent::config::Delegate;
    use edgent::values::limits::MAX_SUB_PROMPT_DEPTH;
    agents::forget_cached();
    let db = FakeD1::new();
    let policy = ModelPolicy::default();
    let rules = rules(&policy);
    let prompt = |name: &str, tools: &[&str]| json!({ "name": name, "model": "m", "system": name, "tools": tools });
    let config = json!({
        "models": [
            { "name": "m", "provider": "openai", "model": "gpt", "base_url": "https://api.openai.com/v1" },
            { "name": "embedder", "provider": "openai", "model": "text-embedding-3-small", "base_url": "https://api.openai.com/v1" },
        ],
        "prompts": [
            prompt("top", &["level1", "get_current_time"]),
            prompt("level1", &["level2"]),
            { "name": "level2", "model": "m", "system": "level2", "tools": ["level3", "top"],
              "tool_selection_model": "embedder" },
            prompt("level3", &["level4"]),
            prompt("level4", &["level5"]),
            prompt("level5", &[]),
            prompt("unrelated", &[]),
        ],
        "agents": [{ "id": "desk", "side_a": { "prompt": "top" } }]
    })
    .to_string();
    let stored = block_on(admin::put_config(&db, config.as_bytes(), rules, T0));
    assert_eq!(stored.unwrap().0, 200);
    let (loaded, n) = trips(&db, || {
        block_on(agents::load_agent(&db, "desk", Side::A, T0))
            .unwrap()
            .unwrap()
    });
    assert_eq!(n, 1, "one round trip, however deep");
    assert_eq!(MAX_SUB_PROMPT_DEPTH, 3);
    let names: Vec<(&str, usize)> = loaded
        .delegates
        .iter()
        .map(|(d, models)| match d {
            Delegate::Prompt(p) => (p.name.as_str(), models.len()),
            Delegate::Agent(a) => (a.id.as_str(), models.len()),
        })
        .collect();
    // Level by level; `top` (named by level2) runs as a sub-prompt too; level4 is the level
    // past the limit; level5 is not loaded.
    assert_eq!(
        names,
        [
            ("level1", 1),
            ("level2", 1),
            ("level3", 1),
            ("top", 1),
            ("level4", 1)
        ]
    );
    assert!(loaded.delegate("level1").is_some());
    // A sub-prompt's embedding model comes with the load too.
    let level2 = loaded
        .delegates
        .iter()
        .find_map(|(d, _)| match d {
            Delegate::Prompt(p) if p.name == "level2" => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        loaded.selection_model(level2).map(|m| m.name.as_str()),
        Some("embedder")
    );
    assert!(
        loaded.delegate("level2").is_none(),
        "the side's prompt does not list it"
    );
}

/// A prompt's `tool_selection_model`: read with the agent's configuration in the same batch
/// (no extra round trip), deleting it while named is a 409, and `GET /api/tools/recommend`
/// ranks that prompt's tools by its embeddings, saying so, or by BM25 with the reason.
#[test]
fn the_embedding_model_is_loaded_with_the_configuration_and_ranks_recommendations() {
    use edgent::api::tools::RecommendQuery;
    use edgent::runtime::recommend::recommend;
    use edgent::testing::{EmbedAnswer, ToyEmbedder};
    agents::forget_cached();
    edgent::runtime::selection::forget_vectors();
    let db = FakeD1::new();
    let registry = crate::registry().unwrap();
    let tools: Vec<&str> = registry.names().collect();
    let policy = ModelPolicy::default();
    let rules = admin::WriteRules {
        tools: &tools,
        schemas: &[],
        models: &policy,
    };
    let set = json!({
        "models": [
            { "name": "m", "provider": "openai", "model": "gpt", "base_url": "https://api.openai.com/v1" },
            { "name": "embedder", "provider": "openai", "model": "text-embedding-3-small", "base_url": "https://api.openai.com/v1" },
        ],
        "prompts": [{ "name": "desk", "model": "m", "max_offered_tools": 1,
                      "tool_selection_model": "embedder",
                      "tools": ["get_current_time", "get_weather", "issue_refund"] }],
        "agents": [{ "id": "desk", "side_a": { "prompt": "desk" } }],
    });
    let (stored, _) = trips(&db, || {
        block_on(admin::put_config(
            &db,
            set.to_string().as_bytes(),
            rules,
            T0,
        ))
    });
    assert_eq!(stored.unwrap().0, 200);
    let (loaded, n) = trips(&db, || {
        block_on(agents::load_agent(&db, "desk", Side::A, T0))
            .unwrap()
            .unwrap()
    });
    assert_eq!(n, 1, "one batch, the embedding model included");
    assert_eq!(
        loaded.prompt.tool_selection_model.as_deref(),
        Some("embedder")
    );
    assert_eq!(
        loaded.selection_model(&loaded.prompt).unwrap().model,
        "text-embedding-3-small",
        "the embedding model comes with the configuration"
    );

    let e = ToyEmbedder::with_synonyms(&[("forecast", "weather")]);
    let query = RecommendQuery {
        task: "any forecast for Porto?".into(),
        limit: 3,
        prompt: Some("desk".into()),
    };
    let r = block_on(recommend(&db, &registry, &query, &e, &policy)).unwrap();
    assert_eq!(r["method"], "embeddings", "{r}");
    assert_eq!(r["tools"][0]["name"], "get_weather", "{r}");
    assert_eq!(r["offered"], json!(["get_weather"]));
    assert!(r.get("fallback").is_none());
    e.script([EmbedAnswer::Fail(
        edgent::llm::stream::ProviderError::Timeout("no embeddings within 3000 ms".into()),
    )]);
    let r = block_on(recommend(&db, &registry, &query, &e, &policy)).unwrap();
    assert_eq!(r["method"], "bm25", "{r}");
    assert_eq!(
        r["fallback"],
        "embedding model \"embedder\": model timed out: no embeddings within 3000 ms"
    );
    // Without a prompt: every registered tool, by BM25.
    let all = RecommendQuery {
        prompt: None,
        ..query
    };
    let r = block_on(recommend(&db, &registry, &all, &e, &policy)).unwrap();
    assert_eq!(r["method"], "bm25");

    let e = block_on(admin::delete(&db, Kind::Model, "embedder")).unwrap_err();
    assert_eq!((e.status, e.code), (409, "in_use"));
    assert_eq!(
        e.message,
        "model \"embedder\" is used by prompt \"desk\" (its \"tool_selection_model\"); change or delete that first"
    );
}
