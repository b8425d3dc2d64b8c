//! A prompt definition (`prompts` table, `agents/prompts/*.toml`): its fields, their
//! defaults and rules, and the system text rendered from the thread's context.

use serde::{Deserialize, Serialize};

use super::*;

/// `true`, as a serde default.
pub(super) fn yes() -> bool {
    true
}

/// A prompt row (`prompts` table, `agents/prompts/*.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptConfig {
    /// Row name, referenced by agents and usable as a tool name.
    pub name: String,
    /// System text; `{{key}}` is replaced by the thread context's value for `key`.
    #[serde(default)]
    pub system: String,
    /// Model name.
    pub model: String,
    /// Names of tools, prompts (run as sub-prompts) and agents (run as agents) it may call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Whether the model must, may or must not call tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Several tool calls in one reply run concurrently.
    #[serde(default = "yes")]
    pub parallel_tool_calls: bool,
    /// As a sub-prompt: whether it sees the parent conversation.
    #[serde(default = "yes")]
    pub include_chat: bool,
    /// What it does, when offered to a model as a tool.
    #[serde(default)]
    pub description: String,
    /// Hook names (files in `agents/hooks/`).
    #[serde(default)]
    pub hooks: Vec<String>,
    /// Runtime context per tool (`{"weather_brief": {"account": "acme"}}`): given to the
    /// tool or workflow as `flow.bindings`, never shown to the model.
    #[serde(default)]
    pub tool_bindings: serde_json::Map<String, serde_json::Value>,
    /// MCP servers whose tools are offered beside `tools`, as `<server>__<tool>`.
    #[serde(default)]
    pub mcp_servers: Vec<mcp_servers::McpServerConfig>,
    /// The prompt that summarises the older messages when the history outgrows the model's
    /// `max_history_tokens` (its system text says how; its model writes the summary). Unset:
    /// the oldest messages are left out instead.
    #[serde(default)]
    pub compaction_prompt: Option<String>,
    /// The final answer is JSON of this shape, checked (`None`: free text).
    #[serde(default)]
    pub response_format: Option<response_format::ResponseFormat>,
    /// Offer the model at most this many tools per call, the ones most relevant to the
    /// conversation's latest messages ([`crate::tool::select`]); unset: every tool.
    #[serde(default)]
    pub max_offered_tools: Option<u32>,
    /// Tools offered whenever a selection runs, before the ranked ones (each one of `tools`).
    #[serde(default)]
    pub pinned_tools: Vec<String>,
    /// The embedding model (a `models` row, `openai` or `workers_ai`) that ranks the tools when
    /// a selection runs; unset: the lexical ranking (BM25), which is also what a call falls back
    /// to when the embedding request fails.
    #[serde(default)]
    pub tool_selection_model: Option<String>,
}

impl PromptConfig {
    /// Rules that need no other row.
    pub fn check(&self) -> Result<(), Invalid> {
        check_name("prompt name", &self.name)?;
        check_name("model name", &self.model)?;
        for t in &self.tools {
            check_name("tool name", t)?;
            if t == &self.name {
                return Err(format!("prompt {:?} cannot list itself as a tool", self.name).into());
            }
        }
        for h in &self.hooks {
            check_name("hook name", h)?;
        }
        for (tool, b) in &self.tool_bindings {
            if !self.tools.contains(tool) {
                return Err(format!(
                    "tool_bindings names {tool:?}, which is not in this prompt's tools"
                )
                .into());
            }
            if !b.is_object() {
                return Err(format!("tool_bindings.{tool} must be an object").into());
            }
        }
        if let Some(c) = &self.compaction_prompt {
            check_name("compaction prompt", c)?;
            if c == &self.name {
                return Err(format!("prompt {:?} cannot compact with itself", self.name).into());
            }
        }
        if let Some(format) = &self.response_format {
            format.check(&self.tools, self.tool_choice)?;
        }
        mcp_servers::check_all(&self.mcp_servers, &self.tools)?;
        self.check_selection()
    }

    /// The rules of `max_offered_tools` and `pinned_tools`.
    fn check_selection(&self) -> Result<(), Invalid> {
        if let Some(m) = &self.tool_selection_model {
            check_name("tool selection model", m)?;
        }
        if self.max_offered_tools == Some(0) {
            return Err(
                "max_offered_tools must be at least 1 (leave it out to offer every tool)".into(),
            );
        }
        for (i, pin) in self.pinned_tools.iter().enumerate() {
            if !self.tools.contains(pin) {
                return Err(format!(
                    "pinned_tools names {pin:?}, which is not in this prompt's tools"
                )
                .into());
            }
            if self.pinned_tools[..i].contains(pin) {
                return Err(format!("pinned_tools names {pin:?} twice").into());
            }
        }
        match self.max_offered_tools {
            Some(max) if self.pinned_tools.len() > max as usize => Err(format!(
                "pinned_tools names {} tools but max_offered_tools is {max}: pin at most {max}",
                self.pinned_tools.len()
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The system text with `{{key}}` replaced from `context` (strings as they are, other
    /// values as JSON); unknown keys are left as written so the gap is visible.
    pub fn render_system(&self, context: &serde_json::Map<String, serde_json::Value>) -> String {
        render_template(&self.system, context)
    }
}

/// Replaces `{{ key }}` placeholders from `context`.
pub fn render_template(text: &str, context: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let key = after[..end].trim();
                match context.get(key) {
                    Some(serde_json::Value::String(s)) => out.push_str(s),
                    Some(v) => out.push_str(&v.to_string()),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
