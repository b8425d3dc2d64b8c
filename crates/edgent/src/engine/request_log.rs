//! The model request log: one row per attempt at a model call, in the thread's SQLite, read by
//! `GET /api/threads/:id/logs`.
//!
//! Rows are append-only and keyed by `seq`, so the total is `MAX(seq)` and a page is a range
//! of the primary key: neither grows with the log.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ModelConfig;
use crate::engine::store::Order;
use crate::llm::stream::Completion;
use crate::values::redact::redact_secrets;
use crate::values::sql::{Row, Sql, SqlError};

/// One attempt at a model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequestLog {
    /// Position in the log (assigned when recorded).
    #[serde(default)]
    pub seq: i64,
    /// The assistant message the call was for.
    pub message_id: Option<String>,
    /// Model row name.
    pub model: String,
    /// `openai`, `anthropic` or `workers_ai`.
    pub provider: String,
    /// 1 for the first try of this model in this call, 2 for its retry.
    pub attempt: u32,
    /// `ok` or `error`.
    pub status: String,
    /// The HTTP status, when the server answered.
    pub http_status: Option<u16>,
    /// From sending the request to the end of the reply (or the failure).
    pub latency_ms: i64,
    /// From sending the request to the first streamed chunk.
    pub ttft_ms: Option<i64>,
    /// Prompt tokens reported by the provider.
    pub input_tokens: u64,
    /// Completion tokens reported by the provider.
    pub output_tokens: u64,
    /// US dollars, from the model's prices.
    pub cost: f64,
    /// What went wrong (secrets redacted).
    pub error: Option<String>,
    /// 0 for the main conversation, deeper for sub-prompts.
    #[serde(default)]
    pub depth: u32,
    /// When the attempt started, ms since the epoch.
    pub created_at: i64,
    /// The tools the attempt offered and, when the prompt's `max_offered_tools` left some
    /// out, how they were chosen: `{"offered", "max"?, "scores"?}` as
    /// [`ToolSelection::to_json`](crate::tool::offer::ToolSelection::to_json) writes it (`null`
    /// on rows logged before it was kept).
    #[serde(default)]
    pub tool_selection: Option<Value>,
}

impl ModelRequestLog {
    /// Fills in the token counts of a successful attempt and their cost at the prices of the
    /// model it used (one of `models`).
    pub fn add_usage(&mut self, completion: &Completion, models: &[ModelConfig]) {
        self.input_tokens = completion.input_tokens;
        self.output_tokens = completion.output_tokens;
        if let Some(m) = models.iter().find(|m| m.name == self.model) {
            self.cost = m.cost(self.input_tokens, self.output_tokens);
        }
    }
}

/// A page of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogPage {
    /// The page.
    pub logs: Vec<ModelRequestLog>,
    /// Rows in the log.
    pub total: i64,
    /// Whether another page follows.
    pub has_more: bool,
}

const COLUMNS: &str = "seq, message_id, model, provider, attempt, status, http_status, \
     latency_ms, ttft_ms, input_tokens, output_tokens, cost, error, depth, created_at, \
     tool_selection";

/// Appends one attempt.
pub fn record(sql: &dyn Sql, e: &ModelRequestLog) -> Result<(), SqlError> {
    sql.exec(
        "INSERT INTO model_requests (message_id, model, provider, attempt, status, http_status,
            latency_ms, ttft_ms, input_tokens, output_tokens, cost, error, depth, created_at,
            tool_selection)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            e.message_id.clone().into(),
            e.model.as_str().into(),
            e.provider.as_str().into(),
            e.attempt.into(),
            e.status.as_str().into(),
            e.http_status.map(u32::from).into(),
            e.latency_ms.into(),
            e.ttft_ms.into(),
            clamp(e.input_tokens).into(),
            clamp(e.output_tokens).into(),
            e.cost.into(),
            e.error.clone().into(),
            e.depth.into(),
            e.created_at.into(),
            e.tool_selection.as_ref().map(Value::to_string).into(),
        ],
    )?;
    Ok(())
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A page of the log, oldest or newest first.
pub fn page(sql: &dyn Sql, limit: u32, offset: u32, order: Order) -> Result<LogPage, SqlError> {
    let direction = order.sql();
    let rows = sql.exec(
        &format!("SELECT {COLUMNS} FROM model_requests ORDER BY seq {direction} LIMIT ? OFFSET ?"),
        &[limit.into(), offset.into()],
    )?;
    let logs = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
    let total = sql
        .exec("SELECT COALESCE(MAX(seq), 0) FROM model_requests", &[])?
        .first()
        .map_or(Ok(0), |r| r.int(0))?;
    let has_more = i64::from(offset) + (logs.len() as i64) < total;
    Ok(LogPage {
        logs,
        total,
        has_more,
    })
}

fn from_row(r: &Row) -> Result<ModelRequestLog, SqlError> {
    let count = |i| r.int(i).map(|n| u64::try_from(n).unwrap_or(0));
    Ok(ModelRequestLog {
        seq: r.int(0)?,
        message_id: r.opt_text(1)?,
        model: r.text(2)?,
        provider: r.text(3)?,
        attempt: u32::try_from(r.int(4)?).unwrap_or(0),
        status: r.text(5)?,
        http_status: r.opt_int(6)?.and_then(|n| u16::try_from(n).ok()),
        latency_ms: r.int(7)?,
        ttft_ms: r.opt_int(8)?,
        input_tokens: count(9)?,
        output_tokens: count(10)?,
        cost: r.real(11)?,
        error: r.opt_text(12)?,
        depth: u32::try_from(r.int(13)?).unwrap_or(0),
        created_at: r.int(14)?,
        // Written by `record` only; a value that does not read is left out, not a failed page.
        tool_selection: r.opt_text(15)?.and_then(|t| serde_json::from_str(&t).ok()),
    })
}

/// Removes a secret from text bound for logs or clients: the key itself in any of the forms
/// [`redact_secrets`] knows (percent-encoded too), and anything shaped like a provider key
/// (`sk-…`, `sk_…`), which some providers echo back partly masked.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    let secrets: Vec<String> = secret.map(str::to_owned).into_iter().collect();
    let mut out = redact_secrets(text, &secrets).into_owned();
    let mut i = 0;
    while let Some(found) = out[i..].find("sk") {
        let start = i + found;
        let boundary = start == 0 || !out[..start].ends_with(|c: char| c.is_ascii_alphanumeric());
        let rest = &out[start + 2..];
        if boundary && (rest.starts_with('-') || rest.starts_with('_')) {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "-_*.".contains(c)))
                .unwrap_or(rest.len());
            if len >= 6 {
                out.replace_range(start..start + 2 + len, "[redacted]");
                i = start + "[redacted]".len();
                continue;
            }
        }
        i = start + 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn keys_are_redacted() {
        assert_eq!(
            redact("bad key sk-proj-abc***wxyz given", None),
            "bad key [redacted] given"
        );
        assert_eq!(
            redact("key=supersecret!", Some("supersecret")),
            "key=[redacted]!"
        );
        assert_eq!(redact("risk-free ask_me", None), "risk-free ask_me");
        assert_eq!(redact("sk_live_1234567", None), "[redacted]");
        // A key an error echoes inside a URL is percent-encoded there.
        assert_eq!(
            redact("GET /v1?key=a%2Fb%2Bc%3D%3D failed", Some("a/b+c==")),
            "GET /v1?key=[redacted] failed"
        );
    }
}
