//! Typed reads and writes of a thread's SQLite: the only place that knows the column lists.

mod config_copies;
mod context;
mod history;
mod mcp_servers;
mod messages;
mod schedules;
mod summaries;
mod thread_row;
mod tool_calls;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::engine::schema::{self, Feature};
use crate::values::message::{Message, MessageStatus, Role, ToolCall};
use crate::values::sql::{Row, Sql, SqlError, SqlValue};

pub use crate::values::status::{Approval, CallStatus, Order, Side, ThreadStatus};
pub use config_copies::ConfigCopy;
pub use history::{newest_within, ThreadCache};
pub use mcp_servers::McpServerRow;
pub use messages::stored_reply_calls;
pub use summaries::{summary_tokens, HistoryAfter, Summary, SUMMARY_PREFIX};

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
    /// Tokens (input and output) of every model attempt logged in this thread, sub-prompts'
    /// included: what an agent's `max_tokens` budget counts.
    #[serde(default)]
    pub tokens_used: i64,
    /// Their cost in US dollars at the models' configured prices: what `max_cost_usd` counts.
    #[serde(default)]
    pub cost_usd: f64,
    /// When the earliest active schedule falls due (ms since the epoch), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_at: Option<i64>,
    /// For a child thread: the thread a client created at the top of its chain of agent
    /// tools (its parent's root, or its parent when that has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_thread_id: Option<String>,
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
    /// `error` (see [`CallStatus`]).
    pub status: CallStatus,
    /// Who asked for it: the model, or the application (`queue_tool` from a tool or client).
    pub origin: CallOrigin,
    /// Attempts started (a retry is a new attempt; resuming a suspended workflow is not).
    pub attempts: i64,
    /// Runs cut short by a crash or an eviction.
    pub interruptions: i64,
    /// A suspended call's time to run again (ms since the epoch).
    pub wake_at: Option<i64>,
    /// For tools that need approval: waiting for it, approved or rejected.
    pub approval: Option<Approval>,
    /// The caller's runtime bindings (a JSON object), kept apart from the arguments.
    pub bindings: Option<String>,
    /// A workflow's whole-run deadline (ms since the epoch), set at its first start.
    pub deadline_at: Option<i64>,
    /// The version of the tool's code its runs started on (see
    /// [`crate::engine::durable::run_version`]); none until it first starts.
    pub version: Option<u32>,
}

impl StoredToolCall {
    /// The call's runtime bindings as a map (empty when it has none, or when the stored text
    /// is not a JSON object).
    pub fn binding_map(&self) -> Map<String, Value> {
        self.bindings
            .as_deref()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or_default()
    }
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

    /// The stored name back (anything but `queue` is the model's).
    pub fn parse(s: &str) -> Self {
        if s == "queue" {
            CallOrigin::Queue
        } else {
            CallOrigin::Model
        }
    }
}

/// How many columns [`MESSAGE_COLUMNS`] names (a query may select more after them).
const MESSAGE_COLUMN_COUNT: usize = 15;
const MESSAGE_COLUMNS: &str = "id, role, content, name, tool_calls, tool_call_id, created_at, \
     silent, depth, status, parts, side, parent_message_id, parent_tool_call_id, structured";

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

    /// A read, update or delete of a feature table ([`Feature`]): nothing to read, update or
    /// delete when this thread never created it.
    pub(crate) fn feature_exec(
        &self,
        statement: &str,
        params: &[SqlValue],
    ) -> Result<Vec<Row>, SqlError> {
        schema::feature_exec(self.sql, statement, params)
    }

    /// An insert into a feature table ([`Feature`]), creating the feature's tables first when
    /// this thread has none yet.
    pub(crate) fn feature_insert(
        &self,
        feature: Feature,
        statement: &str,
        params: &[SqlValue],
    ) -> Result<Vec<Row>, SqlError> {
        schema::feature_insert(self.sql, feature, statement, params)
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
     interruptions, wake_at, approval, bindings, deadline_at, version";
/// Columns in [`TOOL_CALL_COLUMNS`] (a query may append more after them).
const TOOL_CALL_COLUMN_COUNT: usize = 13;
/// Queues one call: id, message id, name, arguments, created at, origin (its queue position
/// follows the last call's).
const INSERT_TOOL_CALL: &str =
    "INSERT INTO tool_calls (id, message_id, seq, name, arguments, created_at, origin)
     VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tool_calls), ?, ?, ?, ?)";

/// Closes a call with its result: status, finish time, result message, by id.
const FINISH_TOOL_CALL: &str =
    "UPDATE tool_calls SET status = ?, finished_at = ?, result_message_id = ?,
         wake_at = NULL, detail = NULL
     WHERE id = ?";

fn tool_call_from_row(r: &Row) -> Result<StoredToolCall, SqlError> {
    Ok(StoredToolCall {
        call: ToolCall {
            id: r.text(0)?,
            name: r.text(1)?,
            arguments: r.text(2)?,
        },
        message_id: r.text(3)?,
        status: CallStatus::parse(&r.text(4)?),
        origin: CallOrigin::parse(&r.text(5)?),
        attempts: r.int(6)?,
        interruptions: r.int(7)?,
        wake_at: r.opt_int(8)?,
        approval: r.opt_text(9)?.as_deref().map(Approval::parse),
        bindings: r.opt_text(10)?,
        deadline_at: r.opt_int(11)?,
        // A version past u32 was never written by this code: read as unknown (not started).
        version: r.opt_int(12)?.and_then(|v| u32::try_from(v).ok()),
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
        structured: r
            .opt_text(14)?
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| SqlError(format!("a message's structured answer is not JSON: {e}")))?,
    })
}
