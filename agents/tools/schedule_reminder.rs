//! `schedule_reminder`: answers at once and leaves the waiting to a durable workflow. It
//! queues `remind_later`, which sleeps in the thread's SQLite (no memory, one alarm) and
//! posts the reminder when it is due, even after the Worker restarted in between.

use edgent::prelude::*;

/// The reminder to schedule.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleReminder {
    /// What to remind the user about.
    pub text: String,
    /// In how many minutes (1 to 43200, i.e. 30 days).
    pub in_minutes: u32,
}

/// Registered as `schedule_reminder`.
pub fn tool() -> Tool {
    Tool::new("Schedules a reminder that appears in this conversation after some minutes.")
        .handler(schedule_reminder)
        .refine(|r: &ScheduleReminder| {
            if r.text.trim().is_empty() {
                return Err("text must not be empty".into());
            }
            match r.in_minutes {
                1..=43_200 => Ok(()),
                m => Err(format!("in_minutes is {m}; it must be 1 to 43200")),
            }
        })
}

async fn schedule_reminder(flow: FlowState, r: ScheduleReminder) -> Result<String, ToolError> {
    let seconds = u64::from(r.in_minutes) * 60;
    let call_id = queue_tool(
        flow.root(),
        "remind_later",
        serde_json::json!({ "text": r.text, "in_seconds": seconds }),
    )?;
    let due = rfc3339_from_ms(flow.now_ms + (seconds as i64) * 1000);
    Ok(format!("reminder scheduled for {due} (call {call_id})"))
}
