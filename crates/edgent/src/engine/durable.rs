//! Durable tool calls without I/O: what a call may do before it runs ([`gate`]: approval,
//! deadline, cached result, rate limit) and what its outcome means ([`settle`]: a result, a
//! retry after a backoff, or a suspension until a wake time). The Durable Object performs the
//! decisions; host tests drive them in virtual time.

use serde_json::{json, Value};

use crate::engine::store::{Store, StoredToolCall};
use crate::values::sql::SqlError;
use crate::values::{
    Approval, CallToolResult, LimitScope, Retry, ToolError, ToolPolicy, WebhookStatus, WhenLimited,
};

pub use crate::values::status::CallStatus;

/// Why and until when a call is parked.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspension {
    /// `sleeping`, `waiting`, `retrying` or `rate_limited`.
    pub status: CallStatus,
    /// When to run it again; `None` waits for something outside (an approval).
    pub wake_at: Option<i64>,
    /// What it waits for, shown to clients (`{"sleep": "cooldown"}`, `{"webhook": …, "url": …}`).
    pub detail: Value,
}

/// What to do with a call that is due.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Run it; `new_attempt` is false when a suspended workflow resumes.
    Run {
        /// Counts as an attempt (first start, retry, or restart after a crash).
        new_attempt: bool,
        /// The version of the tool's code it runs on (see [`run_version`]).
        version: u32,
    },
    /// Do not run it yet.
    Suspend(Suspension),
    /// Do not run it: this is its result (rejected, timed out, cached, over a failing limit).
    Finish(CallToolResult),
}

/// How one run of a call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ran {
    /// The handler returned.
    Done(Result<CallToolResult, ToolError>),
    /// The per-attempt timeout fired first.
    TimedOut,
    /// A workflow suspended (sleep, webhook).
    Suspended(Suspension),
}

/// What the thread stores after a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// The call's result.
    Finish(CallToolResult),
    /// Try again at `wake_at`; `error` is why this attempt failed.
    Retry {
        /// When the next attempt is due.
        wake_at: i64,
        /// This attempt's failure.
        error: String,
    },
    /// Parked until it is woken.
    Suspend(Suspension),
}

/// What a call of a rate-limited tool is told, and when the window has room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Calls started in the last minute.
    pub used: u32,
    /// When the oldest of them leaves the window.
    pub frees_at: i64,
}

/// The longest `retry_after` honoured (24 h).
pub const MAX_RETRY_AFTER_MS: u64 = 24 * 3600 * 1000;

/// The length of a rate-limit window.
pub const WINDOW_MS: i64 = 60_000;

/// Decides whether a due call runs now. Reads and writes only the call's own rows.
pub fn gate(
    store: &Store<'_>,
    call: &StoredToolCall,
    policy: &ToolPolicy,
    now: i64,
) -> Result<Gate, SqlError> {
    let status = call.status;
    if policy.needs_approval {
        match call.approval {
            Some(Approval::Approved) => {}
            Some(Approval::Rejected) => {
                let reason = store.tool_call_error(&call.call.id)?;
                let why = match reason.filter(|r| !r.trim().is_empty()) {
                    Some(r) => format!("the user rejected this call: {r}"),
                    None => "the user rejected this call".to_owned(),
                };
                return Ok(Gate::Finish(CallToolResult::error(format!(
                    "{why}. Do not call it again unless the user asks."
                ))));
            }
            Some(_) => return Ok(Gate::Suspend(approval_wait())),
            None => {
                store.set_approval(&call.call.id, Approval::Pending.as_str())?;
                return Ok(Gate::Suspend(approval_wait()));
            }
        }
    }
    if let Some(deadline) = call.deadline_at {
        if now >= deadline {
            return Ok(Gate::Finish(deadline_error(policy)));
        }
    }
    let version = match run_version(store, call, policy)? {
        Ok(version) => version,
        Err(changed) => return Ok(Gate::Finish(changed)),
    };
    // A call parked before it ever ran (waiting for approval) starts its first attempt; only
    // a run that started and then parked resumes without one.
    let new_attempt = !status.is_suspended_run() || call.attempts == 0;
    // Only a call that never ran is answered from the cache: a parked workflow has handed
    // out webhooks and recorded steps, and must finish its own run.
    if let (Some(ttl), 0) = (policy.cache_for, call.attempts) {
        let since = now - ttl.as_millis().min(i64::MAX as u128) as i64;
        let key = cache_key(call);
        if let Some(hit) = store.cached_result(&call.call.name, &key, since)? {
            return Ok(Gate::Finish(hit));
        }
    }
    if new_attempt {
        if let Some(limit) = &policy.rate_limit {
            let window = store.calls_since(&call.call.name, now - WINDOW_MS)?;
            if window.used >= limit.per_minute {
                return Ok(over_limit(
                    limit.per_minute,
                    limit.when_limited,
                    window,
                    now,
                    "thread",
                ));
            }
        }
    }
    Ok(Gate::Run {
        new_attempt,
        version,
    })
}

/// The version of its tool a due call runs on: the one it started on, for every run after
/// its first start; the deployed one for a call that never started, or that recorded nothing
/// a run would replay (no step, sleep, webhook or race); else the handler kept for its
/// version. A call with records and no handler for its version ends with the
/// `workflow_version_changed` error result: its records are never replayed into changed code.
/// Reads nothing unless the versions differ.
pub fn run_version(
    store: &Store<'_>,
    call: &StoredToolCall,
    policy: &ToolPolicy,
) -> Result<Result<u32, CallToolResult>, SqlError> {
    let deployed = policy.version;
    let started_on = match call.version {
        Some(v) if v != deployed => v,
        _ => return Ok(Ok(deployed)),
    };
    if !store.call_has_records(&call.call.id)? {
        return Ok(Ok(deployed));
    }
    if policy.kept_versions.contains(&started_on) {
        return Ok(Ok(started_on));
    }
    Ok(Err(CallToolResult::error(version_changed_text(
        &format!("{:?}", call.call.name),
        started_on,
        deployed,
    ))))
}

/// The `workflow_version_changed` answer: what happened to a call of `tool` started on
/// version `started_on` now that `deployed` runs, and what the model and the operator can do.
pub fn version_changed_text(tool: &str, started_on: u32, deployed: u32) -> String {
    format!(
        "workflow_version_changed: this call of {tool} started on version {started_on}, and \
         version {deployed} is deployed with no handler kept for version {started_on}, so its \
         recorded steps were not replayed into the changed code. Call the tool again to start \
         over on version {deployed}; to let such calls finish instead, keep the old handler \
         with `.previous_version({started_on}, …)` and deploy again."
    )
}

/// The gate of a deployment-wide limit, given the shared counter's answer.
pub fn deployment_gate(policy: &ToolPolicy, window: Option<Window>, now: i64) -> Option<Gate> {
    let limit = policy
        .rate_limit
        .filter(|l| l.scope == LimitScope::Deployment)?;
    let window = window?;
    (window.used >= limit.per_minute).then(|| {
        over_limit(
            limit.per_minute,
            limit.when_limited,
            window,
            now,
            "deployment",
        )
    })
}

fn over_limit(per_minute: u32, when: WhenLimited, window: Window, now: i64, scope: &str) -> Gate {
    let wait_ms = (window.frees_at - now).max(1);
    match when {
        WhenLimited::Wait => Gate::Suspend(Suspension {
            status: CallStatus::RateLimited,
            wake_at: Some(now + wait_ms),
            detail: json!({ "rate_limit": { "per_minute": per_minute, "scope": scope } }),
        }),
        WhenLimited::Fail => Gate::Finish(CallToolResult::error(format!(
            "rate limited: this tool allows {per_minute} calls per minute per {scope}; try again in {} s",
            (wait_ms + 999) / 1000
        ))),
    }
}

fn approval_wait() -> Suspension {
    Suspension {
        status: CallStatus::Waiting,
        wake_at: None,
        detail: json!({ "approval": "pending" }),
    }
}

fn deadline_error(policy: &ToolPolicy) -> CallToolResult {
    let limit = policy
        .deadline
        .map_or_else(String::new, |d| format!(" ({} s)", d.as_secs()));
    CallToolResult::error(format!(
        "the workflow did not finish within its time limit{limit} and was stopped"
    ))
}

/// Decides what a run's outcome means under the tool's policy. `attempts` counts this one;
/// `jitter` is a random number in 0..1.
pub fn settle(
    policy: &ToolPolicy,
    call: &StoredToolCall,
    attempts: i64,
    ran: Ran,
    now: i64,
    jitter: f64,
) -> Settle {
    let failure = match ran {
        Ran::Done(Ok(result)) => return Settle::Finish(result),
        Ran::Suspended(mut s) => {
            if let Some(deadline) = call.deadline_at {
                // Wake at the deadline at the latest, to fail the workflow on time.
                s.wake_at = Some(s.wake_at.map_or(deadline, |w| w.min(deadline)));
            }
            return Settle::Suspend(s);
        }
        Ran::Done(Err(e)) => e,
        Ran::TimedOut => ToolError::new(format!(
            "timed out after {} s",
            seconds_text(policy.timeout)
        )),
    };
    let max = i64::from(policy.retry.max_attempts);
    let delay = match failure.retry() {
        Retry::Never => return Settle::Finish(CallToolResult::error(failure.text())),
        _ if attempts >= max => {
            let tail = if max > 1 {
                format!(" (gave up after {attempts} attempts)")
            } else {
                String::new()
            };
            return Settle::Finish(CallToolResult::error(format!("{}{tail}", failure.text())));
        }
        // A service's word, bounded: a day at most, so a hostile header cannot park the
        // call (and a model turn waiting on it) for good.
        Retry::After(ms) => i64::try_from(ms.min(MAX_RETRY_AFTER_MS)).unwrap_or(0),
        Retry::Backoff => policy
            .retry
            .delay_ms(u32::try_from(attempts).unwrap_or(u32::MAX), jitter),
    };
    let wake_at = now.saturating_add(delay);
    if call.deadline_at.is_some_and(|d| wake_at >= d) {
        return Settle::Finish(deadline_error(policy));
    }
    Settle::Retry {
        wake_at,
        error: failure.text().to_owned(),
    }
}

/// What identifies "the same input" for the result cache: the arguments and the runtime
/// bindings (two accounts asking the same question get their own answers).
pub fn cache_key(call: &StoredToolCall) -> String {
    let args = canonical_arguments(&call.call.arguments);
    match call.bindings.as_deref() {
        Some(b) => format!("{args}|{}", canonical_arguments(b)),
        None => args,
    }
}

/// The canonical form of a call's arguments (sorted keys, no spaces), for the result cache.
pub fn canonical_arguments(raw: &str) -> String {
    serde_json::from_str::<Value>(raw).map_or_else(|_| raw.trim().to_owned(), |v| v.to_string())
}

/// Why a webhook delivery was refused; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookRefusal {
    /// No webhook has this token (404: the same answer for a wrong token and a wrong thread).
    Unknown,
    /// It already received a body, or its wait timed out (409); nothing changes.
    Closed(String),
    /// The body is not JSON (400).
    NotJson(String),
}

/// Delivers a webhook body: stores it and makes the waiting call due. The token is checked
/// first, so a wrong token learns nothing about the body rules.
pub fn deliver_webhook(
    store: &Store<'_>,
    token: &str,
    body: &[u8],
    now: i64,
) -> Result<Result<String, WebhookRefusal>, SqlError> {
    let Some(hook) = store.webhook_by_token(token)? else {
        return Ok(Err(WebhookRefusal::Unknown));
    };
    let call_status = store.tool_call(&hook.call_id)?.map(|c| c.status);
    let call_open =
        call_status.is_some_and(|c| !matches!(c, CallStatus::Success | CallStatus::Error));
    match hook.status {
        WebhookStatus::Open if call_open => {}
        WebhookStatus::Received => {
            return Ok(Err(WebhookRefusal::Closed(
                "this webhook was already delivered; a webhook accepts one body".into(),
            )))
        }
        WebhookStatus::TimedOut => {
            return Ok(Err(WebhookRefusal::Closed(
                "this webhook's wait timed out".into(),
            )))
        }
        WebhookStatus::Closed => {
            return Ok(Err(WebhookRefusal::Closed(format!(
                "another wait of race {:?} finished first; this webhook takes no body",
                hook.race.as_deref().unwrap_or_default()
            ))))
        }
        _ => {
            return Ok(Err(WebhookRefusal::Closed(
                "the tool call waiting for this webhook has finished".into(),
            )))
        }
    }
    if hook.deadline_at.is_some_and(|d| now >= d) {
        if let Some(race) = &hook.race {
            // The race ended at its earliest sleep or timeout, even if the alarm has not run
            // yet; the workflow settles every wait of it (this one too) when it runs.
            return Ok(Err(WebhookRefusal::Closed(format!(
                "race {race:?} ended before this body came (a sleep or timeout of it passed first)"
            ))));
        }
        // The wait is over even if the alarm has not run yet: the workflow gets TimedOut.
        store.end_webhook(token, WebhookStatus::TimedOut)?;
        return Ok(Err(WebhookRefusal::Closed(
            "this webhook's wait timed out".into(),
        )));
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Err(WebhookRefusal::NotJson(format!(
                "the body must be JSON: {e}"
            ))))
        }
    };
    if !store.receive_webhook(token, &value.to_string(), now)? {
        return Ok(Err(WebhookRefusal::Closed(
            "this webhook was already delivered; a webhook accepts one body".into(),
        )));
    }
    // Wake a call waiting for it, or one still running (a parallel batch stores the park after
    // every call of the batch returns). A call that sleeps or retries keeps its schedule: the
    // body waits in the webhook row until the workflow asks for it.
    if matches!(call_status, Some(CallStatus::Waiting | CallStatus::Running)) {
        store.wake_tool_call(now, &hook.call_id)?;
    }
    Ok(Ok(hook.call_id))
}

/// A tool's status in one thread, like an orchestrator's: `rate_limited` (its window is
/// full), `busy` (a call is running or parked), `error` (its last finished call failed) or
/// `available`, in that order of precedence.
pub fn tool_status(
    store: &Store<'_>,
    tool: &str,
    policy: &ToolPolicy,
    now: i64,
) -> Result<&'static str, SqlError> {
    // A full window says more than "busy": calls parked for it are waiting on the limit.
    if let Some(limit) = &policy.rate_limit {
        if store.calls_since(tool, now - WINDOW_MS)?.used >= limit.per_minute {
            return Ok("rate_limited");
        }
    }
    if store.tool_busy(tool)? {
        return Ok("busy");
    }
    Ok(match store.last_tool_status(tool)?.as_deref() {
        Some("error") => "error",
        _ => "available",
    })
}

/// `d` in seconds as people write it ("30", "1.5", "0.25"), to the millisecond. Integer
/// arithmetic: formatting an `f64` links core's float printing (~16 KB of wasm) for this one
/// message.
fn seconds_text(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    let (secs, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        return secs.to_string();
    }
    let frac = format!("{frac:03}");
    format!("{secs}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::seconds_text;
    use std::time::Duration;

    #[test]
    fn seconds_read_as_written() {
        let text = |ms| seconds_text(Duration::from_millis(ms));
        assert_eq!(text(30_000), "30");
        assert_eq!(text(1_500), "1.5");
        assert_eq!(text(250), "0.25");
        assert_eq!(text(1_001), "1.001");
        assert_eq!(text(0), "0");
    }
}
