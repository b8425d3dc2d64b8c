//! Agent configuration from D1 (`agents` → `prompts` → `models`), read fresh for every turn so
//! operators can change an agent without redeploying.

use serde::Deserialize;
use worker::{D1Database, Env};

use crate::core::config::{AgentConfig, ModelConfig, DEFAULT_MAX_STEPS};
use crate::core::store::Side;

fn db(env: &Env) -> worker::Result<D1Database> {
    env.d1("DB")
}

/// Whether an agent with this id exists.
pub(crate) async fn agent_exists(env: &Env, agent_id: &str) -> worker::Result<bool> {
    let row: Option<serde_json::Value> = db(env)?
        .prepare("SELECT 1 AS found FROM agents WHERE id = ?1")
        .bind(&[agent_id.into()])?
        .first(None)
        .await?;
    Ok(row.is_some())
}

/// Whether `agent_id` configures a prompt for `side` (side A always does).
pub(crate) async fn agent_has_side(env: &Env, agent_id: &str, side: Side) -> worker::Result<bool> {
    if side == Side::A {
        return Ok(true);
    }
    let row: Option<serde_json::Value> = db(env)?
        .prepare(
            "SELECT 1 AS found FROM agents
             WHERE id = ?1 AND json_extract(side_b, '$.prompt') IS NOT NULL",
        )
        .bind(&[agent_id.into()])?
        .first(None)
        .await?;
    Ok(row.is_some())
}

#[derive(Deserialize)]
struct ConfigRow {
    agent_id: String,
    prompt: String,
    system: String,
    tools: String,
    max_steps: Option<f64>,
    model_name: String,
    provider: String,
    model: String,
    base_url: String,
    api_key_secret: Option<String>,
}

/// Everything a turn needs for one side of `agent_id`, or `None` if the agent, that side's
/// prompt or its model is missing.
pub(crate) async fn load_agent(
    env: &Env,
    agent_id: &str,
    side: Side,
) -> worker::Result<Option<AgentConfig>> {
    // The column name comes from this match, never from input.
    let column = match side {
        Side::A => "side_a",
        Side::B => "side_b",
    };
    let row: Option<ConfigRow> = db(env)?
        .prepare(format!(
            "SELECT a.id AS agent_id, p.name AS prompt, p.system AS system, p.tools AS tools,
                    json_extract(a.{column}, '$.max_steps') AS max_steps,
                    m.name AS model_name, m.provider AS provider, m.model AS model,
                    m.base_url AS base_url, m.api_key_secret AS api_key_secret
             FROM agents a
             JOIN prompts p ON p.name = json_extract(a.{column}, '$.prompt')
             JOIN models m ON m.name = p.model
             WHERE a.id = ?1"
        ))
        .bind(&[agent_id.into()])?
        .first(None)
        .await?;
    Ok(row.map(|r| AgentConfig {
        agent_id: r.agent_id,
        prompt: r.prompt,
        system: r.system,
        tools: serde_json::from_str(&r.tools).unwrap_or_default(),
        max_steps: r
            .max_steps
            .filter(|n| *n >= 1.0)
            .map_or(DEFAULT_MAX_STEPS, |n| n as u32),
        model: ModelConfig {
            name: r.model_name,
            provider: r.provider,
            model: r.model,
            base_url: r.base_url,
            api_key_secret: r.api_key_secret.filter(|s| !s.is_empty()),
        },
    }))
}
