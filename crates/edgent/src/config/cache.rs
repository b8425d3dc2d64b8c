//! How long a resolved agent configuration may be reused without asking D1.
//!
//! Reading an agent's configuration is a D1 round trip (a network hop in production), so the
//! driver keeps what it resolved, per agent and side, in the isolate. An entry is used as is
//! for [`CONFIG_TTL_MS`]; after that the driver asks D1 only for the configuration's version
//! stamp (`config_version`, bumped by a trigger on every change to models, prompts or agents)
//! and reloads when it moved. So a change reaches every thread within `CONFIG_TTL_MS` (plus one
//! round trip), and at once in the isolate that made it through the API ([`ConfigCache::clear`]).

use std::collections::HashMap;
use std::rc::Rc;

use super::AgentConfig;
use crate::values::status::Side;

/// How long a cached configuration is used without checking its version stamp.
pub const CONFIG_TTL_MS: i64 = 5_000;

/// How long a copy a thread kept may plan a step in a new isolate: an older one is loaded
/// instead. It bounds how long after a change a first turn may still send its one request
/// (checked by the operator's policy, and cancelled once the version check answers) to what
/// the configuration named before.
pub const KEPT_COPY_TTL_MS: i64 = 3_600_000;

/// At most this many (agent, side) entries; a full cache starts over (agents are few).
const MAX_ENTRIES: usize = 256;

/// What the driver must do to have an agent's configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Use this one.
    Fresh(Rc<AgentConfig>),
    /// Ask D1 for the version stamp and give it to [`ConfigCache::handle_version`].
    CheckVersion,
    /// Load and resolve it, then [`ConfigCache::handle_loaded`].
    Load,
}

#[derive(Debug)]
struct Entry {
    config: Rc<AgentConfig>,
    version: i64,
    checked_at: i64,
    /// What the configuration was resolved from (the D1 rows as JSON): the copy a thread keeps.
    copy: Rc<str>,
}

/// Resolved configurations by agent and side, with when their version was last confirmed.
#[derive(Debug, Default)]
pub struct ConfigCache {
    entries: HashMap<(String, Side), Entry>,
    /// The newest version stamp this isolate has read (`i64::MAX` once it changed the
    /// configuration itself): a kept copy older than it is known to be stale.
    newest: i64,
}

impl ConfigCache {
    /// What to do for `agent_id`'s `side` at `now`.
    pub fn lookup(&self, agent_id: &str, side: Side, now: i64) -> Lookup {
        match self.entries.get(&(agent_id.to_owned(), side)) {
            None => Lookup::Load,
            Some(e) if now - e.checked_at < CONFIG_TTL_MS => Lookup::Fresh(e.config.clone()),
            Some(_) => Lookup::CheckVersion,
        }
    }

    /// The cached configuration of `agent_id`'s `side`, however old: a step may be planned
    /// with it while its version is checked (see `runtime::config_check`).
    pub fn cached(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>> {
        self.entries
            .get(&(agent_id.to_owned(), side))
            .map(|e| e.config.clone())
    }

    /// What `config` was resolved from, with the version stamp it was read at (the copy a
    /// thread keeps), while it is the cached configuration of its agent and side.
    pub fn copy(&self, config: &Rc<AgentConfig>) -> Option<(i64, Rc<str>)> {
        self.entries
            .get(&(config.agent.id.clone(), config.side))
            .filter(|e| Rc::ptr_eq(&e.config, config))
            .map(|e| (e.version, e.copy.clone()))
    }

    /// A copy read at `version` that this isolate did not load (a thread's own kept copy),
    /// when nothing is cached for it and no newer version was read here: used once its
    /// version is checked, as one past its freshness.
    pub fn adopt(&mut self, config: AgentConfig, version: i64, copy: Rc<str>, now: i64) {
        let key = (config.agent.id.clone(), config.side);
        // Known to be stale: sent with it, a request would only be cancelled.
        if self.entries.contains_key(&key) || version < self.newest {
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        let entry = Entry {
            config: Rc::new(config),
            version,
            checked_at: now.saturating_sub(CONFIG_TTL_MS),
            copy,
        };
        self.entries.insert(key, entry);
    }

    /// D1's version stamp after [`Lookup::CheckVersion`]: the cached configuration when it is
    /// unchanged (good for another `CONFIG_TTL_MS`), `None` when it must be reloaded.
    pub fn handle_version(
        &mut self,
        agent_id: &str,
        side: Side,
        version: i64,
        now: i64,
    ) -> Option<Rc<AgentConfig>> {
        self.newest = self.newest.max(version);
        let key = (agent_id.to_owned(), side);
        match self.entries.get_mut(&key) {
            Some(e) if e.version == version => {
                e.checked_at = now;
                Some(e.config.clone())
            }
            _ => {
                self.entries.remove(&key);
                None
            }
        }
    }

    /// A configuration resolved from D1 at `version`.
    pub fn handle_loaded(
        &mut self,
        config: AgentConfig,
        version: i64,
        copy: Rc<str>,
        now: i64,
    ) -> Rc<AgentConfig> {
        self.newest = self.newest.max(version);
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        let config = Rc::new(config);
        let key = (config.agent.id.clone(), config.side);
        let entry = Entry {
            config: config.clone(),
            version,
            checked_at: now,
            copy,
        };
        self.entries.insert(key, entry);
        config
    }

    /// Forgets `agent_id`'s `side`: its version could not be checked, so no step is planned
    /// with it until a load succeeds.
    pub fn forget(&mut self, agent_id: &str, side: Side) {
        self.entries.remove(&(agent_id.to_owned(), side));
    }

    /// Forgets everything: this isolate just changed the configuration (so every copy a
    /// thread kept is older than the configuration now).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.newest = i64::MAX;
    }
}

/// The version stamp query (one row, maintained by triggers: migrations/0005_config_version.sql).
pub const VERSION_SQL: &str = "SELECT version FROM config_version WHERE id = 1";

/// The stamp in [`VERSION_SQL`]'s row (none: the D1 migrations were not applied).
pub fn version_of(row: Option<&serde_json::Value>) -> Result<i64, crate::values::Invalid> {
    row.and_then(|r| r.get("version"))
        .and_then(serde_json::Value::as_i64)
        .ok_or_else(|| {
            crate::values::Invalid::new(
                "config_version has no row: apply the D1 migrations (wrangler d1 migrations apply DB)",
            )
        })
}

/// The rows of one load: the results of [`resolve::statements`](super::resolve::statements)
/// followed by [`VERSION_SQL`]'s, in that order, and the version they were read at.
pub fn loaded_rows(
    mut sets: Vec<Vec<serde_json::Value>>,
) -> Result<(super::resolve::AgentRows, i64), crate::values::Invalid> {
    let version = sets.pop().unwrap_or_default();
    let [agents, prompts, sub_agents, models]: [Vec<serde_json::Value>; 4] =
        sets.try_into().map_err(|_| {
            crate::values::Invalid::new(
                "the configuration batch returned the wrong number of results",
            )
        })?;
    let rows = super::resolve::AgentRows {
        agents,
        prompts,
        sub_agents,
        models,
    };
    Ok((rows, version_of(version.first())?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(agent: &str, side: Side, system: &str) -> AgentConfig {
        AgentConfig {
            agent: serde_json::from_value(json!({ "id": agent, "side_a": { "prompt": "p" } }))
                .unwrap(),
            side,
            prompt: serde_json::from_value(json!({ "name": "p", "model": "m", "system": system }))
                .unwrap(),
            models: Vec::new(),
            delegates: Vec::new(),
            compaction: None,
            selection_models: Vec::new(),
        }
    }

    #[test]
    fn a_configuration_is_reused_then_checked_then_reloaded_when_its_version_moved() {
        let mut cache = ConfigCache::default();
        assert_eq!(cache.lookup("support", Side::A, 0), Lookup::Load);
        let loaded = cache.handle_loaded(config("support", Side::A, "v1"), 7, "[]".into(), 1_000);
        assert_eq!(
            cache.lookup("support", Side::A, 1_000 + CONFIG_TTL_MS - 1),
            Lookup::Fresh(loaded.clone())
        );
        // Per agent and side.
        assert_eq!(cache.lookup("support", Side::B, 1_001), Lookup::Load);
        assert_eq!(cache.lookup("review", Side::A, 1_001), Lookup::Load);

        let later = 1_000 + CONFIG_TTL_MS;
        assert_eq!(
            cache.lookup("support", Side::A, later),
            Lookup::CheckVersion
        );
        // Unchanged: good for another TTL from the check.
        assert_eq!(
            cache.handle_version("support", Side::A, 7, later),
            Some(loaded.clone())
        );
        assert_eq!(
            cache.lookup("support", Side::A, later + CONFIG_TTL_MS - 1),
            Lookup::Fresh(loaded)
        );
        // Moved: forgotten, so the driver reloads.
        let much_later = later + CONFIG_TTL_MS;
        assert_eq!(
            cache.handle_version("support", Side::A, 8, much_later),
            None
        );
        assert_eq!(cache.lookup("support", Side::A, much_later), Lookup::Load);
    }

    #[test]
    fn a_change_made_in_this_isolate_is_seen_at_once() {
        let mut cache = ConfigCache::default();
        cache.handle_loaded(config("support", Side::A, "v1"), 1, "[]".into(), 0);
        cache.clear();
        assert_eq!(cache.lookup("support", Side::A, 1), Lookup::Load);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut cache = ConfigCache::default();
        for i in 0..=MAX_ENTRIES {
            cache.handle_loaded(
                config(&format!("agent-{i}"), Side::A, ""),
                1,
                "[]".into(),
                0,
            );
        }
        assert!(cache.entries.len() <= MAX_ENTRIES);
        let last = format!("agent-{MAX_ENTRIES}");
        assert!(matches!(cache.lookup(&last, Side::A, 1), Lookup::Fresh(_)));
    }

    #[test]
    fn a_kept_copy_is_adopted_only_when_no_newer_version_was_read() {
        let mut cache = ConfigCache::default();
        cache.handle_loaded(config("support", Side::A, "v7"), 7, "[]".into(), 0);
        cache.adopt(config("billing", Side::A, "old"), 6, "[]".into(), 10_000);
        assert!(
            cache.cached("billing", Side::A).is_none(),
            "older than v7: stale"
        );
        cache.adopt(config("billing", Side::A, "v7"), 7, "[]".into(), 10_000);
        assert_eq!(
            cache.lookup("billing", Side::A, 10_000),
            Lookup::CheckVersion,
            "adopted, past its freshness"
        );
        cache.clear();
        cache.adopt(config("billing", Side::A, "v7"), 7, "[]".into(), 10_000);
        assert!(
            cache.cached("billing", Side::A).is_none(),
            "this isolate changed the configuration"
        );
    }

    #[test]
    fn a_load_is_four_row_sets_and_the_version() {
        let sets = vec![
            vec![json!({"id": "a"})],
            vec![],
            vec![],
            vec![],
            vec![json!({"version": 7})],
        ];
        let (rows, version) = loaded_rows(sets).unwrap();
        assert_eq!((rows.agents.len(), version), (1, 7));
        let short = loaded_rows(vec![vec![], vec![json!({"version": 7})]]).unwrap_err();
        assert!(short.to_string().contains("wrong number"), "{short}");
        let unmigrated = loaded_rows(vec![vec![], vec![], vec![], vec![], vec![]]).unwrap_err();
        assert!(
            unmigrated.to_string().contains("apply the D1 migrations"),
            "{unmigrated}"
        );
    }
}
