//! The configuration API and agent resolution as the Worker runs them (`edgent::runtime::admin`
//! and `::agents`), over a D1-like database: the project's migrations in SQLite, answering
//! rows as JSON objects, with every batch counted. Proves the round trips a turn pays (none
//! while the isolate's copy is fresh, a version check after `CONFIG_TTL_MS`, a full load only
//! when the configuration moved) and that a write through the API reaches this isolate's
//! threads at once.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use rusqlite::types::ValueRef;
use serde_json::{json, Map, Value};

use edgent::config::admin::Kind;
use edgent::config::cache::CONFIG_TTL_MS;
use edgent::config::policy::ModelPolicy;
use edgent::engine::store::Side;
use edgent::runtime::{admin, agents, ConfigDb};
use edgent::testing::block_on;
use edgent::tool::BoxFuture;
use edgent::values::sql::SqlValue;

const T0: i64 = 1_800_000_000_000;

/// The migrated database; `batches` counts round trips.
struct FakeD1 {
    conn: RefCell<rusqlite::Connection>,
    batches: Cell<u32>,
}

impl FakeD1 {
    fn new() -> Self {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        let mut files: Vec<_> =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
        files.sort();
        for file in files {
            conn.execute_batch(&std::fs::read_to_string(&file).unwrap())
                .unwrap();
        }
        FakeD1 {
            conn: RefCell::new(conn),
            batches: Cell::new(0),
        }
    }

    fn run(&self, statements: Vec<(String, Vec<SqlValue>)>) -> Result<Vec<Vec<Value>>, String> {
        let mut conn = self.conn.borrow_mut();
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for (sql, params) in statements {
            let mut stmt = tx.prepare(&sql).map_err(|e| e.to_string())?;
            let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
            let params: Vec<rusqlite::types::Value> = params
                .into_iter()
                .map(|p| match p {
                    SqlValue::Null => rusqlite::types::Value::Null,
                    SqlValue::Integer(i) => rusqlite::types::Value::Integer(i),
                    SqlValue::Real(f) => rusqlite::types::Value::Real(f),
                    SqlValue::Text(t) => rusqlite::types::Value::Text(t),
                })
                .collect();
            let mut rows = stmt
                .query(rusqlite::params_from_iter(params))
                .map_err(|e| e.to_string())?;
            let mut set = Vec::new();
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let mut obj = Map::new();
                for (i, name) in names.iter().enumerate() {
                    let v = match row.get_ref(i).unwrap() {
                        ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                        ValueRef::Integer(n) => json!(n),
                        ValueRef::Real(f) => json!(f),
                        ValueRef::Text(t) => Value::String(String::from_utf8(t.to_vec()).unwrap()),
                    };
                    obj.insert(name.clone(), v);
                }
                set.push(Value::Object(obj));
            }
            out.push(set);
        }
        tx.commit().map_err(|e| e.to_string())?;
        Ok(out)
    }
}

impl ConfigDb for FakeD1 {
    fn batch(
        &self,
        statements: Vec<(String, Vec<SqlValue>)>,
    ) -> BoxFuture<'static, Result<Vec<Vec<Value>>, String>> {
        self.batches.set(self.batches.get() + 1);
        let out = self.run(statements);
        Box::pin(async move { out })
    }

    fn log_error(&self, message: &str) {
        panic!("logged: {message}");
    }
}

fn config(system: &str) -> Vec<u8> {
    json!({
        "models": [{ "name": "m", "provider": "openai", "model": "gpt", "base_url": "https://api.openai.com/v1" }],
        "prompts": [{ "name": "helper", "model": "m", "system": system, "tools": ["get_current_time"] }],
        "agents": [{ "id": "desk", "side_a": { "prompt": "helper" } }]
    })
    .to_string()
    .into_bytes()
}

/// What the API checks writes against: the one registered tool these tests name, no
/// registered output types, and `models`.
fn rules(models: &ModelPolicy) -> admin::WriteRules<'_> {
    admin::WriteRules {
        tools: &["get_current_time"],
        schemas: &[],
        models,
    }
}

/// How many round trips `f` cost.
fn trips<T>(db: &FakeD1, f: impl FnOnce() -> T) -> (T, u32) {
    let before = db.batches.get();
    let out = f();
    (out, db.batches.get() - before)
}

#[test]
fn a_turn_pays_no_round_trip_while_fresh_a_version_check_after_and_a_load_when_it_moved() {
    agents::forget_cached();
    let db = FakeD1::new();
    let policy = ModelPolicy::default();
    let rules = rules(&policy);
    let (stored, _) = trips(&db, || {
        block_on(admin::put_config(&db, &config("Be brief."), rules, T0))
    });
    assert_eq!(stored.unwrap().0, 200);

    let load = |now| {
        block_on(agents::load_agent(&db, "desk", Side::A, now))
            .unwrap()
            .unwrap()
    };
    let (first, n) = trips(&db, || load(T0));
    assert_eq!(
        (n, first.prompt.system.as_str()),
        (1, "Be brief."),
        "one batch loads it all"
    );
    let (again, n) = trips(&db, || load(T0 + 1));
    assert!(Rc::ptr_eq(&first, &again));
    assert_eq!(n, 0, "fresh: no round trip");
    assert!(agents::fresh_agent("desk", Side::A, T0 + 1).is_some());

    let later = T0 + CONFIG_TTL_MS + 1;
    assert!(agents::fresh_agent("desk", Side::A, later).is_none());
    let (checked, n) = trips(&db, || load(later));
    assert!(Rc::ptr_eq(&first, &checked), "unchanged: the copy is kept");
    assert_eq!(n, 1, "only the version stamp is read");

    // A change through the API reaches this isolate's next turn at once.
    let prompt = json!({ "name": "helper", "model": "m", "system": "Be thorough." }).to_string();
    let (put, _) = trips(&db, || {
        block_on(admin::put(
            &db,
            Kind::Prompt,
            "helper",
            prompt.as_bytes(),
            rules,
            later,
        ))
    });
    assert_eq!(put.unwrap().0, 200);
    let (changed, n) = trips(&db, || load(later + 1));
    assert_eq!((n, changed.prompt.system.as_str()), (1, "Be thorough."));

    // A change made elsewhere (another isolate, by hand) is seen after the TTL.
    db.conn
        .borrow()
        .execute("UPDATE prompts SET system = 'By hand.'", [])
        .unwrap();
    assert_eq!(
        load(later + 2).prompt.system,
        "Be thorough.",
        "within the TTL"
    );
    let (reloaded, n) = trips(&db, || load(later + 2 + CONFIG_TTL_MS + 1));
    assert_eq!(
        (n, reloaded.prompt.system.as_str()),
        (2, "By hand."),
        "version, then the load"
    );
}

/// A prompt's `response_format` is stored in its column and read back whole by the turn's
/// loader; a type name is taken only when the app registers it.
#[test]
fn a_response_format_is_stored_and_a_type_name_must_be_registered() {
    agents::forget_cached();
    let db = FakeD1::new();
    let tools = ["get_current_time"];
    let policy = ModelPolicy::default();
    let rules = admin::WriteRules {
        tools: &tools,
        schemas: &["ticket_triage"],
        models: &policy,
    };
    block_on(admin::put_config(&db, &config("Hi."), rules, T0)).unwrap();
    let format = json!({ "name": "answer", "schema": { "type": "object", "properties": { "ok": { "type": "boolean" } } } });
    let put = |body: Value| {
        let body = body.to_string();
        block_on(admin::put(
            &db,
            Kind::Prompt,
            "helper",
            body.as_bytes(),
            rules,
            T0,
        ))
    };
    let (status, stored) = put(json!({ "model": "m", "response_format": format })).unwrap();
    assert_eq!((status, &stored["response_format"]), (200, &format));
    let loaded = block_on(agents::load_agent(&db, "desk", Side::A, T0))
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&loaded.prompt.response_format).unwrap(),
        format
    );

    assert_eq!(
        put(json!({ "model": "m", "response_format": { "type_name": "ticket_triage" } }))
            .unwrap()
            .0,
        200
    );
    let unknown =
        put(json!({ "model": "m", "response_format": { "type_name": "invoice" } })).unwrap_err();
    assert_eq!((unknown.status, unknown.code), (400, "invalid_definition"));
    assert!(
        unknown.message.contains("type_name \"invoice\" is not an output type this app registers (registered: ticket_triage)"),
        "{}",
        unknown.message
    );
    let bad = put(json!({ "model": "m", "response_format": { "schema": { "type": "object", "$ref": "#/x" } } })).unwrap_err();
    assert_eq!(bad.status, 400);
    assert!(
        bad.message.contains("`$ref` is not supported"),
        "{}",
        bad.message
    );
    let cleared = put(json!({ "model": "m" })).unwrap().1;
    assert_eq!(cleared["response_format"], Value::Null);
}

#[test]
fn the_api_answers_and_refuses_over_the_database() {
    agents::forget_cached();
    let db = FakeD1::new();
    let policy = ModelPolicy::default();
    let rules = rules(&policy);
    block_on(admin::put_config(&db, &config("Hi."), rules, T0)).unwrap();

    let (status, list) = block_on(admin::list(&db, Kind::Agent)).unwrap();
    assert_eq!(
        (status, list["agents"][0]["id"].as_str()),
        (200, Some("desk"))
    );
    assert_eq!(
        block_on(admin::get(&db, Kind::Model, "m")).unwrap().1["model"],
        "gpt"
    );
    assert_eq!(
        block_on(admin::get(&db, Kind::Model, "nope"))
            .unwrap_err()
            .status,
        404
    );
    let in_use = block_on(admin::delete(&db, Kind::Prompt, "helper")).unwrap_err();
    assert_eq!(in_use.status, 409, "{}", in_use.message);
    let unknown_tool = json!({ "name": "p2", "model": "m", "tools": ["launch"] }).to_string();
    let refused = block_on(admin::put(
        &db,
        Kind::Prompt,
        "p2",
        unknown_tool.as_bytes(),
        rules,
        T0,
    ));
    assert_eq!(refused.unwrap_err().status, 400);

    assert!(block_on(agents::agent_exists(&db, "desk", T0)).unwrap());
    assert!(!block_on(agents::agent_exists(&db, "ghost", T0)).unwrap());
    assert!(!block_on(agents::agent_has_side(&db, "desk", Side::B)).unwrap());
    let missing = block_on(agents::load_agent(&db, "ghost", Side::A, T0)).unwrap();
    assert!(
        missing.is_err(),
        "an unknown agent is a configuration error, not a fault"
    );

    let (deleted, _) = block_on(admin::delete(&db, Kind::Agent, "desk")).unwrap();
    assert_eq!(deleted, 200);
    assert!(
        !block_on(agents::agent_exists(&db, "desk", T0)).unwrap(),
        "the delete cleared the cache"
    );
}

#[test]
fn a_model_naming_a_secret_the_operator_does_not_allow_is_refused_and_not_written() {
    let db = FakeD1::new();
    let tools = ["get_current_time"];
    let strict = ModelPolicy::from_vars(|k| (k == "MODEL_HOSTS").then(|| "api.openai.com".into()));
    let rules = admin::WriteRules {
        tools: &tools,
        schemas: &[],
        models: &strict,
    };
    for (model, why) in [
        (
            json!({ "provider": "openai", "model": "x", "base_url": "https://api.openai.com/v1", "api_key_secret": "EDGENT_API_KEY" }),
            "never sent",
        ),
        (
            json!({ "provider": "openai", "model": "x", "base_url": "https://api.openai.com/v1", "api_key_secret": "WEATHER_API_KEY" }),
            "MODEL_SECRETS",
        ),
        (
            json!({ "provider": "openai", "model": "x", "base_url": "http://api.openai.com/v1" }),
            "https",
        ),
        (
            json!({ "provider": "openai", "model": "x", "base_url": "https://collector.example/v1", "api_key_secret": "OPENAI_API_KEY" }),
            "MODEL_HOSTS",
        ),
    ] {
        let body = model.to_string();
        let refused = block_on(admin::put(
            &db,
            Kind::Model,
            "leaky",
            body.as_bytes(),
            rules,
            T0,
        ));
        let e = refused.unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (400, "invalid_definition"),
            "{}",
            e.message
        );
        assert!(e.message.contains(why), "{}", e.message);
        let mut set = json!({ "models": [model] });
        set["models"][0]["name"] = "leaky".into();
        let refused = block_on(admin::put_config(
            &db,
            set.to_string().as_bytes(),
            rules,
            T0,
        ));
        assert_eq!(refused.unwrap_err().status, 400);
    }
    assert_eq!(
        block_on(admin::get(&db, Kind::Model, "leaky"))
            .unwrap_err()
            .status,
        404,
        "nothing was written"
    );
}

#[test]
fn a_model_timeout_past_an_hour_is_refused() {
    let db = FakeD1::new();
    let policy = ModelPolicy::default();
    let rules = rules(&policy);
    // 2^31 ms would wrap in a JavaScript timer and fire at once.
    for (field, ms) in [
        ("first_chunk_timeout_ms", 2_147_483_648u64),
        ("stall_timeout_ms", 3_600_001),
    ] {
        let mut model =
            json!({ "provider": "openai", "model": "x", "base_url": "https://api.openai.com/v1" });
        model[field] = ms.into();
        let body = model.to_string();
        let e = block_on(admin::put(
            &db,
            Kind::Model,
            "slow",
            body.as_bytes(),
            rules,
            T0,
        ))
        .unwrap_err();
        assert_eq!(e.status, 400, "{field}: {}", e.message);
    }
}

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
    let policy = ModelPolicy::default();
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
