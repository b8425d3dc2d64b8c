//! Tool selection by embeddings, when a prompt names a `tool_selection_model`: the query (the
//! same messages BM25 reads, [`select::query_text`]) and each candidate's text
//! ([`select::document_text`]) are embedded by that model, and candidates are ranked by cosine
//! similarity. Pins and the choice are [`crate::tool::offer`]'s, as for BM25.
//!
//! The tools' vectors are kept in the isolate, keyed by the model (name, provider, model id,
//! base URL) and a hash of the tool's text, so a warm isolate sends one request per model call
//! (the query alone) and each tool's text once. Any failure (the policy refusing the model, a
//! timeout, a 4xx/5xx, an answer of the wrong shape or dimensions) ranks that call by BM25
//! instead and says why in the logged `tool_selection.fallback`: the turn goes on.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use crate::config::policy::ModelPolicy;
use crate::config::{AgentConfig, ModelConfig, PromptConfig};
use crate::engine::thread::Thread;
use crate::llm::embeddings;
use crate::llm::stream::ProviderError;
use crate::llm::ToolSpec;
use crate::tool::offer::{all_candidates, choose_offer, selecting, Offer};
use crate::tool::select::{self, Method, Ranking};
use crate::tool::BoxFuture;
use crate::values::message::Message;

use super::ThreadRuntime;

/// How long one embedding request may take when the model row sets no `total_timeout_ms`: a
/// slow embedder must not hold a turn (it is then ranked by BM25).
pub const EMBEDDING_TIMEOUT_MS: u32 = 3_000;
/// Texts per request at most (Workers AI's `bge` models take 100): a cold isolate with more
/// uncached tools sends several requests.
pub const MAX_TEXTS_PER_REQUEST: usize = 96;
/// Tool vectors kept in the isolate at most; a full cache starts over (a few hundred tools
/// of 384–1536 dimensions is a few MB).
const MAX_CACHED_VECTORS: usize = 1_024;

/// Sends embedding requests: the Worker's `fetch` and `AI` binding, a scripted embedder in
/// host tests.
pub trait Embedder {
    /// Sends one request to `model` (`body` from [`embeddings::request_body`]) and answers the
    /// provider's JSON, or fails within `timeout_ms` ([`ProviderError::Timeout`]). The
    /// implementation reads the key the model names and puts it in the request's header only,
    /// never in an error.
    fn embed(
        &self,
        model: &ModelConfig,
        body: Value,
        timeout_ms: u32,
    ) -> BoxFuture<'static, Result<Value, ProviderError>>;
}

/// One cached tool vector: the model's key, the hash of the tool's text, the vector.
type Cached = (u64, u64, Rc<[f32]>);

thread_local! {
    /// The tool vectors this isolate holds. A list, scanned: a few hundred entries at most,
    /// and no map code instantiated for it in the Worker.
    static VECTORS: RefCell<Vec<Cached>> = RefCell::default();
}

/// How many tool vectors this isolate holds (for tests and the docs' measurements).
pub fn cached_vectors() -> usize {
    VECTORS.with(|c| c.borrow().len())
}

/// Forgets every cached tool vector.
pub fn forget_vectors() {
    VECTORS.with(|c| c.borrow_mut().clear());
}

/// What the cache keys a model's vectors by: a change of model id or endpoint under the same
/// name is another model.
fn model_key(model: &ModelConfig) -> u64 {
    let text = format!(
        "{}\n{}\n{}\n{}",
        model.name,
        model.provider.as_str(),
        model.model,
        model.base_url
    );
    select::fingerprint(&text)
}

/// How `prompt` ranks `all` for `history` when a selection runs: by embeddings with `model`
/// (its `tool_selection_model` row, `None` when it names none or the row is missing), else by
/// BM25; by BM25 with the reason in [`Ranking::fallback`] when embedding fails.
pub async fn rank(
    embedder: &dyn Embedder,
    policy: &ModelPolicy,
    prompt: &PromptConfig,
    model: Option<&ModelConfig>,
    all: &[ToolSpec],
    history: &[Message],
) -> Ranking {
    let Some(name) = &prompt.tool_selection_model else {
        return Ranking::bm25(all, &select::query(history));
    };
    let scores = match model {
        None => Err(format!("model {name:?} is not a models row")),
        Some(model) => {
            embedding_scores(embedder, policy, model, all, &select::query_text(history)).await
        }
    };
    match scores {
        Ok(scores) => Ranking {
            method: Method::Embeddings,
            scores,
            fallback: None,
        },
        Err(why) => Ranking {
            fallback: Some(format!("embedding model {name:?}: {why}")),
            ..Ranking::bm25(all, &select::query(history))
        },
    }
}

/// Each of `all`'s cosine similarity to `query` under `model`: one request for the query and
/// the tools whose vectors the isolate does not hold yet (split when they are many).
pub async fn embedding_scores(
    embedder: &dyn Embedder,
    policy: &ModelPolicy,
    model: &ModelConfig,
    all: &[ToolSpec],
    query: &str,
) -> Result<Vec<f64>, String> {
    // At call time, as for a chat model: a row written without the API, or a policy tightened
    // since, sends nothing.
    policy.check(model).map_err(|why| why.to_string())?;
    if !embeddings::supports(model.provider) {
        return Err(format!(
            "provider {:?} has no embeddings",
            model.provider.as_str()
        ));
    }
    if query.trim().is_empty() {
        return Err("the latest messages have no text to embed".into());
    }
    let key = model_key(model);
    let docs: Vec<String> = all.iter().map(select::document_text).collect();
    let hashes: Vec<u64> = docs.iter().map(|d| select::fingerprint(d)).collect();
    let mut vectors: Vec<Option<Rc<[f32]>>> = VECTORS.with(|c| {
        let c = c.borrow();
        hashes
            .iter()
            .map(|h| {
                c.iter()
                    .find(|(k, t, _)| *k == key && t == h)
                    .map(|(_, _, v)| v.clone())
            })
            .collect()
    });
    let missing: Vec<usize> = (0..all.len()).filter(|&i| vectors[i].is_none()).collect();
    let mut texts: Vec<&str> = vec![query];
    texts.extend(
        missing
            .iter()
            .filter_map(|&i| docs.get(i))
            .map(String::as_str),
    );
    let timeout = model.total_timeout_ms.unwrap_or(EMBEDDING_TIMEOUT_MS);
    let mut answered: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(MAX_TEXTS_PER_REQUEST) {
        let body = embeddings::request_body(&model.target(), chunk);
        let answer = embedder
            .embed(model, body, timeout)
            .await
            .map_err(|e| e.to_string())?;
        answered.extend(
            embeddings::parse_answer(model.provider, &answer, chunk.len())
                .map_err(|e| e.to_string())?,
        );
    }
    let mut answered = answered.into_iter();
    let query_vector = answered
        .next()
        .ok_or_else(|| "no vector for the query".to_owned())?;
    let dims = query_vector.len();
    for (i, vector) in missing.iter().zip(answered) {
        if vector.len() != dims {
            return Err(format!("vectors of {dims} and {} dimensions", vector.len()));
        }
        if let Some(slot) = vectors.get_mut(*i) {
            *slot = Some(vector.into());
        }
    }
    if let Some(old) = vectors.iter().flatten().find(|v| v.len() != dims) {
        // The model behind this name changed its vectors: the kept ones are of no use.
        let stale = old.len();
        VECTORS.with(|c| c.borrow_mut().retain(|(k, _, _)| *k != key));
        return Err(format!(
            "the query has {dims} dimensions, the cached tool vectors {stale} (dropped)"
        ));
    }
    VECTORS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() + missing.len() > MAX_CACHED_VECTORS {
            c.clear();
        }
        // Never past the bound, even when one call brings more new tools than it holds.
        for &i in missing.iter().take(MAX_CACHED_VECTORS) {
            if let (Some(h), Some(Some(v))) = (hashes.get(i), vectors.get(i)) {
                c.push((key, *h, v.clone()));
            }
        }
    });
    Ok(vectors
        .iter()
        .map(|v| {
            v.as_deref()
                .map_or(0.0, |v| select::cosine(&query_vector, v))
        })
        .collect())
}

impl ThreadRuntime {
    /// What `config`'s prompt offers a model call over `history` (the messages it sends):
    /// every candidate (its tools and delegates, then `mcp_tools`) while they fit its
    /// `max_offered_tools`, else its pins and the best ranked, by embeddings when it names a
    /// `tool_selection_model` (frames are flushed first: the request is awaited), else BM25.
    pub(super) async fn offer(
        &self,
        thread: Option<&mut Thread<'_>>,
        config: &AgentConfig,
        history: &[Message],
        mcp_tools: Vec<ToolSpec>,
    ) -> Offer {
        let all = all_candidates(self.platform.registry(), config, mcp_tools);
        let prompt = &config.prompt;
        if selecting(prompt, &all).is_none() {
            return choose_offer(all, prompt, None);
        }
        let model = config.selection_model(prompt).cloned();
        if prompt.tool_selection_model.is_some() {
            if let Some(thread) = thread {
                // Frames never wait behind an await.
                self.flush(thread);
            }
        }
        let policy = ModelPolicy::from_vars(|k| self.platform.var(k));
        let embedder = PlatformEmbedder(&*self.platform);
        let ranking = rank(&embedder, &policy, prompt, model.as_ref(), &all, history).await;
        choose_offer(all, prompt, Some(ranking))
    }
}

/// The platform as an [`Embedder`] (a `&dyn Platform` is not coerced to its supertrait's
/// object before Rust 1.86; the workspace supports 1.85).
struct PlatformEmbedder<'p>(&'p dyn super::Platform);

impl Embedder for PlatformEmbedder<'_> {
    fn embed(
        &self,
        model: &ModelConfig,
        body: Value,
        timeout_ms: u32,
    ) -> BoxFuture<'static, Result<Value, ProviderError>> {
        self.0.embed(model, body, timeout_ms)
    }
}
