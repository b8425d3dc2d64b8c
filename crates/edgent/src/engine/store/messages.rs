//! Messages: appending, inserting, paging through the indexes, model history within a budget.

use super::thread_row::{returning_thread_row, row_from_returning};
use super::*;
use crate::values::limits::MAX_PAGE_BYTES;

/// A message's final form: content, tool calls (JSON), status, structured answer, by id.
const UPDATE_REPLY: &str =
    "UPDATE messages SET content = ?, tool_calls = ?, status = ?, structured = ? WHERE id = ?";

impl Store<'_> {
    /// Appends a message at the end of the history.
    /// Returns the position it was given.
    pub fn append_message(&self, m: &Message) -> Result<f64, SqlError> {
        self.insert_message(m, None, "1")?
            .ok_or_else(|| SqlError("the message was not stored".into()))
    }

    /// [`Store::append_message`] unless the thread is stopped (or absent), in one statement:
    /// `Ok(None)` when it was not stored.
    pub fn append_message_if_open(&self, m: &Message) -> Result<Option<f64>, SqlError> {
        self.insert_message(
            m,
            None,
            "EXISTS (SELECT 1 FROM thread WHERE status != 'stopped')",
        )
    }

    /// Inserts a message just before `before_id` in history order. `Ok(false)` if there is
    /// no such message.
    pub fn insert_message_before(&self, m: &Message, before_id: &str) -> Result<bool, SqlError> {
        let Some(target) = self
            .sql
            .exec(
                "SELECT position FROM messages WHERE id = ?",
                &[before_id.into()],
            )?
            .first()
            .map(|r| r.real(0))
            .transpose()?
        else {
            return Ok(false);
        };
        let previous = self
            .sql
            .exec(
                "SELECT MAX(position) FROM messages WHERE position < ?",
                &[target.into()],
            )?
            .first()
            .map(|r| r.opt_real(0))
            .transpose()?
            .flatten();
        let mut position = match previous {
            Some(p) => p + (target - p) / 2.0,
            None => target - 1.0,
        };
        if position <= previous.unwrap_or(f64::MIN) || position >= target {
            // Out of room between two neighbours (after very many inserts at one spot):
            // shift the tail by one, which is rare and keeps the order.
            self.sql.exec(
                "UPDATE messages SET position = position + 1 WHERE position >= ?",
                &[target.into()],
            )?;
            position = target;
        }
        self.insert_message(m, Some(position), "1")?;
        Ok(true)
    }

    /// One statement: the position is the next one after the last when `None` (through the
    /// position index), and the thread's counters follow by trigger (schema v5).
    /// Inserts `m` when `condition` (a fixed SQL expression) holds; its position if it did.
    fn insert_message(
        &self,
        m: &Message,
        position: Option<f64>,
        condition: &'static str,
    ) -> Result<Option<f64>, SqlError> {
        let (statement, params) = insert_statement(m, position, condition)?;
        let inserted = self.sql.exec(&statement, &params)?;
        inserted.first().map(|r| r.real(0)).transpose()
    }

    /// Appends `m` with the statements that belong to it (`then`) as one transaction: all of
    /// them or none, so a failing statement (or a crash between two) never leaves half of it.
    /// The position `m` was given.
    fn append_message_with(
        &self,
        m: &Message,
        then: &[(&str, &[SqlValue])],
    ) -> Result<f64, SqlError> {
        self.append_message_then(m, then)
            .map(|(position, _)| position)
    }

    /// [`Store::append_message_with`], also answering the rows the last statement returned.
    fn append_message_then(
        &self,
        m: &Message,
        then: &[(&str, &[SqlValue])],
    ) -> Result<(f64, Vec<Row>), SqlError> {
        let (statement, params) = insert_statement(m, None, "1")?;
        let mut batch: Vec<(&str, &[SqlValue])> = vec![(&statement, &params)];
        batch.extend_from_slice(then);
        let mut rows = self.sql.batch(&batch)?;
        let position = rows
            .first()
            .and_then(|r| r.first())
            .map(|r| r.real(0))
            .transpose()?
            .ok_or_else(|| SqlError("the message was not stored".into()))?;
        let last = if then.is_empty() {
            Vec::new()
        } else {
            rows.pop().unwrap_or_default()
        };
        Ok((position, last))
    }

    /// Appends an assistant message holding calls queued by the application (not a model's
    /// reply) and queues them, with the caller's `bindings` for each, as one transaction: a
    /// call is never stored without the message that holds it, nor the message without its
    /// calls. The message's position.
    pub fn append_queued_calls(
        &self,
        now: i64,
        m: &Message,
        bindings: Option<&Value>,
    ) -> Result<f64, SqlError> {
        let inserts = call_rows(now, m, CallOrigin::Queue);
        let bindings: Vec<[SqlValue; 2]> = match bindings {
            Some(b) => m
                .tool_calls
                .iter()
                .map(|c| [b.to_string().into(), c.id.as_str().into()])
                .collect(),
            None => Vec::new(),
        };
        let mut then: Vec<(&str, &[SqlValue])> = Vec::new();
        for values in &inserts {
            then.push((INSERT_TOOL_CALL, values));
        }
        for values in &bindings {
            then.push(("UPDATE tool_calls SET bindings = ? WHERE id = ?", values));
        }
        self.append_message_with(m, &then)
    }

    /// Appends a call's result message and closes the call with it (`status`: `success` or
    /// `error`) as one transaction: a call never has a result it does not point at, so a
    /// crash in between cannot make it run again and get a second one. The message's
    /// position, and the thread row with its count of calls without a result as
    /// [`Store::thread_and_open_calls`] would read them right after (read by the closing
    /// statement: no statement of its own).
    pub fn append_result(
        &self,
        now: i64,
        m: &Message,
        call_id: &str,
        status: &str,
    ) -> Result<(f64, Option<(ThreadSummary, i64)>), SqlError> {
        let close = [
            SqlValue::from(status),
            now.into(),
            m.id.as_str().into(),
            call_id.into(),
        ];
        let statement = format!("{FINISH_TOOL_CALL} {}", returning_thread_row());
        let (position, rows) = self.append_message_then(m, &[(&statement, &close)])?;
        Ok((position, row_from_returning(&rows)?))
    }

    /// Whether a message with this id exists.
    pub fn message_exists(&self, id: &str) -> Result<bool, SqlError> {
        Ok(!self
            .sql
            .exec("SELECT 1 FROM messages WHERE id = ?", &[id.into()])?
            .is_empty())
    }

    /// Rewrites content, tool calls and status of an existing message (a streamed reply).
    pub fn update_message(&self, m: &Message) -> Result<(), SqlError> {
        self.sql.exec(UPDATE_REPLY, &reply_values(m)?)?;
        Ok(())
    }

    /// Stores a completed reply and queues its tool calls as one transaction: the reply and
    /// all of its calls, or nothing (a reused call id, say, fails it whole instead of leaving
    /// the reply stored with some of its calls). A model's calls owe the model another call
    /// (trigger `model_call_owes_model`, schema v18); with calls, the answer is the thread row
    /// and its count of calls without a result as they are after it (read by the last
    /// insert: no statement of its own). `None` without calls.
    pub fn store_reply(
        &self,
        now: i64,
        m: &Message,
        origin: CallOrigin,
    ) -> Result<Option<(ThreadSummary, i64)>, SqlError> {
        if m.tool_calls.is_empty() {
            return self.update_message(m).map(|()| None);
        }
        let update = reply_values(m)?;
        let inserts = call_rows(now, m, origin);
        let last = format!("{INSERT_TOOL_CALL} {}", returning_thread_row());
        let mut batch: Vec<(&str, &[SqlValue])> = vec![(UPDATE_REPLY, &update)];
        for (i, values) in inserts.iter().enumerate() {
            let statement = if i + 1 == inserts.len() {
                last.as_str()
            } else {
                INSERT_TOOL_CALL
            };
            batch.push((statement, values));
        }
        let rows = self.sql.batch(&batch)?;
        row_from_returning(rows.last().map_or(&[][..], Vec::as_slice))
    }

    /// How many top-level messages after the last user message the model did not write in
    /// its answer: injected messages (no side), queued calls and their results. A regenerate
    /// must not hide those (they are the server's, not the answer's).
    pub fn foreign_messages_in_last_answer(&self) -> Result<i64, SqlError> {
        let rows = self.sql.exec(
            "SELECT COUNT(*) FROM messages
             WHERE depth = 0 AND role != 'user' AND status != 'failed'
               AND position > (SELECT MAX(position) FROM messages
                               WHERE depth = 0 AND role = 'user')
               AND NOT ((role = 'assistant' AND side IS NOT NULL)
                     OR (role = 'tool' AND tool_call_id IN
                           (SELECT id FROM tool_calls WHERE origin = 'model')))",
            &[],
        )?;
        Ok(rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(0))
    }

    /// Marks the top-level answer to the last user message (every message after it) as
    /// failed, so the model no longer sees it (a regenerate); the messages as now stored.
    /// Clients keep seeing them, failed.
    pub fn retract_last_answer(&self) -> Result<Vec<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "UPDATE messages SET status = 'failed'
                 WHERE depth = 0 AND role != 'user' AND status != 'failed'
                   AND position > (SELECT MAX(position) FROM messages
                                   WHERE depth = 0 AND role = 'user')
                 RETURNING {MESSAGE_COLUMNS}"
            ),
            &[],
        )?;
        rows.iter().map(message_from_row).collect()
    }

    /// One message by id.
    pub fn message(&self, id: &str) -> Result<Option<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"),
            &[id.into()],
        )?;
        rows.first().map(message_from_row).transpose()
    }

    /// A page of top-level messages, straight from an index (`(depth, position)`, or
    /// `(depth, silent, position)` without silent messages); `total` comes from counters, so
    /// the cost does not grow with the history.
    pub fn messages_page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
        include_silent: bool,
    ) -> Result<MessagePage, SqlError> {
        let direction = order.sql();
        let filter = if include_silent {
            "depth = 0"
        } else {
            "depth = 0 AND silent = 0"
        };
        let rows = self.sql.exec(
            &page_query(filter, direction),
            &[limit.into(), offset.into(), MAX_PAGE_BYTES.into()],
        )?;
        let counter = if include_silent {
            "message_count"
        } else {
            "visible_count"
        };
        let total = self
            .sql
            .exec(&format!("SELECT {counter} FROM thread LIMIT 1"), &[])?;
        page_of(&rows, &total, offset)
    }

    /// What the model sees: top-level, non-silent, completed messages, oldest first.
    pub fn model_history(&self) -> Result<Vec<Message>, SqlError> {
        self.model_history_within(u64::MAX)
    }

    /// A sub-prompt's messages (those answering `parent_tool_call_id`), oldest first.
    pub fn sub_messages(&self, parent_tool_call_id: &str) -> Result<Vec<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE parent_tool_call_id = ?
                 ORDER BY position ASC"
            ),
            &[parent_tool_call_id.into()],
        )?;
        rows.iter().map(message_from_row).collect()
    }

    /// A page of messages at `depth` (> 0: sub-prompt messages), through the depth index.
    pub fn messages_at_depth(
        &self,
        depth: u32,
        limit: u32,
        offset: u32,
        order: Order,
    ) -> Result<MessagePage, SqlError> {
        let direction = order.sql();
        let rows = self.sql.exec(
            &page_query("depth = ?", direction),
            &[
                depth.into(),
                limit.into(),
                offset.into(),
                MAX_PAGE_BYTES.into(),
            ],
        )?;
        // Sub-prompt messages are few next to the conversation, so a counted total is fine.
        let total = self.sql.exec(
            "SELECT COUNT(*) FROM messages WHERE depth = ?",
            &[depth.into()],
        )?;
        page_of(&rows, &total, offset)
    }

    /// Assistant messages left `pending` by an interrupted model call.
    pub fn pending_messages(&self) -> Result<Vec<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE status = 'pending'"),
            &[],
        )?;
        rows.iter().map(message_from_row).collect()
    }
}

/// The page of messages in `rows`, starting at `offset`, of the total in `total`'s one row.
fn page_of(rows: &[Row], total: &[Row], offset: u32) -> Result<MessagePage, SqlError> {
    let messages = rows
        .iter()
        .map(message_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let total = total.first().map_or(Ok(0), |r| r.int(0))?;
    let has_more = i64::from(offset) + (messages.len() as i64) < total;
    Ok(MessagePage {
        messages,
        total,
        has_more,
    })
}

/// A page of messages matching `filter` (its parameters first, then limit, offset and the byte
/// budget), in `direction`, cut after the message that would take it past
/// [`MAX_PAGE_BYTES`] of content, tool calls and parts (the first message always comes, so
/// paging goes on). Sizes are summed over the page's rows only (never the whole thread), and
/// only the rows kept are read whole. A cut page has `has_more`.
fn page_query(filter: &str, direction: &str) -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages JOIN (
             SELECT page_seq, page_row,
                 SUM(size) OVER (ORDER BY page_row ROWS UNBOUNDED PRECEDING) AS page_bytes
             FROM (
                 SELECT seq AS page_seq, size,
                     ROW_NUMBER() OVER (ORDER BY position {direction}) AS page_row
                 FROM (
                     SELECT seq, position,
                         length(CAST(content AS BLOB))
                             + ifnull(length(CAST(tool_calls AS BLOB)), 0)
                             + ifnull(length(CAST(parts AS BLOB)), 0)
                             + ifnull(length(CAST(structured AS BLOB)), 0) AS size
                     FROM messages
                     WHERE {filter} ORDER BY position {direction} LIMIT ? OFFSET ?
                 )
             )
         ) ON seq = page_seq
         WHERE page_bytes <= ? OR page_row = 1
         ORDER BY page_row"
    )
}

/// The [`UPDATE_REPLY`] parameters of `m`.
fn reply_values(m: &Message) -> Result<[SqlValue; 5], SqlError> {
    Ok([
        m.content.as_str().into(),
        json_column(&m.tool_calls)?.into(),
        m.status.as_str().into(),
        structured_column(m).into(),
        m.id.as_str().into(),
    ])
}

/// A structured answer as JSON text (NULL without one).
fn structured_column(m: &Message) -> Option<String> {
    m.structured.as_ref().map(Value::to_string)
}

/// The statement inserting `m` (see `Store::insert_message`) and its parameters.
fn insert_statement(
    m: &Message,
    position: Option<f64>,
    condition: &'static str,
) -> Result<(String, Vec<SqlValue>), SqlError> {
    let tool_calls = json_column(&m.tool_calls)?;
    let parts = json_column(&m.parts)?;
    let statement = format!(
        "INSERT INTO messages (id, position, role, content, name, tool_calls, tool_call_id,
                               created_at, silent, depth, status, parts, side,
                               parent_message_id, parent_tool_call_id, structured)
         SELECT ?, COALESCE(?, (SELECT COALESCE(MAX(position), 0) + 1 FROM messages)),
                ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
         WHERE {condition}
         RETURNING position"
    );
    let params = vec![
        m.id.as_str().into(),
        position.into(),
        m.role.as_str().into(),
        m.content.as_str().into(),
        m.name.clone().into(),
        tool_calls.into(),
        m.tool_call_id.clone().into(),
        m.created_at.into(),
        m.silent.into(),
        m.depth.into(),
        m.status.as_str().into(),
        parts.into(),
        m.side.map(Side::as_str).into(),
        m.parent_message_id.clone().into(),
        m.parent_tool_call_id.clone().into(),
        structured_column(m).into(),
    ];
    Ok((statement, params))
}

/// The `INSERT_TOOL_CALL` parameters of each call `m` holds.
/// The calls of a reply as [`Store::store_reply`] has just stored them (queued, never run),
/// the rows [`Store::pending_tool_calls`] would read back while no other call is open.
pub fn stored_reply_calls(m: &Message, origin: CallOrigin) -> Vec<StoredToolCall> {
    m.tool_calls
        .iter()
        .map(|call| StoredToolCall {
            call: call.clone(),
            message_id: m.id.clone(),
            status: CallStatus::Queued,
            origin,
            attempts: 0,
            interruptions: 0,
            wake_at: None,
            approval: None,
            bindings: None,
            deadline_at: None,
            version: None,
        })
        .collect()
}

fn call_rows(now: i64, m: &Message, origin: CallOrigin) -> Vec<[SqlValue; 6]> {
    m.tool_calls
        .iter()
        .map(|call| {
            [
                call.id.as_str().into(),
                m.id.as_str().into(),
                call.name.as_str().into(),
                call.arguments.as_str().into(),
                now.into(),
                origin.as_str().into(),
            ]
        })
        .collect()
}
