//! Typed reads and writes of a thread's SQLite: the only place that knows the column lists.

use serde::{Deserialize, Serialize};

use super::message::{Message, MessageStatus, Role, ToolCall};
use super::sql::{Row, Sql, SqlError};

/// Whether a thread is working, waiting for input, or finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// Waiting for a message.
    Idle,
    /// A turn is in progress (model calls and tools).
    Running,
    /// Stopped by a user or a rule; new messages are refused.
    Stopped,
}

impl ThreadStatus {
    /// Lowercase SQL/wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Running => "running",
            ThreadStatus::Stopped => "stopped",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "running" => ThreadStatus::Running,
            "stopped" => ThreadStatus::Stopped,
            _ => ThreadStatus::Idle,
        }
    }
}

/// The thread row, as returned by `GET /api/threads/:id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// The thread id (random UUID).
    pub thread_id: String,
    /// The agent in D1 that runs this thread.
    pub agent_id: String,
    /// Free-form labels given at creation.
    pub tags: Vec<String>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// Last change, ms since the epoch.
    pub updated_at: i64,
    /// Completed turns.
    pub turn_count: i64,
    /// Working, waiting or finished.
    pub status: ThreadStatus,
    /// Which side acts next (`a` or `b`).
    pub current_side: String,
    /// Model calls made in the current turn.
    pub steps: i64,
    /// Who stopped the thread, when stopped.
    pub stopped_by: Option<String>,
    /// The last error reported to clients, if the last turn failed.
    pub last_error: Option<String>,
    /// Number of top-level messages.
    pub message_count: i64,
}

/// Oldest-first or newest-first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Oldest first.
    #[default]
    Asc,
    /// Newest first.
    Desc,
}

/// One page of messages with what a client needs to fetch the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePage {
    /// The page, in the requested order.
    pub messages: Vec<Message>,
    /// Messages at this depth in total.
    pub total: i64,
    /// Whether another page follows.
    pub has_more: bool,
}

/// A tool call waiting to run, running, or done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToolCall {
    /// The call as the model wrote it.
    pub call: ToolCall,
    /// The assistant message that asked for it.
    pub message_id: String,
    /// `queued`, `running` or `done`.
    pub status: String,
}

const MESSAGE_COLUMNS: &str =
    "id, role, content, name, tool_calls, tool_call_id, created_at, silent, depth, status";

/// Typed access to one thread's tables. Cheap to build: it only borrows the connection.
pub struct Store<'a> {
    sql: &'a dyn Sql,
}

impl<'a> Store<'a> {
    /// Wraps a connection whose schema is already migrated.
    pub fn new(sql: &'a dyn Sql) -> Self {
        Store { sql }
    }

    // ---- thread row -------------------------------------------------------------------

    /// Inserts the thread row. Errors if the thread already exists.
    pub fn create_thread(
        &self,
        now: i64,
        thread_id: &str,
        agent_id: &str,
        tags: &[String],
    ) -> Result<(), SqlError> {
        let tags = serde_json::to_string(tags).map_err(|e| SqlError(e.to_string()))?;
        self.sql.exec(
            "INSERT INTO thread (id, agent_id, tags, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            &[thread_id.into(), agent_id.into(), tags.into(), now.into(), now.into()],
        )?;
        Ok(())
    }

    /// The thread row, or `None` if this object never had a thread created in it.
    pub fn thread(&self) -> Result<Option<ThreadSummary>, SqlError> {
        let rows = self.sql.exec(
            "SELECT id, agent_id, tags, created_at, updated_at, turn_count, status, current_side,
                    steps, stopped_by, last_error,
                    (SELECT COUNT(*) FROM messages WHERE depth = 0)
             FROM thread LIMIT 1",
            &[],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(ThreadSummary {
            thread_id: row.text(0)?,
            agent_id: row.text(1)?,
            tags: serde_json::from_str(&row.text(2)?).unwrap_or_default(),
            created_at: row.int(3)?,
            updated_at: row.int(4)?,
            turn_count: row.int(5)?,
            status: ThreadStatus::parse(&row.text(6)?),
            current_side: row.text(7)?,
            steps: row.int(8)?,
            stopped_by: row.opt_text(9)?,
            last_error: row.opt_text(10)?,
            message_count: row.int(11)?,
        }))
    }

    /// Sets the status (and clears or records the last error).
    pub fn set_status(
        &self,
        now: i64,
        status: ThreadStatus,
        last_error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = ?, last_error = ?, updated_at = ?",
            &[status.as_str().into(), last_error.into(), now.into()],
        )?;
        Ok(())
    }

    /// Marks the thread stopped by `by`.
    pub fn set_stopped(&self, now: i64, by: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = 'stopped', stopped_by = ?, updated_at = ?",
            &[by.into(), now.into()],
        )?;
        Ok(())
    }

    /// Starts a new turn: zero steps, running.
    pub fn begin_turn(&self, now: i64) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = 'running', steps = 0, last_error = NULL, updated_at = ?",
            &[now.into()],
        )?;
        Ok(())
    }

    /// Counts one more model call in the current turn and returns the new count.
    pub fn add_step(&self, now: i64) -> Result<i64, SqlError> {
        let rows = self.sql.exec(
            "UPDATE thread SET steps = steps + 1, updated_at = ? RETURNING steps",
            &[now.into()],
        )?;
        rows.first().map_or(Ok(0), |r| r.int(0))
    }

    /// Closes the current turn: idle, one more completed turn.
    pub fn finish_turn(&self, now: i64) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET status = 'idle', turn_count = turn_count + 1, updated_at = ?",
            &[now.into()],
        )?;
        Ok(())
    }

    // ---- messages ---------------------------------------------------------------------

    /// Appends a message at the end of the history.
    pub fn append_message(&self, m: &Message) -> Result<(), SqlError> {
        let tool_calls = if m.tool_calls.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&m.tool_calls).map_err(|e| SqlError(e.to_string()))?)
        };
        self.sql.exec(
            "INSERT INTO messages (id, position, role, content, name, tool_calls, tool_call_id,
                                   created_at, silent, depth, status)
             VALUES (?, (SELECT COALESCE(MAX(position), 0) + 1 FROM messages), ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                m.id.as_str().into(),
                m.role.as_str().into(),
                m.content.as_str().into(),
                m.name.clone().into(),
                tool_calls.into(),
                m.tool_call_id.clone().into(),
                m.created_at.into(),
                m.silent.into(),
                m.depth.into(),
                m.status.as_str().into(),
            ],
        )?;
        Ok(())
    }

    /// Rewrites content, tool calls and status of an existing message (a streamed reply).
    pub fn update_message(&self, m: &Message) -> Result<(), SqlError> {
        let tool_calls = if m.tool_calls.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&m.tool_calls).map_err(|e| SqlError(e.to_string()))?)
        };
        self.sql.exec(
            "UPDATE messages SET content = ?, tool_calls = ?, status = ? WHERE id = ?",
            &[
                m.content.as_str().into(),
                tool_calls.into(),
                m.status.as_str().into(),
                m.id.as_str().into(),
            ],
        )?;
        Ok(())
    }

    /// One message by id.
    pub fn message(&self, id: &str) -> Result<Option<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"),
            &[id.into()],
        )?;
        rows.first().map(message_from_row).transpose()
    }

    /// A page of top-level messages, straight from the `(depth, position)` index.
    pub fn messages_page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
    ) -> Result<MessagePage, SqlError> {
        let direction = match order {
            Order::Asc => "ASC",
            Order::Desc => "DESC",
        };
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE depth = 0
                 ORDER BY position {direction} LIMIT ? OFFSET ?"
            ),
            &[limit.into(), offset.into()],
        )?;
        let messages = rows
            .iter()
            .map(message_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let total = self
            .sql
            .exec("SELECT COUNT(*) FROM messages WHERE depth = 0", &[])?
            .first()
            .map_or(Ok(0), |r| r.int(0))?;
        let has_more = i64::from(offset) + (messages.len() as i64) < total;
        Ok(MessagePage {
            messages,
            total,
            has_more,
        })
    }

    /// What the model sees: top-level, non-silent, completed messages, oldest first.
    pub fn model_history(&self) -> Result<Vec<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages
                 WHERE depth = 0 AND silent = 0 AND status = 'completed'
                 ORDER BY position ASC"
            ),
            &[],
        )?;
        rows.iter().map(message_from_row).collect()
    }

    /// The newest top-level message that a model would see (for deciding the next step).
    pub fn last_model_message(&self) -> Result<Option<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages
                 WHERE depth = 0 AND silent = 0 AND status = 'completed'
                 ORDER BY position DESC LIMIT 1"
            ),
            &[],
        )?;
        rows.first().map(message_from_row).transpose()
    }

    /// Assistant messages left `pending` by an interrupted model call.
    pub fn pending_messages(&self) -> Result<Vec<Message>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE status = 'pending'"),
            &[],
        )?;
        rows.iter().map(message_from_row).collect()
    }

    // ---- tool calls -------------------------------------------------------------------

    /// Queues the tool calls of an assistant message, in call order.
    pub fn queue_tool_calls(
        &self,
        now: i64,
        message_id: &str,
        calls: &[ToolCall],
    ) -> Result<(), SqlError> {
        for call in calls {
            self.sql.exec(
                "INSERT INTO tool_calls (id, message_id, seq, name, arguments, created_at)
                 VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tool_calls), ?, ?, ?)",
                &[
                    call.id.as_str().into(),
                    message_id.into(),
                    call.name.as_str().into(),
                    call.arguments.as_str().into(),
                    now.into(),
                ],
            )?;
        }
        Ok(())
    }

    /// The oldest tool call not yet done (queued, or running when a crash interrupted it).
    pub fn next_tool_call(&self) -> Result<Option<StoredToolCall>, SqlError> {
        let rows = self.sql.exec(
            "SELECT id, name, arguments, message_id, status FROM tool_calls
             WHERE status IN ('queued', 'running') ORDER BY seq ASC LIMIT 1",
            &[],
        )?;
        rows.first()
            .map(|r| {
                Ok(StoredToolCall {
                    call: ToolCall {
                        id: r.text(0)?,
                        name: r.text(1)?,
                        arguments: r.text(2)?,
                    },
                    message_id: r.text(3)?,
                    status: r.text(4)?,
                })
            })
            .transpose()
    }

    /// Marks a tool call as running.
    pub fn start_tool_call(&self, now: i64, call_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET status = 'running', started_at = ? WHERE id = ?",
            &[now.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Marks a tool call done and links its result message.
    pub fn finish_tool_call(
        &self,
        now: i64,
        call_id: &str,
        result_message_id: &str,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET status = 'done', finished_at = ?, result_message_id = ? WHERE id = ?",
            &[now.into(), result_message_id.into(), call_id.into()],
        )?;
        Ok(())
    }
}

fn message_from_row(r: &Row) -> Result<Message, SqlError> {
    let role = r.text(1)?;
    let tool_calls = match r.opt_text(4)? {
        Some(json) => serde_json::from_str(&json).map_err(|e| SqlError(e.to_string()))?,
        None => Vec::new(),
    };
    Ok(Message {
        id: r.text(0)?,
        role: Role::parse(&role).ok_or_else(|| SqlError(format!("unknown role {role:?}")))?,
        content: r.text(2)?,
        name: r.opt_text(3)?,
        tool_calls,
        tool_call_id: r.opt_text(5)?,
        created_at: r.int(6)?,
        silent: r.int(7)? != 0,
        depth: u32::try_from(r.int(8)?).unwrap_or(0),
        status: MessageStatus::parse(&r.text(9)?),
    })
}
