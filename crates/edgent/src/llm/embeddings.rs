//! The embedding requests tool selection makes (`crate::runtime::selection`), beside the chat
//! formats: the body, where it goes, and how its answer is read, for the two providers that
//! have them. Pure, like the rest of `llm`: the driver sends the body and hands back the JSON.
//!
//! - `openai` (any OpenAI-compatible server): `POST {base_url}/embeddings` with
//!   `{"model", "input": [texts]}`, answered `{"data": [{"embedding": [..], "index": i}, ..]}`.
//! - `workers_ai`: `env.AI.run(model, {"text": [texts]})`, answered `{"shape": [n, d], "data":
//!   [[..], ..]}` (the `@cf/baai/bge-*` models).
//!
//! Anthropic has no embeddings API; the configuration refuses such a model here.

use serde_json::{json, Value};

use super::request::{Provider, Target};
use super::stream::ProviderError;

/// Whether `provider` can embed text.
pub fn supports(provider: Provider) -> bool {
    matches!(provider, Provider::OpenAi | Provider::WorkersAi)
}

/// The request body embedding `texts` with `target`'s model (for `workers_ai`, the input of
/// `env.AI.run`; the model id travels separately).
pub fn request_body(target: &Target<'_>, texts: &[&str]) -> Value {
    match target.provider {
        Provider::WorkersAi => json!({ "text": texts }),
        _ => json!({ "model": target.model, "input": texts }),
    }
}

/// Where the request goes (`None` for `workers_ai`, reached through its binding).
pub fn endpoint(target: &Target<'_>) -> Option<String> {
    match target.provider {
        Provider::WorkersAi => None,
        _ => Some(format!(
            "{}/embeddings",
            target.base_url.trim_end_matches('/')
        )),
    }
}

/// The vectors of an answer, one per text sent (`expected`), in the order sent, all of the
/// same length. Anything else (a missing vector, a number that is not one, vectors of
/// different lengths) is [`ProviderError::Malformed`], saying what was wrong.
pub fn parse_answer(
    provider: Provider,
    answer: &Value,
    expected: usize,
) -> Result<Vec<Vec<f32>>, ProviderError> {
    let data = answer["data"]
        .as_array()
        .ok_or_else(|| malformed("the answer has no \"data\" list".into()))?;
    if data.len() != expected {
        return Err(malformed(format!(
            "{} vectors for {expected} texts",
            data.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (i, item) in data.iter().enumerate() {
        // OpenAI numbers each vector (`index`); Workers AI answers them in order.
        let (at, vector) = match provider {
            Provider::WorkersAi => (i, item),
            _ => {
                let at = item["index"].as_u64().and_then(|n| usize::try_from(n).ok());
                (at.unwrap_or(i), &item["embedding"])
            }
        };
        let slot = out
            .get_mut(at)
            .filter(|s| s.is_none())
            .ok_or_else(|| malformed(format!("vector index {at} is out of range or repeated")))?;
        *slot =
            Some(numbers(vector).ok_or_else(|| {
                malformed(format!("vector {at} is not a non-empty list of numbers"))
            })?);
    }
    let vectors: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    if let Some(first) = vectors.first() {
        if let Some(other) = vectors.iter().find(|v| v.len() != first.len()) {
            return Err(malformed(format!(
                "vectors of {} and {} dimensions in one answer",
                first.len(),
                other.len()
            )));
        }
    }
    Ok(vectors)
}

fn numbers(v: &Value) -> Option<Vec<f32>> {
    let list = v.as_array().filter(|l| !l.is_empty())?;
    list.iter()
        .map(|n| n.as_f64().filter(|f| f.is_finite()).map(|f| f as f32))
        .collect()
}

fn malformed(why: String) -> ProviderError {
    ProviderError::Malformed(format!("embedding answer: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(provider: Provider) -> Target<'static> {
        Target {
            provider,
            model: "m",
            base_url: "http://h/v1/",
            max_output_tokens: None,
        }
    }

    #[test]
    fn each_provider_has_its_body_and_endpoint() {
        let openai = target(Provider::OpenAi);
        assert_eq!(
            request_body(&openai, &["a", "b"]),
            json!({"model": "m", "input": ["a", "b"]})
        );
        assert_eq!(endpoint(&openai).as_deref(), Some("http://h/v1/embeddings"));
        let workers = target(Provider::WorkersAi);
        assert_eq!(request_body(&workers, &["a"]), json!({"text": ["a"]}));
        assert_eq!(endpoint(&workers), None);
        assert!(!supports(Provider::Anthropic));
    }

    #[test]
    fn answers_are_read_in_the_order_sent_and_checked() {
        let openai = json!({"object": "list", "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.5]},
        ]});
        assert_eq!(
            parse_answer(Provider::OpenAi, &openai, 2).unwrap(),
            [vec![1.0, 0.5], vec![0.0, 1.0]]
        );
        let workers = json!({"shape": [2, 2], "data": [[1, 2], [3, 4]]});
        assert_eq!(
            parse_answer(Provider::WorkersAi, &workers, 2).unwrap(),
            [vec![1.0, 2.0], vec![3.0, 4.0]]
        );
        for (answer, n, says) in [
            (json!({}), 1, "no \"data\""),
            (json!({"data": [[1]]}), 2, "1 vectors for 2 texts"),
            (json!({"data": [[1], [1, 2]]}), 2, "1 and 2 dimensions"),
            (json!({"data": [[]]}), 1, "not a non-empty list"),
            (json!({"data": [["x"]]}), 1, "not a non-empty list"),
        ] {
            let e = parse_answer(Provider::WorkersAi, &answer, n).unwrap_err();
            assert!(e.to_string().contains(says), "{answer}: {e}");
        }
        let repeated =
            json!({"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]});
        let e = parse_answer(Provider::OpenAi, &repeated, 2).unwrap_err();
        assert!(e.to_string().contains("repeated"), "{e}");
    }
}
