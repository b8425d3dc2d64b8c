//! The configuration API's definitions: the body parser, the D1 row codec and the API's
//! writes and deletes. A definition survives every form it takes (API JSON, D1 row), and no
//! sequence of requests leaves D1 holding a configuration that does not hold together.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::api::check_api_error;
use super::input::{any_value, field, Input};
use crate::config::admin::{plan, ConfigSet, Definition, Kind, KINDS};
use crate::config::policy::ModelPolicy;
use crate::runtime::{admin, ConfigDb};
use crate::testing::block_on;
use crate::tool::BoxFuture;
use crate::values::sql::SqlValue;

/// Names: valid ones that collide, and invalid ones.
const NAMES: &[&str] = &[
    "m",
    "fast",
    "p",
    "helper",
    "a",
    "desk",
    "get_weather",
    "x y",
    "",
];
/// Tools the write rules know as registered.
const TOOLS: &[&str] = &["get_weather", "lookup_customer"];

fn name(input: &mut Input<'_>) -> String {
    if input.one_in(8) {
        return input.text(8);
    }
    input.pick(NAMES).unwrap_or("m").to_owned()
}

/// A name for (or a reference to) a definition of `kind`: half the time the one name the
/// other definitions refer to it by, so requests build configurations that hold together.
fn name_of(kind: Kind, input: &mut Input<'_>) -> String {
    if input.bool() {
        return name(input);
    }
    match kind {
        Kind::Model => "m",
        Kind::Prompt => "p",
        Kind::Agent => "a",
    }
    .to_owned()
}

fn names(input: &mut Input<'_>) -> Value {
    Value::from((0..input.below(3)).map(|_| name(input)).collect::<Vec<_>>())
}

/// A number as a definition might carry it: small, at a bound, huge, negative or fractional.
fn number(input: &mut Input<'_>) -> Value {
    match input.below(8) {
        0..=2 => json!(1 + input.below(100)),
        3 => json!(-1),
        4 => json!(0),
        5 => json!(u32::MAX),
        6 => json!(u64::from(u32::MAX) + 1),
        _ => match input.below(3) {
            0 => json!(f64::from(input.u16()) / 7.0),
            1 => json!(1e300),
            _ => json!(input.u16()),
        },
    }
}

fn side(input: &mut Input<'_>) -> Value {
    let mut s = Map::new();
    field(&mut s, input, "prompt", |input| {
        Value::from(name_of(Kind::Prompt, input))
    });
    if input.bool() {
        field(&mut s, input, "label", |input| Value::from(input.text(8)));
    }
    if input.bool() {
        field(&mut s, input, "stop_on_response", |input| {
            Value::from(input.bool())
        });
    }
    if input.bool() {
        field(&mut s, input, "stop_tool", |input| Value::from(name(input)));
    }
    if input.bool() {
        field(&mut s, input, "stop_tool_response_property", |input| {
            Value::from(input.text(6))
        });
    }
    if input.bool() {
        field(&mut s, input, "max_steps", number);
    }
    Value::Object(s)
}

/// A definition body of `kind` read from the input: every field, each sometimes left out or
/// of the wrong type, values at and past their bounds, sometimes a field no kind has.
fn definition(kind: Kind, input: &mut Input<'_>, url_name: Option<&str>) -> Value {
    let mut d = Map::new();
    let key = kind.key();
    match url_name {
        // Under a URL the body mostly repeats its name or leaves it out.
        Some(url_name) if !input.one_in(8) => {
            if input.bool() {
                d.insert(key.to_owned(), Value::from(url_name));
            }
        }
        _ => field(&mut d, input, key, |input| {
            Value::from(name_of(kind, input))
        }),
    }
    match kind {
        Kind::Model => {
            let provider = match input.one_in(16) {
                true => "other",
                false => input
                    .pick(&["openai", "anthropic", "workers_ai"])
                    .unwrap_or("openai"),
            };
            field(&mut d, input, "provider", |_| Value::from(provider));
            field(&mut d, input, "model", |input| {
                Value::from(format!("gpt-{}", input.text(8)))
            });
            let url = input
                .pick(&[
                    "https://api.openai.com/v1",
                    "http://127.0.0.1:9/v1",
                    "ftp://x",
                    "",
                ])
                .unwrap_or_default();
            field(&mut d, input, "base_url", |_| Value::from(url));
            if input.bool() {
                let secret = input
                    .pick(&[
                        "OPENAI_API_KEY",
                        "ANTHROPIC_API_KEY",
                        "EDGENT_API_KEY",
                        "sk-live-1",
                    ])
                    .unwrap_or_default();
                field(&mut d, input, "api_key_secret", |_| Value::from(secret));
            }
            field(&mut d, input, "fallbacks", names);
            for key in [
                "input_price_per_mtok",
                "output_price_per_mtok",
                "first_chunk_timeout_ms",
                "stall_timeout_ms",
                "max_history_tokens",
                "max_output_tokens",
            ] {
                if input.bool() {
                    field(&mut d, input, key, number);
                }
            }
        }
        Kind::Prompt => {
            field(&mut d, input, "system", |input| Value::from(input.text(24)));
            field(&mut d, input, "model", |input| {
                Value::from(name_of(Kind::Model, input))
            });
            field(&mut d, input, "tools", names);
            let choice = match input.one_in(16) {
                true => "any",
                false => input.pick(&["auto", "none", "required"]).unwrap_or("auto"),
            };
            field(&mut d, input, "tool_choice", |_| Value::from(choice));
            field(&mut d, input, "parallel_tool_calls", |input| {
                Value::from(input.bool())
            });
            field(&mut d, input, "include_chat", |input| {
                Value::from(input.bool())
            });
            field(&mut d, input, "description", |input| {
                Value::from(input.text(12))
            });
            if input.bool() {
                let mut bindings = Map::new();
                bindings.insert(name(input), any_value(input, 1));
                field(&mut d, input, "tool_bindings", |_| Value::Object(bindings));
            }
            if input.bool() {
                field(&mut d, input, "max_offered_tools", number);
            }
            field(&mut d, input, "pinned_tools", names);
        }
        Kind::Agent => {
            let kind = match input.one_in(16) {
                true => "robot",
                false => input.pick(&["ai_human", "dual_ai"]).unwrap_or("ai_human"),
            };
            field(&mut d, input, "kind", |_| Value::from(kind));
            field(&mut d, input, "description", |input| {
                Value::from(input.text(12))
            });
            field(&mut d, input, "side_a", side);
            if input.bool() {
                field(&mut d, input, "side_b", side);
            }
            if input.bool() {
                field(&mut d, input, "max_turns", number);
            }
            field(&mut d, input, "expose_as_tool", |input| {
                Value::from(input.bool())
            });
            field(&mut d, input, "tool_description", |input| {
                Value::from(input.text(12))
            });
        }
    }
    if input.one_in(4) {
        field(&mut d, input, "hooks", names);
    }
    if input.one_in(16) {
        d.insert("api_key".into(), Value::from("sk-inline"));
    }
    Value::Object(d)
}

fn body(kind: Kind, input: &mut Input<'_>, url_name: &str) -> Vec<u8> {
    if input.one_in(8) {
        return input.bytes(256).to_vec();
    }
    definition(kind, input, Some(url_name))
        .to_string()
        .into_bytes()
}

/// A bound value as D1 hands it back: the column's affinity applied (`REAL` columns turn
/// integers into reals), numbers as JSON numbers, text as strings.
fn d1_value(column: &str, value: &SqlValue) -> Value {
    let real = column.ends_with("_price_per_mtok");
    match value {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) if real => json!(*i as f64),
        SqlValue::Integer(i) => json!(i),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        SqlValue::Text(t) => Value::String(t.clone()),
    }
}

/// `def` written as a row of its table and read back as D1 would answer `SELECT *`.
fn stored_row(def: &Definition) -> Value {
    #[allow(clippy::expect_used)] // a property body: a codec fault is a found defect
    let values = def
        .row(1_800_000_000_000)
        .expect("every definition has a row");
    let mut row = Map::new();
    let columns = def.kind().columns().iter().chain(&["updated_at"]);
    for (column, value) in columns.zip(&values) {
        row.insert((*column).to_owned(), d1_value(column, value));
    }
    Value::Object(row)
}

/// Input: a kind, a URL name and a body (raw bytes, or the ops that build a definition).
///
/// The body parses into a definition under the URL's name or a clean 400; a parsed one is
/// the same after its API JSON is parsed again, and after it is written as a D1 row (the
/// codec's columns, D1's types) and read back with the engine's reader; the row of what was
/// read back is the row written.
pub fn definition_round_trip(data: &[u8]) {
    let mut input = Input::new(data);
    let kind = input.pick(&KINDS).unwrap_or(Kind::Model);
    let url_name = name_of(kind, &mut input);
    let body = body(kind, &mut input, &url_name);
    let def = match Definition::parse_put(kind, &body, &url_name) {
        Ok(def) => def,
        Err(e) => return check_api_error(&e),
    };
    assert_eq!(def.name(), url_name, "a definition under another name");
    let json = def.to_json().to_string();
    let again = Definition::parse_put(kind, json.as_bytes(), &url_name);
    assert_eq!(again.as_ref(), Ok(&def), "the API JSON {json} read back");
    let row = stored_row(&def);
    let back = Definition::from_row(kind, row.clone());
    assert_eq!(back.as_ref(), Ok(&def), "the row {row} read back");
    if let Ok(back) = back {
        assert_eq!(stored_row(&back), row, "the row of what was read back");
    }
}

/// A D1 made of maps: answers the codec's own statements (`SELECT *`, one row, upsert,
/// delete) for the three tables, atomically per batch, and refuses any other statement.
#[derive(Debug, Default)]
struct MemoryD1 {
    tables: RefCell<BTreeMap<&'static str, BTreeMap<String, Value>>>,
}

impl MemoryD1 {
    fn run(
        tables: &mut BTreeMap<&'static str, BTreeMap<String, Value>>,
        sql: &str,
        params: &[SqlValue],
    ) -> Result<Vec<Value>, String> {
        let key = || match params.first() {
            Some(SqlValue::Text(k)) => Ok(k.clone()),
            other => Err(format!("a key must be text, not {other:?}")),
        };
        for kind in KINDS {
            let table = tables.entry(kind.table()).or_default();
            if sql == kind.select_all_sql() {
                return Ok(table.values().cloned().collect());
            }
            if sql == kind.select_one_sql() {
                return Ok(table.get(&key()?).cloned().into_iter().collect());
            }
            if sql == kind.delete_sql() {
                table.remove(&key()?);
                return Ok(Vec::new());
            }
            if sql == kind.upsert_sql() {
                let columns = kind.columns().iter().chain(&["updated_at"]);
                if params.len() != kind.columns().len() + 1 {
                    return Err(format!("{} values for {}", params.len(), kind.table()));
                }
                let row: Map<String, Value> = columns
                    .zip(params)
                    .map(|(c, v)| ((*c).to_owned(), d1_value(c, v)))
                    .collect();
                table.insert(key()?, Value::Object(row));
                return Ok(Vec::new());
            }
        }
        Err(format!("MemoryD1 does not know the statement {sql:?}"))
    }
}

impl ConfigDb for MemoryD1 {
    fn batch(
        &self,
        statements: Vec<(String, Vec<SqlValue>)>,
    ) -> BoxFuture<'static, Result<Vec<Vec<Value>>, String>> {
        let mut tables = self.tables.borrow().clone();
        let out: Result<Vec<Vec<Value>>, String> = statements
            .iter()
            .map(|(sql, params)| Self::run(&mut tables, sql, params))
            .collect();
        if out.is_ok() {
            *self.tables.borrow_mut() = tables;
        }
        Box::pin(async move { out })
    }

    fn log_error(&self, message: &str) {
        panic!("the configuration API logged a fault: {message}");
    }
}

/// Input: up to eight requests, each a kind byte, a name and a body.
///
/// `PUT /api/{kind}/:name`, `PUT /api/config`, `DELETE`, `GET` and the listing, run by the
/// shipped handlers over a D1 of maps: every answer is a success or a clean 4xx (a 500 would
/// mean a row the codec wrote could not be read back); a definition written reads back as the
/// PUT answered it; and after every request what D1 holds passes every rule and reference
/// check as one set (no write or delete leaves a prompt without its model, an agent without
/// its prompts, a stop tool outside its prompt's tools).
pub fn admin_api(data: &[u8]) {
    let mut input = Input::new(data);
    let db = MemoryD1::default();
    let policy = ModelPolicy::default();
    let rules = admin::WriteRules {
        tools: TOOLS,
        schemas: &[],
        models: &policy,
    };
    let now = 1_800_000_000_000;
    for _ in 0..8 {
        if input.is_empty() {
            break;
        }
        let kind = input.pick(&KINDS).unwrap_or(Kind::Model);
        let name = name_of(kind, &mut input);
        let answer = match input.below(6) {
            0 | 1 => {
                let put = block_on(admin::put(
                    &db,
                    kind,
                    &name,
                    &body(kind, &mut input, &name),
                    rules,
                    now,
                ));
                if let Ok((_, written)) = &put {
                    let read = block_on(admin::get(&db, kind, &name));
                    assert_eq!(read.as_ref().map(|(_, v)| v), Ok(written), "read back");
                }
                put
            }
            2 => {
                let mut set = Map::new();
                for k in KINDS {
                    let defs: Vec<Value> = (0..input.below(3))
                        .map(|_| definition(k, &mut input, None))
                        .collect();
                    set.insert(k.plural().to_owned(), Value::from(defs));
                }
                let body = Value::Object(set).to_string();
                block_on(admin::put_config(&db, body.as_bytes(), rules, now))
            }
            3 => block_on(admin::delete(&db, kind, &name)),
            4 => block_on(admin::get(&db, kind, &name)),
            _ => block_on(admin::list(&db, kind)),
        };
        match answer {
            Ok((status, _)) => assert!(matches!(status, 200 | 201), "status {status}"),
            Err(e) => check_api_error(&e),
        }
        let mut stored = ConfigSet::default();
        for kind in KINDS {
            #[allow(clippy::expect_used)] // a property body: a failure is a found defect
            let (_, listed) = block_on(admin::list(&db, kind)).expect("list");
            for def in listed[kind.plural()].as_array().into_iter().flatten() {
                #[allow(clippy::expect_used)]
                let def = Definition::from_json(kind, def.clone()).expect("a listed definition");
                stored.insert(def);
            }
        }
        let checked = plan(stored.definitions(), &ConfigSet::default(), TOOLS);
        assert!(
            checked.is_ok(),
            "D1 holds a broken configuration: {checked:?}"
        );
    }
}
