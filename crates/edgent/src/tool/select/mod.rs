//! Tool selection: ranks the tools a prompt could offer by how well they match the
//! conversation's latest messages, so that a prompt listing more tools than its
//! `max_offered_tools` offers the model only the most relevant ones ([`super::offer`] applies
//! it; `GET /api/tools/recommend` shows it).
//!
//! The ranking is Okapi BM25 over one short document per candidate: its name split into words
//! (counted twice, since a name is the densest description a tool has), its description, and
//! its argument docs (the JSON Schema's property names and descriptions, one level of nesting
//! deep). Pure and deterministic: the same candidates and query give the same scores, and
//! equal scores keep the order the caller gives. Why lexical by default:
//! docs/decisions/2026-11-24-tool-selection.md. A prompt with a `tool_selection_model` ranks
//! by embeddings instead ([`query_text`], [`document_text`] and [`cosine`] here; the requests
//! in `crate::runtime::selection`), with the same pins and the same choice.

use serde_json::Value;

use crate::llm::ToolSpec;
use crate::values::message::{Message, Role};

/// BM25's term-frequency saturation: a word's third mention adds little.
mod words;
use words::{each_word, hash};
pub use words::{fingerprint, words};

const K1: f64 = 1.2;
/// BM25's length normalisation: a long description does not win by length alone.
const B: f64 = 0.75;

/// Words too common to tell one tool from another.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he",
    "her", "here", "him", "his", "how", "if", "in", "into", "is", "it", "its", "just", "let", "me",
    "my", "no", "not", "now", "of", "on", "or", "our", "please", "she", "should", "so", "some",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will",
    "with", "would", "you", "your",
];

/// The latest messages the query reads (the last user message is read as well when it is
/// older).
pub const QUERY_MESSAGES: usize = 4;
/// Words read from one message: a long tool result must not drown the question.
pub const QUERY_WORDS_PER_MESSAGE: usize = 100;

/// The query for a model call over `history` (the model-ready messages the engine already
/// holds): the text of the last user message, then of the latest [`QUERY_MESSAGES`] messages
/// with the names of the tools they called. The last user message therefore counts twice
/// when it is among the latest: what the person asked weighs more than what followed.
pub fn query(history: &[Message]) -> Vec<String> {
    let last_user = history.iter().rev().find(|m| m.role == Role::User);
    let latest = history
        .iter()
        .skip(history.len().saturating_sub(QUERY_MESSAGES));
    let mut words = Vec::new();
    for message in last_user.into_iter().chain(latest) {
        let mut read = 0;
        let mut keep = |word: &str| words.push(word.to_owned());
        read += each_word(&message.content, QUERY_WORDS_PER_MESSAGE, &mut keep);
        for call in &message.tool_calls {
            let room = QUERY_WORDS_PER_MESSAGE.saturating_sub(read);
            read += each_word(&call.name, room, &mut keep);
        }
    }
    words
}

/// [`query`] as text, for an embedding model: the same messages (the last user message, then
/// the latest [`QUERY_MESSAGES`]), each cut to its first [`QUERY_WORDS_PER_MESSAGE`]
/// whitespace-separated words, with the names of the tools it called; one line each.
pub fn query_text(history: &[Message]) -> String {
    let last_user = history.iter().rev().find(|m| m.role == Role::User);
    let latest = history
        .iter()
        .skip(history.len().saturating_sub(QUERY_MESSAGES));
    let mut out = String::new();
    for message in last_user.into_iter().chain(latest) {
        let mut line: Vec<&str> = message
            .content
            .split_whitespace()
            .take(QUERY_WORDS_PER_MESSAGE)
            .collect();
        line.extend(message.tool_calls.iter().map(|c| c.name.as_str()));
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line.join(" "));
    }
    out
}

/// How a selection ranked its candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// [`scores`]: BM25 over the words of the latest messages.
    #[default]
    Bm25,
    /// Cosine similarity of the prompt's `tool_selection_model`'s vectors
    /// (`crate::runtime::selection`).
    Embeddings,
}

impl Method {
    /// The name logged and answered (`bm25`, `embeddings`).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Bm25 => "bm25",
            Method::Embeddings => "embeddings",
        }
    }
}

/// One ranking of a call's candidates: a score each, in the candidates' order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranking {
    /// How the scores were made.
    pub method: Method,
    /// Each candidate's score (BM25's from 0; a cosine from -1 to 1).
    pub scores: Vec<f64>,
    /// Why the prompt's embedding model did not rank this call (BM25 did instead).
    pub fallback: Option<String>,
}

impl Ranking {
    /// The BM25 ranking of `candidates` for the `query` words.
    pub fn bm25(candidates: &[ToolSpec], query: &[String]) -> Self {
        Ranking {
            method: Method::Bm25,
            scores: scores(candidates, query),
            fallback: None,
        }
    }
}

/// The words a candidate is found by, hashed.
fn document(spec: &ToolSpec) -> Vec<u64> {
    let mut doc = Vec::new();
    let mut keep = |w: &str| doc.push(hash(w));
    // The name twice: it is the densest description a tool has.
    each_word(&spec.name, usize::MAX, &mut keep);
    each_word(&spec.name, usize::MAX, &mut keep);
    each_word(&spec.description, usize::MAX, &mut keep);
    let mut docs = String::new();
    argument_docs(&spec.parameters, 2, &mut docs);
    each_word(&docs, usize::MAX, &mut keep);
    doc
}

/// The text a candidate is found by, for an embedding model: what [`document`] reads (its
/// name, description and argument docs), one part a line.
pub fn document_text(spec: &ToolSpec) -> String {
    let mut text = format!("{}\n{}\n", spec.name, spec.description);
    argument_docs(&spec.parameters, 2, &mut text);
    text.truncate(text.trim_end().len());
    text
}

/// The cosine similarity of two vectors of the same length (0 when either is all zeros or
/// their lengths differ), from -1 to 1.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut aa, mut bb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    dot / (aa.sqrt() * bb.sqrt())
}

/// The property names and descriptions of `schema`, `levels` of properties deep; an array's
/// items and a choice's variants describe the level they are on.
fn argument_docs(schema: &Value, levels: u32, out: &mut String) {
    if let Some(Value::String(description)) = schema.get("description") {
        out.push_str(description);
        out.push('\n');
    }
    if levels == 0 {
        return;
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            out.push_str(name);
            out.push('\n');
            argument_docs(property, levels - 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        argument_docs(items, levels, out);
    }
    for choice in ["oneOf", "anyOf"] {
        if let Some(Value::Array(variants)) = schema.get(choice) {
            for variant in variants {
                argument_docs(variant, levels, out);
            }
        }
    }
}

/// The BM25 score of each candidate for the query `words` (from [`query`] or [`words`]), in
/// the candidates' order; 0 for a candidate sharing no word with the query.
pub fn scores(candidates: &[ToolSpec], query: &[String]) -> Vec<f64> {
    let docs: Vec<Vec<u64>> = candidates.iter().map(document).collect();
    let total = docs.len() as f64;
    let average_len = docs.iter().map(Vec::len).sum::<usize>() as f64 / total.max(1.0);
    let terms: Vec<u64> = query.iter().map(|w| hash(w)).collect();
    let mut out = vec![0.0; docs.len()];
    // Counted by scanning, not sorting: documents are a few dozen words, the query a few
    // hundred at most, and the Worker carries no sort of its own for this.
    for (i, &term) in terms.iter().enumerate() {
        if terms[..i].contains(&term) {
            continue;
        }
        let occurrences = |words: &[u64]| words.iter().filter(|w| **w == term).count();
        let frequencies: Vec<usize> = docs.iter().map(|d| occurrences(d)).collect();
        let holding = frequencies.iter().filter(|f| **f > 0).count() as f64;
        if holding == 0.0 {
            continue;
        }
        let idf = (1.0 + (total - holding + 0.5) / (holding + 0.5)).ln();
        // A word the query repeats weighs more, saturating like a document's.
        let repeats = occurrences(&terms[i..]) as f64;
        let weight = idf * repeats * (K1 + 1.0) / (repeats + K1);
        for ((score, tf), doc) in out.iter_mut().zip(frequencies).zip(&docs) {
            if tf == 0 {
                continue;
            }
            let tf = tf as f64;
            let length = 1.0 - B + B * doc.len() as f64 / average_len.max(1.0);
            *score += weight * tf * (K1 + 1.0) / (tf + K1 * length);
        }
    }
    out
}

/// The indexes of `scores`, best first; equal scores in the order of `tie_break` (each
/// candidate's position in the prompt's `tools`, say), then of the index.
pub fn best_first(scores: &[f64], tie_break: &[usize]) -> Vec<usize> {
    let key = |i: usize| {
        let score = scores.get(i).copied().unwrap_or(0.0);
        (score, tie_break.get(i).copied().unwrap_or(usize::MAX))
    };
    // Insertion into the ranked prefix: a few dozen candidates, and no sort instantiated.
    let mut order: Vec<usize> = Vec::with_capacity(scores.len());
    for i in 0..scores.len() {
        let (score, tie) = key(i);
        let at = order.partition_point(|&j| {
            let (s, t) = key(j);
            s > score || (s == score && t <= tie)
        });
        order.insert(at, i);
    }
    order
}

/// Which of `candidates` to offer, one flag each: those named in `pinned` first (while there
/// is room), then the best of `ranked` (from [`best_first`]) until `max` are chosen.
pub fn choose(
    candidates: &[ToolSpec],
    pinned: &[String],
    ranked: &[usize],
    max: usize,
) -> Vec<bool> {
    let mut chosen = vec![false; candidates.len()];
    let mut room = max;
    for (flag, candidate) in chosen.iter_mut().zip(candidates) {
        if room > 0 && pinned.contains(&candidate.name) {
            *flag = true;
            room -= 1;
        }
    }
    for &i in ranked {
        if room == 0 {
            break;
        }
        if let Some(flag) = chosen.get_mut(i).filter(|f| !**f) {
            *flag = true;
            room -= 1;
        }
    }
    chosen
}

/// A score as logged and answered: three decimals are plenty to compare, and short.
pub fn rounded(score: f64) -> f64 {
    (score * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
            returns: None,
        }
    }

    fn tools() -> Vec<ToolSpec> {
        let city = json!({"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Lisbon\"."}}});
        vec![
            spec(
                "get_current_time",
                "Returns the current date and time in UTC.",
                json!({}),
            ),
            spec("get_weather", "Gets the current weather for a city.", city),
            spec(
                "issue_refund",
                "Refunds a customer's order.",
                json!({"type": "object",
                "properties": {"customer_id": {"type": "string"}, "amount_cents": {"type": "integer"}}}),
            ),
            spec(
                "lookup_customer",
                "Looks up a customer by id or email.",
                json!({"type": "object",
                "properties": {"email": {"type": "string", "description": "The customer's email address."}}}),
            ),
        ]
    }

    fn ranked_names(task: &str) -> Vec<String> {
        let tools = tools();
        let scores = scores(&tools, &words(task));
        best_first(&scores, &[0, 1, 2, 3])
            .into_iter()
            .map(|i| tools[i].name.clone())
            .collect()
    }

    #[test]
    fn words_are_lowercase_without_stop_words_and_plurals() {
        assert_eq!(
            words("What's the Weather in Lisbon? getWeather, 3 refunds, replies; process status"),
            ["weather", "lisbon", "get", "weather", "refund", "reply", "process", "status"]
        );
        assert_eq!(words("Ação rápida"), ["ação", "rápida"]);
        // Capitals of the scripts folded by hand, and punctuation outside ASCII as a break.
        assert_eq!(
            words("ÉCOLE “Lisbon”—café… «ŁÓDŹ» ΚΑΙΡΟΣ Погода Ёж 東京、大阪 👍ok"),
            [
                "école",
                "lisbon",
                "café",
                "łódź",
                "καιροσ",
                "погода",
                "ёж",
                "東京",
                "大阪",
                "ok"
            ]
        );
        assert!(words("a I it is of").is_empty());
        assert_eq!(words("HTTPRequest ABC"), ["httprequest", "abc"]);
    }

    #[test]
    fn the_tool_a_task_is_about_ranks_first() {
        assert_eq!(
            ranked_names("what's the weather in Lisbon")[0],
            "get_weather"
        );
        assert_eq!(ranked_names("what time is it")[0], "get_current_time");
        assert_eq!(
            ranked_names("refund order 1234 for ada@example.com")[0],
            "issue_refund"
        );
        assert_eq!(
            ranked_names("find the customer with this email")[0],
            "lookup_customer"
        );
        // An argument's description counts: "Lisbon" is only in get_weather's.
        assert_eq!(ranked_names("Lisbon")[0], "get_weather");
    }

    #[test]
    fn a_query_sharing_no_word_scores_zero_and_keeps_the_given_order() {
        let tools = tools();
        let scores = scores(&tools, &words("hello there"));
        assert!(scores.iter().all(|s| *s == 0.0), "{scores:?}");
        assert_eq!(best_first(&scores, &[0, 1, 2, 3]), [0, 1, 2, 3]);
        assert_eq!(
            best_first(&scores, &[3, 2, 1, 0]),
            [3, 2, 1, 0],
            "ties follow tie_break"
        );
        assert!(super::scores(&[], &words("weather")).is_empty());
    }

    #[test]
    fn rarer_words_and_repeated_words_weigh_more() {
        let tools = tools();
        // "current" is in two tools, "weather" in one.
        let s = scores(&tools, &words("current weather"));
        assert!(s[1] > s[0], "{s:?}");
        let once = scores(&tools, &words("weather"))[1];
        let twice = scores(&tools, &words("weather weather"))[1];
        assert!(twice > once && twice < 2.0 * once, "{once} {twice}");
    }

    #[test]
    fn nested_argument_docs_count_one_level_deep() {
        let deep = json!({"type": "object", "properties": {"items": {"type": "array", "items": {
            "type": "object", "properties": {"sku": {"description": "Product SKU."}}}}}});
        let deeper = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {
            "b": {"type": "object", "properties": {"hidden": {"description": "Zebra."}}}}}}});
        let tools = [
            spec("order", "Orders.", deep),
            spec("other", "Other.", deeper),
        ];
        assert!(scores(&tools, &words("product sku"))[0] > 0.0);
        // "b" is two levels deep: its name counts, its own properties do not.
        assert_eq!(scores(&tools, &words("zebra hidden"))[1], 0.0);
    }

    #[test]
    fn pins_come_first_then_the_best_ranked_until_the_maximum() {
        let tools = tools();
        let scores = scores(&tools, &words("the weather, please"));
        let ranked = best_first(&scores, &[0, 1, 2, 3]);
        assert_eq!(ranked, [1, 0, 2, 3], "get_weather, then the rest in order");
        let pinned = vec!["lookup_customer".to_owned()];
        assert_eq!(
            choose(&tools, &pinned, &ranked, 2),
            [false, true, false, true]
        );
        assert_eq!(choose(&tools, &[], &ranked, 2), [true, true, false, false]);
        assert_eq!(
            choose(&tools, &pinned, &ranked, 1),
            [false, false, false, true]
        );
        assert_eq!(choose(&tools, &[], &ranked, 9), [true; 4]);
    }

    #[test]
    fn the_query_is_the_last_user_message_and_the_latest_messages() {
        use crate::values::message::ToolCall;
        let mut history: Vec<Message> = ["weather please", "sure", "and refunds?", "one moment"]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                Message::new(role, *text, 0)
            })
            .collect();
        history[3].tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "issue_refund".into(),
            arguments: "{}".into(),
        });
        assert_eq!(
            query(&history),
            ["refund", "weather", "sure", "refund", "one", "moment", "issue", "refund"]
        );
        // Older than the latest four: only the last user message is read.
        let mut long = history.clone();
        long.extend((0..4).map(|_| Message::new(Role::Tool, "42", 0)));
        assert_eq!(query(&long), ["refund", "42", "42", "42", "42"]);
        let huge = Message::new(Role::User, "word ".repeat(10_000), 0);
        assert_eq!(query(&[huge]).len(), 2 * QUERY_WORDS_PER_MESSAGE);
        assert!(query(&[]).is_empty());
    }

    #[test]
    fn the_embedding_texts_are_the_same_messages_and_documents() {
        use crate::values::message::ToolCall;
        let mut history = vec![
            Message::new(Role::User, "weather   please", 0),
            Message::new(Role::Assistant, "", 0),
        ];
        history[1].tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "get_weather".into(),
            arguments: "{}".into(),
        });
        assert_eq!(
            query_text(&history),
            "weather please\nweather please\nget_weather"
        );
        let huge = Message::new(Role::User, "word ".repeat(10_000), 0);
        assert_eq!(
            query_text(&[huge]).split_whitespace().count(),
            2 * QUERY_WORDS_PER_MESSAGE
        );
        assert_eq!(
            document_text(&tools()[1]),
            "get_weather\nGets the current weather for a city.\ncity\nCity name, e.g. \"Lisbon\"."
        );
        assert_eq!(
            document_text(&tools()[0]),
            "get_current_time\nReturns the current date and time in UTC."
        );
    }

    #[test]
    fn cosine_is_the_angle_between_vectors() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-9);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn scores_are_rounded_to_three_decimals() {
        assert_eq!(rounded(1.234_56), 1.235);
        assert_eq!(rounded(0.0), 0.0);
    }
}
