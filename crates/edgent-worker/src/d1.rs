//! The `DB` binding (D1) as the runtime's [`ConfigDb`]: statements run as one batch (one round
//! trip, one transaction). What runs on it (the configuration API, agent resolution and its
//! cache) is `edgent::runtime::{admin, agents}`.

use serde_json::Value;
use wasm_bindgen::JsValue;
use worker::{D1PreparedStatement, Env};

use edgent::runtime::ConfigDb;
use edgent::tool::BoxFuture;
use edgent::values::sql::SqlValue;

/// The Worker's configuration database.
pub(crate) struct D1(pub(crate) Env);

/// A statement parameter for D1.
pub(crate) fn to_js(v: &SqlValue) -> JsValue {
    match v {
        SqlValue::Null => JsValue::NULL,
        // Our integers (0/1, limits, milliseconds) are far below 2^53, so a JS number is exact.
        SqlValue::Integer(i) => JsValue::from_f64(*i as f64),
        SqlValue::Real(f) => JsValue::from_f64(*f),
        SqlValue::Text(s) => JsValue::from_str(s),
    }
}

impl ConfigDb for D1 {
    fn batch(
        &self,
        statements: Vec<(String, Vec<SqlValue>)>,
    ) -> BoxFuture<'static, Result<Vec<Vec<Value>>, String>> {
        let db = self.0.d1("DB");
        Box::pin(async move {
            let db = db.map_err(|e| e.to_string())?;
            let prepared = statements
                .into_iter()
                .map(|(sql, params)| {
                    let values: Vec<JsValue> = params.iter().map(to_js).collect();
                    db.prepare(sql).bind(&values)
                })
                .collect::<worker::Result<Vec<D1PreparedStatement>>>()
                .map_err(|e| e.to_string())?;
            let results = db.batch(prepared).await.map_err(|e| e.to_string())?;
            results
                .into_iter()
                .map(|r| r.results::<Value>().map_err(|e| e.to_string()))
                .collect()
        })
    }

    fn log_error(&self, message: &str) {
        worker::console_error!("{message}");
    }
}
