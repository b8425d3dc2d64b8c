//! `GET /api/tools/recommend`: the tools ranked for a task, with their scores
//! ([`crate::tool::select`]): every registered tool (by BM25), or one prompt's tools and
//! delegates ranked as its turns rank them (by its `tool_selection_model`'s embeddings when it
//! names one, [`super::selection`]), then also what that prompt would offer a conversation
//! whose latest message is the task.

use serde_json::{json, Value};

use super::admin::stored;
use super::selection::{rank, Embedder};
use super::ConfigDb;
use crate::api::tools::RecommendQuery;
use crate::api::ApiError;
use crate::config::policy::ModelPolicy;
use crate::config::Delegate;
use crate::llm::ToolSpec;
use crate::tool::offer::{candidates, choose_offer, listed_order};
use crate::tool::select::{self, Ranking};
use crate::tool::Registry;

/// The answer: `{"task", "method", "tools": [{"name", "score"}, …]}` best first, at most
/// `limit`; with `prompt`, also `"prompt"`, `"offered"` (the names it would offer, in its
/// order) and `"fallback"` when its embedding model failed (BM25 ranked instead). 404 for a
/// prompt that does not exist. `embedder` and `policy` serve a prompt's embedding model.
pub async fn recommend(
    db: &dyn ConfigDb,
    registry: &Registry,
    query: &RecommendQuery,
    embedder: &dyn Embedder,
    policy: &ModelPolicy,
) -> Result<Value, ApiError> {
    // The conversation a turn would rank for: its last message is the task.
    let as_turn = [crate::values::message::Message::new(
        crate::values::message::Role::User,
        query.task.clone(),
        0,
    )];
    let Some(name) = &query.prompt else {
        let all = registry.all_specs();
        let ranking = Ranking::bm25(&all, &select::query(&as_turn));
        let order: Vec<usize> = (0..all.len()).collect();
        let ranked = select::best_first(&ranking.scores, &order);
        return Ok(json!({
            "task": query.task,
            "method": ranking.method.as_str(),
            "tools": ranking_json(&all, &ranking.scores, &ranked, query.limit),
        }));
    };
    // The configuration API's own read: this route is an operator's, not a turn's.
    let set = stored(db).await?;
    let Some(prompt) = set.prompt(name) else {
        return Err(ApiError::not_found(format!(
            "prompt {name:?} does not exist"
        )));
    };
    // Looked up as a turn resolves them: a prompt first, then an agent exposed as a tool.
    let delegates: Vec<Delegate> = prompt
        .tools
        .iter()
        .filter_map(|t| {
            let agent = || set.agent(t).filter(|a| a.expose_as_tool).cloned();
            set.prompt(t)
                .cloned()
                .map(Delegate::Prompt)
                .or_else(|| agent().map(Delegate::Agent))
        })
        .collect();
    let all = candidates(registry, &prompt.tools, &|n| {
        delegates.iter().find(|d| d.name() == n)
    });
    let model = prompt
        .tool_selection_model
        .as_deref()
        .and_then(|m| set.model(m));
    // Boxed: inlined, the ranking (embeddings and all) became part of the router's entry
    // function, which also polls every request body chunk; that function grew and workerd's
    // memory with it while a large upload streamed in (bad_input.test.mjs).
    let ranking = Box::pin(rank(embedder, policy, prompt, model, &all, &as_turn)).await;
    let ranked = select::best_first(&ranking.scores, &listed_order(prompt, &all));
    let tools = ranking_json(&all, &ranking.scores, &ranked, query.limit);
    let mut answer = json!({
        "task": query.task,
        "prompt": name,
        "method": ranking.method.as_str(),
        "tools": tools,
    });
    if let Some(why) = &ranking.fallback {
        answer["fallback"] = json!(why);
    }
    answer["offered"] = json!(choose_offer(all, prompt, Some(ranking)).selection.offered);
    Ok(answer)
}

/// The first `limit` of `ranked` as `{"name", "score"}`.
fn ranking_json(all: &[ToolSpec], scores: &[f64], ranked: &[usize], limit: u32) -> Vec<Value> {
    ranked
        .iter()
        .filter_map(|&i| Some((all.get(i)?, scores.get(i)?)))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|(spec, score)| json!({ "name": spec.name, "score": select::rounded(*score) }))
        .collect()
}
