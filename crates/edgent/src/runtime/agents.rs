//! An agent's configuration for a turn, resolved from the configuration database (`agents` →
//! `prompts` → `models`) so operators can change an agent without redeploying, and kept in
//! the isolate for a few seconds so a turn costs no round trip (see [`crate::config::cache`]).

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use super::ConfigDb;
use crate::config::cache::{loaded_rows, version_of, ConfigCache, Lookup, VERSION_SQL};
use crate::config::resolve::{self, ConfigError};
use crate::config::{rows, AgentConfig, AgentDef};
use crate::engine::store::Side;

thread_local! {
    /// This isolate's resolved configurations.
    static CACHE: RefCell<ConfigCache> = RefCell::default();
}

/// Forgets every cached configuration: this isolate just changed the configuration, so its
/// own threads see the change at once (others within `CONFIG_TTL_MS`).
pub fn forget_cached() {
    CACHE.with(|c| c.borrow_mut().clear());
}

/// Empties the cache as a new isolate starts (for tests: [`forget_cached`] also records that
/// the configuration changed).
#[doc(hidden)]
pub fn as_a_new_isolate() {
    CACHE.with(|c| *c.borrow_mut() = ConfigCache::default());
}

/// The cached configuration of `agent_id`'s `side` while it is fresh: no I/O, so a caller
/// that gets one has not yielded (what it read before is still current).
pub fn fresh_agent(agent_id: &str, side: Side, now: i64) -> Option<Rc<AgentConfig>> {
    match CACHE.with(|c| c.borrow().lookup(agent_id, side, now)) {
        Lookup::Fresh(config) => Some(config),
        Lookup::CheckVersion | Lookup::Load => None,
    }
}

/// The cached configuration of `agent_id`'s `side`, however old (no I/O): a step is planned
/// with it while [`load_agent`] confirms it (see `runtime::config_check`).
pub fn cached_agent(agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
    CACHE.with(|c| c.borrow().cached(agent_id, side))
}

/// What `config` was resolved from (the D1 rows, tagged with the queries that read them, as
/// JSON) and the version stamp it was read at, while it is the cached configuration of its
/// agent and side: the copy a thread keeps.
pub fn kept_copy(config: &Rc<AgentConfig>) -> Option<(i64, Rc<str>)> {
    CACHE.with(|c| c.borrow().copy(config))
}

/// Which rows a copy holds: a fingerprint (FNV-1a) of the queries that read them, so a copy
/// another build wrote (other queries, other rows) is not resolved as if it were complete.
fn rows_format(side: Side) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in resolve::statements(side).concat().bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Resolves a copy a thread kept ([`kept_copy`]'s, read at `version`) and caches it when the
/// isolate holds nothing for it and has read no newer version: it plans a step only while
/// its version is checked. `None` when the copy is refused, or does not resolve (written by
/// another build, say).
pub fn adopt(
    agent_id: &str,
    side: Side,
    version: i64,
    copy: &str,
    now: i64,
) -> Option<Rc<AgentConfig>> {
    let mut kept: Value = serde_json::from_str(copy).ok()?;
    if kept.get("format").and_then(Value::as_str) != Some(rows_format(side).as_str()) {
        return None;
    }
    let Value::Array(sets) = kept["rows"].take() else {
        return None;
    };
    let mut sets = sets.into_iter().map(|set| match set {
        Value::Array(rows) => Some(rows),
        _ => None,
    });
    let mut next = || sets.next().flatten();
    let rows = resolve::AgentRows {
        agents: next()?,
        prompts: next()?,
        sub_agents: next()?,
        models: next()?,
    };
    let config = resolve::resolve(agent_id, side, rows).ok()?;
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        cache.adopt(config, version, copy.into(), now);
        cache.cached(agent_id, side)
    })
}

/// Everything a turn needs for one side of `agent_id`; the inner `Err` says what is missing
/// (a row that does not read, or a database fault, is the outer error).
///
/// From the isolate's cache while it is fresh; then one query for the version stamp; a full
/// load (one round trip: the batch [`resolve::statements`] gives, plus the version) only when
/// it moved or nothing is cached.
pub async fn load_agent(
    db: &dyn ConfigDb,
    agent_id: &str,
    side: Side,
    now: i64,
) -> Result<Result<Rc<AgentConfig>, ConfigError>, String> {
    match CACHE.with(|c| c.borrow().lookup(agent_id, side, now)) {
        Lookup::Fresh(config) => return Ok(Ok(config)),
        Lookup::CheckVersion => {
            let version = match stamp(db).await {
                Ok(version) => version,
                Err(e) => {
                    // A copy that cannot be confirmed plans no step (and sends no model
                    // request) until a load succeeds.
                    CACHE.with(|c| c.borrow_mut().forget(agent_id, side));
                    return Err(e);
                }
            };
            let kept = CACHE.with(|c| c.borrow_mut().handle_version(agent_id, side, version, now));
            if let Some(config) = kept {
                return Ok(Ok(config));
            }
        }
        Lookup::Load => {}
    }
    let mut batch: Vec<_> = resolve::statements(side)
        .into_iter()
        .map(|sql| (sql, vec![agent_id.into()]))
        .collect();
    batch.push((VERSION_SQL.to_owned(), Vec::new()));
    let (rows, version) = loaded_rows(db.batch(batch).await?).map_err(|e| e.to_string())?;
    // The rows as JSON: the copy a thread keeps, resolved again by `adopt`.
    let sets = [&rows.agents, &rows.prompts, &rows.sub_agents, &rows.models];
    let sets = serde_json::to_string(&sets).unwrap_or_default();
    let copy: Rc<str> = format!(r#"{{"format":"{}","rows":{sets}}}"#, rows_format(side)).into();
    match resolve::resolve(agent_id, side, rows) {
        Ok(config) => {
            Ok(Ok(CACHE.with(|c| {
                c.borrow_mut().handle_loaded(config, version, copy, now)
            })))
        }
        // A row that does not read is a storage fault, not a missing definition.
        Err(e @ ConfigError::BadRow(_)) => Err(e.to_string()),
        Err(e) => Ok(Err(e)),
    }
}

/// The configuration's version stamp.
async fn stamp(db: &dyn ConfigDb) -> Result<i64, String> {
    let mut sets = db.batch(vec![(VERSION_SQL.to_owned(), Vec::new())]).await?;
    let row = sets.pop().and_then(|rows| rows.into_iter().next());
    version_of(row.as_ref()).map_err(|e| e.to_string())
}

/// One agent row.
pub async fn agent_def(db: &dyn ConfigDb, agent_id: &str) -> Result<Option<AgentDef>, String> {
    let sql = "SELECT * FROM agents WHERE id = ?1".to_owned();
    let mut sets = db.batch(vec![(sql, vec![agent_id.into()])]).await?;
    let row: Option<Value> = sets.pop().and_then(|rows| rows.into_iter().next());
    row.map(rows::agent)
        .transpose()
        .map_err(|why| ConfigError::BadRow(why).to_string())
}

/// Whether an agent with this id exists. Answered from the cache when side A resolves (the
/// usual case: no round trip while it is fresh); an agent that does not resolve is looked up
/// by its row, since it may exist with a broken configuration.
pub async fn agent_exists(db: &dyn ConfigDb, agent_id: &str, now: i64) -> Result<bool, String> {
    match load_agent(db, agent_id, Side::A, now).await {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(ConfigError::NoAgent { .. })) => Ok(false),
        // Broken further down (a missing prompt, a row that does not read): the agent may
        // still exist, and its turns will say what is wrong.
        _ => Ok(agent_def(db, agent_id).await?.is_some()),
    }
}

/// Whether `agent_id` configures a prompt for `side` (side A always does).
pub async fn agent_has_side(db: &dyn ConfigDb, agent_id: &str, side: Side) -> Result<bool, String> {
    Ok(agent_def(db, agent_id)
        .await?
        .is_some_and(|a| side == Side::A || a.side_b.is_some()))
}
