//! What durable tool calls record in the thread's SQLite: workflow steps (so a replay returns
//! them instead of running them again), webhooks, the attempts window of rate limits, cached
//! results, and the execution history served at `GET /api/threads/:id/tool-calls`.

use serde::Serialize;
use serde_json::Value;

use crate::engine::durable::{Window, WINDOW_MS};
use crate::engine::schema::Feature;
use crate::engine::store::{Order, Store};
use crate::values::sql::{Row, SqlError};
use crate::values::{CallStatus, CallToolResult, StepKind, StepStatus, WebhookStatus};

/// A recorded step of a workflow call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    /// The name the workflow gave it (unique within the call).
    pub name: String,
    /// A step, a sleep or a webhook wait.
    pub kind: StepKind,
    /// Where it is.
    pub status: StepStatus,
    /// A done step's value (JSON text), returned on replay.
    #[serde(skip)]
    pub value: Option<String>,
    /// A sleep's wake time.
    pub wake_at: Option<i64>,
    /// When it first started.
    pub started_at: i64,
    /// When it finished.
    pub finished_at: Option<i64>,
    /// `finished_at - started_at`, for run metrics.
    pub duration_ms: Option<i64>,
}

/// A webhook a workflow waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRecord {
    /// The unguessable token in its URL.
    pub token: String,
    /// The call waiting for it.
    pub call_id: String,
    /// Its name within the call.
    pub name: String,
    /// Open, received or timed out.
    pub status: WebhookStatus,
    /// When waiting ends without it.
    pub deadline_at: Option<i64>,
    /// The JSON body that resumed the workflow.
    pub body: Option<String>,
    /// The race it is one of the waits of (`flow.race`), if any.
    pub race: Option<String>,
}

/// One tool execution, as listed by `GET /api/threads/:id/tool-calls`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// The call id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The arguments (as the model or the caller wrote them).
    pub arguments: Value,
    /// `model` or `queue`.
    pub origin: String,
    /// Where the call is in its life.
    pub status: CallStatus,
    /// The result text the model saw, once finished.
    pub result: Option<String>,
    /// Attempts started.
    pub attempts: i64,
    /// Runs cut short by a crash or eviction.
    pub interruptions: i64,
    /// The last failed attempt's error.
    pub last_error: Option<String>,
    /// What a suspended call waits for.
    pub waiting_for: Option<Value>,
    /// When a suspended call runs again.
    pub wake_at: Option<i64>,
    /// The version of its tool's code its runs are on (none before its first start).
    pub version: Option<u32>,
    /// When it was queued.
    pub created_at: i64,
    /// When its first attempt started.
    pub started_at: Option<i64>,
    /// When it finished.
    pub finished_at: Option<i64>,
    /// From first start to finish.
    pub duration_ms: Option<i64>,
    /// Each attempt: number, start, end, outcome and error.
    pub attempt_log: Vec<AttemptRecord>,
    /// Workflow steps with their durations (run metrics).
    pub steps: Vec<StepRecord>,
    /// Runs of other tools inside this call (`flow.call_tool`, TOML workflow steps, a
    /// sub-prompt's tools), in order: each counted against its tool's rate limit.
    pub nested: Vec<NestedAttempt>,
}

/// One run of a tool nested in another call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NestedAttempt {
    /// Where it ran: the enclosing call's id, then the step and position (a workflow) or the
    /// sub-prompt's call id.
    pub key: String,
    /// The tool that ran.
    pub tool: String,
    /// The attempt of this key (a rerun of the enclosing step runs it again).
    #[serde(flatten)]
    pub attempt: AttemptRecord,
}

/// One attempt of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// 1-based.
    pub attempt: i64,
    /// Start time.
    pub started_at: i64,
    /// End time (none while running or suspended).
    pub finished_at: Option<i64>,
    /// `success`, `error`, `failed` or `timeout`.
    pub outcome: Option<String>,
    /// The failure's text.
    pub error: Option<String>,
}

/// A page of the execution history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallPage {
    /// The calls on this page.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Calls in the thread.
    pub total: i64,
    /// Whether another page follows.
    pub has_more: bool,
}

const STEP_COLUMNS: &str = "name, kind, status, value, wake_at, started_at, finished_at";

fn step_from_row(r: &Row) -> Result<StepRecord, SqlError> {
    let started_at = r.int(5)?;
    let finished_at = r.opt_int(6)?;
    Ok(StepRecord {
        name: r.text(0)?,
        kind: StepKind::parse(&r.text(1)?),
        status: StepStatus::parse(&r.text(2)?),
        value: r.opt_text(3)?,
        wake_at: r.opt_int(4)?,
        started_at,
        finished_at,
        duration_ms: finished_at.map(|f| f - started_at),
    })
}

const WEBHOOK_COLUMNS: &str = "token, call_id, name, status, deadline_at, body, race";

fn webhook_from_row(r: &Row) -> Result<WebhookRecord, SqlError> {
    Ok(WebhookRecord {
        token: r.text(0)?,
        call_id: r.text(1)?,
        name: r.text(2)?,
        status: WebhookStatus::parse(&r.text(3)?),
        deadline_at: r.opt_int(4)?,
        body: r.opt_text(5)?,
        race: r.opt_text(6)?,
    })
}

/// Most attempts listed per call in the execution history (its own and nested ones).
pub const MAX_LISTED_ATTEMPTS: u32 = 100;

impl Store<'_> {
    // ---- workflow steps ------------------------------------------------------------------

    /// A step of `call_id` by name, if recorded.
    pub fn step(&self, call_id: &str, name: &str) -> Result<Option<StepRecord>, SqlError> {
        let rows = self.feature_exec(
            &format!("SELECT {STEP_COLUMNS} FROM tool_steps WHERE call_id = ? AND name = ?"),
            &[call_id.into(), name.into()],
        )?;
        rows.first().map(step_from_row).transpose()
    }

    /// Whether a call recorded anything a later run would replay: a step (a sleep, a webhook
    /// wait and a race are steps too) or a webhook handed out.
    pub fn call_has_records(&self, call_id: &str) -> Result<bool, SqlError> {
        let rows = self.feature_exec(
            "SELECT 1 FROM tool_steps WHERE call_id = ?
             UNION ALL SELECT 1 FROM webhooks WHERE call_id = ? LIMIT 1",
            &[call_id.into(), call_id.into()],
        )?;
        Ok(!rows.is_empty())
    }

    /// The steps of a call in the order they first ran.
    pub fn steps(&self, call_id: &str) -> Result<Vec<StepRecord>, SqlError> {
        let rows = self.feature_exec(
            &format!("SELECT {STEP_COLUMNS} FROM tool_steps WHERE call_id = ? ORDER BY seq"),
            &[call_id.into()],
        )?;
        rows.iter().map(step_from_row).collect()
    }

    /// Records that a step started (or, for a sleep, until when it sleeps). Starting a step
    /// again after an interruption keeps its first start time.
    pub fn begin_step(
        &self,
        call_id: &str,
        name: &str,
        kind: StepKind,
        status: StepStatus,
        wake_at: Option<i64>,
        now: i64,
    ) -> Result<(), SqlError> {
        self.feature_insert(
            Feature::Durable,
            "INSERT INTO tool_steps (call_id, name, kind, seq, status, wake_at, started_at)
             VALUES (?, ?, ?, (SELECT COUNT(*) + 1 FROM tool_steps WHERE call_id = ?), ?, ?, ?)
             ON CONFLICT (call_id, name) DO UPDATE SET status = excluded.status",
            &[
                call_id.into(),
                name.into(),
                kind.as_str().into(),
                call_id.into(),
                status.as_str().into(),
                wake_at.into(),
                now.into(),
            ],
        )?;
        Ok(())
    }

    /// Records a step's end: `done` with its value (returned on every replay) or `failed`.
    pub fn end_step(
        &self,
        call_id: &str,
        name: &str,
        status: StepStatus,
        value: Option<&str>,
        now: i64,
    ) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE tool_steps SET status = ?, value = ?, finished_at = ? WHERE call_id = ? AND name = ?",
            &[
                status.as_str().into(),
                value.into(),
                now.into(),
                call_id.into(),
                name.into(),
            ],
        )?;
        Ok(())
    }

    // ---- webhooks ------------------------------------------------------------------------

    /// The webhook `name` of a call, if created.
    pub fn webhook_for(
        &self,
        call_id: &str,
        name: &str,
    ) -> Result<Option<WebhookRecord>, SqlError> {
        let rows = self.feature_exec(
            &format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE call_id = ? AND name = ?"),
            &[call_id.into(), name.into()],
        )?;
        rows.first().map(webhook_from_row).transpose()
    }

    /// The webhook holding `token`.
    pub fn webhook_by_token(&self, token: &str) -> Result<Option<WebhookRecord>, SqlError> {
        let rows = self.feature_exec(
            &format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE token = ?"),
            &[token.into()],
        )?;
        rows.first().map(webhook_from_row).transpose()
    }

    /// Creates webhook `name` of a call with `token` (kept if it exists) and returns it.
    pub fn create_webhook(
        &self,
        call_id: &str,
        name: &str,
        token: &str,
        now: i64,
    ) -> Result<WebhookRecord, SqlError> {
        self.feature_insert(
            Feature::Durable,
            "INSERT INTO webhooks (token, call_id, name, created_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (call_id, name) DO NOTHING",
            &[token.into(), call_id.into(), name.into(), now.into()],
        )?;
        self.webhook_for(call_id, name)?
            .ok_or_else(|| SqlError("webhook vanished after insert".into()))
    }

    /// Sets when waiting for a webhook ends, once.
    pub fn set_webhook_deadline(&self, token: &str, deadline_at: i64) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE webhooks SET deadline_at = COALESCE(deadline_at, ?) WHERE token = ?",
            &[deadline_at.into(), token.into()],
        )?;
        Ok(())
    }

    /// Makes a webhook one of the waits of `race`, whose wait ends at `ends_at` (the race's
    /// earliest sleep or timeout), once: a delivery from then on is refused, since the race
    /// was decided without it.
    pub fn join_race(&self, token: &str, race: &str, ends_at: i64) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE webhooks SET race = COALESCE(race, ?), deadline_at = COALESCE(deadline_at, ?)
             WHERE token = ?",
            &[race.into(), ends_at.into(), token.into()],
        )?;
        Ok(())
    }

    /// Stores the body of an open webhook. False if it was no longer open (already received
    /// or timed out), in which case nothing changes.
    pub fn receive_webhook(&self, token: &str, body: &str, now: i64) -> Result<bool, SqlError> {
        let rows = self.feature_exec(
            "UPDATE webhooks SET status = 'received', body = ?, received_at = ?
             WHERE token = ? AND status = 'open' RETURNING call_id",
            &[body.into(), now.into(), token.into()],
        )?;
        Ok(!rows.is_empty())
    }

    /// Ends an open webhook without a body: `timed_out` (its wait timed out) or `closed`
    /// (another wait of its race won). A webhook no longer open keeps its status.
    pub fn end_webhook(&self, token: &str, status: WebhookStatus) -> Result<(), SqlError> {
        self.feature_exec(
            "UPDATE webhooks SET status = ? WHERE token = ? AND status = 'open'",
            &[status.as_str().into(), token.into()],
        )?;
        Ok(())
    }

    // ---- rate limits, cache --------------------------------------------------------------

    /// Attempts of `tool` started since `since`, and when the oldest leaves the window.
    pub fn calls_since(&self, tool: &str, since: i64) -> Result<Window, SqlError> {
        let rows = self.sql().exec(
            "SELECT COUNT(*), MIN(started_at) FROM tool_attempts WHERE name = ? AND started_at > ?",
            &[tool.into(), since.into()],
        )?;
        let (used, oldest) = match rows.first() {
            Some(r) => (r.int(0)?, r.opt_int(1)?),
            None => (0, None),
        };
        Ok(Window {
            used: u32::try_from(used).unwrap_or(u32::MAX),
            frees_at: oldest.map_or(since + WINDOW_MS, |o| o + WINDOW_MS),
        })
    }

    /// A successful result of `tool` for the same input (`key` from
    /// [`crate::engine::durable::cache_key`]) stored since `since`.
    pub fn cached_result(
        &self,
        tool: &str,
        key: &str,
        since: i64,
    ) -> Result<Option<CallToolResult>, SqlError> {
        let rows = self.feature_exec(
            "SELECT result FROM tool_cache WHERE tool = ? AND arguments = ? AND created_at >= ?",
            &[tool.into(), key.into(), since.into()],
        )?;
        Ok(rows
            .first()
            .map(|r| r.text(0))
            .transpose()?
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Stores a successful result for later calls with the same input (`key` from
    /// [`crate::engine::durable::cache_key`]).
    pub fn cache_result(
        &self,
        tool: &str,
        key: &str,
        result: &CallToolResult,
        now: i64,
    ) -> Result<(), SqlError> {
        let text = serde_json::to_string(result).map_err(|e| SqlError(e.to_string()))?;
        self.feature_insert(
            Feature::ToolCache,
            "INSERT INTO tool_cache (tool, arguments, result, created_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (tool, arguments) DO UPDATE SET result = excluded.result,
                 created_at = excluded.created_at",
            &[tool.into(), key.into(), text.into(), now.into()],
        )?;
        Ok(())
    }

    /// The last failure (or a rejection's reason) recorded on a call.
    pub fn tool_call_error(&self, call_id: &str) -> Result<Option<String>, SqlError> {
        let rows = self.sql().exec(
            "SELECT last_error FROM tool_calls WHERE id = ?",
            &[call_id.into()],
        )?;
        Ok(rows.first().map(|r| r.opt_text(0)).transpose()?.flatten())
    }

    /// Stores a rejection's reason where the gate finds it.
    pub fn set_tool_call_error(&self, call_id: &str, error: &str) -> Result<(), SqlError> {
        self.sql().exec(
            "UPDATE tool_calls SET last_error = ? WHERE id = ?",
            &[error.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Whether a call of `tool` is running or parked.
    pub fn tool_busy(&self, tool: &str) -> Result<bool, SqlError> {
        let rows = self.sql().exec(
            "SELECT 1 FROM tool_calls WHERE status IN
                 ('running', 'retrying', 'sleeping', 'waiting', 'rate_limited') AND name = ? LIMIT 1",
            &[tool.into()],
        )?;
        Ok(!rows.is_empty())
    }

    /// The status of the latest finished call of `tool`.
    pub fn last_tool_status(&self, tool: &str) -> Result<Option<String>, SqlError> {
        let rows = self.sql().exec(
            "SELECT status FROM tool_calls WHERE name = ? AND finished_at IS NOT NULL
             ORDER BY finished_at DESC LIMIT 1",
            &[tool.into()],
        )?;
        rows.first().map(|r| r.text(0)).transpose()
    }

    // ---- execution history ---------------------------------------------------------------

    /// A page of the thread's tool calls with their attempts and steps.
    pub fn tool_call_page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
    ) -> Result<ToolCallPage, SqlError> {
        let direction = order.sql();
        let total = self
            .sql()
            .exec("SELECT COUNT(*) FROM tool_calls", &[])?
            .first()
            .map(|r| r.int(0))
            .transpose()?
            .unwrap_or(0);
        let rows = self.sql().exec(
            &format!(
                "SELECT c.id, c.name, c.arguments, c.origin, c.status, m.content, c.attempts,
                        c.interruptions, c.last_error, c.detail, c.wake_at, c.created_at,
                        c.first_started_at, c.finished_at, c.version
                 FROM tool_calls c LEFT JOIN messages m ON m.id = c.result_message_id
                 ORDER BY c.seq {direction} LIMIT ? OFFSET ?"
            ),
            &[limit.into(), offset.into()],
        )?;
        let mut calls = Vec::with_capacity(rows.len());
        for r in &rows {
            let id = r.text(0)?;
            let arguments = r.text(2)?;
            let started_at = r.opt_int(12)?;
            let finished_at = r.opt_int(13)?;
            let (attempt_log, nested) = self.attempts(&id)?;
            calls.push(ToolCallRecord {
                tool: r.text(1)?,
                arguments: serde_json::from_str(&arguments).unwrap_or(Value::String(arguments)),
                origin: r.text(3)?,
                status: CallStatus::parse(&r.text(4)?),
                result: r.opt_text(5)?,
                attempts: r.int(6)?,
                interruptions: r.int(7)?,
                last_error: r.opt_text(8)?,
                waiting_for: r.opt_text(9)?.and_then(|d| serde_json::from_str(&d).ok()),
                wake_at: r.opt_int(10)?,
                version: r.opt_int(14)?.and_then(|v| u32::try_from(v).ok()),
                created_at: r.int(11)?,
                started_at,
                finished_at,
                duration_ms: started_at.zip(finished_at).map(|(s, f)| f - s),
                attempt_log,
                nested,
                steps: self.steps(&id)?,
                id,
            });
        }
        let has_more = i64::from(offset) + (calls.len() as i64) < total;
        Ok(ToolCallPage {
            tool_calls: calls,
            total,
            has_more,
        })
    }

    /// Opens an attempt of a call nested in another (see `tool::nested`): `key` starts with
    /// the enclosing call's id and a `/`. An attempt of the same key left open (a crash cut
    /// its run short) is closed as `interrupted` first. Counts in `name`'s rate-limit window.
    pub fn begin_nested_attempt(&self, now: i64, key: &str, name: &str) -> Result<(), SqlError> {
        self.sql().exec(
            "UPDATE tool_attempts SET finished_at = ?, outcome = 'interrupted'
             WHERE call_id = ? AND finished_at IS NULL",
            &[now.into(), key.into()],
        )?;
        self.sql().exec(
            "INSERT INTO tool_attempts (call_id, name, attempt, started_at)
             VALUES (?, ?, (SELECT COUNT(*) + 1 FROM tool_attempts WHERE call_id = ?), ?)",
            &[key.into(), name.into(), key.into(), now.into()],
        )?;
        Ok(())
    }

    /// The attempts of a call, in order, and those of the tools nested in it (their keys start
    /// with the call's id and a `/`: one range of the index). The newest
    /// [`MAX_LISTED_ATTEMPTS`] in all: a workflow calling tools in a loop lists its latest
    /// runs, and a page of calls stays bounded.
    pub fn attempts(
        &self,
        call_id: &str,
    ) -> Result<(Vec<AttemptRecord>, Vec<NestedAttempt>), SqlError> {
        let rows = self.sql().exec(
            "SELECT attempt, started_at, finished_at, outcome, error, call_id, name
             FROM tool_attempts
             WHERE call_id = ? OR (call_id > ? AND call_id < ?)
             ORDER BY seq DESC LIMIT ?",
            &[
                call_id.into(),
                format!("{call_id}/").into(),
                // '0' follows '/': every key with the prefix sorts before this.
                format!("{call_id}0").into(),
                MAX_LISTED_ATTEMPTS.into(),
            ],
        )?;
        let (mut own, mut nested) = (Vec::new(), Vec::new());
        // Newest first from the index, kept oldest first.
        for r in rows.iter().rev() {
            let attempt = AttemptRecord {
                attempt: r.int(0)?,
                started_at: r.int(1)?,
                finished_at: r.opt_int(2)?,
                outcome: r.opt_text(3)?,
                error: r.opt_text(4)?,
            };
            let key = r.text(5)?;
            if key == call_id {
                own.push(attempt);
            } else {
                nested.push(NestedAttempt {
                    key,
                    tool: r.text(6)?,
                    attempt,
                });
            }
        }
        Ok((own, nested))
    }
}
