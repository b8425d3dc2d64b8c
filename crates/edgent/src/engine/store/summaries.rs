//! Compaction's records: each summary of older messages, with the range of positions it
//! covers, and the reads compaction needs (the history after a summary, the messages a new
//! summary replaces). The messages themselves are never changed: clients page through all
//! of them; only the model sees the summary in their place.

use super::history::BudgetWalk;
use super::*;

/// What the model sees before a summary's text.
pub const SUMMARY_PREFIX: &str = "[Summary of the earlier conversation]\n";

/// The estimated tokens a summary takes in the history.
pub fn summary_tokens(summary: Option<&Summary>) -> u64 {
    summary.map_or(0, |s| {
        estimate_tokens(&Message::new(
            Role::User,
            format!("{SUMMARY_PREFIX}{}", s.content),
            0,
        ))
    })
}

/// A stored summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Its id (ascending: the newest is the one in use).
    pub id: i64,
    /// The newest message it covers (inclusive); the model sees the messages after it.
    pub up_to: f64,
    /// Its text.
    pub content: String,
    /// How many messages it covers, earlier summaries' included.
    pub covers: i64,
}

/// The history after a summary, within a budget.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryAfter {
    /// The newest messages that fit, oldest first.
    pub messages: Vec<Message>,
    /// Whether the walk reached the summary (or the thread's start): nothing was left out.
    pub complete: bool,
    /// The position of the oldest message taken.
    pub oldest: Option<f64>,
}

impl Store<'_> {
    /// The summary in use, if the thread has one.
    pub fn latest_summary(&self) -> Result<Option<Summary>, SqlError> {
        let rows = self.feature_exec(
            "SELECT id, up_to_position, content, message_count FROM summaries ORDER BY id DESC LIMIT 1",
            &[],
        )?;
        rows.first()
            .map(|r| {
                Ok(Summary {
                    id: r.int(0)?,
                    up_to: r.real(1)?,
                    content: r.text(2)?,
                    covers: r.int(3)?,
                })
            })
            .transpose()
    }

    /// Keeps a summary of the messages after `from` up to `up_to` (both positions).
    pub fn add_summary(
        &self,
        now: i64,
        from: f64,
        up_to: f64,
        covers: i64,
        content: &str,
        tokens_replaced: u64,
    ) -> Result<i64, SqlError> {
        let rows = self.feature_insert(
            Feature::Summaries,
            "INSERT INTO summaries (from_position, up_to_position, message_count, content, tokens_replaced, created_at)
             VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            &[
                from.into(),
                up_to.into(),
                covers.into(),
                content.into(),
                i64::try_from(tokens_replaced).unwrap_or(i64::MAX).into(),
                now.into(),
            ],
        )?;
        rows.first()
            .ok_or_else(|| SqlError("no id returned".into()))?
            .int(0)
    }

    /// The history a model sees within `budget` once the thread has a summary: the summary
    /// in use as a first user message, then the newest messages after it that fit in what the
    /// budget leaves; without a summary, the newest messages that fit.
    pub fn summarised_history(&self, budget: u64) -> Result<Vec<Message>, SqlError> {
        let summary = self.latest_summary()?;
        let after = summary.as_ref().map_or(f64::MIN, |s| s.up_to);
        let room = budget.saturating_sub(summary_tokens(summary.as_ref()));
        let mut history = self.history_after(room, after)?.messages;
        if let Some(s) = summary {
            let created_at = history.first().map_or(0, |m| m.created_at);
            let text = format!("{SUMMARY_PREFIX}{}", s.content);
            history.insert(0, Message::new(Role::User, text, created_at));
        }
        Ok(history)
    }

    /// The newest top-level visible completed messages after position `after` that fit in
    /// `budget` (a call and its results kept together), read newest first in pages through the
    /// `(depth, silent, position)` index.
    pub fn history_after(&self, budget: u64, after: f64) -> Result<HistoryAfter, SqlError> {
        const PAGE: u32 = 64;
        let mut walk = BudgetWalk::new(budget);
        let mut kept: Vec<Message> = Vec::new();
        let mut before = f64::MAX;
        let mut oldest = None;
        let mut complete = true;
        'pages: loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT {MESSAGE_COLUMNS}, position FROM messages
                     WHERE depth = 0 AND silent = 0 AND position > ? AND position < ?
                     ORDER BY position DESC LIMIT ?"
                ),
                &[after.into(), before.into(), PAGE.into()],
            )?;
            for r in &rows {
                before = r.real(MESSAGE_COLUMN_COUNT)?;
                let m = message_from_row(r)?;
                if m.status != MessageStatus::Completed {
                    continue;
                }
                if !walk.offer(&m) {
                    complete = false;
                    break 'pages;
                }
                oldest = Some(before);
                kept.push(m);
            }
            if rows.len() < PAGE as usize {
                break;
            }
        }
        kept.reverse();
        Ok(HistoryAfter {
            messages: kept,
            complete,
            oldest,
        })
    }

    /// The top-level visible completed messages after `after` and before `before`, oldest
    /// first, at most `limit` (the newest of them), with their positions.
    pub fn messages_between(
        &self,
        after: f64,
        before: f64,
        limit: u32,
    ) -> Result<Vec<(f64, Message)>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS}, position FROM messages
                 WHERE depth = 0 AND silent = 0 AND status = 'completed' AND position > ? AND position < ?
                 ORDER BY position DESC LIMIT ?"
            ),
            &[after.into(), before.into(), limit.into()],
        )?;
        let mut out = rows
            .iter()
            .map(|r| Ok((r.real(MESSAGE_COLUMN_COUNT)?, message_from_row(r)?)))
            .collect::<Result<Vec<_>, SqlError>>()?;
        out.reverse();
        Ok(out)
    }
}
