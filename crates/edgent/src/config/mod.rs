//! Agent configuration: the definitions stored in D1 (`models`, `prompts`, `agents`, loaded
//! from `agents/*/*.toml`) and the resolved [`AgentConfig`] a turn runs with.
//!
//! The `*Def` types are the one schema for all three places a definition appears: TOML source
//! files, D1 rows and the admin API's JSON bodies. Their `check` methods hold the rules that do
//! not need other rows; cross-references (a prompt's model, a prompt's tools) are checked by
//! whoever can look them up.

pub mod admin;
pub mod cache;
pub mod codec;
pub mod mcp_servers;
pub mod policy;
mod prompt;
pub mod resolve;
pub mod response_format;

pub use crate::llm::request::{Provider, ToolChoice, ToolSpec};
use prompt::yes;
pub use prompt::{render_template, PromptConfig};

use serde::{Deserialize, Serialize};

use crate::values::limits::MAX_MODEL_TIMEOUT_MS;
use crate::values::Invalid;

/// Default time allowed for a model's response headers and first stream chunk.
pub const DEFAULT_FIRST_CHUNK_TIMEOUT_MS: u32 = 60_000;
/// Default time allowed between two stream chunks before the stream counts as stalled.
pub const DEFAULT_STALL_TIMEOUT_MS: u32 = 60_000;
/// Default time allowed for a whole model attempt, from the request to the stream's end: a
/// stream that drips a byte at a time never stalls, and this ends it.
pub const DEFAULT_TOTAL_TIMEOUT_MS: u32 = 600_000;
/// Default token budget for the history sent to a model.
pub const DEFAULT_MAX_HISTORY_TOKENS: u32 = 100_000;

/// A model row (`models` table, `agents/models/*.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Row name, referenced by prompts and fallbacks.
    pub name: String,
    /// Wire format.
    pub provider: Provider,
    /// The provider's model id, e.g. `gpt-4o-mini`, `claude-sonnet-4-5`, `@cf/meta/llama-3.1-8b-instruct`.
    pub model: String,
    /// Base URL for HTTP providers, e.g. `https://api.openai.com/v1`; unused by `workers_ai`.
    #[serde(default)]
    pub base_url: String,
    /// Name of the Worker secret holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_secret: Option<String>,
    /// Models tried in order when this one keeps failing.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Price in US dollars per million input tokens (for the request log's cost).
    #[serde(default)]
    pub input_price_per_mtok: f64,
    /// Price in US dollars per million output tokens.
    #[serde(default)]
    pub output_price_per_mtok: f64,
    /// Time allowed for response headers and the first chunk.
    #[serde(default)]
    pub first_chunk_timeout_ms: Option<u32>,
    /// Time allowed between chunks.
    #[serde(default)]
    pub stall_timeout_ms: Option<u32>,
    /// Time allowed for a whole attempt, request to the end of the stream.
    #[serde(default)]
    pub total_timeout_ms: Option<u32>,
    /// Token budget for the history sent to this model (oldest messages are dropped first).
    #[serde(default)]
    pub max_history_tokens: Option<u32>,
    /// Output token limit sent with each request (Anthropic requires one; default 4096 there).
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
}

impl ModelConfig {
    /// What a request to this model names: its wire format, model id, endpoint base and
    /// output limit.
    pub fn target(&self) -> crate::llm::request::Target<'_> {
        crate::llm::request::Target {
            provider: self.provider,
            model: &self.model,
            base_url: &self.base_url,
            max_output_tokens: self.max_output_tokens,
        }
    }

    /// Cost in US dollars of a call with these token counts.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_price_per_mtok
            + output_tokens as f64 * self.output_price_per_mtok)
            / 1_000_000.0
    }

    /// Rules that need no other row.
    pub fn check(&self) -> Result<(), Invalid> {
        check_name("model name", &self.name)?;
        if self.model.trim().is_empty() {
            return Err("\"model\" (the provider's model id) must not be empty".into());
        }
        if self.provider != Provider::WorkersAi
            && !(self.base_url.starts_with("https://") || self.base_url.starts_with("http://"))
        {
            return Err(format!(
                "\"base_url\" must be an http(s) URL for provider {:?}",
                self.provider.as_str()
            )
            .into());
        }
        if let Some(secret) = &self.api_key_secret {
            let ok = |c: char| c.is_ascii_alphanumeric() || c == '_';
            if secret.is_empty() || !secret.chars().all(ok) {
                return Err("\"api_key_secret\" is the NAME of a Worker secret (A-Z, 0-9, _), never the key itself".into());
            }
        }
        if self.fallbacks.iter().any(|f| f == &self.name) {
            return Err("a model cannot be its own fallback".into());
        }
        if self.input_price_per_mtok < 0.0 || self.output_price_per_mtok < 0.0 {
            return Err("prices must not be negative".into());
        }
        if [
            self.first_chunk_timeout_ms,
            self.stall_timeout_ms,
            self.total_timeout_ms,
        ]
        .iter()
        .flatten()
        .any(|ms| *ms < 100 || *ms > MAX_MODEL_TIMEOUT_MS)
        {
            return Err(format!(
                "timeouts are in milliseconds, from 100 to {MAX_MODEL_TIMEOUT_MS} (one hour)"
            )
            .into());
        }
        Ok(())
    }
}

/// The two kinds of agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// A human talks; side A answers each message.
    #[default]
    AiHuman,
    /// Sides A and B talk to each other until a stop rule ends the conversation.
    DualAi,
}

impl AgentKind {
    /// The name used in D1 and TOML.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::AiHuman => "ai_human",
            AgentKind::DualAi => "dual_ai",
        }
    }
}

/// Default per-turn model-call budget when a side does not set one.
pub const DEFAULT_MAX_STEPS: u32 = 10;
/// Default number of turns before a conversation ends.
pub const DEFAULT_MAX_TURNS: u32 = 25;

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS
}

fn default_max_turns() -> u32 {
    DEFAULT_MAX_TURNS
}

/// One side of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideConfig {
    /// Prompt name.
    pub prompt: String,
    /// Display name of this side (also the `name` on its messages as the other side sees them).
    #[serde(default)]
    pub label: Option<String>,
    /// An answer without tool calls ends this side's turn.
    #[serde(default = "yes")]
    pub stop_on_response: bool,
    /// Calling this tool ends the turn (ai_human) or the conversation (dual_ai).
    #[serde(default)]
    pub stop_tool: Option<String>,
    /// The property of the stop tool's result (or arguments) that is the final answer.
    #[serde(default)]
    pub stop_tool_response_property: Option<String>,
    /// Model calls allowed in one turn.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
}

/// An agent row (`agents` table, `agents/agents/*.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// Agent id, given when creating threads.
    pub id: String,
    /// Who talks.
    #[serde(default)]
    pub kind: AgentKind,
    /// What it is for (humans).
    #[serde(default)]
    pub description: String,
    /// Side A (always present).
    pub side_a: SideConfig,
    /// Side B (dual_ai only).
    #[serde(default)]
    pub side_b: Option<SideConfig>,
    /// Turns before the conversation ends; `turn_count` runs 0..max_turns-1.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Offer this agent to prompts as a tool.
    #[serde(default)]
    pub expose_as_tool: bool,
    /// The tool description models see.
    #[serde(default)]
    pub tool_description: String,
    /// Hook names (files in `agents/hooks/`), run for every prompt of this agent.
    #[serde(default)]
    pub hooks: Vec<String>,
    /// A thread's spending budget in tokens (input and output of every model attempt over the
    /// thread's life, sub-prompts' included): once used, the thread stops with
    /// `stopped_by: "budget"` before its next model call. No budget when unset.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// The same budget in US dollars, at the models' configured prices.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
}

impl AgentDef {
    /// Rules that need no other row.
    pub fn check(&self) -> Result<(), Invalid> {
        check_name("agent id", &self.id)?;
        match (self.kind, &self.side_b) {
            (AgentKind::DualAi, None) => {
                return Err("a dual_ai agent needs [side_b] with a prompt".into())
            }
            (AgentKind::AiHuman, Some(_)) => {
                return Err(
                    "an ai_human agent has only side_a; remove side_b or use kind = \"dual_ai\""
                        .into(),
                )
            }
            _ => {}
        }
        for side in self.sides() {
            check_name("prompt name", &side.prompt)?;
            if side.max_steps == 0 || side.max_steps > 1000 {
                return Err("max_steps must be between 1 and 1000".into());
            }
            if side.stop_tool_response_property.is_some() && side.stop_tool.is_none() {
                return Err("stop_tool_response_property needs a stop_tool".into());
            }
        }
        if self.max_turns == 0 || self.max_turns > 10_000 {
            return Err("max_turns must be between 1 and 10000".into());
        }
        if self.max_tokens == Some(0) {
            return Err("max_tokens must be at least 1 (leave it out for no budget)".into());
        }
        if let Some(usd) = self.max_cost_usd {
            if !(usd.is_finite() && usd > 0.0) {
                return Err("max_cost_usd must be a positive number of dollars (leave it out for no budget)".into());
            }
        }
        for h in &self.hooks {
            check_name("hook name", h)?;
        }
        Ok(())
    }

    /// Side A, then side B if any.
    pub fn sides(&self) -> impl Iterator<Item = &SideConfig> {
        std::iter::once(&self.side_a).chain(self.side_b.as_ref())
    }
}

/// Names are 1-64 characters of `a-z A-Z 0-9 _ - .` (they appear in URLs and tool lists).
pub fn check_name(what: &str, name: &str) -> Result<(), Invalid> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
        return Err(format!("{what} {name:?} must be 1-64 characters of a-z A-Z 0-9 _ - .").into());
    }
    Ok(())
}

/// What a prompt's tool list can name besides registered tools.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "testing", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "testing", serde(rename_all = "snake_case"))]
pub enum Delegate {
    /// A prompt run as a sub-prompt at depth + 1 in the same thread.
    Prompt(PromptConfig),
    /// An agent: dual_ai runs in a child thread, ai_human takes over this thread.
    Agent(AgentDef),
}

impl Delegate {
    /// The name a prompt's `tools` lists it by: the prompt's name, the agent's id.
    pub fn name(&self) -> &str {
        match self {
            Delegate::Prompt(p) => &p.name,
            Delegate::Agent(a) => &a.id,
        }
    }
}

/// Everything one side of a thread needs for a turn, resolved from D1. (The test host keeps
/// its copies as this type's JSON; the Worker keeps the D1 rows it was resolved from.)
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "testing", derive(Serialize, Deserialize))]
pub struct AgentConfig {
    /// The agent.
    pub agent: AgentDef,
    /// Which side this config runs.
    pub side: crate::values::status::Side,
    /// That side's prompt.
    pub prompt: PromptConfig,
    /// The prompt's model, then its fallbacks in order (missing fallbacks are skipped).
    pub models: Vec<ModelConfig>,
    /// Prompts and agents named in the prompt's tools, then the prompts those prompts name,
    /// to [`crate::values::limits::MAX_SUB_PROMPT_DEPTH`] (what sub-prompts may call), with
    /// their model chains (prompts). Only those the prompt's own tools name are its to call:
    /// see [`AgentConfig::delegate`].
    pub delegates: Vec<(Delegate, Vec<ModelConfig>)>,
    /// The prompt's `compaction_prompt`, with its model chain.
    pub compaction: Option<(PromptConfig, Vec<ModelConfig>)>,
    /// The models the prompt and the prompts it may run as sub-prompts name as their
    /// `tool_selection_model` (see [`AgentConfig::selection_model`]).
    pub selection_models: Vec<ModelConfig>,
}

impl AgentConfig {
    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.agent.id
    }

    /// The running side's settings.
    pub fn side_config(&self) -> &SideConfig {
        match (self.side, &self.agent.side_b) {
            (crate::values::status::Side::B, Some(b)) => b,
            _ => &self.agent.side_a,
        }
    }

    /// Model calls allowed in one turn of this side.
    pub fn max_steps(&self) -> u32 {
        self.side_config().max_steps
    }

    /// The tool names the model may call.
    pub fn tools(&self) -> &[String] {
        &self.prompt.tools
    }

    /// The primary model.
    pub fn model(&self) -> Option<&ModelConfig> {
        self.models.first()
    }

    /// The prompt or agent a tool name of this prompt refers to, if it is not a registered
    /// tool (`None` for a name the prompt does not list).
    pub fn delegate(&self, name: &str) -> Option<&(Delegate, Vec<ModelConfig>)> {
        if !self.prompt.tools.iter().any(|t| t == name) {
            return None;
        }
        self.delegates.iter().find(|(d, _)| d.name() == name)
    }

    /// The `tool_selection_model` row `prompt` names, as loaded with this configuration
    /// (`None`: it names none, or the row is missing).
    pub fn selection_model(&self, prompt: &PromptConfig) -> Option<&ModelConfig> {
        let name = prompt.tool_selection_model.as_deref()?;
        self.selection_models.iter().find(|m| m.name == name)
    }

    /// Hook names to run: the agent's, then the prompt's.
    pub fn hooks(&self) -> impl Iterator<Item = &str> {
        self.agent
            .hooks
            .iter()
            .chain(&self.prompt.hooks)
            .map(String::as_str)
    }
}

/// The arguments schema of a prompt or agent offered as a tool: one `input` string.
pub fn delegate_parameters() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "input": { "type": "string", "description": "What to ask or hand over, in full: the callee sees only this (and the chat, if its prompt includes it)." }
        },
        "required": ["input"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn template_substitutes_known_keys_and_keeps_unknown_ones() {
        let ctx = json!({ "name": "Ada", "tier": 3 });
        let ctx = ctx.as_object().cloned().unwrap_or_default();
        assert_eq!(
            render_template("Hi {{ name }} ({{tier}}), {{missing}} {{", &ctx),
            "Hi Ada (3), {{missing}} {{"
        );
    }

    #[test]
    fn agent_rules() {
        let side = |p: &str| SideConfig {
            prompt: p.into(),
            label: None,
            stop_on_response: true,
            stop_tool: None,
            stop_tool_response_property: None,
            max_steps: 5,
        };
        let mut a = AgentDef {
            id: "x".into(),
            kind: AgentKind::DualAi,
            description: String::new(),
            side_a: side("p"),
            side_b: None,
            max_turns: 4,
            expose_as_tool: false,
            tool_description: String::new(),
            hooks: vec![],
            max_tokens: None,
            max_cost_usd: None,
        };
        assert!(a.check().unwrap_err().message().contains("side_b"));
        a.side_b = Some(side("q"));
        assert!(a.check().is_ok());
        a.max_tokens = Some(0);
        assert!(a.check().unwrap_err().message().contains("max_tokens"));
        a.max_tokens = Some(1);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            a.max_cost_usd = Some(bad);
            assert!(a.check().unwrap_err().message().contains("max_cost_usd"));
        }
        a.max_cost_usd = Some(0.01);
        assert!(a.check().is_ok());
        a.max_turns = 0;
        assert!(a.check().is_err());
    }

    #[test]
    fn toml_shapes_parse_with_defaults() {
        let m: ModelConfig = serde_json::from_value(json!({
            "name": "m", "provider": "workers_ai", "model": "@cf/x"
        }))
        .unwrap();
        assert!(m.check().is_ok());
        let bad: Result<ModelConfig, _> = serde_json::from_value(json!({
            "name": "m", "provider": "openai", "model": "x", "api_key": "sk-123"
        }));
        assert!(bad.is_err(), "an inline key is refused");
        let p: PromptConfig = serde_json::from_value(json!({ "name": "p", "model": "m" })).unwrap();
        assert!(p.parallel_tool_calls && p.include_chat);
        assert_eq!(p.tool_choice, ToolChoice::Auto);
    }
}

/// Turning D1 rows (JSON objects as D1 returns them) into definitions: JSON-list columns are
/// stored as text, booleans as 0/1, and unset optional columns as NULL.
pub mod rows {
    use serde::de::DeserializeOwned;
    use serde_json::{Map, Value};

    use super::{AgentDef, ModelConfig, PromptConfig};
    use crate::values::Invalid;

    /// Columns holding JSON text.
    const JSON_COLUMNS: &[&str] = &[
        "fallbacks",
        "tools",
        "hooks",
        "side_a",
        "side_b",
        "tool_bindings",
        "mcp_servers",
        "response_format",
        "pinned_tools",
    ];
    /// Columns holding 0/1.
    const BOOL_COLUMNS: &[&str] = &["parallel_tool_calls", "include_chat", "expose_as_tool"];

    fn from_row<T: DeserializeOwned>(row: Value) -> Result<T, Invalid> {
        serde_json::from_value(columns(row)?).map_err(|e| Invalid::new(e.to_string()))
    }

    /// A D1 row as the object its type deserialises from (apart from [`from_row`], so each
    /// row type's instance holds only its deserialisation).
    fn columns(row: Value) -> Result<Value, Invalid> {
        let Value::Object(cols) = row else {
            return Err("a D1 row is not an object".into());
        };
        let mut out = Map::new();
        for (k, v) in cols {
            let v = match (k.as_str(), v) {
                ("updated_at", _) | (_, Value::Null) => continue,
                (k, Value::String(s)) if JSON_COLUMNS.contains(&k) => serde_json::from_str(&s)
                    .map_err(|e| Invalid::new(format!("column {k} holds invalid JSON: {e}")))?,
                (k, Value::Number(n)) if BOOL_COLUMNS.contains(&k) => {
                    Value::Bool(n.as_f64().is_some_and(|f| f != 0.0))
                }
                (k, Value::Number(n))
                    if (k.ends_with("_ms") || k.starts_with("max_")) && !k.ends_with("_usd") =>
                {
                    // D1 hands integers back as floats.
                    n.as_f64()
                        .map_or(Value::Null, |f| Value::from(f.max(0.0) as u64))
                }
                (_, v) => v,
            };
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }

    /// A `models` row.
    pub fn model(row: Value) -> Result<ModelConfig, Invalid> {
        from_row(row)
    }

    /// A `prompts` row.
    pub fn prompt(row: Value) -> Result<PromptConfig, Invalid> {
        from_row(row)
    }

    /// An `agents` row.
    pub fn agent(row: Value) -> Result<AgentDef, Invalid> {
        from_row(row)
    }
}
