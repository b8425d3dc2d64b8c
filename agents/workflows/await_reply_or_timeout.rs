//! `await_reply_or_timeout`: a durable race, like `Promise.race([webhook, sleep(timeout)])`.
//! Creates a webhook, announces its URL once (a `reply_url` thread event), then waits for
//! whichever comes first: a JSON body POSTed to the URL, or the end of the timeout. The loser
//! is cancelled: after the timeout won, a POST to the URL gets 409.

use edgent::prelude::*;

/// The longest the reply is waited for (7 days): also the webhook's own timeout.
const MAX_WAIT_SECONDS: u64 = 604_800;

/// What is asked, and how long to wait for the reply.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitReplyOrTimeout {
    /// What the reply is awaited for, shown with the URL (e.g. "approve the refund?").
    pub question: String,
    /// Seconds to wait for the reply before giving up (1 to 604800, i.e. 7 days).
    pub timeout_seconds: u64,
}

/// Registered as `await_reply_or_timeout`.
pub fn tool() -> Tool {
    Tool::new(
        "Asks for a reply at a webhook URL and waits for it or for the timeout, whichever comes first.",
    )
    .handler(await_reply_or_timeout)
    .refine(|a: &AwaitReplyOrTimeout| match a.timeout_seconds {
        1..=MAX_WAIT_SECONDS => Ok(()),
        s => Err(format!("timeout_seconds is {s}; it must be 1 to {MAX_WAIT_SECONDS}")),
    })
}

async fn await_reply_or_timeout(flow: FlowState, a: AwaitReplyOrTimeout) -> Result<CallToolResult, ToolError> {
    let url = flow.webhook_url("reply")?;
    // Announced once: the run after the race replays this step.
    flow.step("announce", || async {
        emit_thread_event(
            &flow,
            "reply_url",
            serde_json::json!({ "question": a.question, "url": url, "tool_call_id": flow.tool_call_id }),
        )?;
        Ok(())
    })
    .await?;
    let winner = flow
        .race("reply_or_timeout", [
            Wait::webhook("reply", Duration::from_secs(MAX_WAIT_SECONDS)),
            Wait::sleep("timeout", Duration::from_secs(a.timeout_seconds)),
        ])
        .await?;
    Ok(match winner {
        Winner::Received { body, .. } => CallToolResult::json(&serde_json::json!({ "replied": body })),
        Winner::Slept { .. } | Winner::TimedOut { .. } => CallToolResult::json(&serde_json::json!({
            "timed_out": true,
            "waited_seconds": a.timeout_seconds,
        })),
    })
}
