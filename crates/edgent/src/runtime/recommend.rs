//! `GET /api/tools/recommend`: the tools ranked for a task, with their scores
//! ([`crate::tool::select`]): every registered tool, or one prompt's tools and delegates, then
//! also what that prompt would offer a conversation whose latest message is the task.

use serde_json::{json, Value};

use super::admin::stored;
use super::ConfigDb;
use crate::api::tools::RecommendQuery;
use crate::api::ApiError;
use crate::config::Delegate;
use crate::llm::ToolSpec;
use crate::tool::offer::{candidates, listed_order, select_for};
use crate::tool::select;
use crate::tool::Registry;

/// The answer: `{"task", "tools": [{"name", "score"}, …]}` best first, at most `limit`; with
/// `prompt`, also `"prompt"` and `"offered"` (the names it would offer, in its order). 404 for
/// a prompt that does not exist.
pub async fn recommend(
    db: &dyn ConfigDb,
    registry: &Registry,
    query: &RecommendQuery,
) -> Result<Value, ApiError> {
    // The words a turn would rank by, for a conversation whose last message is the task.
    let as_turn = [crate::values::message::Message::new(
        crate::values::message::Role::User,
        query.task.clone(),
        0,
    )];
    let words = select::query(&as_turn);
    let Some(name) = &query.prompt else {
        let all = registry.all_specs();
        let scores = select::scores(&all, &words);
        let order: Vec<usize> = (0..all.len()).collect();
        let ranked = select::best_first(&scores, &order);
        return Ok(json!({
            "task": query.task,
            "tools": ranking(&all, &scores, &ranked, query.limit),
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
    let scores = select::scores(&all, &words);
    let ranked = select::best_first(&scores, &listed_order(prompt, &all));
    let tools = ranking(&all, &scores, &ranked, query.limit);
    let offered = select_for(all, prompt, &words).selection.offered;
    Ok(json!({
        "task": query.task,
        "prompt": name,
        "tools": tools,
        "offered": offered,
    }))
}

/// The first `limit` of `ranked` as `{"name", "score"}`.
fn ranking(all: &[ToolSpec], scores: &[f64], ranked: &[usize], limit: u32) -> Vec<Value> {
    ranked
        .iter()
        .filter_map(|&i| Some((all.get(i)?, scores.get(i)?)))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|(spec, score)| json!({ "name": spec.name, "score": select::rounded(*score) }))
        .collect()
}
