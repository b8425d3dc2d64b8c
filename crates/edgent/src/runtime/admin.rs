//! The configuration API (`GET|PUT|DELETE /api/{models,prompts,agents}[/:name]`, `PUT
//! /api/config`) over a [`ConfigDb`]: parsing, validation and the SQL come from
//! [`crate::config::admin`]; this loads rows, runs the statements (writes in one batch, so one
//! transaction) and shapes the answers. A write clears this isolate's configuration cache, so
//! its threads see the change at once (the others within `CONFIG_TTL_MS`).

use serde_json::{json, Value};

use super::agents::forget_cached;
use super::ConfigDb;
use crate::api::ApiError;
use crate::config::admin::{in_use, plan, Change, ConfigSet, Definition, Kind, Plan, KINDS};
use crate::config::codec::invalid;
use crate::config::policy::ModelPolicy;
use crate::config::PromptConfig;
use crate::values::Invalid;

type Answer = Result<(u16, Value), ApiError>;

/// A 500 whose cause goes to the operator's log only.
fn unavailable(db: &dyn ConfigDb, cause: impl std::fmt::Display) -> ApiError {
    db.log_error(&format!("agent configuration is unavailable: {cause}"));
    ApiError::internal("agent configuration is unavailable")
}

fn bad_row(db: &dyn ConfigDb, kind: Kind, why: Invalid) -> ApiError {
    unavailable(db, format!("invalid {} row: {why}", kind.singular()))
}

fn parse_rows(
    db: &dyn ConfigDb,
    kind: Kind,
    rows: Vec<Value>,
) -> Result<Vec<Definition>, ApiError> {
    rows.into_iter()
        .map(|r| Definition::from_row(kind, r).map_err(|why| bad_row(db, kind, why)))
        .collect()
}

fn not_found(kind: Kind, name: &str) -> ApiError {
    ApiError::not_found(format!("{} {name:?} does not exist", kind.singular()))
}

/// Runs one statement; its rows.
async fn query(
    db: &dyn ConfigDb,
    sql: String,
    params: Vec<crate::values::sql::SqlValue>,
) -> Result<Vec<Value>, ApiError> {
    let mut sets = db
        .batch(vec![(sql, params)])
        .await
        .map_err(|e| unavailable(db, e))?;
    Ok(sets.pop().unwrap_or_default())
}

/// Everything the database holds, read in one batch so the three tables are seen at one point
/// in time.
pub(super) async fn stored(db: &dyn ConfigDb) -> Result<ConfigSet, ApiError> {
    let statements = KINDS
        .iter()
        .map(|k| (k.select_all_sql(), Vec::new()))
        .collect();
    let sets = db.batch(statements).await.map_err(|e| unavailable(db, e))?;
    let mut set = ConfigSet::default();
    for (kind, rows) in KINDS.into_iter().zip(sets) {
        for def in parse_rows(db, kind, rows)? {
            set.insert(def);
        }
    }
    Ok(set)
}

/// `GET /api/{kind}`: every definition, ordered by name.
pub async fn list(db: &dyn ConfigDb, kind: Kind) -> Answer {
    let rows = query(db, kind.select_all_sql(), Vec::new()).await?;
    let defs: Vec<Value> = parse_rows(db, kind, rows)?
        .iter()
        .map(Definition::to_json)
        .collect();
    Ok((200, json!({ kind.plural(): defs })))
}

/// `GET /api/{kind}/:name`.
pub async fn get(db: &dyn ConfigDb, kind: Kind, name: &str) -> Answer {
    let rows = query(db, kind.select_one_sql(), vec![name.into()]).await?;
    let Some(row) = rows.into_iter().next() else {
        return Err(not_found(kind, name));
    };
    let def = Definition::from_row(kind, row).map_err(|why| bad_row(db, kind, why))?;
    Ok((200, def.to_json()))
}

/// What a write is checked against besides the stored definitions: the registered tool
/// names (prompts may list them), the app's output types (a prompt's `response_format` may
/// name one) and the operator's rules for models.
#[derive(Debug, Clone, Copy)]
pub struct WriteRules<'a> {
    /// Registered tool names.
    pub tools: &'a [&'a str],
    /// The app's output types (`Catalog::schemas`).
    pub schemas: &'a [&'a str],
    /// The secrets and hosts models may name.
    pub models: &'a ModelPolicy,
}

/// Whether the output type `prompt`'s `response_format` names (if any) is one the app registers.
fn known_output_type(prompt: &PromptConfig, schemas: &[&str]) -> Result<(), Invalid> {
    let Some(name) = prompt
        .response_format
        .as_ref()
        .and_then(|f| f.type_name.as_deref())
    else {
        return Ok(());
    };
    if schemas.contains(&name) {
        return Ok(());
    }
    let known = if schemas.is_empty() {
        "none: see Catalog::with_schemas".to_owned()
    } else {
        schemas.join(", ")
    };
    Err(format!(
        "response_format: type_name {name:?} is not an output type this app registers (registered: {known})"
    )
    .into())
}

/// Validates `incoming` against the database and the rules, and writes what changed in one
/// batch (one transaction: all rows or none).
async fn apply(
    db: &dyn ConfigDb,
    incoming: Vec<Definition>,
    rules: WriteRules<'_>,
    now: i64,
) -> Result<Plan, ApiError> {
    for def in &incoming {
        // Refused before anything is read or written: a model or MCP server the operator
        // does not allow never reaches D1, so no call can send its secret anywhere.
        // (A definition's own rules first: a literal key is named as such.)
        let allowed = match def {
            Definition::Model(m) => def.check().and_then(|()| rules.models.check(m)),
            Definition::Prompt(p) => def
                .check()
                .and_then(|()| known_output_type(p, rules.schemas))
                .and_then(|()| {
                    p.mcp_servers
                        .iter()
                        .try_for_each(|s| rules.models.check_mcp_server(s))
                }),
            Definition::Agent(_) => Ok(()),
        };
        allowed.map_err(|why| invalid(format!("{}: {why}", def.label())))?;
    }
    let tools = rules.tools;
    let stored = stored(db).await?;
    let plan = plan(incoming, &stored, tools)?;
    let writes = plan
        .writes()
        .map(|def| {
            let values = def
                .row(now)
                .map_err(|why| unavailable(db, format!("could not encode a definition: {why}")))?;
            Ok((def.kind().upsert_sql(), values))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    if !writes.is_empty() {
        db.batch(writes).await.map_err(|e| unavailable(db, e))?;
        forget_cached();
    }
    Ok(plan)
}

/// `PUT /api/{kind}/:name`: 201 with the stored definition when created, 200 when replaced.
pub async fn put(
    db: &dyn ConfigDb,
    kind: Kind,
    name: &str,
    body: &[u8],
    rules: WriteRules<'_>,
    now: i64,
) -> Answer {
    let def = Definition::parse_put(kind, body, name)?;
    let plan = apply(db, vec![def], rules, now).await?;
    let Some((def, change)) = plan.changes.first() else {
        return Err(ApiError::internal("nothing was planned"));
    };
    let status = match change {
        Change::Created => 201,
        _ => 200,
    };
    Ok((status, def.to_json()))
}

/// `PUT /api/config`: models, prompts and agents validated as one set and written atomically.
pub async fn put_config(db: &dyn ConfigDb, body: &[u8], rules: WriteRules<'_>, now: i64) -> Answer {
    let incoming = ConfigSet::parse(body)?.definitions();
    let plan = apply(db, incoming, rules, now).await?;
    Ok((200, plan.summary()))
}

/// `DELETE /api/{kind}/:name`: 404 when missing, 409 while anything refers to it.
pub async fn delete(db: &dyn ConfigDb, kind: Kind, name: &str) -> Answer {
    let stored = stored(db).await?;
    if stored.get(kind, name).is_none() {
        return Err(not_found(kind, name));
    }
    if let Some(referrer) = stored.referrer(kind, name) {
        return Err(in_use(kind, name, &referrer));
    }
    query(db, kind.delete_sql(), vec![name.into()]).await?;
    forget_cached();
    Ok((200, json!({ "deleted": name })))
}
