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

mod reach;

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

/// A database holding agent `desk` ("Be brief."), written through the API, and an isolate
/// cache that holds nothing.
fn desk_stored() -> FakeD1 {
    agents::forget_cached();
    let db = FakeD1::new();
    let policy = ModelPolicy::default();
    let stored = block_on(admin::put_config(
        &db,
        &config("Be brief."),
        rules(&policy),
        T0,
    ));
    assert_eq!(stored.unwrap().0, 200);
    agents::forget_cached();
    db
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

/// What `ThreadRuntime::create` asks of the configuration: the agent check, then the load for
/// the new thread's hooks. The check's load is the only round trip.
#[test]
fn creating_a_thread_reads_the_configuration_once() {
    let db = desk_stored();
    let (checked, n) = trips(&db, || {
        let exists = block_on(agents::agent_exists(&db, "desk", T0)).unwrap();
        let loaded = block_on(agents::load_agent(&db, "desk", Side::A, T0)).unwrap();
        (exists, loaded.is_ok())
    });
    assert_eq!(
        (checked, n),
        ((true, true), 1),
        "the check's load serves the hooks"
    );
    let (exists, n) = trips(&db, || block_on(agents::agent_exists(&db, "desk", T0 + 1)));
    assert_eq!(
        (exists.unwrap(), n),
        (true, 0),
        "the next thread: no round trip"
    );
    let (exists, n) = trips(&db, || {
        block_on(agents::agent_exists(&db, "nobody", T0 + 1))
    });
    assert_eq!(
        (exists.unwrap(), n),
        (false, 1),
        "an unknown agent: one load, not cached"
    );
}

/// A version check that fails forgets the copy: no step is planned with it (so no model request
/// goes out before the check's answer) until a load succeeds.
#[test]
fn a_version_check_that_fails_forgets_the_copy_until_a_load_succeeds() {
    let db = desk_stored();
    block_on(agents::load_agent(&db, "desk", Side::A, T0))
        .unwrap()
        .unwrap();
    let later = T0 + CONFIG_TTL_MS + 1;
    assert!(agents::fresh_agent("desk", Side::A, later).is_none());
    assert!(
        agents::cached_agent("desk", Side::A).is_some(),
        "past its 5 s, a copy to plan with"
    );

    let rename = |from: &str, to: &str| {
        let sql = format!("ALTER TABLE {from} RENAME TO {to}");
        db.conn.borrow().execute_batch(&sql).unwrap();
    };
    rename("config_version", "config_version_away");
    let failed = block_on(agents::load_agent(&db, "desk", Side::A, later));
    assert!(failed.is_err(), "the check's fault is the load's");
    assert!(agents::cached_agent("desk", Side::A).is_none(), "forgotten");

    rename("config_version_away", "config_version");
    let (loaded, n) = trips(&db, || {
        block_on(agents::load_agent(&db, "desk", Side::A, later + 1))
    });
    assert!(loaded.unwrap().is_ok());
    assert_eq!(n, 1, "one full load");
    assert!(agents::cached_agent("desk", Side::A).is_some());

    // A stamp that reads but is not there (the migrations not applied) is a fault too.
    db.conn
        .borrow()
        .execute_batch("DELETE FROM config_version")
        .unwrap();
    let much_later = later + 1 + CONFIG_TTL_MS + 1;
    let failed = block_on(agents::load_agent(&db, "desk", Side::A, much_later));
    assert!(failed.is_err());
    assert!(agents::cached_agent("desk", Side::A).is_none());
}

/// The copy a thread keeps is the D1 rows its configuration was resolved from: a new isolate
/// resolves them to the same configuration, past its freshness until its version is checked
/// (one round trip, and the copy holds).
#[test]
fn a_kept_copy_resolves_to_the_loaded_configuration_and_is_checked_before_it_is_fresh() {
    let db = desk_stored();
    let loaded = block_on(agents::load_agent(&db, "desk", Side::A, T0))
        .unwrap()
        .unwrap();
    let (version, copy) = agents::kept_copy(&loaded).unwrap();

    agents::as_a_new_isolate();
    let later = T0 + 60_000;
    let adopted = agents::adopt("desk", Side::A, version, &copy, later).unwrap();
    assert_eq!(*adopted, *loaded, "the same configuration");
    assert!(
        agents::fresh_agent("desk", Side::A, later).is_none(),
        "not fresh before its check"
    );
    let (checked, n) = trips(&db, || {
        block_on(agents::load_agent(&db, "desk", Side::A, later))
            .unwrap()
            .unwrap()
    });
    assert!(Rc::ptr_eq(&checked, &adopted), "the copy held");
    assert_eq!(n, 1, "only the version stamp is read");

    agents::as_a_new_isolate();
    assert!(agents::adopt("desk", Side::A, version, "not rows", later).is_none());
    // Another build's rows (other queries): refused even though they would resolve.
    let other = copy.replacen(r#""format":""#, r#""format":"0"#, 1);
    assert_ne!(other, *copy);
    assert!(agents::adopt("desk", Side::A, version, &other, later).is_none());
    assert!(
        agents::adopt("desk", Side::B, version, &copy, later).is_none(),
        "side B's queries differ"
    );
    assert!(agents::adopt("desk", Side::A, version, &copy, later).is_some());
    agents::as_a_new_isolate();
    // An isolate that changed the configuration itself knows the copy is stale: it loads
    // instead of sending a request it would cancel.
    agents::forget_cached();
    assert!(agents::adopt("desk", Side::A, version, &copy, later).is_none());
}
