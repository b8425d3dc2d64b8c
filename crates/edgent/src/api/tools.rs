//! `GET /api/tools`: every tool's schema, how it runs (timeout, retries, approval, limits) and
//! its deployment-wide status.

use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::values::policy::{LimitScope, ToolPolicy, WhenLimited};

/// The per-minute limit a tool shares across the deployment, if its policy has one (the
/// caller asks the deployment's counter whether it is full).
pub fn deployment_limit(policy: &ToolPolicy) -> Option<u32> {
    policy
        .rate_limit
        .filter(|l| l.scope == LimitScope::Deployment)
        .map(|l| l.per_minute)
}

/// One tool's entry: its spec, `status` (`rate_limited` when its deployment window is full,
/// else `available`) and `policy`.
pub fn tool_entry(spec: &ToolSpec, policy: &ToolPolicy, rate_limited: bool) -> Value {
    let mut entry = serde_json::to_value(spec).unwrap_or_default();
    if let Some(obj) = entry.as_object_mut() {
        let status = if rate_limited {
            "rate_limited"
        } else {
            "available"
        };
        obj.insert("status".into(), json!(status));
        obj.insert("policy".into(), policy_json(policy));
    }
    entry
}

fn policy_json(p: &ToolPolicy) -> Value {
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    json!({
        "timeout_ms": ms(p.timeout),
        "max_attempts": p.retry.max_attempts,
        "needs_approval": p.needs_approval,
        "client_callable": p.client_callable,
        "mcp": p.mcp,
        "rate_limit": p.rate_limit.map(|l| json!({
            "per_minute": l.per_minute,
            "when_limited": match l.when_limited { WhenLimited::Wait => "wait", WhenLimited::Fail => "fail" },
            "scope": match l.scope { LimitScope::Thread => "thread", LimitScope::Deployment => "deployment" },
        })),
        "deadline_ms": p.deadline.map(ms),
        "cache_ms": p.cache_for.map(ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::policy::RateLimit;
    use std::time::Duration;

    #[test]
    fn an_entry_shows_the_policy_and_the_deployment_status() {
        let spec: ToolSpec = serde_json::from_value(json!({
            "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}
        }))
        .unwrap();
        let mut policy = ToolPolicy {
            timeout: Duration::from_millis(1500),
            ..ToolPolicy::default()
        };
        assert_eq!(deployment_limit(&policy), None);
        policy.rate_limit = Some(RateLimit {
            scope: LimitScope::Deployment,
            ..RateLimit::per_minute(60)
        });
        assert_eq!(deployment_limit(&policy), Some(60));
        let entry = tool_entry(&spec, &policy, true);
        assert_eq!(entry["name"], "get_weather");
        assert_eq!(entry["status"], "rate_limited");
        assert_eq!(entry["policy"]["timeout_ms"], 1500);
        assert_eq!(entry["policy"]["rate_limit"]["scope"], "deployment");
        assert_eq!(entry["policy"]["deadline_ms"], Value::Null);
        assert_eq!(tool_entry(&spec, &policy, false)["status"], "available");
    }
}
