//! What a prompt offers the model and what a call may run: registered tools first, then the
//! prompts and agents it may delegate to (each with one `input` parameter). A call from the
//! model may run only what its prompt offers; a call the application queued may run any
//! registered tool. Anything else gets an error result naming what is available.

use super::{CallToolResult, Registry, Tool};
use crate::config::mcp_servers::{self, McpServerConfig};
use crate::config::{delegate_parameters, AgentConfig, Delegate, ModelConfig};
use crate::engine::store::CallOrigin;
use crate::llm::ToolSpec;

/// What a tool call names.
#[derive(Debug)]
pub enum Callee<'a> {
    /// A registered tool or workflow.
    Tool(&'a Tool),
    /// A prompt (run as a sub-prompt) or an agent, with the prompt's model chain.
    Delegate(&'a Delegate, &'a [ModelConfig]),
    /// A tool of one of the prompt's MCP servers (the server, and the tool's own name there).
    Mcp(&'a McpServerConfig, &'a str),
    /// Nothing the caller may run: this is its result.
    Unavailable(CallToolResult),
}

/// The tool specs `config`'s prompt offers the model.
pub fn offered(registry: &Registry, config: &AgentConfig) -> Vec<ToolSpec> {
    let mut specs = registry.specs(config.tools().iter().map(String::as_str));
    for name in config.tools() {
        if registry.get(name).is_some() {
            continue;
        }
        let description = match config.delegate(name) {
            Some((Delegate::Prompt(p), _)) => non_empty(&p.description, || {
                format!(
                    "Asks the {:?} assistant; give it everything it needs in `input`.",
                    p.name
                )
            }),
            Some((Delegate::Agent(a), _)) => non_empty(&a.tool_description, || {
                non_empty(&a.description, || format!("Runs the {:?} agent.", a.id))
            }),
            None => continue,
        };
        specs.push(ToolSpec {
            name: name.clone(),
            description,
            parameters: delegate_parameters(),
            returns: None,
        });
    }
    specs
}

/// What the call `name` from `origin` may run under `config`.
pub fn callee<'a>(
    registry: &'a Registry,
    config: &'a AgentConfig,
    name: &'a str,
    origin: CallOrigin,
) -> Callee<'a> {
    let allowed = origin == CallOrigin::Queue || config.tools().iter().any(|t| t == name);
    if allowed {
        if let Some(tool) = registry.get(name) {
            return Callee::Tool(tool);
        }
        if let Some((delegate, models)) = config.delegate(name) {
            return Callee::Delegate(delegate, models);
        }
    }
    if origin == CallOrigin::Model {
        if let Some((server, tool)) = mcp_servers::split(&config.prompt.mcp_servers, name) {
            return Callee::Mcp(server, tool);
        }
    }
    let available: Vec<&str> = config
        .tools()
        .iter()
        .map(String::as_str)
        .filter(|n| registry.get(n).is_some() || config.delegate(n).is_some())
        .collect();
    Callee::Unavailable(CallToolResult::error(format!(
        "unknown tool {name:?}; available tools: {}",
        available.join(", ")
    )))
}

fn non_empty(s: &str, otherwise: impl FnOnce() -> String) -> String {
    if s.trim().is_empty() {
        otherwise()
    } else {
        s.to_owned()
    }
}
