//! The policy a tool call runs under: the tool's own ([`ToolPolicy`]) with the operator's
//! overrides from the host's variables, so limits can change without a code change.

use std::time::Duration;

use super::{LimitScope, RateLimit, Registry, RetryPolicy, ToolPolicy, WhenLimited};

/// The policy a call of `name` runs under: the tool's own, with the operator's overrides read
/// through `var` (`TOOL_<NAME>_TIMEOUT_MS`, `_MAX_ATTEMPTS`, `_RATE_PER_MINUTE`,
/// `_WHEN_LIMITED` = wait|fail, `_RATE_SCOPE` = thread|deployment).
/// Prompts and agents used as tools manage their own model retries and are not retried.
pub fn policy_for(
    registry: &Registry,
    name: &str,
    var: impl Fn(&str) -> Option<String>,
) -> ToolPolicy {
    let Some(tool) = registry.get(name) else {
        return ToolPolicy {
            retry: RetryPolicy::none(),
            timeout: Duration::from_secs(24 * 3600),
            ..ToolPolicy::default()
        };
    };
    with_overrides(tool.policy().clone(), name, var)
}

/// The policy of a call to an MCP server's tool (`name` as the model sees it,
/// `<server>__<tool>`): the defaults of a tool doing I/O (3 attempts for transport failures,
/// 30 s), approval when the prompt asks for it, and the operator's overrides as for any tool.
pub fn mcp_policy(
    name: &str,
    needs_approval: bool,
    var: impl Fn(&str) -> Option<String>,
) -> ToolPolicy {
    let base = ToolPolicy {
        needs_approval,
        ..ToolPolicy::default()
    };
    with_overrides(base, name, var)
}

/// `policy` with the operator's `TOOL_<NAME>_*` overrides.
fn with_overrides(
    mut policy: ToolPolicy,
    name: &str,
    var: impl Fn(&str) -> Option<String>,
) -> ToolPolicy {
    let text = |suffix: &str| {
        var(&format!("TOOL_{}_{suffix}", name.to_ascii_uppercase()))
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let number = |suffix: &str| text(suffix).and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = number("TIMEOUT_MS") {
        policy.timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = number("MAX_ATTEMPTS") {
        policy.retry.max_attempts = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    }
    if let Some(n) = number("RATE_PER_MINUTE") {
        let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        policy.rate_limit = Some(match policy.rate_limit {
            Some(limit) => RateLimit {
                per_minute: n,
                ..limit
            },
            None => RateLimit::per_minute(n),
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tool;

    fn registry() -> Registry {
        let tool = Tool::new("slow").handler(|_flow: crate::tool::FlowState| async {
            crate::tool::CallToolResult::text("ok")
        });
        Registry::build(vec![("slow_tool", tool)]).expect("a valid registry")
    }

    #[test]
    fn operator_variables_override_the_tools_own_policy() {
        let vars = |k: &str| match k {
            "TOOL_SLOW_TOOL_TIMEOUT_MS" => Some(" 2500 ".to_owned()),
            "TOOL_SLOW_TOOL_MAX_ATTEMPTS" => Some("0".to_owned()),
            "TOOL_SLOW_TOOL_RATE_PER_MINUTE" => Some("7".to_owned()),
            "TOOL_SLOW_TOOL_WHEN_LIMITED" => Some("FAIL".to_owned()),
            "TOOL_SLOW_TOOL_RATE_SCOPE" => Some("deployment".to_owned()),
            _ => None,
        };
        let p = policy_for(&registry(), "slow_tool", vars);
        assert_eq!(p.timeout, Duration::from_millis(2500));
        assert_eq!(p.retry.max_attempts, 1, "at least one attempt");
        let limit = p.rate_limit.expect("a limit from the variable");
        assert_eq!(limit.per_minute, 7);
        assert_eq!(limit.when_limited, WhenLimited::Fail);
        assert_eq!(limit.scope, LimitScope::Deployment);
    }

    #[test]
    fn unreadable_variables_are_ignored_and_delegates_are_not_retried() {
        let own = policy_for(&registry(), "slow_tool", |_| None);
        let p = policy_for(&registry(), "slow_tool", |_| Some("soon".to_owned()));
        assert_eq!(p.timeout, own.timeout);
        assert_eq!(p.rate_limit, own.rate_limit);
        let delegate = policy_for(&registry(), "support_prompt", |_| None);
        assert_eq!(
            delegate.retry.max_attempts,
            RetryPolicy::none().max_attempts
        );
    }
}
