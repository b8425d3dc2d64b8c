//! The configuration API's pure half: body parsing, set validation, delete rules, and the row
//! codec that writes definitions to D1, round-tripped through real SQLite with the project's
//! migrations and read back with the engine's own row reader.

use edgent::api::ApiError;
use edgent::config::admin::{plan, Change, ConfigSet, Definition, Kind, KINDS};
use edgent::values::sql::SqlValue;
use rusqlite::types::{Value as RValue, ValueRef};
use serde_json::{json, Map, Value};

fn model(v: Value) -> Definition {
    Definition::from_json(Kind::Model, v).unwrap()
}
fn prompt(v: Value) -> Definition {
    Definition::from_json(Kind::Prompt, v).unwrap()
}
fn agent(v: Value) -> Definition {
    Definition::from_json(Kind::Agent, v).unwrap()
}

/// Every field set, so the column lists can be compared with the serialised fields.
fn full_model() -> Definition {
    model(json!({
        "name": "big", "provider": "anthropic", "model": "claude-x",
        "base_url": "https://api.anthropic.com/v1", "api_key_secret": "ANTHROPIC_API_KEY",
        "fallbacks": ["small"], "input_price_per_mtok": 3.0, "output_price_per_mtok": 15.5,
        "first_chunk_timeout_ms": 30000, "stall_timeout_ms": 20000,
        "max_history_tokens": 50000, "max_output_tokens": 2048
    }))
}
fn small_model() -> Definition {
    model(json!({ "name": "small", "provider": "workers_ai", "model": "@cf/meta/llama" }))
}
fn full_prompt() -> Definition {
    prompt(json!({
        "name": "helper", "system": "Be brief, {{name}}.", "model": "big",
        "tools": ["get_current_time", "send_notification"], "tool_choice": "required",
        "parallel_tool_calls": false, "include_chat": false,
        "description": "Helps.", "hooks": ["redact_emails"],
        "max_offered_tools": 1, "pinned_tools": ["send_notification"]
    }))
}
fn full_agent() -> Definition {
    agent(json!({
        "id": "duo", "kind": "dual_ai", "description": "Two sides.",
        "side_a": { "prompt": "helper", "label": "A", "stop_on_response": false,
                    "stop_tool": "send_notification", "stop_tool_response_property": "answer", "max_steps": 3 },
        "side_b": { "prompt": "helper" },
        "max_turns": 7, "expose_as_tool": true, "tool_description": "Ask the duo.", "hooks": ["redact_emails"],
        "max_tokens": 50000, "max_cost_usd": 1.5
    }))
}

fn tool_names() -> Vec<&'static str> {
    crate::registry().unwrap().names().collect()
}

/// A D1-like database: the project's migrations in SQLite with foreign keys on (as D1 has).
fn d1() -> rusqlite::Connection {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    for f in files {
        conn.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    conn
}

fn write(conn: &rusqlite::Connection, def: &Definition, now: i64) {
    let values: Vec<RValue> = def
        .row(now)
        .unwrap()
        .into_iter()
        .map(|v| match v {
            SqlValue::Null => RValue::Null,
            SqlValue::Integer(i) => RValue::Integer(i),
            SqlValue::Real(f) => RValue::Real(f),
            SqlValue::Text(s) => RValue::Text(s),
        })
        .collect();
    conn.execute(&def.kind().upsert_sql(), rusqlite::params_from_iter(values))
        .unwrap();
}

/// Rows as D1 hands them to the Worker: JSON objects keyed by column; with `floats`, every
/// number as a float (D1 returns JavaScript numbers).
fn read(conn: &rusqlite::Connection, kind: Kind, floats: bool) -> Vec<Value> {
    let mut stmt = conn.prepare(&kind.select_all_sql()).unwrap();
    let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let mut obj = Map::new();
        for (i, name) in names.iter().enumerate() {
            let v = match row.get_ref(i).unwrap() {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) if floats => json!(n as f64),
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(f) => json!(f),
                ValueRef::Text(t) => Value::String(String::from_utf8(t.to_vec()).unwrap()),
                ValueRef::Blob(_) => Value::Null,
            };
            obj.insert(name.clone(), v);
        }
        out.push(Value::Object(obj));
    }
    out
}

fn read_defs(conn: &rusqlite::Connection, kind: Kind, floats: bool) -> Vec<Definition> {
    read(conn, kind, floats)
        .into_iter()
        .map(|r| Definition::from_row(kind, r).unwrap())
        .collect()
}

fn set(defs: &[Definition]) -> ConfigSet {
    let mut s = ConfigSet::default();
    for d in defs {
        s.insert(d.clone());
    }
    s
}

fn err(r: Result<impl std::fmt::Debug, ApiError>) -> ApiError {
    r.expect_err("expected an error")
}

#[test]
fn every_field_has_exactly_one_column() {
    crate::install_app();
    for def in [full_model(), full_prompt(), full_agent()] {
        let mut fields: Vec<String> = def.to_json().as_object().unwrap().keys().cloned().collect();
        let mut cols: Vec<String> = def.kind().columns().iter().map(|c| c.to_string()).collect();
        fields.sort();
        cols.sort();
        assert_eq!(fields, cols, "{}", def.label());
        assert_eq!(def.row(1).unwrap().len(), cols.len() + 1);
    }
}

#[test]
fn sql_is_built_from_constants_with_numbered_parameters() {
    crate::install_app();
    assert_eq!(Kind::from_plural("models"), Some(Kind::Model));
    assert_eq!(Kind::from_plural("agents"), Some(Kind::Agent));
    assert_eq!(Kind::from_plural("threads"), None);
    assert_eq!(
        Kind::Agent.select_one_sql(),
        "SELECT * FROM agents WHERE id = ?1"
    );
    assert_eq!(
        Kind::Prompt.delete_sql(),
        "DELETE FROM prompts WHERE name = ?1"
    );
    let upsert = Kind::Prompt.upsert_sql();
    assert!(upsert.starts_with("INSERT INTO prompts (name, system, model, tools, tool_choice, parallel_tool_calls, include_chat, description, hooks, tool_bindings, mcp_servers, compaction_prompt, response_format, max_offered_tools, pinned_tools, tool_selection_model, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) ON CONFLICT (name) DO UPDATE SET system = excluded.system"), "{upsert}");
    assert!(!upsert.contains("name = excluded.name"));
    assert!(upsert.ends_with("updated_at = excluded.updated_at"));
}

#[test]
fn the_row_codec_encodes_lists_as_text_booleans_as_integers_and_unset_options_as_null() {
    crate::install_app();
    let row = full_prompt().row(42).unwrap();
    assert_eq!(
        row[3],
        SqlValue::Text(r#"["get_current_time","send_notification"]"#.into())
    );
    assert_eq!(row[5], SqlValue::Integer(0));
    assert_eq!(row[6], SqlValue::Integer(0));
    assert_eq!(row[9], SqlValue::Text("{}".into()), "tool_bindings unset");
    assert_eq!(row[10], SqlValue::Text("[]".into()), "mcp_servers unset");
    assert_eq!(row[11], SqlValue::Null, "compaction_prompt unset");
    assert_eq!(row[12], SqlValue::Null, "response_format unset");
    assert_eq!(row[13], SqlValue::Integer(1), "max_offered_tools");
    assert_eq!(row[14], SqlValue::Text(r#"["send_notification"]"#.into()));
    assert_eq!(row[15], SqlValue::Null, "tool_selection_model unset");
    assert_eq!(row[16], SqlValue::Integer(42));
    let row = prompt(json!({ "name": "plain", "model": "small" }))
        .row(1)
        .unwrap();
    assert_eq!(row[13], SqlValue::Null, "max_offered_tools unset");
    assert_eq!(row[14], SqlValue::Text("[]".into()), "pinned_tools unset");
    let row = small_model().row(1).unwrap();
    assert_eq!(row[4], SqlValue::Null, "api_key_secret unset");
    assert_eq!(row[5], SqlValue::Text("[]".into()));
    assert_eq!(row[6], SqlValue::Real(0.0));
    assert_eq!(row[8], SqlValue::Null, "first_chunk_timeout_ms unset");
    let row = full_agent().row(1).unwrap();
    assert!(matches!(&row[3], SqlValue::Text(t) if t.starts_with('{')));
    assert_eq!(row[6], SqlValue::Integer(1));
}

#[test]
fn definitions_round_trip_through_d1_rows_and_the_engine_reader() {
    crate::install_app();
    let conn = d1();
    let minimal_agent = agent(json!({ "id": "solo", "side_a": { "prompt": "helper" } }));
    let minimal_prompt = prompt(json!({ "name": "plain", "model": "small" }));
    let answering = prompt(
        json!({ "name": "triage", "model": "small", "response_format": {
            "name": "ticket",
            "schema": { "type": "object", "properties": { "urgency": { "type": "integer", "minimum": 1 } }, "required": ["urgency"] }
        }}),
    );
    let typed = prompt(
        json!({ "name": "typed", "model": "small", "response_format": { "type_name": "Ticket" } }),
    );
    let defs = [
        small_model(),
        full_model(),
        full_prompt(),
        minimal_prompt,
        answering,
        typed,
        full_agent(),
        minimal_agent,
    ];
    // Written in KINDS order, as the shell batches them: the foreign key needs models first.
    for kind in KINDS {
        for d in defs.iter().filter(|d| d.kind() == kind) {
            write(&conn, d, 1000);
        }
    }
    for floats in [false, true] {
        let mut back: Vec<Definition> = KINDS
            .into_iter()
            .flat_map(|k| read_defs(&conn, k, floats))
            .collect();
        let mut want = defs.to_vec();
        let key = |d: &Definition| (d.kind() as u8, d.name().to_owned());
        back.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(back, want, "floats = {floats}");
    }
}

#[test]
fn upserting_twice_keeps_one_row_and_an_update_replaces_every_column() {
    crate::install_app();
    let conn = d1();
    write(&conn, &small_model(), 1);
    write(&conn, &full_model(), 1);
    write(&conn, &full_model(), 2);
    assert_eq!(read(&conn, Kind::Model, false).len(), 2);
    // Updating to a definition with fewer fields clears the others (PUT replaces).
    let bare =
        model(json!({ "name": "big", "provider": "openai", "model": "m", "base_url": "http://x" }));
    write(&conn, &bare, 3);
    let rows = read(&conn, Kind::Model, false);
    let big = rows.iter().find(|r| r["name"] == "big").unwrap();
    assert_eq!(big["api_key_secret"], Value::Null);
    assert_eq!(big["fallbacks"], "[]");
    assert_eq!(big["max_output_tokens"], Value::Null);
    assert_eq!(big["updated_at"], 3);
    assert_eq!(
        Definition::from_row(Kind::Model, big.clone()).unwrap(),
        bare
    );
}

#[test]
fn put_bodies_take_the_name_from_the_url_and_refuse_a_different_one() {
    crate::install_app();
    let d = Definition::parse_put(
        Kind::Model,
        br#"{"provider":"workers_ai","model":"@cf/x"}"#,
        "m1",
    )
    .unwrap();
    assert_eq!(d.name(), "m1");
    let d =
        Definition::parse_put(Kind::Agent, br#"{"id":"a","side_a":{"prompt":"p"}}"#, "a").unwrap();
    assert_eq!(d.name(), "a");
    let e = err(Definition::parse_put(
        Kind::Agent,
        br#"{"id":"other","side_a":{"prompt":"p"}}"#,
        "a",
    ));
    assert_eq!((e.status, e.code), (400, "invalid_definition"));
    assert!(
        e.message.contains("\"other\"") && e.message.contains("\"a\""),
        "{}",
        e.message
    );
}

#[test]
fn put_bodies_report_serde_errors_with_the_field() {
    crate::install_app();
    let cases: [(&[u8], &str, &str); 6] = [
        (b"{", "bad_json", "not valid JSON"),
        (b"[]", "bad_json", "JSON object"),
        (
            br#"{"provider":"openai","model":"x","base_url":"http://x","api_key":"sk-1"}"#,
            "invalid_definition",
            "unknown field `api_key`",
        ),
        (
            br#"{"provider":"gemini","model":"x"}"#,
            "invalid_definition",
            "unknown variant `gemini`",
        ),
        (
            br#"{"provider":"openai","model":"x","base_url":"http://x","fallbacks":"y"}"#,
            "invalid_definition",
            "fallbacks",
        ),
        (
            br#"{"provider":"openai"}"#,
            "invalid_definition",
            "missing field `model`",
        ),
    ];
    for (body, code, needle) in cases {
        let e = err(Definition::parse_put(Kind::Model, body, "m"));
        assert_eq!((e.status, e.code), (400, code), "{e}");
        assert!(e.message.contains(needle), "{needle:?} in {:?}", e.message);
    }
    let e = err(Definition::parse_put(
        Kind::Agent,
        br#"{"side_a":{"prompt":"p","max_steps":"ten"}}"#,
        "a",
    ));
    assert!(e.message.contains("side_a.max_steps"), "{}", e.message);
}

#[test]
fn config_bodies_parse_every_kind_and_refuse_unknown_keys() {
    crate::install_app();
    let s = ConfigSet::parse(
        br#"{"models":[{"name":"m","provider":"workers_ai","model":"x"}],"agents":[]}"#,
    )
    .unwrap();
    assert_eq!(s.models.len(), 1);
    assert!(s.prompts.is_empty());
    let e = err(ConfigSet::parse(br#"{"tools":[]}"#));
    assert_eq!((e.status, e.code), (400, "invalid_definition"));
    assert!(e.message.contains("unknown field `tools`"), "{}", e.message);
    let e = err(ConfigSet::parse(br#"{"prompts":[{"name":"p"}]}"#));
    assert!(e.message.contains("prompts[0]"), "{}", e.message);
    assert_eq!(err(ConfigSet::parse(b"nope")).code, "bad_json");
}

fn base() -> ConfigSet {
    set(&[small_model(), full_model(), full_prompt(), full_agent()])
}

/// The message of the 400 `plan` gives for `incoming` against `stored`.
fn refused(incoming: Vec<Definition>, stored: &ConfigSet) -> String {
    let e = err(plan(incoming, stored, &tool_names()));
    assert_eq!((e.status, e.code), (400, "invalid_definition"), "{e}");
    e.message
}

#[test]
fn a_valid_set_plans_creates_updates_and_unchanged_rows() {
    crate::install_app();
    let tools = tool_names();
    let p = plan(
        vec![full_agent(), full_prompt(), small_model(), full_model()],
        &ConfigSet::default(),
        &tools,
    )
    .unwrap();
    // Write order is models, prompts, agents whatever the request order.
    let order: Vec<Kind> = p.changes.iter().map(|(d, _)| d.kind()).collect();
    assert_eq!(order, [Kind::Model, Kind::Model, Kind::Prompt, Kind::Agent]);
    assert!(p.changes.iter().all(|(_, c)| *c == Change::Created));

    let mut changed = full_prompt();
    if let Definition::Prompt(pr) = &mut changed {
        pr.system = "New text".into();
    }
    let p = plan(vec![small_model(), changed], &base(), &tools).unwrap();
    assert_eq!(p.changes[0].1, Change::Unchanged);
    assert_eq!(p.changes[1].1, Change::Updated);
    assert_eq!(p.writes().count(), 1);
    assert_eq!(
        p.summary()["prompts"],
        json!({ "created": [], "updated": ["helper"], "unchanged": [] })
    );
    assert_eq!(p.summary()["models"]["unchanged"], json!(["small"]));
}

#[test]
fn references_must_resolve_in_the_set_as_it_will_be() {
    crate::install_app();
    let empty = ConfigSet::default();
    let m = refused(vec![full_prompt()], &empty);
    assert!(
        m.contains("prompt \"helper\"") && m.contains("\"model\" is \"big\""),
        "{m}"
    );

    let m = refused(vec![full_model()], &empty);
    assert!(m.contains("\"fallbacks\" lists \"small\""), "{m}");

    let p = prompt(json!({ "name": "p", "model": "small", "tools": ["no_such_tool"] }));
    let m = refused(vec![p], &base());
    assert!(m.contains("\"tools\" lists \"no_such_tool\""), "{m}");

    // A registered tool, a prompt and an exposed agent are all valid tool names.
    let p =
        prompt(json!({ "name": "p", "model": "small", "tools": ["get_weather", "helper", "duo"] }));
    plan(vec![p], &base(), &tool_names()).unwrap();

    let solo = agent(json!({ "id": "solo", "side_a": { "prompt": "helper" } }));
    let p = prompt(json!({ "name": "p", "model": "small", "tools": ["solo"] }));
    let m = refused(vec![solo.clone(), p], &base());
    assert!(m.contains("expose_as_tool"), "{m}");

    let a = agent(json!({ "id": "x", "side_a": { "prompt": "ghost" } }));
    let m = refused(vec![a], &base());
    assert!(m.contains("\"side_a.prompt\" is \"ghost\""), "{m}");

    let a =
        agent(json!({ "id": "x", "side_a": { "prompt": "helper", "stop_tool": "get_weather" } }));
    let m = refused(vec![a], &base());
    assert!(m.contains("\"side_a.stop_tool\" is \"get_weather\""), "{m}");

    // Definitions in the same request resolve each other, in any order.
    plan(
        vec![
            agent(json!({ "id": "x", "side_a": { "prompt": "q" } })),
            prompt(json!({ "name": "q", "model": "n" })),
            model(json!({ "name": "n", "provider": "workers_ai", "model": "@cf/x" })),
        ],
        &empty,
        &tool_names(),
    )
    .unwrap();
}

#[test]
fn single_definition_rules_are_reported_with_the_definition() {
    crate::install_app();
    let m = refused(
        vec![model(
            json!({ "name": "k", "provider": "openai", "model": "x", "base_url": "https://x", "api_key_secret": "sk-live-123" }),
        )],
        &ConfigSet::default(),
    );
    assert!(m.starts_with("model \"k\": \"api_key_secret\""), "{m}");
    let m = refused(
        vec![agent(
            json!({ "id": "d", "kind": "dual_ai", "side_a": { "prompt": "helper" } }),
        )],
        &base(),
    );
    assert!(m.contains("side_b"), "{m}");
    let m = refused(
        vec![model(
            json!({ "name": "o", "provider": "openai", "model": "x" }),
        )],
        &ConfigSet::default(),
    );
    assert!(m.contains("base_url"), "{m}");
    let m = refused(vec![small_model(), small_model()], &ConfigSet::default());
    assert!(m.contains("appears twice"), "{m}");
    let m = refused(
        vec![prompt(
            json!({ "name": "p", "model": "small", "response_format": { "schema": { "type": "object", "properties": { "a": { "pattern": "x" } } } } }),
        )],
        &base(),
    );
    assert!(
        m.starts_with("prompt \"p\": response_format: schema: at `a`: `pattern` is not supported"),
        "{m}"
    );
}

#[test]
fn tool_selection_fields_are_checked_with_the_prompt_named() {
    crate::install_app();
    let picker = |extra: Value| {
        let mut p = json!({ "name": "picker", "model": "big", "tools": ["get_current_time", "get_weather"] });
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        prompt(p)
    };
    let m = refused(vec![picker(json!({ "max_offered_tools": 0 }))], &base());
    assert_eq!(
        m,
        "prompt \"picker\": max_offered_tools must be at least 1 (leave it out to offer every tool)"
    );
    let m = refused(
        vec![picker(json!({ "pinned_tools": ["send_notification"] }))],
        &base(),
    );
    assert_eq!(
        m,
        "prompt \"picker\": pinned_tools names \"send_notification\", which is not in this prompt's tools"
    );
    let m = refused(
        vec![picker(
            json!({ "pinned_tools": ["get_weather", "get_weather"] }),
        )],
        &base(),
    );
    assert!(
        m.ends_with("pinned_tools names \"get_weather\" twice"),
        "{m}"
    );
    let m = refused(
        vec![picker(
            json!({ "max_offered_tools": 1, "pinned_tools": ["get_weather", "get_current_time"] }),
        )],
        &base(),
    );
    assert!(
        m.contains("pinned_tools names 2 tools but max_offered_tools is 1"),
        "{m}"
    );
    let e = err(Definition::parse_put(
        Kind::Prompt,
        br#"{"model":"big","max_offered_tools":-1}"#,
        "picker",
    ));
    assert_eq!(e.code, "invalid_definition");
    assert!(e.message.contains("max_offered_tools"), "{}", e.message);
    // The embedding model is a models row of a provider that has embeddings.
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "ghost" }))],
        &base(),
    );
    assert_eq!(
        m,
        "prompt \"picker\": \"tool_selection_model\" is \"ghost\", which is not a model"
    );
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "big" }))],
        &base(),
    );
    assert!(
        m.ends_with("is \"big\", a model of provider \"anthropic\", which has no embeddings (use an openai or workers_ai model)"),
        "{m}"
    );
    let m = refused(
        vec![picker(json!({ "tool_selection_model": "a b" }))],
        &base(),
    );
    assert!(
        m.contains("tool selection model \"a b\" must be 1-64"),
        "{m}"
    );
    let embedding = plan(
        vec![picker(json!({ "tool_selection_model": "small" }))],
        &base(),
        &tool_names(),
    );
    assert!(embedding.is_ok(), "{embedding:?}");
    let stored = set(&[
        small_model(),
        full_model(),
        prompt(json!({ "name": "picker", "model": "big", "tool_selection_model": "small" })),
    ]);
    assert_eq!(
        stored.referrer(Kind::Model, "small").unwrap(),
        "prompt \"picker\" (its \"tool_selection_model\")"
    );
    // Pins without a maximum are allowed (every tool is offered anyway), and so is a maximum
    // at least as large as the list.
    let ok = plan(
        vec![
            picker(json!({ "pinned_tools": ["get_weather"] })),
            picker(
                json!({ "name": "other", "max_offered_tools": 5, "pinned_tools": ["get_weather"] }),
            ),
        ],
        &base(),
        &tool_names(),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn a_change_that_breaks_a_stored_definition_is_refused() {
    crate::install_app();
    // helper loses the stop tool the stored agent `duo` relies on.
    let mut p = full_prompt();
    if let Definition::Prompt(pr) = &mut p {
        pr.tools = vec!["get_current_time".into()];
        pr.pinned_tools.clear();
    }
    let m = refused(vec![p], &base());
    assert!(
        m.starts_with("agent \"duo\"") && m.contains("after this change"),
        "{m}"
    );

    // duo stops being offered as a tool while a stored prompt lists it.
    let stored = set(&[
        small_model(),
        full_model(),
        full_prompt(),
        full_agent(),
        prompt(json!({ "name": "boss", "model": "small", "tools": ["duo"] })),
    ]);
    let mut a = full_agent();
    if let Definition::Agent(ag) = &mut a {
        ag.expose_as_tool = false;
    }
    let m = refused(vec![a], &stored);
    assert!(m.starts_with("prompt \"boss\""), "{m}");
}

#[test]
fn referrers_block_deletes() {
    crate::install_app();
    let stored = set(&[
        small_model(),
        full_model(),
        full_prompt(),
        full_agent(),
        prompt(json!({ "name": "boss", "model": "small", "tools": ["duo", "plain"] })),
        prompt(json!({ "name": "plain", "model": "small" })),
    ]);
    let r = |k, n| stored.referrer(k, n);
    assert_eq!(
        r(Kind::Model, "big").unwrap(),
        "prompt \"helper\" (its \"model\")"
    );
    let only_fallback = set(&[small_model(), full_model()]);
    assert_eq!(
        only_fallback.referrer(Kind::Model, "small").unwrap(),
        "model \"big\" (its \"fallbacks\")"
    );
    assert_eq!(
        r(Kind::Prompt, "helper").unwrap(),
        "agent \"duo\" (its \"side_a.prompt\")"
    );
    assert_eq!(
        r(Kind::Prompt, "plain").unwrap(),
        "prompt \"boss\" (its \"tools\")"
    );
    assert_eq!(
        r(Kind::Agent, "duo").unwrap(),
        "prompt \"boss\" (its \"tools\")"
    );
    assert_eq!(r(Kind::Prompt, "boss"), None);
    let e = edgent::config::admin::in_use(Kind::Model, "big", "prompt \"helper\" (its \"model\")");
    assert_eq!((e.status, e.code), (409, "in_use"));
}

#[test]
fn hook_names_must_be_hook_files() {
    crate::install_app();
    let mut p = serde_json::json!({ "name": "p2", "model": "m" });
    p["hooks"] = serde_json::json!(["not_a_hook"]);
    let def = edgent::config::admin::Definition::from_json(edgent::config::admin::Kind::Prompt, p)
        .unwrap();
    let stored = edgent::config::admin::ConfigSet::parse(
        br#"{"models":[{"name":"m","provider":"workers_ai","model":"@cf/x"}]}"#,
    )
    .unwrap();
    let err = edgent::config::admin::plan(vec![def], &stored, &[]).unwrap_err();
    assert!(
        err.message.contains("\"not_a_hook\", which is not a hook"),
        "{}",
        err.message
    );
}

#[test]
fn the_example_apps_output_type_is_registered_with_a_strict_schema() {
    let registry = crate::registry().unwrap();
    assert_eq!(
        registry.output_types().collect::<Vec<_>>(),
        ["ticket_triage"]
    );
    let schema = registry.output_schema("ticket_triage").unwrap();
    assert!(
        edgent::values::json_schema::strict_compatible(schema),
        "{schema}"
    );
    assert_eq!(
        schema["properties"]["category"]["enum"],
        json!(["billing", "shipping", "account", "other"])
    );
}
