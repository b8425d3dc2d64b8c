//! A deterministic embedder for host tests of tool selection by embeddings: each text becomes a
//! bag of its words hashed into a fixed number of dimensions (normalised), so texts sharing
//! words are near; `synonyms` map words onto others ("forecast" onto "weather"), which is what
//! a real embedding model adds over words. It answers in the shape of the model's provider
//! (OpenAI's `data[].embedding` or Workers AI's `data[][]`), keeps every request, and plays
//! scripted faults one request at a time. The same recipe as `tests/support/model-server.mjs`'s
//! `POST /v1/embeddings` (ASCII words of three letters or more, a plural `s` taken off, FNV-1a
//! into the dimensions).

use std::cell::RefCell;
use std::collections::VecDeque;

use serde_json::{json, Value};

use crate::config::{ModelConfig, Provider};
use crate::llm::stream::ProviderError;
use crate::runtime::Embedder;
use crate::tool::BoxFuture;

/// What the next request gets, when scripted.
#[derive(Debug, Clone)]
pub enum EmbedAnswer {
    /// The vectors of the texts (what an unscripted request gets).
    Vectors,
    /// This failure.
    Fail(ProviderError),
    /// Vectors of this many dimensions instead.
    Dimensions(usize),
    /// This JSON.
    Raw(Value),
}

/// See the module docs.
#[derive(Debug)]
pub struct ToyEmbedder {
    /// Dimensions of the vectors.
    pub dims: usize,
    /// `(word, stands for)` pairs.
    pub synonyms: Vec<(String, String)>,
    /// The next requests' answers, in order (then [`EmbedAnswer::Vectors`]).
    pub script: RefCell<VecDeque<EmbedAnswer>>,
    /// Every request: the model's name and the body.
    pub requests: RefCell<Vec<(String, Value)>>,
}

impl Default for ToyEmbedder {
    fn default() -> Self {
        ToyEmbedder {
            dims: 64,
            synonyms: Vec::new(),
            script: RefCell::default(),
            requests: RefCell::default(),
        }
    }
}

impl ToyEmbedder {
    /// An embedder where each `(word, other)` pair means the same.
    pub fn with_synonyms(pairs: &[(&str, &str)]) -> Self {
        ToyEmbedder {
            synonyms: pairs
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
            ..ToyEmbedder::default()
        }
    }

    /// Queues answers for the next requests.
    pub fn script(&self, answers: impl IntoIterator<Item = EmbedAnswer>) {
        self.script.borrow_mut().extend(answers);
    }

    /// The texts each request embedded, in order.
    pub fn texts(&self) -> Vec<Vec<String>> {
        self.requests
            .borrow()
            .iter()
            .map(|(_, body)| {
                let list = body.get("input").or_else(|| body.get("text"));
                list.and_then(Value::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(|t| t.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The vector of `text` in `dims` dimensions.
    pub fn vector(&self, text: &str, dims: usize) -> Vec<f32> {
        let mut v = vec![0.0_f32; dims.max(1)];
        let lower = text.to_ascii_lowercase();
        for word in lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| w.len() > 2)
        {
            let word = word.strip_suffix('s').unwrap_or(word);
            let word = self
                .synonyms
                .iter()
                .find(|(w, _)| w == word)
                .map_or(word, |(_, stands_for)| stands_for.as_str());
            let h = crate::tool::select::fingerprint(word);
            let at = usize::try_from(h % v.len() as u64).unwrap_or(0);
            v[at] += 1.0;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    /// The answer to `body` from `model`'s provider.
    pub fn answer(&self, model: &ModelConfig, body: &Value) -> Result<Value, ProviderError> {
        self.requests
            .borrow_mut()
            .push((model.name.clone(), body.clone()));
        let scripted = self.script.borrow_mut().pop_front();
        let dims = match scripted.unwrap_or(EmbedAnswer::Vectors) {
            EmbedAnswer::Vectors => self.dims,
            EmbedAnswer::Dimensions(d) => d,
            EmbedAnswer::Fail(e) => return Err(e),
            EmbedAnswer::Raw(v) => return Ok(v),
        };
        let texts = self.texts().pop().unwrap_or_default();
        let vectors: Vec<Vec<f32>> = texts.iter().map(|t| self.vector(t, dims)).collect();
        Ok(match model.provider {
            Provider::WorkersAi => json!({ "shape": [vectors.len(), dims], "data": vectors }),
            _ => json!({
                "object": "list",
                "model": model.model,
                "data": vectors.iter().enumerate().map(|(i, v)| json!({
                    "object": "embedding", "index": i, "embedding": v,
                })).collect::<Vec<_>>(),
            }),
        })
    }
}

impl Embedder for ToyEmbedder {
    fn embed(
        &self,
        model: &ModelConfig,
        body: Value,
        _timeout_ms: u32,
    ) -> BoxFuture<'static, Result<Value, ProviderError>> {
        let answer = self.answer(model, &body);
        Box::pin(async move { answer })
    }
}
