//! How the thread runs a tool: retries, timeout, approval, rate limit, whole-run deadline and
//! result caching. Set on the `Tool` builder; the defaults suit a step tool doing I/O.

use std::time::Duration;

/// The default time one attempt may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Retries of a failed attempt: exponential backoff with jitter, capped; a `retry_after` from
/// the tool wins over the computed delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The delay before the second attempt; it doubles for each further one.
    pub initial_backoff: Duration,
    /// The largest delay between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Three attempts, 1 s then 2 s apart (each with jitter), at most 60 s apart.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// `max_attempts` attempts with the default backoff.
    pub fn attempts(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            ..Self::default()
        }
    }

    /// Never retry: the first failure is the result.
    pub fn none() -> Self {
        Self::attempts(1)
    }

    /// Sets the first delay (doubled for each further attempt).
    pub fn backoff(mut self, initial: Duration) -> Self {
        self.initial_backoff = initial;
        self
    }

    /// Caps the delay between attempts.
    pub fn max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max;
        self
    }

    /// The delay after failed attempt `attempt` (1-based): `initial * 2^(attempt-1)`, capped,
    /// then "equal jitter" (half fixed, half random from `jitter` in 0..1) so retries from many
    /// threads spread out but never come sooner than half the nominal delay.
    pub fn delay_ms(&self, attempt: u32, jitter: f64) -> i64 {
        let initial = self.initial_backoff.as_millis() as f64;
        let cap = self.max_backoff.as_millis() as f64;
        let nominal = (initial * 2f64.powi(attempt.saturating_sub(1).min(30) as i32)).min(cap);
        let jitter = jitter.clamp(0.0, 1.0);
        (nominal / 2.0 + nominal / 2.0 * jitter).round() as i64
    }
}

/// What a call over its rate limit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenLimited {
    /// Waits (status `rate_limited`) until the window has room, then runs.
    Wait,
    /// Fails at once with an error result saying when to try again.
    Fail,
}

/// Where a rate limit is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitScope {
    /// Calls of this tool in one thread.
    Thread,
    /// Calls of this tool across the deployment (every thread), counted by the `RATE_LIMITER`
    /// Durable Object; each thread's own window applies too.
    Deployment,
}

/// At most `per_minute` calls of a tool in any sliding 60-second window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed per minute.
    pub per_minute: u32,
    /// Wait or fail when over.
    pub when_limited: WhenLimited,
    /// Per thread, or per deployment as well.
    pub scope: LimitScope,
}

impl RateLimit {
    /// `n` calls per minute per thread; calls over it wait.
    pub fn per_minute(n: u32) -> Self {
        RateLimit {
            per_minute: n.max(1),
            when_limited: WhenLimited::Wait,
            scope: LimitScope::Thread,
        }
    }

    /// Calls over the limit fail instead of waiting.
    pub fn fail(mut self) -> Self {
        self.when_limited = WhenLimited::Fail;
        self
    }

    /// Calls over the limit wait (the default).
    pub fn wait(mut self) -> Self {
        self.when_limited = WhenLimited::Wait;
        self
    }

    /// Counts calls across the whole deployment too, not only per thread.
    pub fn per_deployment(mut self) -> Self {
        self.scope = LimitScope::Deployment;
        self
    }
}

/// Everything the thread needs to know to run a tool durably.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPolicy {
    /// Retries of failed attempts.
    pub retry: RetryPolicy,
    /// The longest one attempt (or one run of a workflow between suspensions) may take.
    pub timeout: Duration,
    /// A client must approve each call before it runs.
    pub needs_approval: bool,
    /// Calls per minute.
    pub rate_limit: Option<RateLimit>,
    /// A workflow's limit from its first start to its result, suspensions included.
    pub deadline: Option<Duration>,
    /// The same arguments give the stored result of an earlier successful call (for
    /// idempotent tools and workflows), for this long.
    pub cache_for: Option<Duration>,
    /// A client token (not only the server key) may queue it with `queue_tool`: for tools a
    /// browser may trigger directly, such as a "refresh" button. Never with bindings.
    pub client_callable: bool,
    /// Listed and callable over MCP (`POST /mcp`): for tools fit to be handed to other agents.
    pub mcp: bool,
    /// The version of the tool's code a new call runs on (1 unless the tool declares one): a
    /// call keeps the version it started on for all its runs.
    pub version: u32,
    /// Older versions whose handlers the tool keeps, so calls started on them can finish.
    pub kept_versions: Vec<u32>,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        ToolPolicy {
            retry: RetryPolicy::default(),
            timeout: DEFAULT_TIMEOUT,
            needs_approval: false,
            rate_limit: None,
            deadline: None,
            cache_for: None,
            client_callable: false,
            mcp: false,
            version: 1,
            kept_versions: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_jittered_within_half() {
        let p = RetryPolicy::default().max_backoff(Duration::from_secs(3));
        assert_eq!(p.delay_ms(1, 1.0), 1000);
        assert_eq!(p.delay_ms(1, 0.0), 500);
        assert_eq!(p.delay_ms(2, 1.0), 2000);
        assert_eq!(p.delay_ms(3, 1.0), 3000, "capped");
        assert_eq!(p.delay_ms(40, 0.5), 2250, "no overflow on huge attempts");
    }
}
