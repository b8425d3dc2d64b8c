//! `remind_later`: the "schedule reminder" pattern. Sleeps durably, then posts the reminder
//! into the conversation as an assistant message and a `reminder` event. Queued by `schedule_reminder`
//! (not called by the model directly), so the conversation goes on while it sleeps: a parked
//! queued call holds nothing else up.

use edgent::prelude::*;

/// What to remind about, and when.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemindLater {
    /// The reminder text.
    pub text: String,
    /// Seconds from now (1 to 30 days).
    pub in_seconds: u64,
}

/// Registered as `remind_later`.
pub fn tool() -> Tool {
    Tool::new("Posts a reminder into this conversation after a delay.")
        .handler(remind_later)
        .refine(|r: &RemindLater| match r.in_seconds {
            1..=2_592_000 => Ok(()),
            s => Err(format!("in_seconds is {s}; it must be 1 to 2592000 (30 days)")),
        })
}

async fn remind_later(flow: FlowState, r: RemindLater) -> Result<String, ToolError> {
    flow.sleep("wait", Duration::from_secs(r.in_seconds)).await?;
    // A step: after a restart the reminder is not posted twice.
    let message_id = flow
        .step("post", || async {
            let m = inject_message(
                &flow,
                InjectMessage {
                    force_top_level: true,
                    ..InjectMessage::new(Role::Assistant, format!("Reminder: {}", r.text))
                },
            )?;
            emit_thread_event(&flow, "reminder", serde_json::json!({ "text": r.text }))?;
            Ok(m.id)
        })
        .await?;
    Ok(format!("reminder posted as message {message_id}"))
}
