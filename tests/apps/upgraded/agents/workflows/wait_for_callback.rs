//! `wait_for_callback` at version 2, without the handler of version 1: a call parked on
//! version 1 ends with the `workflow_version_changed` error result when it resumes.

use edgent::prelude::*;

/// What the callback is for, and how long to wait (unchanged).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForCallback {
    /// What is awaited.
    pub purpose: String,
    /// Seconds to wait before giving up.
    pub timeout_seconds: u64,
}

/// Registered as `wait_for_callback`, version 2.
pub fn tool() -> Tool {
    Tool::new("Waits for an external system to call back (a webhook) and returns what it sent.")
        .handler(wait_for_callback)
        .version(2)
}

async fn wait_for_callback(
    flow: FlowState,
    w: WaitForCallback,
) -> Result<CallToolResult, ToolError> {
    match flow
        .wait_for_webhook("callback_v2", Duration::from_secs(w.timeout_seconds))
        .await?
    {
        WebhookEvent::Received(body) => Ok(CallToolResult::json(
            &serde_json::json!({ "received": body, "purpose": w.purpose }),
        )),
        WebhookEvent::TimedOut => Ok(CallToolResult::json(
            &serde_json::json!({ "timed_out": true }),
        )),
    }
}
