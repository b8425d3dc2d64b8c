//! The configuration API's pure half: parsing request bodies into definitions, validating a set
//! of definitions against what D1 already holds, the delete rules, and the row codec and SQL
//! that write definitions to D1.
//!
//! Nothing here talks to D1. The shell loads the stored rows into a [`ConfigSet`], passes it in
//! with the registered tool names, and runs the statements this module builds. Reading rows
//! back goes through [`crate::config::rows`], the same reader the engine uses, so what the
//! API writes is exactly what a turn reads.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::codec::bad_json;
pub use super::codec::{invalid, Definition, Kind, KINDS};
use crate::config::{AgentDef, ModelConfig, PromptConfig};
use crate::values::error::ApiError;
use crate::values::Invalid;

/// A set of definitions: everything D1 holds, or the body of `PUT /api/config`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSet {
    /// Models.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// Prompts.
    #[serde(default)]
    pub prompts: Vec<PromptConfig>,
    /// Agents.
    #[serde(default)]
    pub agents: Vec<AgentDef>,
}

impl ConfigSet {
    /// Parses the body of `PUT /api/config`: `{"models"?: [...], "prompts"?: [...], "agents"?: [...]}`.
    pub fn parse(body: &[u8]) -> Result<ConfigSet, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| bad_json(&e))?;
        if !value.is_object() {
            return Err(ApiError::new(400, "bad_json", "body must be a JSON object"));
        }
        crate::values::validate::parse_args(value).map_err(|why| invalid(why.to_string()))
    }

    /// Every definition, in write order (models, prompts, agents).
    pub fn definitions(&self) -> Vec<Definition> {
        let models = self.models.iter().cloned().map(Definition::Model);
        let prompts = self.prompts.iter().cloned().map(Definition::Prompt);
        let agents = self.agents.iter().cloned().map(Definition::Agent);
        models.chain(prompts).chain(agents).collect()
    }

    /// Adds `def`, replacing a definition of the same kind and name.
    pub fn insert(&mut self, def: Definition) {
        fn put<T>(list: &mut Vec<T>, item: T, same: impl Fn(&T) -> bool) {
            match list.iter_mut().find(|x| same(x)) {
                Some(slot) => *slot = item,
                None => list.push(item),
            }
        }
        match def {
            Definition::Model(m) => {
                let name = m.name.clone();
                put(&mut self.models, m, |x| x.name == name)
            }
            Definition::Prompt(p) => {
                let name = p.name.clone();
                put(&mut self.prompts, p, |x| x.name == name)
            }
            Definition::Agent(a) => {
                let id = a.id.clone();
                put(&mut self.agents, a, |x| x.id == id)
            }
        }
    }

    /// The model named `name`.
    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The prompt named `name`.
    pub fn prompt(&self, name: &str) -> Option<&PromptConfig> {
        self.prompts.iter().find(|p| p.name == name)
    }

    /// The agent with id `id`.
    pub fn agent(&self, id: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The definition of `kind` named `name`.
    pub fn get(&self, kind: Kind, name: &str) -> Option<Definition> {
        match kind {
            Kind::Model => self.model(name).cloned().map(Definition::Model),
            Kind::Prompt => self.prompt(name).cloned().map(Definition::Prompt),
            Kind::Agent => self.agent(name).cloned().map(Definition::Agent),
        }
    }

    /// The first definition that refers to the `kind` named `name`, described for a 409
    /// (`prompt "support" (its "model")`), or `None` when nothing does.
    pub fn referrer(&self, kind: Kind, name: &str) -> Option<String> {
        let lists = |tools: &[String]| tools.iter().any(|t| t == name);
        match kind {
            Kind::Model => self
                .prompts
                .iter()
                .find(|p| p.model == name)
                .map(|p| format!("prompt {:?} (its \"model\")", p.name))
                .or_else(|| {
                    self.prompts
                        .iter()
                        .find(|p| p.tool_selection_model.as_deref() == Some(name))
                        .map(|p| format!("prompt {:?} (its \"tool_selection_model\")", p.name))
                })
                .or_else(|| {
                    self.models
                        .iter()
                        .find(|m| m.name != name && lists(&m.fallbacks))
                        .map(|m| format!("model {:?} (its \"fallbacks\")", m.name))
                }),
            Kind::Prompt => self
                .agents
                .iter()
                .find_map(|a| {
                    side_names(a)
                        .find(|(_, s)| s.prompt == name)
                        .map(|(side, _)| format!("agent {:?} (its \"{side}.prompt\")", a.id))
                })
                .or_else(|| {
                    self.prompts
                        .iter()
                        .find(|p| p.name != name && lists(&p.tools))
                        .map(|p| format!("prompt {:?} (its \"tools\")", p.name))
                })
                .or_else(|| {
                    self.prompts
                        .iter()
                        .find(|p| p.compaction_prompt.as_deref() == Some(name))
                        .map(|p| format!("prompt {:?} (its \"compaction_prompt\")", p.name))
                }),
            Kind::Agent => self
                .prompts
                .iter()
                .find(|p| lists(&p.tools))
                .map(|p| format!("prompt {:?} (its \"tools\")", p.name)),
        }
    }
}

fn side_names(a: &AgentDef) -> impl Iterator<Item = (&'static str, &crate::config::SideConfig)> {
    std::iter::once(("side_a", &a.side_a)).chain(a.side_b.as_ref().map(|b| ("side_b", b)))
}

/// What writing one definition does to D1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// No row had its name.
    Created,
    /// A different row had its name.
    Updated,
    /// The stored row is the same; nothing is written.
    Unchanged,
}

impl Change {
    /// `created`, `updated` or `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
        }
    }
}

/// A validated set of definitions and what writing each one changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Each definition with its change, in write order (models, prompts, agents).
    pub changes: Vec<(Definition, Change)>,
}

impl Plan {
    /// The definitions that must be written (created or updated), in write order.
    pub fn writes(&self) -> impl Iterator<Item = &Definition> {
        self.changes
            .iter()
            .filter(|(_, c)| *c != Change::Unchanged)
            .map(|(d, _)| d)
    }

    /// `{"models":{"created":[..],"updated":[..],"unchanged":[..]}, "prompts":…, "agents":…}`.
    pub fn summary(&self) -> Value {
        let mut out = Map::new();
        for kind in KINDS {
            let names = |change: Change| -> Vec<&str> {
                self.changes
                    .iter()
                    .filter(|(d, c)| d.kind() == kind && *c == change)
                    .map(|(d, _)| d.name())
                    .collect()
            };
            out.insert(
                kind.plural().to_owned(),
                json!({
                    "created": names(Change::Created),
                    "updated": names(Change::Updated),
                    "unchanged": names(Change::Unchanged),
                }),
            );
        }
        Value::Object(out)
    }
}

/// Validates `incoming` as one set together with what D1 already holds (`stored`) and the
/// registered tool names, and works out what writing it changes.
///
/// Each incoming definition must pass its `check()` and its references must resolve in the
/// stored set as it will be after the write. Stored definitions that an incoming one can break
/// are checked again: an agent whose side prompt is replaced (its `stop_tool` must still be in
/// that prompt's tools), and a prompt listing an agent that is replaced (the agent must still
/// set `expose_as_tool`). Hook names must be files in `agents/hooks/`.
pub fn plan(
    incoming: Vec<Definition>,
    stored: &ConfigSet,
    tools: &[&str],
) -> Result<Plan, ApiError> {
    let mut merged = stored.clone();
    let mut changes = Vec::with_capacity(incoming.len());
    for kind in KINDS {
        for def in incoming.iter().filter(|d| d.kind() == kind) {
            if changes
                .iter()
                .any(|(d, _): &(Definition, Change)| d.kind() == kind && d.name() == def.name())
            {
                return Err(invalid(format!(
                    "{} appears twice in this request",
                    def.label()
                )));
            }
            def.check()
                .map_err(|why| invalid(format!("{}: {why}", def.label())))?;
            let change = match stored.get(kind, def.name()) {
                None => Change::Created,
                Some(old) if &old == def => Change::Unchanged,
                Some(_) => Change::Updated,
            };
            merged.insert(def.clone());
            changes.push((def.clone(), change));
        }
    }
    for (def, _) in &changes {
        references(def, &merged, tools).map_err(|why| invalid(why.to_string()))?;
    }
    let replaced = |kind: Kind, name: &str| {
        changes
            .iter()
            .any(|(d, _)| d.kind() == kind && d.name() == name)
    };
    for agent in &merged.agents {
        if !replaced(Kind::Agent, &agent.id)
            && agent.sides().any(|s| replaced(Kind::Prompt, &s.prompt))
        {
            references(&Definition::Agent(agent.clone()), &merged, tools)
                .map_err(|why| invalid(format!("{why} (after this change)")))?;
        }
    }
    for prompt in &merged.prompts {
        if !replaced(Kind::Prompt, &prompt.name)
            && prompt.tools.iter().any(|t| replaced(Kind::Agent, t))
        {
            references(&Definition::Prompt(prompt.clone()), &merged, tools)
                .map_err(|why| invalid(format!("{why} (after this change)")))?;
        }
    }
    Ok(Plan { changes })
}

/// Whether every name in `hooks` is a hook file in `agents/hooks/`.
fn known_hooks(label: &str, hooks: &[String]) -> Result<(), Invalid> {
    match hooks
        .iter()
        .find(|h| !crate::hook::names().any(|k| k == h.as_str()))
    {
        None => Ok(()),
        Some(h) => Err(format!(
            "{label}: \"hooks\" lists {h:?}, which is not a hook (known: {})",
            crate::hook::names().collect::<Vec<_>>().join(", ")
        )
        .into()),
    }
}

/// Whether `def`'s references resolve in `set` (with `tools` registered); `Err` names the
/// definition, the field and the value.
fn references(def: &Definition, set: &ConfigSet, tools: &[&str]) -> Result<(), Invalid> {
    let label = def.label();
    match def {
        Definition::Prompt(p) => known_hooks(&label, &p.hooks)?,
        Definition::Agent(a) => known_hooks(&label, &a.hooks)?,
        Definition::Model(_) => {}
    }
    match def {
        Definition::Model(m) => {
            for f in &m.fallbacks {
                if set.model(f).is_none() {
                    return Err(format!(
                        "{label}: \"fallbacks\" lists {f:?}, which is not a model"
                    )
                    .into());
                }
            }
        }
        Definition::Prompt(p) => {
            if set.model(&p.model).is_none() {
                return Err(
                    format!("{label}: \"model\" is {:?}, which is not a model", p.model).into(),
                );
            }
            if let Some(m) = p.tool_selection_model.as_deref() {
                match set.model(m) {
                    None => {
                        return Err(format!(
                            "{label}: \"tool_selection_model\" is {m:?}, which is not a model"
                        )
                        .into())
                    }
                    Some(model) if !crate::llm::embeddings::supports(model.provider) => {
                        return Err(format!(
                            "{label}: \"tool_selection_model\" is {m:?}, a model of provider {:?}, \
                             which has no embeddings (use an openai or workers_ai model)",
                            model.provider.as_str()
                        )
                        .into())
                    }
                    Some(_) => {}
                }
            }
            if let Some(c) = p.compaction_prompt.as_deref() {
                if set.prompt(c).is_none() {
                    return Err(format!(
                        "{label}: \"compaction_prompt\" is {c:?}, which is not a prompt"
                    )
                    .into());
                }
            }
            for t in &p.tools {
                let exposed = set.agent(t).is_some_and(|a| a.expose_as_tool);
                if tools.contains(&t.as_str()) || set.prompt(t).is_some() || exposed {
                    continue;
                }
                return Err(match set.agent(t) {
                    Some(_) => format!(
                        "{label}: \"tools\" lists agent {t:?}, which does not set \"expose_as_tool\""
                    ),
                    None => format!(
                        "{label}: \"tools\" lists {t:?}, which is not a registered tool, a prompt or an agent"
                    ),
                }
                .into());
            }
        }
        Definition::Agent(a) => {
            for (side, s) in side_names(a) {
                let Some(prompt) = set.prompt(&s.prompt) else {
                    return Err(format!(
                        "{label}: \"{side}.prompt\" is {:?}, which is not a prompt",
                        s.prompt
                    )
                    .into());
                };
                if let Some(stop) = &s.stop_tool {
                    if !prompt.tools.contains(stop) {
                        return Err(format!(
                            "{label}: \"{side}.stop_tool\" is {stop:?}, which is not in the \"tools\" of prompt {:?}",
                            prompt.name
                        )
                        .into());
                    }
                }
            }
        }
    }
    Ok(())
}

/// The 409 for deleting a definition something still refers to.
pub fn in_use(kind: Kind, name: &str, referrer: &str) -> ApiError {
    ApiError::new(
        409,
        "in_use",
        format!(
            "{} {name:?} is used by {referrer}; change or delete that first",
            kind.singular()
        ),
    )
}
