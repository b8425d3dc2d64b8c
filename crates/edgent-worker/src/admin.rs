//! The configuration API's D1 half: `GET|PUT|DELETE /api/{models,prompts,agents}[/:name]` and
//! `PUT /api/config`. Parsing, validation and the SQL come from [`edgent::config::admin`]; this
//! module loads rows, runs statements and shapes responses.
//!
//! Threads read their configuration from D1 when a turn starts, so a write here reaches every
//! thread on its next turn without any signal to the objects.

use serde_json::{json, Value};
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Env, Request, Response};

use super::http::{json, logged, read_body, registry_error};
use edgent::api::ApiError;
use edgent::config::admin::{in_use, plan, Change, ConfigSet, Definition, Kind, Plan, KINDS};
use edgent::values::sql::SqlValue;
use edgent::values::Invalid;

type Result<T> = std::result::Result<T, ApiError>;

fn db(env: &Env) -> Result<D1Database> {
    env.d1("DB")
        .map_err(|e| logged("agent configuration is unavailable", e))
}

fn d1_failed(e: worker::Error) -> ApiError {
    logged("agent configuration is unavailable", e)
}

fn bad_row(kind: Kind, why: Invalid) -> ApiError {
    logged(
        "agent configuration is unavailable",
        format!("invalid {} row: {why}", kind.singular()),
    )
}

fn to_js(v: &SqlValue) -> JsValue {
    match v {
        SqlValue::Null => JsValue::NULL,
        // Our integers (0/1, limits, milliseconds) are far below 2^53, so a JS number is exact.
        SqlValue::Integer(i) => JsValue::from_f64(*i as f64),
        SqlValue::Real(f) => JsValue::from_f64(*f),
        SqlValue::Text(s) => JsValue::from_str(s),
    }
}

fn statement(db: &D1Database, sql: String, params: &[SqlValue]) -> Result<D1PreparedStatement> {
    let values: Vec<JsValue> = params.iter().map(to_js).collect();
    db.prepare(sql).bind(&values).map_err(d1_failed)
}

fn parse_rows(kind: Kind, rows: Vec<Value>) -> Result<Vec<Definition>> {
    rows.into_iter()
        .map(|r| Definition::from_row(kind, r).map_err(|why| bad_row(kind, why)))
        .collect()
}

/// Everything D1 holds, read in one batch so the three tables are seen at one point in time.
async fn stored(db: &D1Database) -> Result<ConfigSet> {
    let statements: Vec<D1PreparedStatement> = KINDS
        .iter()
        .map(|k| db.prepare(k.select_all_sql()))
        .collect();
    let results = db.batch(statements).await.map_err(d1_failed)?;
    let mut set = ConfigSet::default();
    for (kind, result) in KINDS.into_iter().zip(results) {
        let rows: Vec<Value> = result.results().map_err(d1_failed)?;
        for def in parse_rows(kind, rows)? {
            set.insert(def);
        }
    }
    Ok(set)
}

fn not_found(kind: Kind, name: &str) -> ApiError {
    ApiError::not_found(format!("{} {name:?} does not exist", kind.singular()))
}

fn respond(status: u16, body: &Value) -> Result<Response> {
    json(status, body).map_err(|e| logged("could not build the response", e))
}

/// `GET /api/{kind}`: every definition, ordered by name.
pub(crate) async fn list(env: &Env, kind: Kind) -> Result<Response> {
    let db = db(env)?;
    let rows: Vec<Value> = db
        .prepare(kind.select_all_sql())
        .all()
        .await
        .and_then(|r| r.results())
        .map_err(d1_failed)?;
    let defs: Vec<Value> = parse_rows(kind, rows)?
        .iter()
        .map(Definition::to_json)
        .collect();
    respond(200, &json!({ kind.plural(): defs }))
}

/// `GET /api/{kind}/:name`.
pub(crate) async fn get(env: &Env, kind: Kind, name: &str) -> Result<Response> {
    let db = db(env)?;
    let row: Option<Value> = statement(&db, kind.select_one_sql(), &[name.into()])?
        .first(None)
        .await
        .map_err(d1_failed)?;
    let Some(row) = row else {
        return Err(not_found(kind, name));
    };
    let def = Definition::from_row(kind, row).map_err(|why| bad_row(kind, why))?;
    respond(200, &def.to_json())
}

/// Registered tool names (prompts may list them).
fn tool_names() -> Result<Vec<&'static str>> {
    edgent::Catalog::installed()
        .registry()
        .map(|r| r.names().collect())
        .map_err(|e| registry_error(&e))
}

/// Validates `incoming` against D1 and writes what changed in one batch (one transaction:
/// all rows or none).
async fn apply(db: &D1Database, incoming: Vec<Definition>) -> Result<Plan> {
    let stored = stored(db).await?;
    let plan = plan(incoming, &stored, &tool_names()?)?;
    let now = worker::Date::now().as_millis() as i64;
    let statements = plan
        .writes()
        .map(|def| {
            let values = def
                .row(now)
                .map_err(|why| logged("could not encode a definition", why))?;
            statement(db, def.kind().upsert_sql(), &values)
        })
        .collect::<Result<Vec<_>>>()?;
    if !statements.is_empty() {
        db.batch(statements).await.map_err(d1_failed)?;
        crate::config::forget_cached();
    }
    Ok(plan)
}

/// `PUT /api/{kind}/:name`: 201 with the stored definition when created, 200 when replaced.
pub(crate) async fn put(req: &mut Request, env: &Env, kind: Kind, name: &str) -> Result<Response> {
    let body = read_body(req).await?;
    let def = Definition::parse_put(kind, &body, name)?;
    let plan = apply(&db(env)?, vec![def]).await?;
    let Some((def, change)) = plan.changes.first() else {
        return Err(ApiError::internal("nothing was planned"));
    };
    let status = match change {
        Change::Created => 201,
        _ => 200,
    };
    respond(status, &def.to_json())
}

/// `PUT /api/config`: models, prompts and agents validated as one set and written atomically.
pub(crate) async fn put_config(req: &mut Request, env: &Env) -> Result<Response> {
    let body = read_body(req).await?;
    let incoming = ConfigSet::parse(&body)?.definitions();
    let plan = apply(&db(env)?, incoming).await?;
    respond(200, &plan.summary())
}

/// `DELETE /api/{kind}/:name`: 404 when missing, 409 while anything refers to it.
pub(crate) async fn delete(env: &Env, kind: Kind, name: &str) -> Result<Response> {
    let db = db(env)?;
    let stored = stored(&db).await?;
    if stored.get(kind, name).is_none() {
        return Err(not_found(kind, name));
    }
    if let Some(referrer) = stored.referrer(kind, name) {
        return Err(in_use(kind, name, &referrer));
    }
    statement(&db, kind.delete_sql(), &[name.into()])?
        .run()
        .await
        .map_err(d1_failed)?;
    crate::config::forget_cached();
    respond(200, &json!({ "deleted": name }))
}
