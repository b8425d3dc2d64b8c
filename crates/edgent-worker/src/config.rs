//! Agent configuration from D1 (`agents` → `prompts` → `models`), resolved when a turn starts
//! so operators can change an agent without redeploying, and kept in the isolate for a few
//! seconds so a turn costs no D1 round trip (see `edgent::config::cache`).

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;
use worker::{D1Database, Env};

use crate::clock::now;
use edgent::config::cache::{loaded_rows, version_of, ConfigCache, Lookup, VERSION_SQL};

use edgent::config::resolve::{self, ConfigError};
use edgent::config::{rows, AgentConfig, AgentDef};
use edgent::engine::store::Side;
use edgent::values::Invalid;

fn db(env: &Env) -> worker::Result<D1Database> {
    env.d1("DB")
}

/// Whether an agent with this id exists. Answered from the configuration cache when side A
/// resolves (the usual case: no D1 round trip while it is fresh); an agent that does not
/// resolve is looked up by its row, since it may exist with a broken configuration.
pub(crate) async fn agent_exists(env: &Env, agent_id: &str) -> worker::Result<bool> {
    match load_agent(env, agent_id, Side::A).await {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(ConfigError::NoAgent { .. })) => Ok(false),
        // Broken further down (a missing prompt, a row that does not read): the agent may
        // still exist, and its turns will say what is wrong.
        _ => Ok(agent_def(env, agent_id).await?.is_some()),
    }
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

thread_local! {
    /// This isolate's resolved configurations (see [`edgent::config::cache`]).
    static CACHE: RefCell<ConfigCache> = RefCell::default();
}

/// Forgets every cached configuration: this isolate just changed the configuration, so its
/// own threads see the change at once (others within `CONFIG_TTL_MS`).
pub(crate) fn forget_cached() {
    CACHE.with(|c| c.borrow_mut().clear());
}

/// The cached configuration of `agent_id`'s `side` while it is fresh: no I/O, so a caller
/// that gets one has not yielded (what it read before is still current).
pub(crate) fn fresh_agent(agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
    match CACHE.with(|c| c.borrow().lookup(agent_id, side, now())) {
        Lookup::Fresh(config) => Some(config),
        Lookup::CheckVersion | Lookup::Load => None,
    }
}

/// Everything a turn needs for one side of `agent_id`; the inner `Err` says what is missing
/// (a row that does not read is the outer error: a storage fault).
///
/// From the isolate's cache while it is fresh; then one D1 query for the version stamp; a full
/// load (one D1 round trip: the batch of statements the configuration layer gives,
/// [`resolve::statements`], plus the version) only when it moved or nothing is cached.
pub(crate) async fn load_agent(
    env: &Env,
    agent_id: &str,
    side: Side,
) -> worker::Result<Result<Rc<AgentConfig>, ConfigError>> {
    let db = db(env)?;
    match CACHE.with(|c| c.borrow().lookup(agent_id, side, now())) {
        Lookup::Fresh(config) => return Ok(Ok(config)),
        Lookup::CheckVersion => {
            let row = db.prepare(VERSION_SQL).first::<Value>(None).await?;
            let version = version_of(row.as_ref()).map_err(bad_row)?;
            let kept = CACHE.with(|c| {
                c.borrow_mut()
                    .handle_version(agent_id, side, version, now())
            });
            if let Some(config) = kept {
                return Ok(Ok(config));
            }
        }
        Lookup::Load => {}
    }
    let mut batch = Vec::with_capacity(5);
    for sql in resolve::statements(side) {
        batch.push(db.prepare(sql).bind(&[agent_id.into()])?);
    }
    batch.push(db.prepare(VERSION_SQL));
    let mut sets = Vec::with_capacity(5);
    for r in db.batch(batch).await? {
        sets.push(r.results::<Value>()?);
    }
    let (rows, version) = loaded_rows(sets).map_err(bad_row)?;
    match resolve::resolve(agent_id, side, rows) {
        Ok(config) => {
            Ok(Ok(CACHE.with(|c| {
                c.borrow_mut().handle_loaded(config, version, now())
            })))
        }
        // A row that does not read is a storage fault, not a missing definition.
        Err(e @ ConfigError::BadRow(_)) => Err(worker::Error::RustError(e.to_string())),
        Err(e) => Ok(Err(e)),
    }
}
