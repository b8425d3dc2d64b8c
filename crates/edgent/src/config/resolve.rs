//! Resolving one side of an agent from its D1 rows: the side's prompt, its model chain (the
//! model, then its direct fallbacks), and the prompts and agents it may call as tools.
//!
//! The driver reads the rows in one round trip with the statements [`statements`] gives (the
//! subqueries follow the references, so a turn start costs the same however the agent is
//! built) and hands them to [`resolve`], which decides the rest.

use serde_json::Value;

use super::{rows, AgentConfig, Delegate, ModelConfig, PromptConfig};
use crate::values::limits::MAX_SUB_PROMPT_DEPTH;
use crate::values::{Invalid, Side};

/// Why a side of an agent cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// No agent has this id.
    NoAgent {
        /// The id asked for.
        agent_id: String,
    },
    /// The agent has no side B.
    NoSide {
        /// The agent.
        agent_id: String,
    },
    /// The side's prompt is missing.
    NoPrompt {
        /// The agent.
        agent_id: String,
        /// The side.
        side: Side,
        /// The prompt it names.
        prompt: String,
    },
    /// The prompt's model is missing.
    NoModel {
        /// The prompt.
        prompt: String,
        /// The model it names.
        model: String,
    },
    /// A stored row does not read as a definition (the cause, from the row codec).
    BadRow(Invalid),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::NoAgent { agent_id } => {
                write!(f, "agent {agent_id:?} does not exist in D1")
            }
            ConfigError::NoSide { agent_id } => write!(f, "agent {agent_id:?} has no side b"),
            ConfigError::NoPrompt {
                agent_id,
                side,
                prompt,
            } => write!(
                f,
                "prompt {prompt:?} (side {} of agent {agent_id:?}) does not exist in D1",
                side.as_str()
            ),
            ConfigError::NoModel { prompt, model } => {
                write!(
                    f,
                    "model {model:?} (prompt {prompt:?}) does not exist in D1"
                )
            }
            ConfigError::BadRow(why) => write!(f, "invalid configuration row: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The rows [`resolve`] needs, as read by the statements of [`statements`], in that order.
#[derive(Debug, Default)]
pub struct AgentRows {
    /// The agent (`SELECT * FROM agents WHERE id = ?1`).
    pub agents: Vec<Value>,
    /// The side's prompt and the prompts its tools name.
    pub prompts: Vec<Value>,
    /// The agents its tools name that are exposed as tools.
    pub sub_agents: Vec<Value>,
    /// Those prompts' models (their chains and their embedding models) and the models'
    /// fallbacks.
    pub models: Vec<Value>,
}

/// The four statements (each binding the agent id as `?1`) that read everything a side needs.
/// The column comes from `side`, never from input.
pub fn statements(side: Side) -> [String; 4] {
    let column = match side {
        Side::A => "side_a",
        Side::B => "side_b",
    };
    let prompt = format!("SELECT json_extract({column}, '$.prompt') FROM agents WHERE id = ?1");
    let tools =
        format!("SELECT value FROM json_each((SELECT tools FROM prompts WHERE name = ({prompt})))");
    let compaction = format!("SELECT compaction_prompt FROM prompts WHERE name = ({prompt})");
    // The side's prompt and every prompt reachable through `tools`, to the deepest
    // sub-prompt and one level beyond, so a call past the limit is known as a prompt's
    // (names that are not prompts join nothing and end their branch).
    let reachable = format!(
        "WITH RECURSIVE reach(name, level) AS (
             SELECT ({prompt}), 0
             UNION
             SELECT t.value, r.level + 1 FROM reach r JOIN prompts p ON p.name = r.name,
                    json_each(p.tools) t
             WHERE r.level <= {MAX_SUB_PROMPT_DEPTH}
         ) SELECT name FROM reach"
    );
    // Their models, and the embedding models they rank tools by.
    let models = format!(
        "SELECT model FROM prompts WHERE name IN ({reachable}) OR name = ({compaction})
         UNION SELECT tool_selection_model FROM prompts
               WHERE name IN ({reachable}) AND tool_selection_model IS NOT NULL"
    );
    [
        "SELECT * FROM agents WHERE id = ?1".into(),
        format!("SELECT * FROM prompts WHERE name IN ({reachable}) OR name = ({compaction})"),
        format!("SELECT * FROM agents WHERE expose_as_tool = 1 AND id IN ({tools})"),
        format!(
            "SELECT * FROM models WHERE name IN ({models})
             OR name IN (SELECT f.value FROM models m, json_each(m.fallbacks) f
                         WHERE m.name IN ({models}))"
        ),
    ]
}

/// Everything a turn needs for `side` of `agent_id`, from its rows.
pub fn resolve(agent_id: &str, side: Side, rows: AgentRows) -> Result<AgentConfig, ConfigError> {
    let Some(agent) = rows.agents.into_iter().next() else {
        return Err(ConfigError::NoAgent {
            agent_id: agent_id.to_owned(),
        });
    };
    let agent = rows::agent(agent).map_err(ConfigError::BadRow)?;
    let prompt_name = match (side, &agent.side_b) {
        (Side::A, _) => agent.side_a.prompt.clone(),
        (Side::B, Some(b)) => b.prompt.clone(),
        (Side::B, None) => {
            return Err(ConfigError::NoSide {
                agent_id: agent_id.to_owned(),
            })
        }
    };
    let prompts: Vec<PromptConfig> = rows
        .prompts
        .into_iter()
        .map(rows::prompt)
        .collect::<Result<_, _>>()
        .map_err(ConfigError::BadRow)?;
    let models: Vec<ModelConfig> = rows
        .models
        .into_iter()
        .map(rows::model)
        .collect::<Result<_, _>>()
        .map_err(ConfigError::BadRow)?;
    let Some(prompt) = prompts.iter().find(|p| p.name == prompt_name).cloned() else {
        return Err(ConfigError::NoPrompt {
            agent_id: agent_id.to_owned(),
            side,
            prompt: prompt_name,
        });
    };
    let models_of_prompt = chain(&models, &prompt.model);
    if models_of_prompt.is_empty() {
        return Err(ConfigError::NoModel {
            prompt: prompt_name,
            model: prompt.model.clone(),
        });
    }
    let mut delegates: Vec<(Delegate, Vec<ModelConfig>)> = reachable(&prompts, &prompt)
        .into_iter()
        .map(|p| (Delegate::Prompt(p.clone()), chain(&models, &p.model)))
        .collect();
    for a in rows.sub_agents {
        let agent = rows::agent(a).map_err(ConfigError::BadRow)?;
        delegates.push((Delegate::Agent(agent), Vec::new()));
    }
    let compaction = match &prompt.compaction_prompt {
        None => None,
        Some(name) => {
            let Some(p) = prompts.iter().find(|p| &p.name == name) else {
                return Err(ConfigError::NoPrompt {
                    agent_id: agent_id.to_owned(),
                    side,
                    prompt: name.clone(),
                });
            };
            Some((p.clone(), chain(&models, &p.model)))
        }
    };
    // The embedding models of the prompt and of every prompt it may run as a sub-prompt.
    let mut selection_models: Vec<ModelConfig> = Vec::new();
    let rankers = std::iter::once(&prompt).chain(delegates.iter().filter_map(|(d, _)| match d {
        Delegate::Prompt(p) => Some(p),
        Delegate::Agent(_) => None,
    }));
    for name in rankers.filter_map(|p| p.tool_selection_model.as_deref()) {
        let known = selection_models.iter().any(|m| m.name == name);
        if let Some(m) = models.iter().find(|m| m.name == name).filter(|_| !known) {
            selection_models.push(m.clone());
        }
    }
    Ok(AgentConfig {
        agent,
        side,
        prompt,
        models: models_of_prompt,
        delegates,
        compaction,
        selection_models,
    })
}

/// The prompts `top`'s tools name, then the prompts those name, level by level to
/// [`MAX_SUB_PROMPT_DEPTH`] and one beyond, each once: every prompt a sub-prompt of `top` may
/// run, and those it would call past the limit (refused, by name).
fn reachable<'p>(prompts: &'p [PromptConfig], top: &PromptConfig) -> Vec<&'p PromptConfig> {
    let mut found: Vec<&PromptConfig> = Vec::new();
    let mut level: Vec<&PromptConfig> = vec![top];
    for _ in 0..=MAX_SUB_PROMPT_DEPTH {
        let mut next = Vec::new();
        for caller in level {
            for p in prompts.iter().filter(|p| caller.tools.contains(&p.name)) {
                if !found.iter().any(|f| f.name == p.name) {
                    found.push(p);
                    next.push(p);
                }
            }
        }
        level = next;
    }
    found
}

/// The model `name` and its direct fallbacks, in order, each once; fallbacks of fallbacks
/// are not walked, so a chain is visible in one row and cannot loop. Empty when `name` is
/// missing.
fn chain(models: &[ModelConfig], name: &str) -> Vec<ModelConfig> {
    let find = |n: &str| models.iter().find(|m| m.name == n).cloned();
    let Some(primary) = find(name) else {
        return Vec::new();
    };
    let mut chain = vec![primary.clone()];
    for f in &primary.fallbacks {
        if let Some(m) = find(f) {
            if !chain.iter().any(|c| c.name == m.name) {
                chain.push(m);
            }
        }
    }
    chain
}
