//! What a prompt offers the model and what a call may run: registered tools first, then the
//! prompts and agents it may delegate to (each with one `input` parameter). A prompt with
//! `max_offered_tools` offers at most that many per call: its pinned tools, then the ones
//! [`super::select`] ranks best for the latest messages. A call from the model may run
//! anything its prompt lists, offered this time or not; a call the application queued may run
//! any registered tool. Anything else gets an error result naming what is available.

use super::select;
use super::{CallToolResult, Registry, Tool};
use crate::config::mcp_servers::{self, McpServerConfig};
use crate::config::{delegate_parameters, AgentConfig, Delegate, ModelConfig, PromptConfig};
use crate::engine::store::CallOrigin;
use crate::llm::ToolSpec;
use crate::values::message::Message;
use serde_json::{json, Map, Value};

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

/// The tool specs `config`'s prompt offers the model, all of them (no selection).
pub fn offered(registry: &Registry, config: &AgentConfig) -> Vec<ToolSpec> {
    candidates(registry, config.tools(), &|name| {
        config.delegate(name).map(|(d, _)| d)
    })
}

/// The specs of `tools` (a prompt's list): the registered ones first, then those `delegate`
/// finds as prompts or agents; names that are neither are left out.
pub fn candidates<'d>(
    registry: &Registry,
    tools: &[String],
    delegate: &dyn Fn(&str) -> Option<&'d Delegate>,
) -> Vec<ToolSpec> {
    let mut specs = registry.specs(tools.iter().map(String::as_str));
    for name in tools {
        if registry.get(name).is_some() {
            continue;
        }
        let description = match delegate(name) {
            Some(Delegate::Prompt(p)) => non_empty(&p.description, || {
                format!(
                    "Asks the {:?} assistant; give it everything it needs in `input`.",
                    p.name
                )
            }),
            Some(Delegate::Agent(a)) => non_empty(&a.tool_description, || {
                non_empty(&a.description, || format!("Runs the {:?} agent.", a.id))
            }),
            None => continue,
        };
        specs.push(ToolSpec {
            name: name.clone(),
            description,
            parameters: std::rc::Rc::new(delegate_parameters()),
            returns: None,
        });
    }
    specs
}

/// The tools one model call offered, and how they were chosen: what its request-log rows keep.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSelection {
    /// The names offered, in the order the request lists them.
    pub offered: Vec<String>,
    /// The prompt's `max_offered_tools`, when a selection ran (it lists more tools).
    pub max: Option<u32>,
    /// When a selection ran: each candidate's score for the latest messages (pinned ones
    /// included), in the candidates' order.
    pub scores: Vec<(String, f64)>,
    /// When a selection ran: how it ranked.
    pub method: select::Method,
    /// When the prompt's embedding model failed and BM25 ranked instead: why.
    pub fallback: Option<String>,
    /// When a selection ran: the prompt's pinned tools among the candidates (offered first,
    /// whatever their score).
    pub pinned: Vec<String>,
}

impl ToolSelection {
    /// `{"offered": [names], "max": n, "method": "bm25"|"embeddings", "fallback": why,
    /// "pinned": [names], "scores": {name: score}}`, scores to three decimals; `max`, `method`
    /// and `scores` only when a selection ran, `pinned` only when it had pins, `fallback` only
    /// when embeddings failed. Built by hand: the log
    /// stores it as text and the API shows it, and nothing reads it back into this type.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("offered".into(), json!(self.offered));
        if let Some(max) = self.max {
            out.insert("max".into(), json!(max));
            out.insert("method".into(), json!(self.method.as_str()));
        }
        if let Some(why) = &self.fallback {
            out.insert("fallback".into(), json!(why));
        }
        if !self.pinned.is_empty() {
            out.insert("pinned".into(), json!(self.pinned));
        }
        if !self.scores.is_empty() {
            let mut scores = Map::new();
            for (name, score) in &self.scores {
                scores.insert(name.clone(), json!(select::rounded(*score)));
            }
            out.insert("scores".into(), Value::Object(scores));
        }
        Value::Object(out)
    }

    /// The score of the candidate `name`, when a selection ran.
    pub fn score(&self, name: &str) -> Option<f64> {
        self.scores.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
    }
}

/// What one model call offers, and the record of it for the request log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offer {
    /// The specs sent to the model, in [`offered`]'s order.
    pub tools: Vec<ToolSpec>,
    /// Their names and, when a selection ran, the maximum and every candidate's score.
    pub selection: ToolSelection,
}

/// What `config`'s prompt offers a model call over `history` (the messages the engine holds
/// for it), ranked by BM25: every tool (its own, then `mcp_tools`, its MCP servers' as the
/// runtime listed them), or, when there are more than its `max_offered_tools`, its pinned tools
/// and then the best ranked for [`select::query`] of the history. (A turn ranks by its
/// prompt's `tool_selection_model` when it names one: `crate::runtime::selection`.)
pub fn offer(
    registry: &Registry,
    config: &AgentConfig,
    history: &[Message],
    mcp_tools: Vec<ToolSpec>,
) -> Offer {
    let query = select::query(history);
    select_for(
        all_candidates(registry, config, mcp_tools),
        &config.prompt,
        &query,
    )
}

/// Everything `config`'s prompt could offer: its tools and delegates ([`offered`]), then
/// `mcp_tools`.
pub fn all_candidates(
    registry: &Registry,
    config: &AgentConfig,
    mcp_tools: Vec<ToolSpec>,
) -> Vec<ToolSpec> {
    let mut all = offered(registry, config);
    all.extend(mcp_tools);
    all
}

/// `prompt`'s `max_offered_tools` when `all` does not fit in it (a selection runs), else
/// `None` (every candidate is offered).
pub fn selecting(prompt: &PromptConfig, all: &[ToolSpec]) -> Option<u32> {
    prompt.max_offered_tools.filter(|m| all.len() > *m as usize)
}

/// Of `all` (the prompt's [`candidates`]), what `prompt` offers for the `query` words, ranked
/// by BM25 ([`choose_offer`]).
pub fn select_for(all: Vec<ToolSpec>, prompt: &PromptConfig, query: &[String]) -> Offer {
    let ranking = selecting(prompt, &all).map(|_| select::Ranking::bm25(&all, query));
    choose_offer(all, prompt, ranking)
}

/// Of `all`, what `prompt` offers: every one while they fit its `max_offered_tools` (or with
/// no `ranking`), else the pinned ones and then the best of `ranking` (one score per
/// candidate), kept in `all`'s order. Equal scores go by the prompt's order of `tools`.
pub fn choose_offer(
    all: Vec<ToolSpec>,
    prompt: &PromptConfig,
    ranking: Option<select::Ranking>,
) -> Offer {
    let (Some(max), Some(ranking)) = (selecting(prompt, &all), ranking) else {
        let offered = all.iter().map(|s| s.name.clone()).collect();
        return Offer {
            tools: all,
            selection: ToolSelection {
                offered,
                ..ToolSelection::default()
            },
        };
    };
    let ranked = select::best_first(&ranking.scores, &listed_order(prompt, &all));
    let pinned = all
        .iter()
        .filter(|s| prompt.pinned_tools.contains(&s.name))
        .map(|s| s.name.clone())
        .collect();
    let chosen = select::choose(&all, &prompt.pinned_tools, &ranked, max as usize);
    let scores = all
        .iter()
        .map(|s| s.name.clone())
        .zip(ranking.scores)
        .collect();
    let tools: Vec<ToolSpec> = all
        .into_iter()
        .zip(chosen)
        .filter_map(|(spec, keep)| keep.then_some(spec))
        .collect();
    Offer {
        selection: ToolSelection {
            offered: tools.iter().map(|s| s.name.clone()).collect(),
            max: Some(max),
            scores,
            method: ranking.method,
            fallback: ranking.fallback,
            pinned,
        },
        tools,
    }
}

/// Where each of `candidates` is in `prompt`'s `tools` (the tie-break of equal scores).
pub fn listed_order(prompt: &PromptConfig, candidates: &[ToolSpec]) -> Vec<usize> {
    let at = |name: &str| prompt.tools.iter().position(|t| t == name);
    candidates
        .iter()
        .map(|c| at(&c.name).unwrap_or(usize::MAX))
        .collect()
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
