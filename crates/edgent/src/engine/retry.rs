//! When a model call fails: try the same model again, move to the next fallback, or give up.
//!
//! Pure policy; the shell sleeps and calls. Each model in the chain (the prompt's model, then
//! its fallbacks) gets [`RetryPolicy::attempts_per_model`] tries with exponential backoff, or
//! the server's `Retry-After` when it sent one. Request errors (400-class other than 408, 409
//! and 429, malformed replies) fail fast: another try or model would get the same request.

use crate::llm::stream::ProviderError;

/// How persistent to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries of one model before moving to the next.
    pub attempts_per_model: u32,
    /// Wait before the second try of a model; doubled for each further try.
    pub base_delay_ms: u64,
    /// Longest backoff we compute ourselves.
    pub max_delay_ms: u64,
    /// Longest `Retry-After` we wait for; a longer one moves on to the next model at once.
    pub max_retry_after_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_per_model: 2,
            base_delay_ms: 500,
            max_delay_ms: 8_000,
            max_retry_after_ms: 30_000,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Wait `delay_ms`, then try model `model` (an index into the chain), attempt `attempt`.
    Try {
        /// Index into the model chain.
        model: usize,
        /// 1-based attempt number for that model.
        attempt: u32,
        /// Wait first.
        delay_ms: u64,
    },
    /// Stop and report the error.
    GiveUp,
}

impl RetryPolicy {
    /// The step after attempt `attempt` (1-based) of model `model` failed with `error`, in a
    /// chain of `chain_len` models.
    pub fn after_failure(
        &self,
        model: usize,
        attempt: u32,
        chain_len: usize,
        error: &ProviderError,
    ) -> Next {
        let next_model = || {
            if model + 1 < chain_len {
                Next::Try {
                    model: model + 1,
                    attempt: 1,
                    delay_ms: 0,
                }
            } else {
                Next::GiveUp
            }
        };
        match error {
            // Our side cannot call this model (a missing secret): a fallback may work.
            ProviderError::Config(_) => return next_model(),
            e if !e.is_retryable() => return Next::GiveUp,
            _ => {}
        }
        if attempt >= self.attempts_per_model {
            return next_model();
        }
        let delay_ms = match error {
            ProviderError::Http {
                retry_after_ms: Some(ms),
                ..
            } if *ms > self.max_retry_after_ms => return next_model(),
            ProviderError::Http {
                retry_after_ms: Some(ms),
                ..
            } => *ms,
            _ => self
                .base_delay_ms
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(self.max_delay_ms),
        };
        Next::Try {
            model,
            attempt: attempt + 1,
            delay_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, retry_after_ms: Option<u64>) -> ProviderError {
        ProviderError::Http {
            status,
            message: String::new(),
            retry_after_ms,
        }
    }

    #[test]
    fn two_tries_then_each_fallback_then_give_up() {
        let p = RetryPolicy::default();
        let e = http(503, None);
        assert_eq!(
            p.after_failure(0, 1, 3, &e),
            Next::Try {
                model: 0,
                attempt: 2,
                delay_ms: 500
            }
        );
        assert_eq!(
            p.after_failure(0, 2, 3, &e),
            Next::Try {
                model: 1,
                attempt: 1,
                delay_ms: 0
            }
        );
        assert_eq!(p.after_failure(2, 2, 3, &e), Next::GiveUp);
    }

    #[test]
    fn retry_after_is_honoured_or_skipped_when_too_long() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.after_failure(0, 1, 2, &http(429, Some(1200))),
            Next::Try {
                model: 0,
                attempt: 2,
                delay_ms: 1200
            }
        );
        assert_eq!(
            p.after_failure(0, 1, 2, &http(429, Some(120_000))),
            Next::Try {
                model: 1,
                attempt: 1,
                delay_ms: 0
            }
        );
    }

    #[test]
    fn request_errors_fail_fast_and_config_errors_fall_back() {
        let p = RetryPolicy::default();
        assert_eq!(p.after_failure(0, 1, 2, &http(400, None)), Next::GiveUp);
        assert_eq!(p.after_failure(0, 1, 2, &http(401, None)), Next::GiveUp);
        for status in [408, 409, 429, 500, 529] {
            assert!(matches!(
                p.after_failure(0, 1, 2, &http(status, None)),
                Next::Try { model: 0, .. }
            ));
        }
        assert_eq!(
            p.after_failure(0, 1, 2, &ProviderError::Config("no secret".into())),
            Next::Try {
                model: 1,
                attempt: 1,
                delay_ms: 0
            }
        );
        assert!(matches!(
            p.after_failure(0, 1, 1, &ProviderError::Timeout("stall".into())),
            Next::Try { model: 0, .. }
        ));
    }
}
