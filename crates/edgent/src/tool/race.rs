//! Durable races: [`FlowState::race`] waits for the first of several sleeps and webhooks, like
//! `Promise.race([webhook, sleep("1h")])`, and records which one won.
//!
//! Each wait of a race is recorded as a step of its own (a sleep's wake time, a webhook's
//! timeout), and the race as one more whose value is the [`Winner`]. The call parks until the
//! earliest sleep or timeout, or until a webhook of the race receives its body. The first to
//! complete wins:
//! - a body can only arrive before the race's earliest sleep or timeout (the webhook's
//!   deadline is that instant, so a later POST is refused), and the first body closes the
//!   race's other webhooks in the same statement (trigger `webhook_race_won`): a body that
//!   was received always came first;
//! - otherwise the wait with the earliest end wins (the first in the list on a tie).
//!
//! The run that finds the winner closes the losers (their steps `cancelled`, their webhooks
//! `closed`, so a POST gets 409) and records the winner last: a crash in between finds the
//! same winner again, and every later run replays the record without waiting.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::durable::wake_time;
use super::{FlowState, ToolError};
use crate::engine::durable::{CallStatus, Suspension};
use crate::engine::tool_records::WebhookRecord;
use crate::values::{StepKind, StepStatus, WebhookStatus};

/// One wait of a [`FlowState::race`]. Its name is a step name of the call, like a sleep's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// A durable sleep of `duration` from the race's first run.
    Sleep {
        /// The step name.
        name: String,
        /// How long.
        duration: Duration,
    },
    /// A POST to the call's webhook `name` (the one [`FlowState::webhook_url`] gives), for at
    /// most `timeout` from the race's first run.
    Webhook {
        /// The webhook's name.
        name: String,
        /// How long it is waited for.
        timeout: Duration,
    },
}

impl Wait {
    /// A sleep of `duration` named `name`.
    pub fn sleep(name: impl Into<String>, duration: Duration) -> Self {
        Wait::Sleep {
            name: name.into(),
            duration,
        }
    }

    /// Webhook `name`, waited for at most `timeout`.
    pub fn webhook(name: impl Into<String>, timeout: Duration) -> Self {
        Wait::Webhook {
            name: name.into(),
            timeout,
        }
    }

    /// Its step name.
    pub fn name(&self) -> &str {
        match self {
            Wait::Sleep { name, .. } | Wait::Webhook { name, .. } => name,
        }
    }
}

/// The wait that ended a race first, recorded as the race's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "won", rename_all = "snake_case")]
pub enum Winner {
    /// The sleep `name` ended first.
    Slept {
        /// The sleep's name.
        name: String,
    },
    /// Webhook `name` received `body` first.
    Received {
        /// The webhook's name.
        name: String,
        /// The JSON that was POSTed.
        body: Value,
    },
    /// Webhook `name`'s own timeout passed first, with no body.
    TimedOut {
        /// The webhook's name.
        name: String,
    },
}

impl Winner {
    /// The name of the wait that won.
    pub fn name(&self) -> &str {
        match self {
            Winner::Slept { name } | Winner::Received { name, .. } | Winner::TimedOut { name } => {
                name
            }
        }
    }

    /// The body, when a webhook won with one.
    pub fn body(&self) -> Option<&Value> {
        match self {
            Winner::Received { body, .. } => Some(body),
            _ => None,
        }
    }
}

/// A wait of a race as recorded: when it ends by itself, and its webhook.
struct Member<'w> {
    wait: &'w Wait,
    ends_at: i64,
    hook: Option<WebhookRecord>,
}

impl FlowState {
    /// Waits for the first of `waits` to complete, durably, and returns which one
    /// ([`Winner`]); the others are cancelled. The call parks (`waiting` if a webhook is among
    /// the waits, else `sleeping`) until the earliest sleep or timeout, or until a body is
    /// POSTed to one of the webhooks; the winner is recorded, so a later run returns it at
    /// once. A webhook that lost is closed (a POST to it gets 409), and a sleep that lost
    /// never wakes the call. `name` and every wait's name are step names of this call.
    ///
    /// ```
    /// # use edgent::prelude::*;
    /// # use edgent::tool::{Wait, Winner};
    /// async fn approval_or_timeout(flow: FlowState) -> Result<String, ToolError> {
    ///     let winner = flow
    ///         .race("reply_or_timeout", [
    ///             Wait::webhook("reply", Duration::from_secs(86_400)),
    ///             Wait::sleep("timeout", Duration::from_secs(3_600)),
    ///         ])
    ///         .await?;
    ///     Ok(match winner {
    ///         Winner::Received { body, .. } => format!("they answered {body}"),
    ///         other => format!("no answer ({} ended first)", other.name()),
    ///     })
    /// }
    /// ```
    pub async fn race(
        &self,
        name: &str,
        waits: impl IntoIterator<Item = Wait>,
    ) -> Result<Winner, ToolError> {
        let waits: Vec<Wait> = waits.into_iter().collect();
        self.run.claim(name)?;
        if waits.is_empty() {
            return Err(ToolError::fatal(format!(
                "race {name:?} has no waits; give it at least one sleep or webhook"
            )));
        }
        for wait in &waits {
            self.run.claim(wait.name())?;
        }
        let call = &self.tool_call_id;
        let now = self.host().now_ms();
        let recorded = self.store().step(call, name)?;
        if let Some(done) = recorded.as_ref().filter(|s| s.status == StepStatus::Done) {
            let value = done.value.as_deref().unwrap_or("null");
            return serde_json::from_str(value).map_err(|e| {
                ToolError::fatal(format!(
                    "race {name:?}: the recorded winner no longer fits ({e}); did the workflow change?"
                ))
            });
        }
        let members = waits
            .iter()
            .map(|wait| self.race_member(wait, now))
            .collect::<Result<Vec<_>, _>>()?;
        let ends_at = members.iter().map(|m| m.ends_at).min().unwrap_or(now);
        for hook in members.iter().filter_map(|m| m.hook.as_ref()) {
            if hook.race.is_none() {
                self.store().join_race(&hook.token, name, ends_at)?;
            }
        }
        if recorded.is_none() {
            self.store().begin_step(
                call,
                name,
                StepKind::Race,
                StepStatus::Waiting,
                Some(ends_at),
                now,
            )?;
            self.progress(name, "race", "waiting", None);
        }
        if let Some(winner) = winner(&members, ends_at, now) {
            self.settle_race(name, &members, &winner, now)?;
            return Ok(winner);
        }
        let with_webhook = members.iter().any(|m| m.hook.is_some());
        let detail: Vec<Value> = members
            .iter()
            .map(|m| match (m.wait, &m.hook) {
                (Wait::Webhook { name, .. }, Some(hook)) => json!({
                    "webhook": name,
                    "url": self.webhook_address(&hook.token),
                    "until": m.ends_at,
                }),
                _ => json!({ "sleep": m.wait.name(), "until": m.ends_at }),
            })
            .collect();
        self.run.park(Suspension {
            // `waiting`: a delivery wakes only a waiting call.
            status: if with_webhook {
                CallStatus::Waiting
            } else {
                CallStatus::Sleeping
            },
            wake_at: Some(ends_at),
            detail: json!({ "race": name, "until": ends_at, "waits": detail }),
        });
        // Never completes: the runner sees the parked run and drops this future.
        std::future::pending().await
    }

    /// Records a wait of a race on its first run (its end time and, for a webhook, the
    /// webhook); later runs read the record.
    fn race_member<'w>(&self, wait: &'w Wait, now: i64) -> Result<Member<'w>, ToolError> {
        let call = &self.tool_call_id;
        let (kind, status, duration, hook) = match wait {
            Wait::Sleep { duration, .. } => (StepKind::Sleep, StepStatus::Sleeping, duration, None),
            Wait::Webhook { name, timeout } => (
                StepKind::Webhook,
                StepStatus::Waiting,
                timeout,
                Some(self.webhook(name)?),
            ),
        };
        let ends_at = match self.store().step(call, wait.name())? {
            Some(step) => step.wake_at.unwrap_or(now),
            None => {
                let ends_at = wake_time(now, *duration);
                self.store()
                    .begin_step(call, wait.name(), kind, status, Some(ends_at), now)?;
                ends_at
            }
        };
        Ok(Member {
            wait,
            ends_at,
            hook,
        })
    }

    /// Ends every wait of a race once its winner is known, then records the winner (last: a
    /// crash before it finds the same winner again).
    fn settle_race(
        &self,
        name: &str,
        members: &[Member<'_>],
        winner: &Winner,
        now: i64,
    ) -> Result<(), ToolError> {
        let call = &self.tool_call_id;
        for m in members {
            let status = match winner {
                _ if m.wait.name() != winner.name() => StepStatus::Cancelled,
                Winner::TimedOut { .. } => StepStatus::TimedOut,
                _ => StepStatus::Done,
            };
            let ended = match status {
                StepStatus::TimedOut => Some(WebhookStatus::TimedOut),
                StepStatus::Cancelled => Some(WebhookStatus::Closed),
                _ => None,
            };
            if let (Some(hook), Some(ended)) = (&m.hook, ended) {
                self.store().end_webhook(&hook.token, ended)?;
            }
            self.store()
                .end_step(call, m.wait.name(), status, None, now)?;
        }
        let value = serde_json::to_string(winner)?;
        self.store()
            .end_step(call, name, StepStatus::Done, Some(&value), now)?;
        self.progress(name, "race", "done", None);
        Ok(())
    }
}

/// The race's winner at `now`, if it is decided: a webhook that received its body (it came
/// before any sleep or timeout, which closed the webhooks), else, once `ends_at` has passed,
/// the first wait whose own end is `ends_at`.
fn winner(members: &[Member<'_>], ends_at: i64, now: i64) -> Option<Winner> {
    let received = members.iter().find_map(|m| {
        let hook = m.hook.as_ref()?;
        (hook.status == WebhookStatus::Received).then(|| Winner::Received {
            name: m.wait.name().to_owned(),
            body: hook
                .body
                .as_deref()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null),
        })
    });
    if received.is_some() || now < ends_at {
        return received;
    }
    let first = members.iter().find(|m| m.ends_at == ends_at)?;
    let name = first.wait.name().to_owned();
    Some(match first.wait {
        Wait::Sleep { .. } => Winner::Slept { name },
        Wait::Webhook { .. } => Winner::TimedOut { name },
    })
}
