//! The model chain of the shipped engine (`edgent::engine::model_chain`) in virtual time: which
//! attempt comes next and after what delay, fallbacks, giving up, a stop, and the request-log
//! rows with secrets redacted. The driver only streams the attempts it is told to make; these
//! tests stand in for it with scripted outcomes. What they do not prove: the stream timeouts
//! themselves (first chunk, stall), which the Worker measures (tests/e2e/engine_providers.test.mjs).

use edgent::config::ModelConfig;
use edgent::engine::model_chain::{Attempt, AttemptEnd, ChainStep, ModelChain};
use edgent::llm::stream::ProviderError;
use serde_json::json;

const T0: i64 = 1_795_300_000_000;
const KEY: &str = "sk-live-abcdef123456";

fn model(name: &str) -> ModelConfig {
    serde_json::from_value(json!({
        "name": name,
        "provider": "openai",
        "model": "gpt-x",
        "base_url": "https://api.example/v1",
        "api_key_secret": "OPENAI_API_KEY",
    }))
    .unwrap()
}

fn http(status: u16, retry_after_ms: Option<u64>) -> ProviderError {
    ProviderError::Http {
        status,
        message: format!("upstream said no (key {KEY})"),
        retry_after_ms,
    }
}

/// Ends the current attempt with `outcome` after 100 ms (first chunk at 20 ms on success).
fn end(
    chain: &mut ModelChain,
    models: &[ModelConfig],
    outcome: Result<u16, ProviderError>,
) -> ChainStep {
    let first_chunk_at = outcome.is_ok().then_some(T0 + 20);
    chain.handle_attempt_end(
        models,
        AttemptEnd {
            started: T0,
            finished: T0 + 100,
            first_chunk_at,
            outcome,
            stopped: false,
            secret: Some(KEY),
        },
    )
}

fn attempt(model: usize, number: u32, delay_ms: u64) -> Option<Attempt> {
    Some(Attempt {
        model,
        number,
        delay_ms,
    })
}

#[test]
fn a_reply_on_the_first_attempt_is_done_with_its_log_row() {
    let models = [model("main")];
    let mut chain = ModelChain::new(&models);
    assert_eq!(chain.poll_attempt(), attempt(0, 1, 0));
    let ChainStep::Done { log } = end(&mut chain, &models, Ok(200)) else {
        panic!("a whole reply ends the chain");
    };
    assert_eq!(
        (log.model.as_str(), log.attempt, log.status.as_str()),
        ("main", 1, "ok")
    );
    assert_eq!(
        (log.http_status, log.latency_ms, log.ttft_ms, log.created_at),
        (Some(200), 100, Some(20), T0)
    );
    assert_eq!(chain.poll_attempt(), None);
}

#[test]
fn a_passing_failure_is_tried_again_after_the_backoff_then_the_fallback_takes_over() {
    let models = [model("main"), model("backup")];
    let mut chain = ModelChain::new(&models);
    let ChainStep::Retry { log, error, plan } = end(&mut chain, &models, Err(http(503, None)))
    else {
        panic!("a 503 is retried");
    };
    assert_eq!(plan, "retrying in 500 ms");
    assert_eq!((log.status.as_str(), log.http_status), ("error", Some(503)));
    assert_eq!(chain.poll_attempt(), attempt(0, 2, 500));
    // Secrets never reach the log or the error clients see.
    assert!(!log.error.as_deref().unwrap_or_default().contains(KEY));
    assert!(!error.to_string().contains(KEY));
    assert!(log.error.unwrap_or_default().contains("[redacted]"));

    let ChainStep::Retry { plan, .. } = end(&mut chain, &models, Err(ProviderError::Truncated))
    else {
        panic!("the second failure moves on");
    };
    assert_eq!(plan, "falling back to model \"backup\"");
    assert_eq!(chain.poll_attempt(), attempt(1, 1, 0));
    let ChainStep::Done { log } = end(&mut chain, &models, Ok(200)) else {
        panic!("the fallback answers");
    };
    assert_eq!((log.model.as_str(), log.attempt), ("backup", 1));
}

#[test]
fn retry_after_is_honoured_up_to_30_s_and_a_longer_one_moves_on_at_once() {
    let models = [model("main"), model("backup")];
    let mut chain = ModelChain::new(&models);
    end(&mut chain, &models, Err(http(429, Some(2_000))));
    assert_eq!(chain.poll_attempt(), attempt(0, 2, 2_000));

    let mut chain = ModelChain::new(&models);
    end(&mut chain, &models, Err(http(429, Some(120_000))));
    assert_eq!(chain.poll_attempt(), attempt(1, 1, 0));
}

#[test]
fn a_request_error_gives_up_at_once_and_a_config_error_tries_the_fallback() {
    let models = [model("main"), model("backup")];
    let mut chain = ModelChain::new(&models);
    let ChainStep::GiveUp { log, error } = end(&mut chain, &models, Err(http(400, None))) else {
        panic!("a 400 would fail again");
    };
    assert_eq!(log.http_status, Some(400));
    assert!(matches!(error, ProviderError::Http { status: 400, .. }));
    assert_eq!(chain.poll_attempt(), None);

    let mut chain = ModelChain::new(&models);
    let missing = ProviderError::Config("the secret \"OPENAI_API_KEY\" is not set".into());
    assert!(matches!(
        end(&mut chain, &models, Err(missing)),
        ChainStep::Retry { .. }
    ));
    assert_eq!(
        chain.poll_attempt(),
        attempt(1, 1, 0),
        "no second try of a misconfigured model"
    );
}

#[test]
fn the_last_model_exhausted_gives_up_with_its_error() {
    let models = [model("only")];
    let mut chain = ModelChain::new(&models);
    assert!(matches!(
        end(&mut chain, &models, Err(http(500, None))),
        ChainStep::Retry { .. }
    ));
    let ChainStep::GiveUp { log, error } = end(&mut chain, &models, Err(http(502, None))) else {
        panic!("two tries of the only model");
    };
    assert_eq!((log.attempt, log.http_status), (2, Some(502)));
    assert!(matches!(error, ProviderError::Http { status: 502, .. }));
    assert_eq!(chain.poll_attempt(), None);
}

#[test]
fn a_stopped_thread_walks_no_further() {
    let models = [model("main"), model("backup")];
    let mut chain = ModelChain::new(&models);
    let step = chain.handle_attempt_end(
        &models,
        AttemptEnd {
            started: T0,
            finished: T0 + 5,
            first_chunk_at: None,
            outcome: Err(http(503, None)),
            stopped: true,
            secret: None,
        },
    );
    assert!(matches!(step, ChainStep::GiveUp { .. }));
    assert_eq!(chain.poll_attempt(), None);
}

#[test]
fn a_chain_without_a_model_makes_no_attempt() {
    let chain = ModelChain::new(&[]);
    assert_eq!(chain.poll_attempt(), None);
    assert_eq!(ModelChain::no_model().code(), "model_config");
}
