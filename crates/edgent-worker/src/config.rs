//! Agent configuration from D1 (`agents` → `prompts` → `models`), read when a turn starts so
//! operators can change an agent without redeploying.

use serde_json::Value;
use worker::{D1Database, Env};

use edgent::config::{rows, AgentConfig, AgentDef, Delegate, ModelConfig, PromptConfig};
use edgent::engine::store::Side;

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

/// Everything a turn needs for one side of `agent_id`; `Err` says what is missing.
///
/// One D1 round trip: a batch of four statements whose subqueries follow the references (the
/// side's prompt, the prompts and agents its tools name, their models and those models'
/// fallbacks), so a turn start costs the same however the agent is built.
pub(crate) async fn load_agent(
    env: &Env,
    agent_id: &str,
    side: Side,
) -> worker::Result<Result<AgentConfig, String>> {
    // The column name comes from this match, never from input.
    let column = match side {
        Side::A => "side_a",
        Side::B => "side_b",
    };
    let prompt = format!("SELECT json_extract({column}, '$.prompt') FROM agents WHERE id = ?1");
    let tools =
        format!("SELECT value FROM json_each((SELECT tools FROM prompts WHERE name = ({prompt})))");
    let models = format!("SELECT model FROM prompts WHERE name = ({prompt}) OR name IN ({tools})");
    let db = db(env)?;
    let bind = |sql: String| db.prepare(sql).bind(&[agent_id.into()]);
    let results = db
        .batch(vec![
            bind("SELECT * FROM agents WHERE id = ?1".into())?,
            bind(format!(
                "SELECT * FROM prompts WHERE name = ({prompt}) OR name IN ({tools})"
            ))?,
            bind(format!(
                "SELECT * FROM agents WHERE expose_as_tool = 1 AND id IN ({tools})"
            ))?,
            bind(format!(
                "SELECT * FROM models WHERE name IN ({models})
                 OR name IN (SELECT f.value FROM models m, json_each(m.fallbacks) f
                             WHERE m.name IN ({models}))"
            ))?,
        ])
        .await?;
    let mut sets = Vec::with_capacity(4);
    for r in results {
        sets.push(r.results::<Value>()?);
    }
    let [agents, prompts, sub_agents, models]: [Vec<Value>; 4] = sets.try_into().map_err(|_| {
        worker::Error::RustError("D1 batch returned the wrong number of results".into())
    })?;
    let Some(agent) = agents.into_iter().next() else {
        return Ok(Err(format!("agent {agent_id:?} does not exist in D1")));
    };
    let agent = rows::agent(agent).map_err(bad_row)?;
    let prompt_name = match (side, &agent.side_b) {
        (Side::A, _) => agent.side_a.prompt.clone(),
        (Side::B, Some(b)) => b.prompt.clone(),
        (Side::B, None) => return Ok(Err(format!("agent {agent_id:?} has no side b"))),
    };
    let prompts: Vec<PromptConfig> = prompts
        .into_iter()
        .map(rows::prompt)
        .collect::<Result<_, _>>()
        .map_err(bad_row)?;
    let models: Vec<ModelConfig> = models
        .into_iter()
        .map(rows::model)
        .collect::<Result<_, _>>()
        .map_err(bad_row)?;
    let Some(prompt) = prompts.iter().find(|p| p.name == prompt_name).cloned() else {
        return Ok(Err(format!(
            "prompt {prompt_name:?} (side {} of agent {agent_id:?}) does not exist in D1",
            side.as_str()
        )));
    };
    let chain = |name: &str| -> Vec<ModelConfig> {
        let find = |n: &str| models.iter().find(|m| m.name == n).cloned();
        let Some(primary) = find(name) else {
            return Vec::new();
        };
        let mut chain = vec![primary.clone()];
        // Direct fallbacks only, in order; fallbacks of fallbacks are not walked.
        for f in &primary.fallbacks {
            if let Some(m) = find(f) {
                if !chain.iter().any(|c| c.name == m.name) {
                    chain.push(m);
                }
            }
        }
        chain
    };
    let models_of_prompt = chain(&prompt.model);
    if models_of_prompt.is_empty() {
        return Ok(Err(format!(
            "model {:?} (prompt {prompt_name:?}) does not exist in D1",
            prompt.model
        )));
    }
    let mut delegates = Vec::new();
    for p in prompts.iter().filter(|p| prompt.tools.contains(&p.name)) {
        delegates.push((Delegate::Prompt(p.clone()), chain(&p.model)));
    }
    for a in sub_agents {
        delegates.push((
            Delegate::Agent(rows::agent(a).map_err(bad_row)?),
            Vec::new(),
        ));
    }
    Ok(Ok(AgentConfig {
        agent,
        side,
        prompt,
        models: models_of_prompt,
        delegates,
    }))
}
