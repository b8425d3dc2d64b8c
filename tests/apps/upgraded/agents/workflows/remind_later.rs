//! `remind_later` at version 2: the reminder is posted with a new step name (`post_v2`) and a
//! new text. A call parked on version 1 finishes on the kept version-1 handler, which replays
//! its recorded steps as they were written.

use edgent::prelude::*;

/// What to remind about, and when (unchanged from version 1).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemindLater {
    /// The reminder text.
    pub text: String,
    /// Seconds from now.
    pub in_seconds: u64,
}

/// Registered as `remind_later`, version 2, keeping version 1's handler.
pub fn tool() -> Tool {
    Tool::new("Posts a reminder into this conversation after a delay.")
        .handler(remind_later_v2)
        .version(2)
        .previous_version(1, remind_later_v1)
}

async fn remind_later_v2(flow: FlowState, r: RemindLater) -> Result<String, ToolError> {
    flow.sleep("wait", Duration::from_secs(r.in_seconds)).await?;
    let message_id = flow
        .step("post_v2", || async {
            let m = inject_message(
                &flow,
                InjectMessage {
                    force_top_level: true,
                    ..InjectMessage::new(Role::Assistant, format!("Reminder (v2): {}", r.text))
                },
            )?;
            Ok(m.id)
        })
        .await?;
    Ok(format!("v2 posted {message_id}"))
}

/// Version 1, as the example app has it.
async fn remind_later_v1(flow: FlowState, r: RemindLater) -> Result<String, ToolError> {
    flow.sleep("wait", Duration::from_secs(r.in_seconds)).await?;
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
    Ok(format!("reminder posted as message {message_id} (kept version 1)"))
}
