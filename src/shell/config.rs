//! Agent configuration from D1 (`agents` → `prompts` → `models`), read when a turn starts so
//! operators can change an agent without redeploying.

use serde_json::Value;
use worker::{D1Database, Env};

use crate::core::config::{rows, AgentConfig, AgentDef, Delegate, ModelConfig, PromptConfig};
use crate::core::store::Side;

fn db(env: &Env) -> worker::Result<D1Database> {
    env.d1("DB")
}

/// Whether an agent with this id exists.
pub(crate) async fn agent_exists(env: &Env, agent_id: &str) -> worker::Result<bool> {
    Ok(agent_def(env, agent_id).await?.is_some())
}

/// Whether `agent_id` configures a prompt for `side` (side A always does).
pub(crate) async fn agent_has_side(env: &Env, agent_id: &str, side: Side) -> worker::Result<bool> {
    Ok(agent_def(env, agent_id)
        .await?
        .is_some_and(|a| side == Side::A || a.side_b.is_some()))
}

/// One agent row.
pub(crate) async fn agent_def(env: &Env, agent_id: &str) -> worker::Result<Option<AgentDef>> {
    let row: Option<Value> = db(env)?
        .prepare("SELECT * FROM agents WHERE id = ?1")
        .bind(&[agent_id.into()])?
        .first(None)
        .await?;
    row.map(rows::agent).transpose().map_err(bad_row)
}

fn bad_row(why: String) -> worker::Error {
    worker::Error::RustError(format!("invalid configuration row: {why}"))
}

/// Rows of `table` whose `key` is one of `names` (a JSON array bound as one parameter).
async fn rows_named(
    env: &Env,
    table: &str,
    key: &str,
    names: &[String],
) -> worker::Result<Vec<Value>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let list = serde_json::to_string(names).map_err(|e| worker::Error::RustError(e.to_string()))?;
    // Table and key names come from our own code, never from input.
    let result = db(env)?
        .prepare(format!(
            "SELECT * FROM {table} WHERE {key} IN (SELECT value FROM json_each(?1))"
        ))
        .bind(&[list.into()])?
        .all()
        .await?;
    result.results()
}

/// The models named, each followed by its fallbacks, in order, without repeats.
async fn model_chains(
    env: &Env,
    wanted: &[String],
) -> worker::Result<std::collections::HashMap<String, Vec<ModelConfig>>> {
    let mut known: Vec<ModelConfig> = Vec::new();
    let mut missing: Vec<String> = wanted.to_vec();
    // Two rounds: the models, then their fallbacks (fallbacks of fallbacks are not walked).
    for _ in 0..2 {
        missing.retain(|n| !known.iter().any(|m| &m.name == n));
        missing.dedup();
        for row in rows_named(env, "models", "name", &missing).await? {
            known.push(rows::model(row).map_err(bad_row)?);
        }
        missing = known.iter().flat_map(|m| m.fallbacks.clone()).collect();
    }
    let find = |n: &str| known.iter().find(|m| m.name == n).cloned();
    Ok(wanted
        .iter()
        .filter_map(|name| {
            let primary = find(name)?;
            let mut chain = vec![primary.clone()];
            for f in &primary.fallbacks {
                if let Some(m) = find(f) {
                    if !chain.iter().any(|c| c.name == m.name) {
                        chain.push(m);
                    }
                }
            }
            Some((name.clone(), chain))
        })
        .collect())
}

/// Everything a turn needs for one side of `agent_id`; `Err` says what is missing.
pub(crate) async fn load_agent(
    env: &Env,
    agent_id: &str,
    side: Side,
) -> worker::Result<Result<AgentConfig, String>> {
    let Some(agent) = agent_def(env, agent_id).await? else {
        return Ok(Err(format!("agent {agent_id:?} does not exist in D1")));
    };
    let side_config = match (side, &agent.side_b) {
        (Side::A, _) => &agent.side_a,
        (Side::B, Some(b)) => b,
        (Side::B, None) => return Ok(Err(format!("agent {agent_id:?} has no side b"))),
    };
    let prompt_name = side_config.prompt.clone();
    let Some(prompt) = rows_named(env, "prompts", "name", std::slice::from_ref(&prompt_name))
        .await?
        .into_iter()
        .next()
    else {
        return Ok(Err(format!(
            "prompt {prompt_name:?} (side {} of agent {agent_id:?}) does not exist in D1",
            side.as_str()
        )));
    };
    let prompt = rows::prompt(prompt).map_err(bad_row)?;
    let sub_prompts: Vec<PromptConfig> = rows_named(env, "prompts", "name", &prompt.tools)
        .await?
        .into_iter()
        .map(rows::prompt)
        .collect::<Result<_, _>>()
        .map_err(bad_row)?;
    let sub_agents: Vec<AgentDef> = rows_named(env, "agents", "id", &prompt.tools)
        .await?
        .into_iter()
        .map(rows::agent)
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad_row)?
        .into_iter()
        .filter(|a| a.expose_as_tool)
        .collect();
    let mut wanted = vec![prompt.model.clone()];
    wanted.extend(sub_prompts.iter().map(|p| p.model.clone()));
    let chains = model_chains(env, &wanted).await?;
    let Some(models) = chains.get(&prompt.model).cloned() else {
        return Ok(Err(format!(
            "model {:?} (prompt {prompt_name:?}) does not exist in D1",
            prompt.model
        )));
    };
    let mut delegates = Vec::new();
    for p in sub_prompts {
        let chain = chains.get(&p.model).cloned().unwrap_or_default();
        delegates.push((Delegate::Prompt(p), chain));
    }
    for a in sub_agents {
        delegates.push((Delegate::Agent(a), Vec::new()));
    }
    Ok(Ok(AgentConfig {
        agent,
        side,
        prompt,
        models,
        delegates,
    }))
}
