//! What a model request is made of, in every wire format's terms: the model it targets, the
//! history, the tools on offer and how they may be called.

use serde::{Deserialize, Serialize};

use crate::values::message::Message;

/// Which wire format a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Any OpenAI-compatible `/chat/completions` server (OpenAI, OpenRouter, Groq, local).
    #[serde(rename = "openai")]
    OpenAi,
    /// The Anthropic Messages API (`/v1/messages`).
    Anthropic,
    /// Cloudflare Workers AI through the `AI` binding.
    WorkersAi,
}

impl Provider {
    /// The name used in D1 and TOML.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::WorkersAi => "workers_ai",
        }
    }
}

/// Whether and how the model must call tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
}

impl ToolChoice {
    /// The name used in D1 and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
            ToolChoice::Required => "required",
        }
    }
}

/// A tool as described to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Registered name (the file stem).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object, shared with the registry's tool (every model
    /// call lists its offered tools: a copy each time was a tree of map nodes to build and
    /// drop per tool per call).
    pub parameters: std::rc::Rc<serde_json::Value>,
    /// JSON Schema of a successful result, when the tool declares one (listed by
    /// `GET /api/tools`; providers have no field for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<serde_json::Value>,
}

/// The model a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// Its wire format.
    pub provider: Provider,
    /// The provider's model id.
    pub model: &'a str,
    /// Where its API lives (`https://api.openai.com/v1`, …).
    pub base_url: &'a str,
    /// Longest answer, in tokens, when limited.
    pub max_output_tokens: Option<u32>,
}

/// The shape a final answer must take: a JSON object schema under a name (a prompt's
/// `response_format`, resolved). OpenAI-format requests ask for it as `response_format`; an
/// Anthropic-format request offers it as a tool whose input is the answer (see
/// [`OutputFormat::ANSWER_TOOL_DESCRIPTION`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutputFormat<'a> {
    /// What the answer is called (`json_schema.name`; the answer tool's name).
    pub name: &'a str,
    /// The JSON Schema of the answer: an object schema in the subset edgent checks
    /// ([`crate::values::json_schema`]).
    pub schema: &'a serde_json::Value,
}

impl OutputFormat<'_> {
    /// What a model reads about the answer tool.
    pub const ANSWER_TOOL_DESCRIPTION: &'static str =
        "Gives your final answer. Call it once you have everything you need, with the whole \
         answer as its input; it ends your turn.";
}

/// Everything a request body is built from.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The model: wire format, id, endpoint and output limit.
    pub target: Target<'a>,
    /// The rendered system text (may be empty).
    pub system: &'a str,
    /// Model-ready history; see [`crate::engine::thread::repair_history`].
    pub history: &'a [Message],
    /// Tools offered to the model.
    pub tools: &'a [ToolSpec],
    /// Whether the model must, may or must not call tools.
    pub tool_choice: ToolChoice,
    /// Whether several tool calls may come in one reply.
    pub parallel_tool_calls: bool,
    /// The shape of the final answer, when the prompt asks for one.
    pub output: Option<OutputFormat<'a>>,
    /// What the format wrote of these messages before, when `history` is the thread's stored
    /// messages as stored (see [`crate::llm::memo`]).
    pub memo: Option<crate::llm::memo::MemoUse<'a>>,
}
