//! Schedules: when a thread acts by itself (once at a time, after a delay, every interval, or
//! on a cron expression in UTC) and what it does then (post a message, or queue a tool call).
//! The request a client, the server or a tool makes ([`ScheduleSpec`]), its checks, the
//! stored record ([`Schedule`]) and the due-time arithmetic. Storage and firing are the
//! engine's.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::values::limits::{MAX_CONTENT_BYTES, MAX_SLEEP_MS};
use crate::values::Invalid;

/// Active schedules one thread may hold: each can wake the thread and call a model, so the
/// count is bounded like everything else a client can make a thread keep.
pub const MAX_SCHEDULES_PER_THREAD: usize = 32;
/// The shortest interval (and the closest two cron occurrences may be): one second.
pub const MIN_INTERVAL_MS: i64 = 1_000;
/// A schedule's arguments as JSON text, at most.
pub const MAX_SCHEDULE_ARGUMENTS_BYTES: usize = 16 * 1024;
/// The longest a cron expression may be.
const MAX_CRON_LEN: usize = 200;

/// What to schedule, as posted to `POST /api/threads/:id/schedules`, the `create_schedule`
/// rpc or a tool's `flow.schedule`. Exactly one of `at`, `delay_seconds`, `every_seconds`,
/// `cron` says when; exactly one of `message`, `tool` says what.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Once, at this instant (RFC 3339, e.g. `2026-11-25T09:00:00Z`). A past instant fires
    /// at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Once, this many seconds from now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<u64>,
    /// Repeatedly, every this many seconds (the first time one interval from now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seconds: Option<u64>,
    /// Repeatedly, at the times a cron expression names, in UTC: five fields (minute hour
    /// day-of-month month day-of-week, e.g. `0 9 * * 1-5`), six with seconds first, or a
    /// nickname (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// Post this text as a user message (it starts a turn, or joins the running one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Queue a call of this tool (its result is stored like any queued call's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments (an object; `{}` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// A label for people reading the list (at most 200 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// When a schedule falls due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Once, at this instant (ms since the epoch).
    Once(i64),
    /// Every this many ms.
    Every(i64),
    /// At the times of this cron expression (UTC).
    Cron(String),
}

/// What a schedule does when it falls due.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleAction {
    /// Posts a user message.
    Message(String),
    /// Queues a tool call.
    Tool {
        /// The tool.
        name: String,
        /// Its arguments (an object).
        arguments: Value,
    },
}

impl ScheduleSpec {
    /// A schedule that posts `message` on the cron expression `cron` (UTC).
    pub fn cron(cron: &str, message: &str) -> Self {
        ScheduleSpec {
            cron: Some(cron.to_owned()),
            message: Some(message.to_owned()),
            ..Self::default()
        }
    }

    /// A schedule that posts `message` once, `seconds` from now.
    pub fn after(seconds: u64, message: &str) -> Self {
        ScheduleSpec {
            delay_seconds: Some(seconds),
            message: Some(message.to_owned()),
            ..Self::default()
        }
    }

    /// A schedule that posts `message` every `seconds`.
    pub fn every(seconds: u64, message: &str) -> Self {
        ScheduleSpec {
            every_seconds: Some(seconds),
            message: Some(message.to_owned()),
            ..Self::default()
        }
    }

    /// Checks the request and reads it: when it is due (its first due time after `now`), what
    /// it does. Every problem is named with the field it is in.
    pub fn read(&self, now: i64) -> Result<(When, i64, ScheduleAction), Invalid> {
        let whens = [
            self.at.is_some(),
            self.delay_seconds.is_some(),
            self.every_seconds.is_some(),
            self.cron.is_some(),
        ];
        if whens.iter().filter(|w| **w).count() != 1 {
            return Err(bad(
                "",
                "give exactly one of at, delay_seconds, every_seconds, cron",
            ));
        }
        let when = if let Some(at) = &self.at {
            let at = DateTime::parse_from_rfc3339(at).map_err(|e| {
                bad(
                    "at",
                    format!("not an RFC 3339 instant ({e}), e.g. 2026-11-25T09:00:00Z"),
                )
            })?;
            When::Once(at.timestamp_millis())
        } else if let Some(delay) = self.delay_seconds {
            When::Once(now.saturating_add(seconds_ms("delay_seconds", delay, 0)?))
        } else if let Some(every) = self.every_seconds {
            When::Every(seconds_ms("every_seconds", every, MIN_INTERVAL_MS)?)
        } else {
            let expr = self.cron.as_deref().unwrap_or_default().trim();
            parse_cron(expr).map_err(|why| bad("cron", why))?;
            When::Cron(expr.to_owned())
        };
        let first = when.first_due(now).map_err(|why| bad("cron", why))?;
        if let Some(name) = &self.name {
            if name.len() > 200 {
                return Err(bad("name", "at most 200 bytes"));
            }
        }
        let action = match (&self.message, &self.tool) {
            (Some(text), None) => {
                if text.trim().is_empty() {
                    return Err(bad("message", "must not be empty"));
                }
                if text.len() > MAX_CONTENT_BYTES {
                    return Err(bad("message", format!("at most {MAX_CONTENT_BYTES} bytes")));
                }
                if self.arguments.is_some() {
                    return Err(bad("arguments", "only with tool"));
                }
                ScheduleAction::Message(text.clone())
            }
            (None, Some(name)) => {
                let arguments = Value::Object(self.arguments.clone().unwrap_or_default());
                if arguments.to_string().len() > MAX_SCHEDULE_ARGUMENTS_BYTES {
                    return Err(bad(
                        "arguments",
                        format!("at most {MAX_SCHEDULE_ARGUMENTS_BYTES} bytes as JSON"),
                    ));
                }
                ScheduleAction::Tool {
                    name: name.clone(),
                    arguments,
                }
            }
            _ => return Err(bad("", "give exactly one of message, tool")),
        };
        Ok((when, first, action))
    }
}

/// A problem with `field` of the request (or with the request as a whole when empty).
fn bad(field: &str, why: impl std::fmt::Display) -> Invalid {
    if field.is_empty() {
        Invalid::new(why.to_string())
    } else {
        Invalid::new(format!("{field}: {why}"))
    }
}

fn seconds_ms(field: &str, seconds: u64, min_ms: i64) -> Result<i64, Invalid> {
    let ms = i64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .filter(|ms| *ms <= MAX_SLEEP_MS)
        .ok_or_else(|| bad(field, "at most one year"))?;
    if ms < min_ms {
        return Err(bad(field, format!("at least {} s", min_ms / 1000)));
    }
    Ok(ms)
}

/// Parses a cron expression of five fields (minute first) or six (seconds first), in UTC.
fn parse_cron(expr: &str) -> Result<Cron, String> {
    if expr.is_empty() || expr.len() > MAX_CRON_LEN {
        return Err(format!("a cron expression of 1 to {MAX_CRON_LEN} bytes"));
    }
    Cron::from_str(expr).map_err(|e| {
        format!(
            "not a cron expression ({e}): give five fields (minute hour day-of-month month \
             day-of-week, e.g. `0 9 * * 1-5`), six with seconds first (seven with a year \
             last), or a nickname such as `@daily`"
        )
    })
}

fn utc(ms: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms).single()
}

impl When {
    /// The first due time after `now`.
    pub fn first_due(&self, now: i64) -> Result<i64, String> {
        match self {
            When::Once(at) => Ok(*at),
            When::Every(every) => Ok(now.saturating_add(*every)),
            When::Cron(expr) => next_cron(expr, now),
        }
    }

    /// The due time after the one at `due` that fired at `now`: `None` when it does not repeat.
    /// Missed occurrences are not fired one by one: after downtime a schedule fires once, then
    /// keeps its rhythm from the first due time after `now`.
    pub fn next_due(&self, due: i64, now: i64) -> Result<Option<i64>, String> {
        match self {
            When::Once(_) => Ok(None),
            When::Every(every) => {
                let every = (*every).max(MIN_INTERVAL_MS);
                let behind = now.saturating_sub(due).max(0);
                // The first point of the grid `due + k * every` strictly after `now`.
                let steps = behind / every + 1;
                Ok(Some(due.saturating_add(steps.saturating_mul(every))))
            }
            When::Cron(expr) => next_cron(expr, now.max(due)).map(Some),
        }
    }

    /// The stored form: kind and spec.
    pub fn stored(&self) -> (&'static str, String) {
        match self {
            When::Once(at) => ("once", at.to_string()),
            When::Every(every) => ("every", every.to_string()),
            When::Cron(expr) => ("cron", expr.clone()),
        }
    }

    /// Reads the stored form back.
    pub fn from_stored(kind: &str, spec: &str) -> Option<When> {
        match kind {
            "once" => spec.parse().ok().map(When::Once),
            "every" => spec.parse().ok().map(When::Every),
            "cron" => Some(When::Cron(spec.to_owned())),
            _ => None,
        }
    }
}

/// The first occurrence of `expr` strictly after `after_ms`.
fn next_cron(expr: &str, after_ms: i64) -> Result<i64, String> {
    let cron = parse_cron(expr)?;
    let after = utc(after_ms).ok_or("a time out of range")?;
    let next = cron
        .find_next_occurrence(&after, false)
        .map_err(|e| format!("no next occurrence: {e}"))?;
    Ok(next.timestamp_millis())
}

/// A stored schedule, as listed and as sent in `schedule` frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Schedule {
    /// Random UUID.
    pub id: String,
    /// The label given at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `once`, `every` or `cron`.
    pub kind: String,
    /// For `once`: the instant (ms since the epoch); for `every`: the interval in ms; for
    /// `cron`: the expression.
    pub spec: String,
    /// The next due time (ms since the epoch); none once it is done or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at: Option<i64>,
    /// What it does: `{"message": text}` or `{"tool": name, "arguments": {...}}`.
    pub action: Value,
    /// `active`, `done` (a one-time schedule that fired) or `cancelled`.
    pub status: String,
    /// Who made it: `server` (the API with the server key) or `tool`.
    pub created_by: String,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// Times it fired.
    pub fired_count: i64,
    /// When it last fired, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<i64>,
}

impl ScheduleAction {
    /// The stored (and listed) form.
    pub fn to_value(&self) -> Value {
        match self {
            ScheduleAction::Message(text) => serde_json::json!({ "message": text }),
            ScheduleAction::Tool { name, arguments } => {
                serde_json::json!({ "tool": name, "arguments": arguments })
            }
        }
    }

    /// Reads the stored form back.
    pub fn from_value(value: &Value) -> Option<ScheduleAction> {
        if let Some(text) = value.get("message").and_then(Value::as_str) {
            return Some(ScheduleAction::Message(text.to_owned()));
        }
        let name = value.get("tool").and_then(Value::as_str)?;
        Some(ScheduleAction::Tool {
            name: name.to_owned(),
            arguments: value
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        })
    }
}
