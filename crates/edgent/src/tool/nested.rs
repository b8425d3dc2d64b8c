//! Tools called inside another call: `flow.call_tool` in a workflow, a TOML workflow's steps,
//! and the tools a sub-prompt's model calls. They run under the called tool's own policy, as
//! a top-level call of it would: its rate limits (the thread's window and the deployment's
//! counter, so a workflow cannot walk past the limit that protects an API key's quota) and
//! its timeout; and each run is an attempt in the execution history, recorded under the
//! enclosing call. Retries stay with the enclosing call: a nested failure is its error, and
//! its retry policy decides.

use std::future::Future;
use std::time::Duration;

use futures_util::future::{select, Either};

use super::policy::policy_for;
use super::{run_until_suspended, BoxFuture, CallToolResult, FlowState, RunState, Tool, ToolError};
use crate::engine::durable::{CallStatus, Ran, Suspension, Window, WINDOW_MS};
use crate::engine::store::Store;
use crate::values::limits::{truncated, MAX_ERROR_TEXT_BYTES};
use crate::values::policy::{LimitScope, WhenLimited};
use serde_json::json;

/// Runs `work` until `timer` (a host's sleep) resolves; `None` when the timer won.
pub(crate) async fn with_timeout<F: Future>(
    work: F,
    timer: BoxFuture<'static, ()>,
) -> Option<F::Output> {
    match select(Box::pin(work), timer).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

/// A duration as the milliseconds a host's `sleep` takes.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs the registered tool `name` (already looked up as `tool`) once with `args`, nested in
/// another call. `flow` is the nested call's flow (its `tool_call_id` is where its workflow
/// steps are recorded); `log_key` names it in the attempt log and must start with the
/// enclosing call's id and a `/`, which is how the execution history finds it.
///
/// A rate limit that has no room parks the enclosing run until the window frees when the tool
/// waits for room and `enclosing` is a run that can park (a workflow: it sleeps, counting no
/// attempt, and its step runs again on waking); otherwise it is an error saying when to come
/// back. A run past the tool's timeout is a retryable error; a tool that sleeps or waits for a
/// webhook fails, since only a top-level call can park.
pub(crate) async fn run_nested(
    flow: FlowState,
    tool: &Tool,
    name: &str,
    args: &str,
    log_key: &str,
    enclosing: Option<&RunState>,
) -> Result<CallToolResult, ToolError> {
    let host = flow.host().clone();
    let policy = policy_for(host.registry(), name, |k| host.var(k));
    let store = Store::new(host.sql());
    if let Some(limit) = policy.rate_limit {
        let now = host.now_ms();
        let mut window = Some(store.calls_since(name, now - WINDOW_MS)?);
        let mut scope = "thread";
        if window.is_some_and(|w| w.used < limit.per_minute)
            && limit.scope == LimitScope::Deployment
        {
            // An unreachable counter leaves the thread's window, as for a top-level call.
            window = host.acquire_limit(name, limit.per_minute).await.ok();
            scope = "deployment";
        }
        if let Some(w) = window.filter(|w| w.used >= limit.per_minute) {
            if let (WhenLimited::Wait, Some(run)) = (limit.when_limited, enclosing) {
                let until = w.frees_at.max(now + 1);
                run.park(Suspension {
                    status: CallStatus::Sleeping,
                    wake_at: Some(until),
                    detail: json!({
                        "rate_limit": { "tool": name, "per_minute": limit.per_minute, "scope": scope },
                        "until": until,
                    }),
                });
                // Never completes: the runner sees the parked run and drops this future.
                std::future::pending::<()>().await;
            }
            return Err(over_limit(
                name,
                limit.per_minute,
                limit.when_limited,
                w,
                now,
                scope,
            ));
        }
    }
    store.begin_nested_attempt(host.now_ms(), log_key, name)?;
    let state = flow.run_state().clone();
    let attempt = run_until_suspended(tool.attempt(flow, args), &state);
    let ran = with_timeout(attempt, host.sleep(millis(policy.timeout))).await;
    let (label, outcome) = match ran {
        Some(Ran::Done(Ok(result))) if result.is_error() => ("error", Ok(result)),
        Some(Ran::Done(Ok(result))) => ("success", Ok(result)),
        Some(Ran::Done(Err(e))) => ("error", Err(e)),
        Some(Ran::Suspended(_)) => (
            "error",
            Err(ToolError::fatal(format!(
                "tool {name:?} sleeps or waits, which only a top-level call can do (not one inside another tool)"
            ))),
        ),
        Some(Ran::TimedOut) | None => (
            "timeout",
            Err(ToolError::new(format!(
                "tool {name:?} did not finish within its timeout of {} ms",
                policy.timeout.as_millis()
            ))),
        ),
    };
    let error = match &outcome {
        Ok(result) if result.is_error() => Some(result.to_model_text()),
        Ok(_) => None,
        Err(e) => Some(e.text().to_owned()),
    };
    let error = error.map(|t| truncated(&t, MAX_ERROR_TEXT_BYTES).into_owned());
    // The log is a record: failing to close it never changes what the call returns.
    let _ = store.end_attempt(host.now_ms(), log_key, label, error.as_deref());
    outcome
}

/// The error of a nested call that found its tool's window full: when to come back, so the
/// enclosing call's retry policy can wait for it (a tool that fails when limited says so).
fn over_limit(
    name: &str,
    per_minute: u32,
    when: WhenLimited,
    window: Window,
    now: i64,
    scope: &str,
) -> ToolError {
    let wait_ms = (window.frees_at - now).max(1);
    let text = format!(
        "rate limited: tool {name:?} allows {per_minute} calls per minute per {scope}; try again in {} s",
        (wait_ms + 999) / 1000
    );
    match when {
        WhenLimited::Wait => {
            ToolError::retry_after(text, Duration::from_millis(wait_ms.unsigned_abs()))
        }
        WhenLimited::Fail => ToolError::fatal(text),
    }
}
