//! `wait_for_callback`: the "wait for callback" pattern. Creates a webhook, announces its URL
//! (a `callback_url` thread event, and the `waiting` tool frame carries it too), and waits
//! durably for someone to POST a JSON body to it, or for the timeout.

use edgent::prelude::*;

/// What the callback is for, and how long to wait.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForCallback {
    /// What is awaited, shown with the URL (e.g. "payment confirmation").
    pub purpose: String,
    /// Seconds to wait before giving up (1 to 604800, i.e. 7 days).
    pub timeout_seconds: u64,
}

/// Registered as `wait_for_callback`.
pub fn tool() -> Tool {
    Tool::new("Waits for an external system to call back (a webhook) and returns what it sent.")
        .handler(wait_for_callback)
        .refine(|w: &WaitForCallback| match w.timeout_seconds {
            1..=604_800 => Ok(()),
            s => Err(format!("timeout_seconds is {s}; it must be 1 to 604800")),
        })
}

async fn wait_for_callback(flow: FlowState, w: WaitForCallback) -> Result<CallToolResult, ToolError> {
    let url = flow.webhook_url("callback")?;
    // Announced once: a later run (after the callback arrives) replays this step.
    flow.step("announce", || async {
        emit_thread_event(
            &flow,
            "callback_url",
            serde_json::json!({ "purpose": w.purpose, "url": url, "tool_call_id": flow.tool_call_id }),
        )?;
        Ok(())
    })
    .await?;
    Ok(
        match flow
            .wait_for_webhook("callback", Duration::from_secs(w.timeout_seconds))
            .await?
        {
            WebhookEvent::Received(body) => CallToolResult::json(&serde_json::json!({ "received": body })),
            WebhookEvent::TimedOut => CallToolResult::json(&serde_json::json!({
                "timed_out": true,
                "waited_seconds": w.timeout_seconds,
            })),
        },
    )
}
