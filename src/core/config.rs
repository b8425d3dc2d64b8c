//! Agent configuration as read from D1: which model, which prompt, which tools.

use serde::{Deserialize, Serialize};

/// A model row (`models` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Row name, referenced by prompts.
    pub name: String,
    /// Wire format: `openai` (any OpenAI-compatible server), later `anthropic`, `workers_ai`.
    pub provider: String,
    /// The provider's model id, e.g. `gpt-4o-mini`.
    pub model: String,
    /// Base URL, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Name of the Worker secret holding the API key (never the key itself).
    pub api_key_secret: Option<String>,
}

impl ModelConfig {
    /// The chat-completions endpoint for this model.
    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// What a thread needs to run one side: the prompt, its model and its tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    /// Agent id (`agents.id`).
    pub agent_id: String,
    /// Prompt name (`prompts.name`).
    pub prompt: String,
    /// System text sent first.
    pub system: String,
    /// Tool names the model may call.
    pub tools: Vec<String>,
    /// Model calls allowed in one turn before the thread gives up.
    pub max_steps: u32,
    /// The model.
    pub model: ModelConfig,
}

/// A tool as described to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Registered name (the file stem).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
    /// JSON Schema of a successful result, when the tool declares one (listed by
    /// `GET /api/tools`; providers have no field for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<serde_json::Value>,
}

/// Default per-turn model-call budget when an agent does not set one.
pub const DEFAULT_MAX_STEPS: u32 = 10;
