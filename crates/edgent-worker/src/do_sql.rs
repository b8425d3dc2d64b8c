//! [`Sql`] over the Durable Object's `ctx.storage.sql`.
//!
//! A statement crosses the wasm/JS boundary as two strings: the parameters as a JSON array in,
//! every row (`cursor.raw().toArray()`) as one JSON array out. Reading rows value by value
//! through `js_sys` costs a boundary crossing per row and per value, which profiles showed as
//! a third of a turn's CPU; V8's JSON and serde_json do the same work in bulk.

use serde_json::Value;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::SqlStorage;

use edgent::values::sql::{Row, Sql, SqlError, SqlValue};

// One statement: its parameters as a JSON array in, every row out as one JSON array. A batch
// is `[[query, params], …]` in, every statement's rows out, inside the storage's
// `transactionSync`: an exception (a failing statement) rolls the whole batch back. A BigInt
// (an integer past 2^53, should storage hand one back) cannot be stringified: the slow path
// turns it into a number, as reading it value by value did.
#[wasm_bindgen(inline_js = "function rowsJson(rows) {
    try {
        return JSON.stringify(rows);
    } catch {
        return JSON.stringify(rows, (_, v) => (typeof v === 'bigint' ? Number(v) : v));
    }
}
export function edgent_sql_exec(sql, query, params) {
    return rowsJson(sql.exec(query, ...JSON.parse(params)).raw().toArray());
}
export function edgent_sql_batch(state, batch) {
    const storage = state.storage;
    return rowsJson(storage.transactionSync(() =>
        JSON.parse(batch).map(([query, params]) => storage.sql.exec(query, ...params).raw().toArray())));
}")]
extern "C" {
    #[wasm_bindgen(catch)]
    fn edgent_sql_exec(sql: &JsValue, query: &str, params: &str) -> Result<String, JsValue>;
    #[wasm_bindgen(catch)]
    fn edgent_sql_batch(state: &JsValue, batch: &str) -> Result<String, JsValue>;
}

/// The thread's SQLite as the core sees it: its `sql` handle, and the object's state for
/// transactions.
pub(crate) struct DoSql {
    sql: SqlStorage,
    state: JsValue,
}

impl DoSql {
    /// The SQLite of the object whose state this is.
    pub(crate) fn of(state: &worker::State) -> Self {
        let raw: &JsValue = state.as_raw().as_ref();
        DoSql {
            sql: state.storage().sql(),
            state: raw.clone(),
        }
    }
}

/// The JSON array a statement's parameters travel as.
fn params_json(params: &[SqlValue]) -> Value {
    Value::Array(
        params
            .iter()
            .map(|p| match p {
                SqlValue::Null => Value::Null,
                SqlValue::Integer(i) => Value::from(*i),
                SqlValue::Real(f) => Value::from(*f),
                SqlValue::Text(s) => Value::from(s.as_str()),
            })
            .collect(),
    )
}

/// Rows as JSON gave them back.
fn rows_of(rows: Vec<Vec<Value>>) -> Vec<Row> {
    rows.into_iter()
        .map(|row| Row(row.into_iter().map(sql_value).collect()))
        .collect()
}

impl Sql for DoSql {
    fn batch(&self, statements: &[(&str, &[SqlValue])]) -> Result<Vec<Vec<Row>>, SqlError> {
        let batch = Value::Array(
            statements
                .iter()
                .map(|(q, p)| Value::Array(vec![Value::from(*q), params_json(p)]))
                .collect(),
        );
        let out = edgent_sql_batch(&self.state, &batch.to_string())
            .map_err(|e| SqlError(worker::Error::from(e).to_string()))?;
        let out: Vec<Vec<Vec<Value>>> =
            serde_json::from_str(&out).map_err(|e| SqlError(format!("unreadable rows: {e}")))?;
        Ok(out.into_iter().map(rows_of).collect())
    }

    fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, SqlError> {
        let rows = edgent_sql_exec(
            self.sql.as_ref(),
            statement,
            &params_json(params).to_string(),
        )
        .map_err(|e| SqlError(worker::Error::from(e).to_string()))?;
        let rows: Vec<Vec<Value>> =
            serde_json::from_str(&rows).map_err(|e| SqlError(format!("unreadable rows: {e}")))?;
        Ok(rows_of(rows))
    }
}

/// A column value as JSON gives it back: numbers that are whole (and safe) integers are
/// integers, as the JS API reports them; a blob (an object in JSON) reads as null.
fn sql_value(v: Value) -> SqlValue {
    match v {
        Value::String(s) => SqlValue::Text(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Bool(b) => SqlValue::Integer(i64::from(b)),
        Value::Null | Value::Array(_) | Value::Object(_) => SqlValue::Null,
    }
}
