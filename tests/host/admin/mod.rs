//! The configuration API's pure half: body parsing and the row codec that writes definitions
//! to D1, round-tripped through real SQLite with the project's migrations and read back with
//! the engine's own row reader; the set's validation and delete rules are in `rules.rs`.

use edgent::api::ApiError;
use edgent::config::admin::{plan, Change, ConfigSet, Definition, Kind, KINDS};
use edgent::values::sql::SqlValue;
use rusqlite::types::{Value as RValue, ValueRef};
use serde_json::{json, Map, Value};

mod rules;

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
