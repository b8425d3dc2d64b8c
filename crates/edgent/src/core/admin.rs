//! The configuration API's pure half: parsing request bodies into definitions, validating a set
//! of definitions against what D1 already holds, the delete rules, and the row codec and SQL
//! that write definitions to D1.
//!
//! Nothing here talks to D1. The shell loads the stored rows into a [`ConfigSet`], passes it in
//! with the registered tool names, and runs the statements this module builds. Reading rows
//! back goes through [`crate::core::config::rows`], the same reader the engine uses, so what the
//! API writes is exactly what a turn reads.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::api::ApiError;
use super::config::{rows, AgentDef, ModelConfig, PromptConfig};
use super::sql::SqlValue;

/// The three kinds of definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `models` row.
    Model,
    /// A `prompts` row.
    Prompt,
    /// An `agents` row.
    Agent,
}

/// Every kind, in the order writes must run: prompts reference models (a D1 foreign key) and
/// agents reference prompts.
pub const KINDS: [Kind; 3] = [Kind::Model, Kind::Prompt, Kind::Agent];

/// `models` columns written by the API, in bind order (`updated_at` follows).
pub const MODEL_COLUMNS: &[&str] = &[
    "name",
    "provider",
    "model",
    "base_url",
    "api_key_secret",
    "fallbacks",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "first_chunk_timeout_ms",
    "stall_timeout_ms",
    "max_history_tokens",
    "max_output_tokens",
];

/// `prompts` columns written by the API, in bind order (`updated_at` follows).
pub const PROMPT_COLUMNS: &[&str] = &[
    "name",
    "system",
    "model",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "include_chat",
    "description",
    "hooks",
    "tool_bindings",
];

/// `agents` columns written by the API, in bind order (`updated_at` follows).
pub const AGENT_COLUMNS: &[&str] = &[
    "id",
    "kind",
    "description",
    "side_a",
    "side_b",
    "max_turns",
    "expose_as_tool",
    "tool_description",
    "hooks",
];

impl Kind {
    /// The kind a URL segment (`models`, `prompts`, `agents`) names.
    pub fn from_plural(segment: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.plural() == segment)
    }

    /// The URL segment, the table name and the key in `PUT /api/config` bodies (all the same).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Model => "models",
            Kind::Prompt => "prompts",
            Kind::Agent => "agents",
        }
    }

    /// The word used in messages.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Prompt => "prompt",
            Kind::Agent => "agent",
        }
    }

    /// The D1 table.
    pub fn table(self) -> &'static str {
        self.plural()
    }

    /// The primary-key column, which is also the field naming a definition.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Model | Kind::Prompt => "name",
            Kind::Agent => "id",
        }
    }

    /// The columns written, in bind order.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Kind::Model => MODEL_COLUMNS,
            Kind::Prompt => PROMPT_COLUMNS,
            Kind::Agent => AGENT_COLUMNS,
        }
    }

    /// Every row, ordered by name.
    pub fn select_all_sql(self) -> String {
        format!("SELECT * FROM {} ORDER BY {}", self.table(), self.key())
    }

    /// One row; binds the name as `?1`.
    pub fn select_one_sql(self) -> String {
        format!("SELECT * FROM {} WHERE {} = ?1", self.table(), self.key())
    }

    /// Deletes one row; binds the name as `?1`.
    pub fn delete_sql(self) -> String {
        format!("DELETE FROM {} WHERE {} = ?1", self.table(), self.key())
    }

    /// Inserts or replaces one row; binds [`Definition::row`] (the columns, then `updated_at`).
    /// Running it twice with the same values leaves the same row, which makes seeding idempotent.
    pub fn upsert_sql(self) -> String {
        let cols = self.columns();
        let placeholders: Vec<String> = (1..=cols.len() + 1).map(|i| format!("?{i}")).collect();
        let updates: Vec<String> = cols
            .iter()
            .filter(|c| **c != self.key())
            .chain(std::iter::once(&"updated_at"))
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        format!(
            "INSERT INTO {} ({}, updated_at) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
            self.table(),
            cols.join(", "),
            placeholders.join(", "),
            self.key(),
            updates.join(", ")
        )
    }
}

/// One definition of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// A model.
    Model(ModelConfig),
    /// A prompt.
    Prompt(PromptConfig),
    /// An agent.
    Agent(AgentDef),
}

/// A 400 for a definition that breaks a rule; the message names the definition and the field.
pub fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(400, "invalid_definition", message)
}

fn bad_json(e: &serde_json::Error) -> ApiError {
    ApiError::new(400, "bad_json", format!("body is not valid JSON: {e}"))
}

impl Definition {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Definition::Model(_) => Kind::Model,
            Definition::Prompt(_) => Kind::Prompt,
            Definition::Agent(_) => Kind::Agent,
        }
    }

    /// Its name (an agent's id).
    pub fn name(&self) -> &str {
        match self {
            Definition::Model(m) => &m.name,
            Definition::Prompt(p) => &p.name,
            Definition::Agent(a) => &a.id,
        }
    }

    /// `model "default"`, for messages.
    pub fn label(&self) -> String {
        format!("{} {:?}", self.kind().singular(), self.name())
    }

    /// The rules that need no other definition.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Definition::Model(m) => m.check(),
            Definition::Prompt(p) => p.check(),
            Definition::Agent(a) => a.check(),
        }
    }

    /// The definition as the API shows it (every field, defaults filled in).
    pub fn to_json(&self) -> Value {
        let value = match self {
            Definition::Model(m) => serde_json::to_value(m),
            Definition::Prompt(p) => serde_json::to_value(p),
            Definition::Agent(a) => serde_json::to_value(a),
        };
        // These types are plain data with string keys; serialising them cannot fail.
        value.unwrap_or(Value::Null)
    }

    /// Reads a D1 row of `kind` (with the engine's reader).
    pub fn from_row(kind: Kind, row: Value) -> Result<Definition, String> {
        Ok(match kind {
            Kind::Model => Definition::Model(rows::model(row)?),
            Kind::Prompt => Definition::Prompt(rows::prompt(row)?),
            Kind::Agent => Definition::Agent(rows::agent(row)?),
        })
    }

    /// Parses a definition given as JSON (`serde`, unknown fields refused).
    pub fn from_json(kind: Kind, value: Value) -> Result<Definition, String> {
        use crate::tool::validate::parse_args;
        Ok(match kind {
            Kind::Model => Definition::Model(parse_args(value)?),
            Kind::Prompt => Definition::Prompt(parse_args(value)?),
            Kind::Agent => Definition::Agent(parse_args(value)?),
        })
    }

    /// Parses the body of `PUT /api/{kind}/{url_name}`. The body's name (`id` for agents) must
    /// equal the URL's or be left out, in which case the URL's is used.
    pub fn parse_put(kind: Kind, body: &[u8], url_name: &str) -> Result<Definition, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| bad_json(&e))?;
        let Value::Object(mut fields) = value else {
            return Err(ApiError::new(400, "bad_json", "body must be a JSON object"));
        };
        match fields.get(kind.key()) {
            None | Some(Value::Null) => {
                fields.insert(kind.key().to_owned(), Value::from(url_name));
            }
            Some(Value::String(s)) if s != url_name => {
                return Err(invalid(format!(
                    "\"{}\" is {s:?} but the URL names {} {url_name:?}; they must match (or leave \"{}\" out)",
                    kind.key(),
                    kind.singular(),
                    kind.key()
                )));
            }
            // The URL's name, or a non-string that serde reports below.
            Some(_) => {}
        }
        Definition::from_json(kind, Value::Object(fields))
            .map_err(|why| invalid(format!("{} {url_name:?}: {why}", kind.singular())))
    }

    /// The values bound to [`Kind::upsert_sql`]: the columns of [`Kind::columns`] in order,
    /// then `updated_at`. Lists and side objects are JSON text, booleans 0/1, unset options NULL.
    pub fn row(&self, updated_at: i64) -> Result<Vec<SqlValue>, String> {
        let kind = self.kind();
        let Value::Object(fields) = self.to_json() else {
            return Err(format!("{} did not serialise to an object", self.label()));
        };
        // A field the table has no column for would be silently dropped; refuse instead.
        if let Some(extra) = fields
            .keys()
            .find(|k| !kind.columns().contains(&k.as_str()))
        {
            return Err(format!(
                "{} has field {extra:?}, which has no column in {}",
                self.label(),
                kind.table()
            ));
        }
        let mut out = Vec::with_capacity(kind.columns().len() + 1);
        for col in kind.columns() {
            let value = fields
                .get(*col)
                .ok_or_else(|| format!("{} has no field for column {col:?}", self.label()))?;
            out.push(column_value(value));
        }
        out.push(SqlValue::Integer(updated_at));
        Ok(out)
    }
}

/// One JSON field as a D1 column value.
fn column_value(value: &Value) -> SqlValue {
    match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => SqlValue::Text(value.to_string()),
    }
}

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
        crate::tool::validate::parse_args(value).map_err(invalid)
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
                }),
            Kind::Agent => self
                .prompts
                .iter()
                .find(|p| lists(&p.tools))
                .map(|p| format!("prompt {:?} (its \"tools\")", p.name)),
        }
    }
}

fn side_names(a: &AgentDef) -> impl Iterator<Item = (&'static str, &super::config::SideConfig)> {
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
        references(def, &merged, tools).map_err(invalid)?;
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
fn known_hooks(label: &str, hooks: &[String]) -> Result<(), String> {
    match hooks
        .iter()
        .find(|h| !crate::hook::names().any(|k| k == h.as_str()))
    {
        None => Ok(()),
        Some(h) => Err(format!(
            "{label}: \"hooks\" lists {h:?}, which is not a hook (known: {})",
            crate::hook::names().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Whether `def`'s references resolve in `set` (with `tools` registered); `Err` names the
/// definition, the field and the value.
fn references(def: &Definition, set: &ConfigSet, tools: &[&str]) -> Result<(), String> {
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
                    ));
                }
            }
        }
        Definition::Prompt(p) => {
            if set.model(&p.model).is_none() {
                return Err(format!(
                    "{label}: \"model\" is {:?}, which is not a model",
                    p.model
                ));
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
                });
            }
        }
        Definition::Agent(a) => {
            for (side, s) in side_names(a) {
                let Some(prompt) = set.prompt(&s.prompt) else {
                    return Err(format!(
                        "{label}: \"{side}.prompt\" is {:?}, which is not a prompt",
                        s.prompt
                    ));
                };
                if let Some(stop) = &s.stop_tool {
                    if !prompt.tools.contains(stop) {
                        return Err(format!(
                            "{label}: \"{side}.stop_tool\" is {stop:?}, which is not in the \"tools\" of prompt {:?}",
                            prompt.name
                        ));
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
