//! Resolving one side of an agent from its D1 rows (`edgent::config::resolve`), the way the
//! Worker does after its one batch read: the prompt, the model chain with its direct
//! fallbacks, the delegates, and a clear error for each missing piece. The rows are written by
//! the same codec the configuration API uses. What this does not prove: the SQL of the batch
//! against D1 (tests/e2e/engine_nested.test.mjs reads configuration from D1 per turn).

use edgent::config::codec::{Definition, Kind};
use edgent::config::resolve::{resolve, statements, AgentRows, ConfigError};
use edgent::config::Delegate;
use edgent::values::sql::SqlValue;
use edgent::values::Side;
use serde_json::{json, Map, Value};

/// A D1 row (column name → value) for a definition, as the configuration API writes it.
fn row(kind: Kind, def: Value) -> Value {
    let values = Definition::from_json(kind, def).unwrap().row(0).unwrap();
    let mut out = Map::new();
    for (column, value) in kind.columns().iter().zip(values) {
        out.insert(
            (*column).to_owned(),
            match value {
                SqlValue::Null => Value::Null,
                SqlValue::Integer(i) => json!(i),
                SqlValue::Real(f) => json!(f),
                SqlValue::Text(t) => json!(t),
            },
        );
    }
    Value::Object(out)
}

fn model(name: &str, fallbacks: &[&str]) -> Value {
    row(
        Kind::Model,
        json!({ "name": name, "provider": "openai", "model": "m", "base_url": "https://x.test/v1", "fallbacks": fallbacks }),
    )
}

fn prompt(name: &str, model: &str, tools: &[&str]) -> Value {
    row(
        Kind::Prompt,
        json!({ "name": name, "model": model, "system": "s", "tools": tools }),
    )
}

fn rows() -> AgentRows {
    AgentRows {
        agents: vec![row(
            Kind::Agent,
            json!({ "id": "desk", "kind": "dual_ai",
                    "side_a": { "prompt": "writer" }, "side_b": { "prompt": "reviewer" } }),
        )],
        prompts: vec![
            prompt(
                "writer",
                "main",
                &["summarize", "get_current_time", "critic"],
            ),
            prompt("reviewer", "main", &[]),
            prompt("summarize", "small", &[]),
        ],
        sub_agents: vec![row(
            Kind::Agent,
            json!({ "id": "critic", "kind": "dual_ai", "expose_as_tool": true,
                    "side_a": { "prompt": "reviewer" }, "side_b": { "prompt": "writer" } }),
        )],
        models: vec![
            model("main", &["backup", "main", "gone", "backup"]),
            model("backup", &["main"]),
            model("small", &[]),
        ],
    }
}

#[test]
fn a_side_resolves_with_its_prompt_model_chain_and_delegates() {
    let config = resolve("desk", Side::A, rows()).unwrap();
    assert_eq!(config.prompt.name, "writer");
    assert_eq!(config.side, Side::A);
    // Direct fallbacks in order, each once, missing ones skipped, none walked further.
    let chain: Vec<&str> = config.models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(chain, ["main", "backup"]);
    let delegates: Vec<(String, Vec<String>)> = config
        .delegates
        .iter()
        .map(|(d, models)| {
            let name = match d {
                Delegate::Prompt(p) => format!("prompt {}", p.name),
                Delegate::Agent(a) => format!("agent {}", a.id),
            };
            (name, models.iter().map(|m| m.name.clone()).collect())
        })
        .collect();
    assert_eq!(
        delegates,
        [
            ("prompt summarize".to_owned(), vec!["small".to_owned()]),
            ("agent critic".to_owned(), vec![]),
        ]
    );
    assert_eq!(
        resolve("desk", Side::B, rows()).unwrap().prompt.name,
        "reviewer"
    );
}

#[test]
fn each_missing_piece_is_named() {
    let none = resolve("ghost", Side::A, AgentRows::default()).unwrap_err();
    assert_eq!(none.to_string(), "agent \"ghost\" does not exist in D1");

    let mut r = rows();
    r.agents = vec![row(
        Kind::Agent,
        json!({ "id": "desk", "side_a": { "prompt": "writer" } }),
    )];
    assert_eq!(
        resolve("desk", Side::B, r).unwrap_err(),
        ConfigError::NoSide {
            agent_id: "desk".into()
        }
    );

    let mut r = rows();
    r.prompts.retain(|p| p["name"] != "writer");
    assert_eq!(
        resolve("desk", Side::A, r).unwrap_err().to_string(),
        "prompt \"writer\" (side a of agent \"desk\") does not exist in D1"
    );

    let mut r = rows();
    r.models.retain(|m| m["name"] != "main");
    assert_eq!(
        resolve("desk", Side::A, r).unwrap_err().to_string(),
        "model \"main\" (prompt \"writer\") does not exist in D1"
    );

    let mut r = rows();
    r.models.push(json!({ "name": "broken" }));
    assert!(matches!(
        resolve("desk", Side::A, r).unwrap_err(),
        ConfigError::BadRow(_)
    ));
}

#[test]
fn the_batch_reads_the_side_named_by_the_side_never_by_input() {
    let a = statements(Side::A);
    let b = statements(Side::B);
    assert!(a[1].contains("json_extract(side_a, '$.prompt')"));
    assert!(b[1].contains("json_extract(side_b, '$.prompt')"));
    for s in a.iter().chain(&b) {
        assert!(s.contains("?1"), "every statement binds the agent id: {s}");
    }
}
