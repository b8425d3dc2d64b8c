//! Agent configuration from D1 (`agents` → `prompts` → `models`), read when a turn starts so
//! operators can change an agent without redeploying.

use serde_json::Value;
use worker::{D1Database, Env};

use edgent::config::resolve::{self, AgentRows, ConfigError};
use edgent::config::{rows, AgentConfig, AgentDef};
use edgent::engine::store::Side;
use edgent::values::Invalid;

fn db(env: &Env) -> worker::Result<D1Database> {
    env.d1("DB")
}

/// Whether an agent with this id exists.
pub(crate) async fn agent_exists(env: &Env, agent_id: &str) -> worker::Result<bool> {
    Ok(agent_def(env, agent_id).await?.is_some())
}

/// Whether `agent_id` configures a prompt for `side` (side A always does).
pub(crate) async fn agent_has_side(env: &Env, agent_id: &str, side: Side) -> worker::Result<bool> {
    Ok(agent_def(env, agent_id)
        .await?
        .is_some_and(|a| side == Side::A || a.side_b.is_some()))
}

/// One agent row.
pub(crate) async fn agent_def(env: &Env, agent_id: &str) -> worker::Result<Option<AgentDef>> {
    let row: Option<Value> = db(env)?
        .prepare("SELECT * FROM agents WHERE id = ?1")
        .bind(&[agent_id.into()])?
        .first(None)
        .await?;
    row.map(rows::agent).transpose().map_err(bad_row)
}

fn bad_row(why: Invalid) -> worker::Error {
    worker::Error::RustError(ConfigError::BadRow(why).to_string())
}

/// Everything a turn needs for one side of `agent_id`; the inner `Err` says what is missing
/// (a row that does not read is the outer error: a storage fault).
///
/// One D1 round trip: the batch of statements the configuration layer gives
/// ([`resolve::statements`]), whose rows it then resolves ([`resolve::resolve`]).
pub(crate) async fn load_agent(
    env: &Env,
    agent_id: &str,
    side: Side,
) -> worker::Result<Result<AgentConfig, ConfigError>> {
    let db = db(env)?;
    let mut batch = Vec::with_capacity(4);
    for sql in resolve::statements(side) {
        batch.push(db.prepare(sql).bind(&[agent_id.into()])?);
    }
    let mut sets = Vec::with_capacity(4);
    for r in db.batch(batch).await? {
        sets.push(r.results::<Value>()?);
    }
    let [agents, prompts, sub_agents, models]: [Vec<Value>; 4] = sets.try_into().map_err(|_| {
        worker::Error::RustError("D1 batch returned the wrong number of results".into())
    })?;
    let rows = AgentRows {
        agents,
        prompts,
        sub_agents,
        models,
    };
    match resolve::resolve(agent_id, side, rows) {
        Ok(config) => Ok(Ok(config)),
        // A row that does not read is a storage fault, not a missing definition.
        Err(e @ ConfigError::BadRow(_)) => Err(worker::Error::RustError(e.to_string())),
        Err(e) => Ok(Err(e)),
    }
}
