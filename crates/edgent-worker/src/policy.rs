//! The policy a tool call runs under: the tool's own ([`edgent::tool::ToolPolicy`]) with the
//! operator's overrides from Worker vars, so limits can change without a code change.

use std::time::Duration;

use worker::Env;

use edgent::tool::{LimitScope, RateLimit, Registry, RetryPolicy, ToolPolicy, WhenLimited};

/// The policy a call runs under: the tool's own, with the operator's overrides from vars
/// (`TOOL_<NAME>_TIMEOUT_MS`, `_MAX_ATTEMPTS`, `_RATE_PER_MINUTE`, `_WHEN_LIMITED` = wait|fail,
/// `_RATE_SCOPE` = thread|deployment).
/// Prompts and agents used as tools manage their own model retries and are not retried.
pub(crate) fn policy_for(env: &Env, registry: &Registry, name: &str) -> ToolPolicy {
    let Some(tool) = registry.get(name) else {
        return ToolPolicy {
            retry: RetryPolicy::none(),
            timeout: Duration::from_secs(24 * 3600),
            ..ToolPolicy::default()
        };
    };
    let mut policy = tool.policy().clone();
    let var = |suffix: &str| {
        env.var(&format!("TOOL_{}_{suffix}", name.to_ascii_uppercase()))
            .ok()
            .and_then(|v| v.to_string().trim().parse::<u64>().ok())
    };
    if let Some(ms) = var("TIMEOUT_MS") {
        policy.timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = var("MAX_ATTEMPTS") {
        policy.retry.max_attempts = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    }
    if let Some(n) = var("RATE_PER_MINUTE") {
        let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        policy.rate_limit = Some(match policy.rate_limit {
            Some(limit) => RateLimit {
                per_minute: n,
                ..limit
            },
            None => RateLimit::per_minute(n),
        });
    }
    let text = |suffix: &str| {
        env.var(&format!("TOOL_{}_{suffix}", name.to_ascii_uppercase()))
            .ok()
            .map(|v| v.to_string().trim().to_ascii_lowercase())
    };
    if let Some(limit) = policy.rate_limit.as_mut() {
        match text("WHEN_LIMITED").as_deref() {
            Some("fail") => limit.when_limited = WhenLimited::Fail,
            Some("wait") => limit.when_limited = WhenLimited::Wait,
            _ => {}
        }
        match text("RATE_SCOPE").as_deref() {
            Some("deployment") => limit.scope = LimitScope::Deployment,
            Some("thread") => limit.scope = LimitScope::Thread,
            _ => {}
        }
    }
    policy
}
