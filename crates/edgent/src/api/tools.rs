//! `GET /api/tools`: every tool's schema, how it runs (timeout, retries, approval, limits) and
//! its deployment-wide status; and the query of `GET /api/tools/recommend`.

use serde_json::{json, Value};

use crate::config::check_name;
use crate::llm::ToolSpec;
use crate::values::error::ApiError;
use crate::values::page::parse_limit;
use crate::values::policy::{LimitScope, ToolPolicy, WhenLimited};

/// Longest `task` of `GET /api/tools/recommend`, in bytes: a question, not a document.
pub const MAX_TASK_BYTES: usize = 2_000;
/// Tools `GET /api/tools/recommend` answers when `limit` is left out.
pub const DEFAULT_RECOMMEND_LIMIT: u32 = 10;

/// `GET /api/tools/recommend?task=&limit=&prompt=`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecommendQuery {
    /// The text the tools are ranked for.
    pub task: String,
    /// Tools in the answer, 1 to 200 (10 when left out).
    pub limit: u32,
    /// Rank this prompt's tools and delegates instead of every registered tool.
    pub prompt: Option<String>,
}

impl RecommendQuery {
    /// Validates query pairs; unknown keys are ignored and a repeated key's last value wins
    /// (as for the listings).
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut task = None;
        let mut limit = DEFAULT_RECOMMEND_LIMIT;
        let mut prompt = None;
        for (key, value) in pairs {
            match key.as_str() {
                "task" => task = Some(value.clone()),
                "limit" => limit = parse_limit(value)?,
                "prompt" => {
                    check_name("\"prompt\"", value)
                        .map_err(|why| ApiError::invalid(why.to_string()))?;
                    prompt = Some(value.clone());
                }
                _ => {}
            }
        }
        let task = task.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
            ApiError::invalid(format!(
                "\"task\" is required: the text to rank the tools for (at most {MAX_TASK_BYTES} bytes)"
            ))
        })?;
        if task.len() > MAX_TASK_BYTES {
            return Err(ApiError::invalid(format!(
                "\"task\" is {} bytes; at most {MAX_TASK_BYTES} are allowed",
                task.len()
            )));
        }
        Ok(RecommendQuery {
            task,
            limit,
            prompt,
        })
    }
}

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
        "version": p.version,
        "kept_versions": p.kept_versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::policy::RateLimit;
    use std::time::Duration;

    fn recommend(pairs: &[(&str, &str)]) -> Result<RecommendQuery, ApiError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RecommendQuery::parse(&pairs)
    }

    #[test]
    fn a_recommend_query_needs_a_task_of_bounded_size() {
        let q = recommend(&[("task", "weather in Lisbon"), ("other", "x")]).unwrap();
        assert_eq!(
            q,
            RecommendQuery {
                task: "weather in Lisbon".into(),
                limit: DEFAULT_RECOMMEND_LIMIT,
                prompt: None,
            }
        );
        let q = recommend(&[("task", "t"), ("limit", "3"), ("prompt", "support")]).unwrap();
        assert_eq!((q.limit, q.prompt.as_deref()), (3, Some("support")));
        let long = "é".repeat(MAX_TASK_BYTES / 2);
        assert!(
            recommend(&[("task", &long)]).is_ok(),
            "the bound is in bytes"
        );
        for (pairs, message) in [
            (vec![], "\"task\" is required"),
            (vec![("task", "  ")], "\"task\" is required"),
            (vec![("task", "x"), ("task", "")], "\"task\" is required"),
            (
                vec![("task", &*format!("{long}x"))],
                "\"task\" is 2001 bytes; at most 2000",
            ),
            (
                vec![("task", "x"), ("limit", "0")],
                "\"limit\" must be an integer",
            ),
            (
                vec![("task", "x"), ("prompt", "")],
                "\"prompt\" \"\" must be 1-64",
            ),
            (
                vec![("task", "x"), ("prompt", "a b")],
                "\"prompt\" \"a b\" must be 1-64",
            ),
        ] {
            let e = recommend(&pairs).unwrap_err();
            assert_eq!((e.status, e.code), (400, "invalid_request"), "{pairs:?}");
            assert!(e.message.starts_with(message), "{pairs:?}: {}", e.message);
        }
    }

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
        assert_eq!(entry["policy"]["version"], 1);
        assert_eq!(entry["policy"]["kept_versions"], json!([]));
        assert_eq!(tool_entry(&spec, &policy, false)["status"], "available");
    }
}
