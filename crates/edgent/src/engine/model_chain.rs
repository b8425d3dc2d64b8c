//! One model call through its chain (the prompt's model, then its fallbacks) as a small state
//! machine: the driver asks which attempt to make ([`ModelChain::poll_attempt`]), performs it
//! (waiting the delay, streaming the reply), and hands the end of the attempt back
//! ([`ModelChain::handle_attempt_end`]). The chain decides what follows under the
//! [`RetryPolicy`] and writes the attempt's request-log row, with secrets already redacted.
//!
//! The same chain serves top-level turns and sub-prompts; only what the driver does with the
//! rows and retries (frames to clients or not) differs.

use crate::config::ModelConfig;
use crate::engine::request_log::{redact, ModelRequestLog};
use crate::engine::retry::{Next, RetryPolicy};
use crate::llm::stream::ProviderError;

/// The attempt to make now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// Index of the model in the chain.
    pub model: usize,
    /// 1-based try of that model in this call.
    pub number: u32,
    /// Wait this long before sending it (a retry's backoff); 0 for the first attempt.
    pub delay_ms: u64,
}

/// How an attempt ended, as the driver saw it.
#[derive(Debug)]
pub struct AttemptEnd<'a> {
    /// When it was sent (ms since the epoch).
    pub started: i64,
    /// When it ended.
    pub finished: i64,
    /// When the first chunk arrived, if one did.
    pub first_chunk_at: Option<i64>,
    /// The HTTP status of a reply streamed to its end, or why the attempt failed.
    pub outcome: Result<u16, ProviderError>,
    /// Whether the thread was stopped meanwhile (no further attempt).
    pub stopped: bool,
    /// The value of the model's key, so it is redacted from error texts (providers echo keys).
    pub secret: Option<&'a str>,
}

/// What follows an attempt.
#[derive(Debug)]
pub enum ChainStep {
    /// The reply is complete. Log `log` (after adding the usage the reply reported).
    Done {
        /// The attempt's request-log row.
        log: ModelRequestLog,
    },
    /// Another attempt follows ([`ModelChain::poll_attempt`] says which and after what
    /// delay): forget the partial reply, log `log`, tell clients `plan`.
    Retry {
        /// The failed attempt's row.
        log: ModelRequestLog,
        /// Why it failed (redacted).
        error: ProviderError,
        /// `retrying in N ms` or `falling back to model "x"`.
        plan: String,
    },
    /// The chain gave up: log `log`, the call fails with `error`.
    GiveUp {
        /// The last attempt's row.
        log: ModelRequestLog,
        /// Why (redacted).
        error: ProviderError,
    },
}

/// The state of one model call's chain.
#[derive(Debug, Clone)]
pub struct ModelChain {
    policy: RetryPolicy,
    next: Option<Attempt>,
    chain_len: usize,
}

impl ModelChain {
    /// A chain over `models` (the prompt's model, then its fallbacks), under the default
    /// retry policy.
    pub fn new(models: &[ModelConfig]) -> Self {
        Self::with_policy(models, RetryPolicy::default())
    }

    /// A chain under `policy`.
    pub fn with_policy(models: &[ModelConfig], policy: RetryPolicy) -> Self {
        ModelChain {
            policy,
            next: (!models.is_empty()).then_some(Attempt {
                model: 0,
                number: 1,
                delay_ms: 0,
            }),
            chain_len: models.len(),
        }
    }

    /// The attempt to make now; `None` once the chain is done (or has no model: then the
    /// call fails with [`ModelChain::no_model`]).
    pub fn poll_attempt(&self) -> Option<Attempt> {
        self.next
    }

    /// The error of a chain without any model.
    pub fn no_model() -> ProviderError {
        ProviderError::Config("the prompt has no model".into())
    }

    /// The end of the attempt [`poll_attempt`](Self::poll_attempt) gave, made with
    /// `models[attempt.model]`.
    pub fn handle_attempt_end(&mut self, models: &[ModelConfig], end: AttemptEnd<'_>) -> ChainStep {
        let attempt = self.next.take().unwrap_or(Attempt {
            model: 0,
            number: 1,
            delay_ms: 0,
        });
        let (name, provider) = models.get(attempt.model).map_or_else(
            || (String::new(), String::new()),
            |m| (m.name.clone(), m.provider.as_str().to_owned()),
        );
        let mut log = ModelRequestLog {
            seq: 0,
            message_id: None,
            model: name,
            provider,
            attempt: attempt.number,
            status: "ok".into(),
            http_status: None,
            latency_ms: end.finished - end.started,
            ttft_ms: end.first_chunk_at.map(|t| t - end.started),
            input_tokens: 0,
            output_tokens: 0,
            cost: 0.0,
            error: None,
            depth: 0,
            created_at: end.started,
            tool_selection: None,
        };
        let error = match end.outcome {
            Ok(status) => {
                log.http_status = Some(status);
                return ChainStep::Done { log };
            }
            Err(e) => e.map_text(|t| redact(t, end.secret)),
        };
        log.status = "error".into();
        log.error = Some(error.to_string());
        if let ProviderError::Http { status, .. } = &error {
            log.http_status = Some(*status);
        }
        let next = if end.stopped {
            Next::GiveUp
        } else {
            self.policy
                .after_failure(attempt.model, attempt.number, self.chain_len, &error)
        };
        match next {
            Next::GiveUp => ChainStep::GiveUp { log, error },
            Next::Try {
                model: index,
                attempt: number,
                delay_ms,
            } => {
                let target = models.get(index).map_or("", |m| m.name.as_str());
                let plan = if target == log.model {
                    format!("retrying in {delay_ms} ms")
                } else {
                    format!("falling back to model {target:?}")
                };
                self.next = Some(Attempt {
                    model: index,
                    number,
                    delay_ms,
                });
                ChainStep::Retry { log, error, plan }
            }
        }
    }
}
