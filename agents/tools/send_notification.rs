//! `send_notification`: delivers a notification to the people watching this thread, as an
//! `event` frame on every socket of the thread (`emit_thread_event`). Queued by
//! `process_order`; not offered to the model by the example agent. Replace the body with a
//! call to your email/SMS/push provider.

use edgent::prelude::*;

/// A notification.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendNotification {
    /// How to deliver it.
    pub channel: Channel,
    /// Recipient: an email address, a phone number or a customer id.
    pub to: String,
    /// The text (at most 500 characters).
    pub message: String,
}

/// Delivery channel.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// Email.
    Email,
    /// Text message.
    Sms,
    /// Mobile push notification.
    Push,
}

/// Registered as `send_notification`.
pub fn tool() -> Tool {
    Tool::new("Sends a notification to a customer by email, SMS or push.")
        .handler(send_notification)
        .refine(|n: &SendNotification| match n.message.chars().count() {
            0 => Err("message must not be empty".into()),
            1..=500 => Ok(()),
            len => Err(format!("message is {len} characters; the limit is 500")),
        })
}

async fn send_notification(flow: FlowState, n: SendNotification) -> Result<CallToolResult, ToolError> {
    emit_thread_event(&flow, "notification", &n)?;
    Ok(CallToolResult::text(format!(
        "notification sent by {} to {}",
        serde_json::to_value(n.channel)?.as_str().unwrap_or("?"),
        n.to
    )))
}
