//! Typed reads and writes of a thread's SQLite: the only place that knows the column lists.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// One of the two sides of a thread: `a` is the agent; `b` is the human (or a second agent
/// in a dual-AI thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The agent's side.
    #[default]
    A,
    /// The other side.
    B,
}

impl Side {
    /// `a` or `b`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }

    /// The other side.
    pub fn other(self) -> Self {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    /// Parses `a`/`b` (either case).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "a" | "A" => Some(Side::A),
            "b" | "B" => Some(Side::B),
            _ => None,
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
    /// Which side acts next.
    pub current_side: Side,
    /// Model calls made in the current turn.
    pub steps: i64,
    /// Who stopped the thread, when stopped.
    pub stopped_by: Option<String>,
    /// The last error reported to clients, if the last turn failed.
    pub last_error: Option<String>,
    /// Number of top-level messages (silent ones included).
    pub message_count: i64,
    /// Whether the model of the current side is owed a call in this turn.
    #[serde(skip)]
    pub needs_model: bool,
    /// Why the conversation ends once the running turn's tool calls are done (a side called
    /// its stop tool).
    #[serde(skip)]
    pub ending: Option<String>,
    /// The conversation's final answer once it ended (a stop tool's answer, or the last
    /// assistant text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// For a child thread (an agent called as a tool): the thread that called it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<String>,
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

/// A tool call waiting to run, running, suspended, or finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToolCall {
    /// The call as the model wrote it.
    pub call: ToolCall,
    /// The assistant message that asked for it.
    pub message_id: String,
    /// `queued`, `running`, `retrying`, `sleeping`, `waiting`, `rate_limited`, `success` or
    /// `error` (see [`super::tool_calls::CallStatus`]).
    pub status: String,
    /// Who asked for it: the model, or the application (`queue_tool` from a tool or client).
    pub origin: CallOrigin,
    /// Attempts started (a retry is a new attempt; resuming a suspended workflow is not).
    pub attempts: i64,
    /// Runs cut short by a crash or an eviction.
    pub interruptions: i64,
    /// A suspended call's time to run again (ms since the epoch).
    pub wake_at: Option<i64>,
    /// `pending`, `approved` or `rejected` for tools that need approval.
    pub approval: Option<String>,
    /// The caller's runtime bindings (a JSON object), kept apart from the arguments.
    pub bindings: Option<String>,
    /// A workflow's whole-run deadline (ms since the epoch), set at its first start.
    pub deadline_at: Option<i64>,
}

/// Who asked for a tool call. The model may only call its agent's tools; the application may
/// queue any registered tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOrigin {
    /// The model's reply.
    Model,
    /// `queue_tool`, from a tool or a client.
    Queue,
}

impl CallOrigin {
    /// `model` or `queue`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOrigin::Model => "model",
            CallOrigin::Queue => "queue",
        }
    }
}

const MESSAGE_COLUMNS: &str = "id, role, content, name, tool_calls, tool_call_id, created_at, \
     silent, depth, status, parts, side, parent_message_id, parent_tool_call_id";

/// Typed access to one thread's tables. Cheap to build: it only borrows the connection.
pub struct Store<'a> {
    sql: &'a dyn Sql,
}

impl<'a> Store<'a> {
    /// Wraps a connection whose schema is already migrated.
    pub fn new(sql: &'a dyn Sql) -> Self {
        Store { sql }
    }

    /// The connection (for records kept outside this type, such as the request log).
    pub fn sql(&self) -> &'a dyn Sql {
        self.sql
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
                    steps, stopped_by, last_error, message_count, needs_model, ending, result,
                    parent_thread_id
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
            current_side: Side::parse(&row.text(7)?).unwrap_or_default(),
            steps: row.int(8)?,
            stopped_by: row.opt_text(9)?,
            last_error: row.opt_text(10)?,
            message_count: row.int(11)?,
            needs_model: row.int(12)? != 0,
            ending: row.opt_text(13)?,
            result: row.opt_text(14)?,
            parent_thread_id: row.opt_text(15)?,
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
            "UPDATE thread SET status = ?1, last_error = ?2, updated_at = ?3,
                needs_model = CASE WHEN ?1 = 'running' THEN needs_model ELSE 0 END",
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

    /// Closes the current turn: idle; it counts as a turn if a model was called. Returns the
    /// turn count after it.
    pub fn finish_turn(&self, now: i64) -> Result<i64, SqlError> {
        let rows = self.sql.exec(
            "UPDATE thread SET status = 'idle', needs_model = 0,
                turn_count = turn_count + (steps > 0), updated_at = ? RETURNING turn_count",
            &[now.into()],
        )?;
        rows.first().map_or(Ok(0), |r| r.int(0))
    }

    /// Marks the conversation to end (with `result`) once the running turn's tools are done.
    pub fn set_ending(&self, reason: &str, result: Option<&str>) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET ending = ?, result = COALESCE(?, result)",
            &[reason.into(), result.into()],
        )?;
        Ok(())
    }

    /// Stores the final answer.
    pub fn set_result(&self, result: &str) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET result = ?", &[result.into()])?;
        Ok(())
    }

    /// The public origin clients reach this Worker at (`https://host`), for webhook URLs.
    pub fn public_url(&self) -> Result<Option<String>, SqlError> {
        let rows = self.sql.exec("SELECT public_url FROM thread", &[])?;
        Ok(rows.first().map(|r| r.opt_text(0)).transpose()?.flatten())
    }

    /// Records the public origin (from the request that created the thread).
    pub fn set_public_url(&self, url: &str) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET public_url = ?", &[url.into()])?;
        Ok(())
    }

    /// Links a child thread to the thread that created it.
    pub fn set_parent(&self, parent_thread_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET parent_thread_id = ?",
            &[parent_thread_id.into()],
        )?;
        Ok(())
    }

    /// Hands the thread to another agent (an ai_human agent called as a tool).
    pub fn set_agent(&self, now: i64, agent_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET agent_id = ?, current_side = 'a', updated_at = ?",
            &[agent_id.into(), now.into()],
        )?;
        Ok(())
    }

    /// The text of the newest completed top-level assistant message that has text.
    pub fn last_assistant_text(&self) -> Result<Option<String>, SqlError> {
        self.sql
            .exec(
                "SELECT content FROM messages
                 WHERE depth = 0 AND role = 'assistant' AND status = 'completed' AND content != ''
                 ORDER BY position DESC LIMIT 1",
                &[],
            )?
            .first()
            .map(|r| r.text(0))
            .transpose()
    }

    /// The running prompt's name and hook names, as last recorded.
    pub fn hook_config(&self) -> Result<Option<(String, Vec<String>)>, SqlError> {
        let Some(row) = self
            .sql
            .exec("SELECT hook_config FROM thread LIMIT 1", &[])?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        Ok(row.opt_text(0)?.and_then(|json| {
            let v: Value = serde_json::from_str(&json).ok()?;
            let prompt = v.get("prompt")?.as_str()?.to_owned();
            let names = v
                .get("names")?
                .as_array()?
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            Some((prompt, names))
        }))
    }

    /// Records the running prompt's name and hook names.
    pub fn set_hook_config(&self, prompt: &str, names: &[String]) -> Result<(), SqlError> {
        let json = serde_json::json!({ "prompt": prompt, "names": names }).to_string();
        self.sql.exec(
            "UPDATE thread SET hook_config = ?1 WHERE hook_config IS NOT ?1",
            &[json.into()],
        )?;
        Ok(())
    }

    /// Records whether the model is owed a call.
    pub fn set_needs_model(&self, needs: bool) -> Result<(), SqlError> {
        self.sql
            .exec("UPDATE thread SET needs_model = ?", &[needs.into()])?;
        Ok(())
    }

    /// Sets the side that acts next.
    pub fn set_side(&self, now: i64, side: Side) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE thread SET current_side = ?, updated_at = ?",
            &[side.as_str().into(), now.into()],
        )?;
        Ok(())
    }

    // ---- messages ---------------------------------------------------------------------

    /// Appends a message at the end of the history.
    pub fn append_message(&self, m: &Message) -> Result<(), SqlError> {
        let position = self
            .sql
            .exec("SELECT COALESCE(MAX(position), 0) + 1 FROM messages", &[])?
            .first()
            .map_or(Ok(1.0), |r| r.real(0))?;
        self.insert_message(m, position)
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
        self.insert_message(m, position)?;
        Ok(true)
    }

    fn insert_message(&self, m: &Message, position: f64) -> Result<(), SqlError> {
        let tool_calls = json_column(&m.tool_calls)?;
        let parts = json_column(&m.parts)?;
        self.sql.exec(
            "INSERT INTO messages (id, position, role, content, name, tool_calls, tool_call_id,
                                   created_at, silent, depth, status, parts, side,
                                   parent_message_id, parent_tool_call_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
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
            ],
        )?;
        if m.depth == 0 {
            // Counters kept with the row, so `total` never needs a COUNT over the history.
            self.sql.exec(
                "UPDATE thread SET message_count = message_count + 1,
                    visible_count = visible_count + ?",
                &[(!m.silent).into()],
            )?;
        }
        Ok(())
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
        let tool_calls = json_column(&m.tool_calls)?;
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
        let direction = match order {
            Order::Asc => "ASC",
            Order::Desc => "DESC",
        };
        let filter = if include_silent {
            "depth = 0"
        } else {
            "depth = 0 AND silent = 0"
        };
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE {filter}
                 ORDER BY position {direction} LIMIT ? OFFSET ?"
            ),
            &[limit.into(), offset.into()],
        )?;
        let messages = rows
            .iter()
            .map(message_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let counter = if include_silent {
            "message_count"
        } else {
            "visible_count"
        };
        let total = self
            .sql
            .exec(&format!("SELECT {counter} FROM thread LIMIT 1"), &[])?
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
        self.model_history_within(u64::MAX)
    }

    /// The newest top-level, non-silent, completed messages whose estimated tokens fit in
    /// `budget`, oldest first. Read newest-first in pages through the `(depth, silent,
    /// position)` index, so a long thread costs only what is sent. The newest message is
    /// always included, and a tool result pulls in its call even past the budget; older
    /// results whose call was cut are dropped by [`crate::core::thread::repair_history`], so
    /// a call and its results stay together or go together.
    pub fn model_history_within(&self, budget: u64) -> Result<Vec<Message>, SqlError> {
        const PAGE: u32 = 64;
        let mut out: Vec<Message> = Vec::new();
        let mut used: u64 = 0;
        let mut before = f64::MAX;
        // Results taken whose call is not taken yet: the cut waits for the call, so the
        // newest exchange is whole even when it alone is over the budget.
        let mut open: Vec<String> = Vec::new();
        'pages: loop {
            let rows = self.sql.exec(
                &format!(
                    "SELECT {MESSAGE_COLUMNS}, position FROM messages
                     WHERE depth = 0 AND silent = 0 AND position < ?
                     ORDER BY position DESC LIMIT ?"
                ),
                &[before.into(), PAGE.into()],
            )?;
            for r in &rows {
                before = r.real(14)?;
                let m = message_from_row(r)?;
                if m.status != MessageStatus::Completed {
                    continue;
                }
                used += estimate_tokens(&m);
                if used > budget && !out.is_empty() && open.is_empty() {
                    break 'pages;
                }
                if let (Role::Tool, Some(id)) = (m.role, &m.tool_call_id) {
                    open.push(id.clone());
                }
                open.retain(|id| !m.tool_calls.iter().any(|c| &c.id == id));
                out.push(m);
            }
            if rows.len() < PAGE as usize {
                break;
            }
        }
        out.reverse();
        Ok(out)
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
        let direction = match order {
            Order::Asc => "ASC",
            Order::Desc => "DESC",
        };
        let rows = self.sql.exec(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages WHERE depth = ?
                 ORDER BY position {direction} LIMIT ? OFFSET ?"
            ),
            &[depth.into(), limit.into(), offset.into()],
        )?;
        let messages = rows
            .iter()
            .map(message_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        // Sub-prompt messages are few next to the conversation, so a counted total is fine.
        let total = self
            .sql
            .exec(
                "SELECT COUNT(*) FROM messages WHERE depth = ?",
                &[depth.into()],
            )?
            .first()
            .map_or(Ok(0), |r| r.int(0))?;
        let has_more = i64::from(offset) + (messages.len() as i64) < total;
        Ok(MessagePage {
            messages,
            total,
            has_more,
        })
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
        origin: CallOrigin,
    ) -> Result<(), SqlError> {
        for call in calls {
            self.sql.exec(
                "INSERT INTO tool_calls (id, message_id, seq, name, arguments, created_at, origin)
                 VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tool_calls), ?, ?, ?, ?)",
                &[
                    call.id.as_str().into(),
                    message_id.into(),
                    call.name.as_str().into(),
                    call.arguments.as_str().into(),
                    now.into(),
                    origin.as_str().into(),
                ],
            )?;
        }
        Ok(())
    }

    /// The next tool call that can run at `now`: queued, running when a crash interrupted it,
    /// or parked with its wake time passed; the lowest queue position among the queued ones
    /// and the earliest-due parked ones.
    pub fn next_tool_call(&self, now: i64) -> Result<Option<StoredToolCall>, SqlError> {
        // Two indexed LIMIT 1 lookups (by status, by wake time) rather than one OR, whose plan
        // SQLite may turn into a scan of every call ever made.
        let ready = self.sql.exec(
            &format!(
                "SELECT {TOOL_CALL_COLUMNS}, seq FROM tool_calls
                 WHERE status IN ('queued', 'running') ORDER BY seq ASC LIMIT 1"
            ),
            &[],
        )?;
        let woken = self.sql.exec(
            &format!(
                "SELECT {TOOL_CALL_COLUMNS}, seq FROM tool_calls INDEXED BY tool_calls_waking
                 WHERE wake_at IS NOT NULL AND wake_at <= ? AND status IN ({PENDING})
                 ORDER BY wake_at ASC LIMIT 16"
            ),
            &[now.into()],
        )?;
        let seq = |r: &Row| r.int(TOOL_CALL_COLUMN_COUNT).unwrap_or(i64::MAX);
        let first = ready.iter().chain(woken.iter()).min_by_key(|r| seq(r));
        first.map(tool_call_from_row).transpose()
    }

    /// Pushes the wake time of parked calls that are due back to `later`.
    pub fn defer_due_calls(&self, now: i64, later: i64) -> Result<(), SqlError> {
        self.sql.exec(
            &format!(
                "UPDATE tool_calls SET wake_at = ? WHERE wake_at IS NOT NULL AND wake_at <= ?
                 AND status IN ({PENDING})"
            ),
            &[later.into(), now.into()],
        )?;
        Ok(())
    }

    /// Calls without a result (queued, running or suspended), in run order.
    pub fn pending_tool_calls(&self) -> Result<Vec<StoredToolCall>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE status IN ({PENDING}) ORDER BY seq ASC"
            ),
            &[],
        )?;
        rows.iter().map(tool_call_from_row).collect()
    }

    /// Stores a call's runtime bindings.
    pub fn set_tool_call_bindings(&self, call_id: &str, bindings: &Value) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET bindings = ? WHERE id = ?",
            &[bindings.to_string().into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Ids of the calls without a result.
    pub fn pending_tool_call_ids(&self) -> Result<Vec<String>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT id FROM tool_calls WHERE status IN ({PENDING})"),
            &[],
        )?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Whether a call of a model reply has no result yet (the model waits for it).
    pub fn has_pending_model_calls(&self) -> Result<bool, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT 1 FROM tool_calls WHERE status IN ({PENDING}) AND origin = 'model' LIMIT 1"
            ),
            &[],
        )?;
        Ok(!rows.is_empty())
    }

    /// One call by id.
    pub fn tool_call(&self, call_id: &str) -> Result<Option<StoredToolCall>, SqlError> {
        let rows = self.sql.exec(
            &format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = ?"),
            &[call_id.into()],
        )?;
        rows.first().map(tool_call_from_row).transpose()
    }

    /// Marks a tool call as running; `new_attempt` counts a first start or a retry (not the
    /// resumption of a suspended workflow) and records it in `tool_attempts`.
    pub fn start_tool_call(
        &self,
        now: i64,
        call: &StoredToolCall,
        new_attempt: bool,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET status = 'running', started_at = ?, wake_at = NULL,
                 first_started_at = COALESCE(first_started_at, ?), attempts = attempts + ?
             WHERE id = ?",
            &[
                now.into(),
                now.into(),
                i64::from(new_attempt).into(),
                call.call.id.as_str().into(),
            ],
        )?;
        if new_attempt {
            self.sql.exec(
                "INSERT INTO tool_attempts (call_id, name, attempt, started_at) VALUES (?, ?, ?, ?)",
                &[
                    call.call.id.as_str().into(),
                    call.call.name.as_str().into(),
                    (call.attempts + 1).into(),
                    now.into(),
                ],
            )?;
        }
        Ok(())
    }

    /// Closes the latest attempt of a call with its outcome (`success`, `error`, `failed`,
    /// `timeout`).
    pub fn end_attempt(
        &self,
        now: i64,
        call_id: &str,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_attempts SET finished_at = ?, outcome = ?, error = ?
             WHERE seq = (SELECT MAX(seq) FROM tool_attempts WHERE call_id = ?)
               AND finished_at IS NULL",
            &[now.into(), outcome.into(), error.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Counts a run that a crash or an eviction cut short.
    pub fn count_interruption(&self, call_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET interruptions = interruptions + 1 WHERE id = ?",
            &[call_id.into()],
        )?;
        Ok(())
    }

    /// Suspends a call: `status` until `wake_at` (none: until something outside wakes it),
    /// with `detail` saying why.
    pub fn suspend_tool_call(
        &self,
        call_id: &str,
        status: &str,
        wake_at: Option<i64>,
        detail: Option<&Value>,
        last_error: Option<&str>,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            // A wake time already set came from a webhook delivered while the run was going
            // (`start_tool_call` clears it): the earlier one wins, or the body would wait.
            "UPDATE tool_calls SET status = ?,
                 wake_at = CASE WHEN wake_at IS NOT NULL AND (? IS NULL OR wake_at < ?)
                           THEN wake_at ELSE ? END,
                 detail = ?, last_error = COALESCE(?, last_error)
             WHERE id = ?",
            &[
                status.into(),
                wake_at.into(),
                wake_at.into(),
                wake_at.into(),
                detail.map(Value::to_string).into(),
                last_error.into(),
                call_id.into(),
            ],
        )?;
        Ok(())
    }

    /// Makes a suspended call due now (a webhook arrived, a client approved it).
    pub fn wake_tool_call(&self, now: i64, call_id: &str) -> Result<(), SqlError> {
        self.sql.exec(
            &format!("UPDATE tool_calls SET wake_at = ? WHERE id = ? AND status IN ({PENDING})"),
            &[now.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Records a client's decision on a call that needs approval.
    pub fn set_approval(&self, call_id: &str, approval: &str) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET approval = ? WHERE id = ?",
            &[approval.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// Sets a workflow's whole-run deadline, once.
    pub fn set_deadline(&self, call_id: &str, deadline_at: i64) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET deadline_at = COALESCE(deadline_at, ?) WHERE id = ?",
            &[deadline_at.into(), call_id.into()],
        )?;
        Ok(())
    }

    /// The earliest wake time of a suspended call, for the thread's alarm.
    pub fn next_wake(&self) -> Result<Option<i64>, SqlError> {
        let rows = self.sql.exec(
            &format!(
                "SELECT MIN(wake_at) FROM tool_calls WHERE wake_at IS NOT NULL AND status IN ({PENDING})"
            ),
            &[],
        )?;
        rows.first()
            .map(|r| r.opt_int(0))
            .transpose()
            .map(Option::flatten)
    }

    /// Closes a tool call with its result (`success` or `error`) and links the message.
    pub fn finish_tool_call(
        &self,
        now: i64,
        call_id: &str,
        status: &str,
        result_message_id: &str,
    ) -> Result<(), SqlError> {
        self.sql.exec(
            "UPDATE tool_calls SET status = ?, finished_at = ?, result_message_id = ?,
                 wake_at = NULL, detail = NULL
             WHERE id = ?",
            &[
                status.into(),
                now.into(),
                result_message_id.into(),
                call_id.into(),
            ],
        )?;
        Ok(())
    }

    // ---- child threads ------------------------------------------------------------------

    /// The child thread of an agent-tool call: the one recorded, else `fresh` (recorded now).
    pub fn child_thread(
        &self,
        now: i64,
        tool_call_id: &str,
        fresh: &str,
    ) -> Result<String, SqlError> {
        self.sql.exec(
            "INSERT INTO child_threads (tool_call_id, thread_id, created_at) VALUES (?, ?, ?)
             ON CONFLICT (tool_call_id) DO NOTHING",
            &[tool_call_id.into(), fresh.into(), now.into()],
        )?;
        self.sql
            .exec(
                "SELECT thread_id FROM child_threads WHERE tool_call_id = ?",
                &[tool_call_id.into()],
            )?
            .first()
            .map_or(Ok(fresh.to_owned()), |r| r.text(0))
    }

    // ---- context ------------------------------------------------------------------------

    /// One context value.
    pub fn context_get(&self, key: &str) -> Result<Option<Value>, SqlError> {
        self.sql
            .exec("SELECT value FROM context WHERE key = ?", &[key.into()])?
            .first()
            .map(|r| serde_json::from_str(&r.text(0)?).map_err(|e| SqlError(e.to_string())))
            .transpose()
    }

    /// Sets a context value.
    pub fn context_set(&self, now: i64, key: &str, value: &Value) -> Result<(), SqlError> {
        self.sql.exec(
            "INSERT INTO context (key, value, updated_at) VALUES (?, ?, ?)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            &[key.into(), value.to_string().into(), now.into()],
        )?;
        Ok(())
    }

    /// Removes a context value.
    pub fn context_remove(&self, key: &str) -> Result<(), SqlError> {
        self.sql
            .exec("DELETE FROM context WHERE key = ?", &[key.into()])?;
        Ok(())
    }

    /// The whole context.
    pub fn context_all(&self) -> Result<Map<String, Value>, SqlError> {
        let mut out = Map::new();
        for r in self
            .sql
            .exec("SELECT key, value FROM context ORDER BY key", &[])?
        {
            let value = serde_json::from_str(&r.text(1)?).map_err(|e| SqlError(e.to_string()))?;
            out.insert(r.text(0)?, value);
        }
        Ok(out)
    }
}

/// A rough token count (4 bytes per token, plus a little per message): providers count
/// differently, and the budget only has to keep requests well inside the context window.
pub fn estimate_tokens(m: &Message) -> u64 {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| c.name.len() + c.arguments.len())
        .sum();
    ((m.content.len() + calls) as u64).div_ceil(4) + 4
}

/// A list stored as JSON text, NULL when empty.
fn json_column<T: Serialize>(items: &[T]) -> Result<Option<String>, SqlError> {
    if items.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(items)
        .map(Some)
        .map_err(|e| SqlError(e.to_string()))
}

/// The reverse of [`json_column`]: NULL reads as an empty list.
fn list_from_column<T: serde::de::DeserializeOwned>(
    column: Option<String>,
) -> Result<Vec<T>, SqlError> {
    column.map_or(Ok(Vec::new()), |json| {
        serde_json::from_str(&json).map_err(|e| SqlError(e.to_string()))
    })
}

/// Statuses of a call without a result.
pub(crate) const PENDING: &str =
    "'queued', 'running', 'retrying', 'sleeping', 'waiting', 'rate_limited'";

const TOOL_CALL_COLUMNS: &str = "id, name, arguments, message_id, status, origin, attempts, \
     interruptions, wake_at, approval, bindings, deadline_at";
/// Columns in [`TOOL_CALL_COLUMNS`] (a query may append more after them).
const TOOL_CALL_COLUMN_COUNT: usize = 12;

fn tool_call_from_row(r: &Row) -> Result<StoredToolCall, SqlError> {
    Ok(StoredToolCall {
        call: ToolCall {
            id: r.text(0)?,
            name: r.text(1)?,
            arguments: r.text(2)?,
        },
        message_id: r.text(3)?,
        status: r.text(4)?,
        origin: if r.text(5)? == "queue" {
            CallOrigin::Queue
        } else {
            CallOrigin::Model
        },
        attempts: r.int(6)?,
        interruptions: r.int(7)?,
        wake_at: r.opt_int(8)?,
        approval: r.opt_text(9)?,
        bindings: r.opt_text(10)?,
        deadline_at: r.opt_int(11)?,
    })
}

fn message_from_row(r: &Row) -> Result<Message, SqlError> {
    let role = r.text(1)?;
    Ok(Message {
        id: r.text(0)?,
        role: Role::parse(&role).ok_or_else(|| SqlError(format!("unknown role {role:?}")))?,
        content: r.text(2)?,
        name: r.opt_text(3)?,
        tool_calls: list_from_column(r.opt_text(4)?)?,
        tool_call_id: r.opt_text(5)?,
        created_at: r.int(6)?,
        silent: r.int(7)? != 0,
        depth: u32::try_from(r.int(8)?).unwrap_or(0),
        status: MessageStatus::parse(&r.text(9)?),
        parts: list_from_column(r.opt_text(10)?)?,
        side: r.opt_text(11)?.as_deref().and_then(Side::parse),
        parent_message_id: r.opt_text(12)?,
        parent_tool_call_id: r.opt_text(13)?,
    })
}
