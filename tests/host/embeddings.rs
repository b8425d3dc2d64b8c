//! Tool selection by embeddings (`edgent::runtime::selection`, `edgent::llm::embeddings`), with
//! the host's deterministic embedder (`edgent::testing::ToyEmbedder`: a bag of words, with
//! synonyms standing in for what a real model knows): the ranking follows meaning where BM25
//! finds no word, pins come first, a warm isolate sends only the query, and every failure
//! (an HTTP error, a timeout, an answer of the wrong size or dimensions, a policy refusal, a
//! missing row) falls back to BM25 with the reason. Both providers' wire shapes are checked
//! here: Workers AI cannot be reached from this machine, so this is its only test.
//!
//! What it does not prove: a real embedding model's quality, the Worker's `fetch` and `AI`
//! binding (the OpenAI-compatible path runs end to end in tests/e2e/tool_selection.test.mjs).

use serde_json::json;

use edgent::config::policy::ModelPolicy;
use edgent::config::{ModelConfig, PromptConfig};
use edgent::llm::embeddings;
use edgent::llm::stream::ProviderError;
use edgent::runtime::selection::{self, cached_vectors, forget_vectors, rank};
use edgent::testing::{block_on, EmbedAnswer, ToyEmbedder};
use edgent::tool::offer::{choose_offer, offered};
use edgent::tool::select::Method;
use edgent::values::message::{Message, Role};

fn model(provider: &str) -> ModelConfig {
    serde_json::from_value(json!({
        "name": "embedder", "provider": provider, "model": "bge-small",
        "base_url": "https://embeddings.example/v1",
    }))
    .unwrap()
}

fn prompt(max: u32, pinned: &[&str]) -> PromptConfig {
    serde_json::from_value(json!({
        "name": "support", "model": "default",
        "tools": ["get_current_time", "lookup_customer", "get_weather", "process_order", "issue_refund"],
        "max_offered_tools": max, "pinned_tools": pinned, "tool_selection_model": "embedder",
    }))
    .unwrap()
}

fn candidates(p: &PromptConfig) -> Vec<edgent::llm::ToolSpec> {
    let registry = crate::registry().unwrap();
    let mut config = edgent::testing::agent(&[]);
    config.prompt = p.clone();
    offered(&registry, &config)
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::new(Role::User, text, 0)]
}

/// "forecast" means "weather" and "clock" means "time" to this embedder; no tool says either.
fn embedder() -> ToyEmbedder {
    ToyEmbedder::with_synonyms(&[("forecast", "weather"), ("clock", "time")])
}

fn ranked(
    e: &ToyEmbedder,
    m: Option<&ModelConfig>,
    p: &PromptConfig,
    task: &str,
) -> edgent::tool::select::Ranking {
    let all = candidates(p);
    block_on(rank(e, &ModelPolicy::default(), p, m, &all, &user(task)))
}

fn offered_names(p: &PromptConfig, ranking: edgent::tool::select::Ranking) -> Vec<String> {
    choose_offer(candidates(p), p, Some(ranking))
        .selection
        .offered
}

#[test]
fn embeddings_rank_by_meaning_where_bm25_finds_no_word_and_pins_come_first() {
    forget_vectors();
    let (e, m, p) = (embedder(), model("openai"), prompt(2, &["lookup_customer"]));
    let task = "is a forecast due for Porto tomorrow";
    let by_embeddings = ranked(&e, Some(&m), &p, task);
    assert_eq!(by_embeddings.method, Method::Embeddings);
    assert_eq!(by_embeddings.fallback, None);
    let best = by_embeddings
        .scores
        .iter()
        .enumerate()
        .fold(
            (0, f64::MIN),
            |b, (i, s)| if *s > b.1 { (i, *s) } else { b },
        );
    assert_eq!(best.0, 2, "get_weather: {:?}", by_embeddings.scores);
    assert_eq!(
        offered_names(&p, by_embeddings),
        ["lookup_customer", "get_weather"],
        "the pin, then the best ranked, in the prompt's order"
    );
    // BM25 sees no shared word: every score is 0 and the prompt's order decides.
    let mut lexical = p.clone();
    lexical.tool_selection_model = None;
    let by_words = ranked(&e, None, &lexical, task);
    assert_eq!(by_words.method, Method::Bm25);
    assert!(
        by_words.scores.iter().all(|s| *s == 0.0),
        "{:?}",
        by_words.scores
    );
    assert_eq!(
        offered_names(&lexical, by_words),
        ["get_current_time", "lookup_customer"]
    );
    assert_eq!(e.requests.borrow().len(), 1, "BM25 asks no embedder");
}

#[test]
fn a_warm_isolate_sends_only_the_query_and_a_changed_tool_once() {
    forget_vectors();
    let (e, m, p) = (embedder(), model("openai"), prompt(2, &[]));
    ranked(&e, Some(&m), &p, "what's the weather");
    let texts = e.texts();
    assert_eq!(texts[0].len(), 6, "the query, then the five tools");
    assert_eq!(texts[0][0], "what's the weather\nwhat's the weather");
    assert!(texts[0][3].starts_with("get_weather\n"), "{:?}", texts[0]);
    assert_eq!(cached_vectors(), 5);

    let again = ranked(&e, Some(&m), &p, "and the time?");
    assert_eq!(again.method, Method::Embeddings);
    assert_eq!(
        e.texts()[1],
        ["and the time?\nand the time?"],
        "the query only"
    );

    // A tool whose text changed is embedded again, alone; the others stay cached.
    let all: Vec<_> = candidates(&p)
        .into_iter()
        .map(|mut s| {
            if s.name == "issue_refund" {
                s.description.push_str(" Money back.");
            }
            s
        })
        .collect();
    block_on(rank(
        &e,
        &ModelPolicy::default(),
        &p,
        Some(&m),
        &all,
        &user("refund"),
    ));
    let third = &e.texts()[2];
    assert_eq!(third.len(), 2, "{third:?}");
    assert!(third[1].starts_with("issue_refund\n"));

    // Another model (here: another model id under the same name) embeds everything again.
    let mut other = m.clone();
    other.model = "bge-large".into();
    ranked(&e, Some(&other), &p, "refund");
    assert_eq!(e.texts()[3].len(), 6);
    assert_eq!(e.requests.borrow()[3].1["model"], "bge-large");
}

#[test]
fn many_uncached_tools_are_sent_in_requests_of_at_most_the_limit() {
    forget_vectors();
    let e = embedder();
    let specs: Vec<edgent::llm::ToolSpec> = (0..150)
        .map(|i| edgent::llm::ToolSpec {
            name: format!("tool_{i}"),
            description: format!("Tool number {i}."),
            parameters: json!({}).into(),
            returns: None,
        })
        .collect();
    let scores = block_on(selection::embedding_scores(
        &e,
        &ModelPolicy::default(),
        &model("openai"),
        &specs,
        "number 7",
    ))
    .unwrap();
    assert_eq!(scores.len(), 150);
    let sizes: Vec<usize> = e.texts().iter().map(Vec::len).collect();
    assert_eq!(
        sizes,
        [
            selection::MAX_TEXTS_PER_REQUEST,
            151 - selection::MAX_TEXTS_PER_REQUEST
        ]
    );
}

#[test]
fn any_embedding_failure_ranks_that_call_by_bm25_and_says_why() {
    let (m, p) = (model("openai"), prompt(2, &[]));
    let fails = |answer: EmbedAnswer, says: &str| {
        forget_vectors();
        let e = embedder();
        e.script([answer]);
        let r = ranked(&e, Some(&m), &p, "what's the weather in Lisbon");
        assert_eq!(r.method, Method::Bm25, "{says}");
        let why = r.fallback.clone().unwrap();
        assert!(why.starts_with("embedding model \"embedder\": "), "{why}");
        assert!(why.contains(says), "{why}");
        // The same ranking BM25 gives without an embedding model.
        assert_eq!(offered_names(&p, r), ["get_current_time", "get_weather"]);
        assert_eq!(cached_vectors(), 0, "nothing is kept from a failed answer");
    };
    fails(
        EmbedAnswer::Fail(ProviderError::Http {
            status: 500,
            message: "embedder down".into(),
            retry_after_ms: None,
        }),
        "model server answered 500: embedder down",
    );
    fails(
        EmbedAnswer::Fail(ProviderError::Timeout(
            "no embeddings within 3000 ms".into(),
        )),
        "no embeddings within 3000 ms",
    );
    fails(
        EmbedAnswer::Raw(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        "1 vectors for 6 texts",
    );
    fails(EmbedAnswer::Raw(json!({"error": "?"})), "no \"data\" list");

    // Vectors that change size under the same model: the cached ones are dropped.
    forget_vectors();
    let e = embedder();
    ranked(&e, Some(&m), &p, "weather");
    assert_eq!(cached_vectors(), 5);
    e.script([EmbedAnswer::Dimensions(32)]);
    let r = ranked(&e, Some(&m), &p, "weather");
    assert_eq!(r.method, Method::Bm25);
    assert!(r
        .fallback
        .unwrap()
        .contains("the query has 32 dimensions, the cached tool vectors 64"));
    assert_eq!(cached_vectors(), 0);
    assert_eq!(
        ranked(&e, Some(&m), &p, "weather").method,
        Method::Embeddings
    );
}

#[test]
fn a_refused_or_missing_model_sends_nothing() {
    forget_vectors();
    let p = prompt(2, &[]);
    let e = embedder();
    let mut keyed = model("openai");
    keyed.api_key_secret = Some("EMBEDDINGS_KEY".into());
    let r = ranked(&e, Some(&keyed), &p, "weather");
    let why = r.fallback.unwrap();
    assert!(
        why.contains(
            "\"api_key_secret\" names \"EMBEDDINGS_KEY\", which the operator has not allowed"
        ),
        "{why}"
    );
    let r = ranked(&e, None, &p, "weather");
    assert_eq!(
        r.fallback.as_deref(),
        Some("embedding model \"embedder\": model \"embedder\" is not a models row")
    );
    let mut anthropic = model("anthropic");
    anthropic.base_url = "https://api.anthropic.com/v1".into();
    let r = ranked(&e, Some(&anthropic), &p, "weather");
    assert!(r
        .fallback
        .unwrap()
        .ends_with("provider \"anthropic\" has no embeddings"));
    // A greeting with no words still has text; an empty history has none.
    let all = candidates(&p);
    let r = block_on(rank(
        &e,
        &ModelPolicy::default(),
        &p,
        Some(&model("openai")),
        &all,
        &[],
    ));
    assert!(r
        .fallback
        .unwrap()
        .ends_with("the latest messages have no text to embed"));
    assert!(e.requests.borrow().is_empty());
}

#[test]
fn workers_ai_is_asked_with_text_and_answers_data_lists() {
    forget_vectors();
    let (e, m, p) = (embedder(), model("workers_ai"), prompt(2, &[]));
    let r = ranked(&e, Some(&m), &p, "clock please");
    assert_eq!(r.method, Method::Embeddings, "{:?}", r.fallback);
    let (name, body) = e.requests.borrow()[0].clone();
    assert_eq!(name, "embedder");
    assert!(
        body.get("model").is_none(),
        "the model id goes to AI.run: {body}"
    );
    assert_eq!(body["text"].as_array().unwrap().len(), 6);
    assert_eq!(
        offered_names(&p, r),
        ["get_current_time", "lookup_customer"]
    );
    // The answer as `@cf/baai/bge-small-en-v1.5` gives it (shape, then the rows), and as the
    // OpenAI format numbers it.
    let answer =
        json!({"shape": [2, 3], "data": [[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], "pooling": "mean"});
    let vectors =
        embeddings::parse_answer(edgent::config::Provider::WorkersAi, &answer, 2).unwrap();
    assert_eq!(vectors[1], [0.3, 0.2, 0.1]);
    assert_eq!(
        embeddings::request_body(&m.target(), &["a"]),
        json!({"text": ["a"]})
    );
}
