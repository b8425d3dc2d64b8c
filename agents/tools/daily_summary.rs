//! `daily_summary`: sets up a summary of this conversation every day at a time the user picks.
//! The thread keeps the schedule in its own storage and its alarm wakes it then: at each due
//! time a message asks the model for the summary, which it writes in a turn of its own
//! (docs/schedules.md).

use edgent::prelude::*;

/// When the daily summary should come.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DailySummary {
    /// Hour of the day, in UTC (0 to 23).
    pub hour_utc: u8,
    /// Minute of that hour (0 to 59; 0 when absent).
    #[serde(default)]
    pub minute: u8,
    /// Monday to Friday only (every day when false or absent).
    #[serde(default)]
    pub weekdays_only: bool,
}

/// Registered as `daily_summary`.
pub fn tool() -> Tool {
    Tool::new(
        "Sets up a daily summary of this conversation at a given time (UTC); the summary is \
         then written every day without being asked again.",
    )
    .handler(daily_summary)
    .refine(|d: &DailySummary| {
        if d.hour_utc > 23 || d.minute > 59 {
            return Err(format!(
                "{:02}:{:02} is not a time of day (hour_utc 0 to 23, minute 0 to 59)",
                d.hour_utc, d.minute
            ));
        }
        Ok(())
    })
}

async fn daily_summary(flow: FlowState, d: DailySummary) -> Result<String, ToolError> {
    let days = if d.weekdays_only { "1-5" } else { "*" };
    let cron = format!("{} {} * * {days}", d.minute, d.hour_utc);
    let mut spec = ScheduleSpec::cron(
        &cron,
        "Write the daily summary of this conversation: what was asked, what was done, what is \
         still open.",
    );
    spec.name = Some("daily summary".into());
    let schedule = flow.schedule(&spec)?;
    let next = schedule.next_at.map_or_else(String::new, rfc3339_from_ms);
    Ok(format!(
        "daily summary scheduled at {:02}:{:02} UTC{} (schedule {}); the first comes at {next}",
        d.hour_utc,
        d.minute,
        if d.weekdays_only { " on weekdays" } else { "" },
        schedule.id
    ))
}
