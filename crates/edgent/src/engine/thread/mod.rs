//! The thread state machine, split by topic: client operations (`client`), the turn
//! (`turn`), a model reply as it streams and ends (`reply`), tool calls (`tools`) and history shaping (`history`); this module holds
//! the [`Thread`] view itself, its frames and its hooks.
//!
//! All durable state lives in the thread's SQLite; a [`Thread`] is a short-lived view over it,
//! built for each event. Inputs are `handle_*`/command methods, outputs are the [`Action`]
//! returned by [`Thread::next_action`] and the frames drained with [`Thread::poll_frame`].
//! The driver (the Durable Object, or a host test) performs the actions and feeds results back:
//!
//! ```text
//! post_user_message ─► next_action ─► CallModel ─► on_model_event* ─► finish_model_call ─┐
//!                          ▲             RunTool ─► start_tool ─► finish_tool ────────────┤
//!                          └──────────────────────────────────────────────────────────────┘
//! ```
//!
//! Because the next action is derived from what is stored (pending tool calls, the last
//! message), a driver that crashes at any point resumes by calling `next_action` again.

mod client;
mod compaction;
mod history;
mod records;
mod reply;
mod schedules;
mod sub_prompt;
mod tools;
mod turn;

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use crate::config::{AgentConfig, AgentKind, DEFAULT_MAX_HISTORY_TOKENS, DEFAULT_MAX_TURNS};
use crate::engine::durable::{CallStatus, Suspension};
use crate::engine::schema::migrate;
use crate::engine::store::{
    stored_reply_calls, CallOrigin, MessagePage, Order, Side, Store, StoredToolCall, ThreadCache,
    ThreadStatus, ThreadSummary,
};
use crate::hook::{HookContext, HookFailure, Hooks};
use crate::llm::stream::{Completion, ProviderError, StreamEvent};
use crate::values::message::{Message, MessageStatus, Role, ToolCall};
use crate::values::protocol::ServerFrame;
use crate::values::sql::{Sql, SqlError};
use crate::values::{Approval, CallToolResult, Invalid};
use std::rc::Rc;

/// What the engine knows of the registered tools: which exist and whether arguments fit
/// one. The tool layer's `Registry` implements it, so the engine needs no tool code.
pub trait ToolIndex {
    /// The registered names, alphabetically (for messages naming what exists).
    fn tool_names(&self) -> Vec<&str>;
    /// Checks `arguments` against the tool's schema and rules; `None` when no tool is named
    /// `name`.
    fn check_arguments(&self, name: &str, arguments: Value) -> Option<Result<(), Invalid>>;
    /// The policy of the tool named `name` (`None` when there is none).
    fn tool_policy(&self, name: &str) -> Option<crate::values::ToolPolicy>;
}

/// Why a thread operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadError {
    /// No thread was created in this object.
    NotFound,
    /// `create` on an object that already holds a thread.
    AlreadyExists,
    /// The thread is stopped and accepts no new work.
    Stopped,
    /// No tool with that name is registered.
    UnknownTool(String),
    /// The arguments do not fit the tool's schema or rules.
    InvalidArguments(String),
    /// The request itself is wrong (says why).
    Invalid(String),
    /// An id that must be new is already taken, or the thing named is not in a state the
    /// operation applies to.
    Conflict(String),
    /// Something the request names (other than the thread) does not exist.
    Missing(String),
    /// Storage failed.
    Sql(SqlError),
}

impl From<SqlError> for ThreadError {
    fn from(e: SqlError) -> Self {
        ThreadError::Sql(e)
    }
}

impl std::fmt::Display for ThreadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadError::NotFound => f.write_str("thread not found"),
            ThreadError::AlreadyExists => f.write_str("thread already exists"),
            ThreadError::Stopped => f.write_str("the thread is stopped"),
            ThreadError::UnknownTool(why)
            | ThreadError::InvalidArguments(why)
            | ThreadError::Invalid(why)
            | ThreadError::Conflict(why)
            | ThreadError::Missing(why) => f.write_str(why),
            ThreadError::Sql(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ThreadError {}

impl From<ThreadError> for crate::values::ToolError {
    /// A refused thread operation (unknown tool, bad arguments, stopped thread) will be
    /// refused again; only storage errors are retried.
    fn from(e: ThreadError) -> Self {
        match e {
            ThreadError::Sql(e) => e.into(),
            e => crate::values::ToolError::fatal(e.to_string()),
        }
    }
}

/// Interruptions (the Worker stopped while the call ran) after which a call is abandoned with
/// an error result.
pub const MAX_TOOL_INTERRUPTIONS: i64 = 3;

pub use client::InjectMessage;
pub use compaction::CompactJob;
pub(crate) use history::well_paired;
use history::{
    fits_every_wire, internal_call_id, stop_answer, unfit_call_name, without_calls, worn_out,
};
pub use history::{repair_history, view_for_side};
pub use records::ParentLink;
pub use sub_prompt::{
    SubCallRun, SubPrompt, SubPromptSpec, SubStep, SubToolCall, SUB_PROMPT_MAX_CALLS_PER_CALL,
    SUB_PROMPT_MAX_STEPS,
};
pub use turn::{Action, ModelCall, TurnRules};

/// A view of one thread over its SQLite, plus the frames produced while handling an event.
pub struct Thread<'a> {
    store: Store<'a>,
    frames: VecDeque<ServerFrame>,
    rules: TurnRules,
    /// The running prompt's hooks, resolved on first use from the stored hook config.
    hooks: Option<(Rc<Hooks>, String)>,
    hook_failures: Vec<HookFailure>,
    /// The driver's cache (the model's history, the hook config), if it keeps one (see
    /// [`ThreadCache`]).
    cache: Option<Rc<ThreadCache>>,
    /// Ids of parked calls, read by `next_tools` in this step for the model call after it.
    pending_ids: Option<Vec<String>>,
    /// Calls without a result, counted with the thread row that `step_wanted` or
    /// `next_action` just read; taken by `next_action_for` (valid only with that row: no
    /// await in between), which then reads no calls when there are none.
    open_calls: Cell<Option<i64>>,
    /// When the thread must wake, known from the calls `next_tools` read when the step
    /// ended in [`Action::Idle`] or [`Action::Wait`] with nothing written to them since: the
    /// driver then needs no [`Thread::poll_timeout`] read (see [`Thread::take_wake_hint`]).
    wake_hint: Cell<Option<Option<i64>>>,
    /// The thread row and its open-call count as the statement that ended a model step
    /// returned them (or as the driver hands it over, see [`Thread::take_work_row`]): taken
    /// by the `step_wanted` that follows (nothing written in between, see
    /// [`Thread::forget_row_hint`]), which then reads no row.
    row_hint: Cell<Option<(ThreadSummary, i64)>>,
    /// The calls without a result, when that row hint counts only the calls its reply has
    /// just stored: taken by the `next_action_for` that follows with the row, which then
    /// reads no calls. Forgotten with the row hint.
    calls_hint: Cell<Option<Vec<StoredToolCall>>>,
    /// The row as the write that stored a user message returned it, for the driver to hand
    /// to the turn it starts ([`Thread::take_work_row`]); never read by this view.
    work_row: Cell<Option<(ThreadSummary, i64)>>,
}

impl<'a> Thread<'a> {
    /// Opens the thread database, creating or migrating the schema first.
    pub fn open(sql: &'a dyn Sql) -> Result<Self, ThreadError> {
        migrate(sql)?;
        Ok(Self::open_migrated(sql))
    }

    /// A view over a database the caller has already opened with [`Thread::open`] in this
    /// process (no schema checks: for drivers that open a view per event).
    pub fn open_migrated(sql: &'a dyn Sql) -> Self {
        Thread {
            store: Store::new(sql),
            frames: VecDeque::new(),
            rules: TurnRules::default(),
            hooks: None,
            hook_failures: Vec::new(),
            cache: None,
            pending_ids: None,
            open_calls: Cell::new(None),
            wake_hint: Cell::new(None),
            row_hint: Cell::new(None),
            calls_hint: Cell::new(None),
            work_row: Cell::new(None),
        }
    }

    /// This view reads the model's history through `cache`, which the driver keeps for the
    /// object's life (one per thread): a model call then reads only the messages appended
    /// since the last one.
    pub fn with_cache(mut self, cache: Rc<ThreadCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Records the running prompt and its hooks (agent hooks first) for this and later views.
    pub fn set_hook_config<'n>(
        &mut self,
        prompt: &str,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<(), ThreadError> {
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let written = self.store.set_hook_config(prompt, &names);
        if let Some(cache) = &self.cache {
            let stored = written.is_ok().then(|| Some((prompt.to_owned(), names)));
            cache.remember_hook_config(stored);
        }
        written?;
        self.hooks = None;
        Ok(())
    }

    /// Appends `m`; a view with the object's cache also tells the cache (see
    /// [`ThreadCache`]), so the next model call need not read it back.
    fn append(&mut self, m: &Message) -> Result<(), ThreadError> {
        let position = self.store.append_message(m)?;
        self.note_appended(position, m);
        Ok(())
    }

    /// Tells the cache about a message this view stored at `position`.
    fn note_appended(&self, position: f64, m: &Message) {
        if let Some(cache) = &self.cache {
            cache.note_appended(position, m);
        }
    }

    /// Rewrites a message's content, tool calls and status, telling the cache likewise.
    fn update(&mut self, m: &Message) -> Result<(), ThreadError> {
        self.store.update_message(m)?;
        if let Some(cache) = &self.cache {
            cache.note_updated(m);
        }
        Ok(())
    }

    /// Failures of hooks since the last call, for the driver to log.
    pub fn take_hook_failures(&mut self) -> Vec<HookFailure> {
        std::mem::take(&mut self.hook_failures)
    }

    /// The hooks in force and the context they see (`None` when there are none).
    /// The hook config as recorded: from the object's cache when it knows it, else read (and
    /// then known).
    fn recorded_hook_config(&self) -> Option<(String, Vec<String>)> {
        if let Some(known) = self.cache.as_ref().and_then(|c| c.known_hook_config()) {
            return known;
        }
        let read = self.store.hook_config().ok()?;
        if let Some(cache) = &self.cache {
            cache.remember_hook_config(Some(read.clone()));
        }
        read
    }

    fn hooks(&mut self, depth: u32) -> Option<(Rc<Hooks>, HookContext)> {
        if self.hooks.is_none() {
            let (prompt, names) = self.recorded_hook_config().unwrap_or_default();
            let known: Vec<&str> = crate::hook::names().collect();
            let (found, unknown): (Vec<&String>, Vec<&String>) =
                names.iter().partition(|n| known.contains(&n.as_str()));
            for name in unknown {
                self.hook_failures.push(HookFailure {
                    hook: name.clone(),
                    kind: "unknown",
                    error: "no such hook in agents/hooks/; it is skipped".into(),
                });
            }
            let hooks = Hooks::resolve(found.into_iter().map(String::as_str)).unwrap_or_default();
            self.hooks = Some((Rc::new(hooks), prompt));
        }
        let (hooks, prompt) = self.hooks.clone()?;
        if hooks.is_empty() {
            return None;
        }
        let t = self.store.thread().ok().flatten()?;
        Some((
            hooks,
            HookContext {
                thread_id: t.thread_id,
                agent_id: t.agent_id,
                prompt,
                side: t.current_side,
                depth,
            },
        ))
    }

    /// Runs `before_create_message` hooks over a message about to be stored.
    fn before_create(&mut self, message: Message) -> Message {
        let Some((hooks, ctx)) = self.hooks(message.depth) else {
            return message;
        };
        let (message, failures) = hooks.before_create_message(&ctx, message);
        self.hook_failures.extend(failures);
        message
    }

    /// Runs `after_create_message` hooks over a message just stored.
    fn after_create(&mut self, message: &Message) {
        if let Some((hooks, ctx)) = self.hooks(message.depth) {
            let failures = hooks.after_create_message(&ctx, message);
            self.hook_failures.extend(failures);
        }
    }

    /// Sets the rules of the running side (the driver does this after loading its config).
    pub fn set_rules(&mut self, rules: TurnRules) {
        self.rules = rules;
    }

    /// The rules in force.
    pub fn rules(&self) -> &TurnRules {
        &self.rules
    }

    /// The storage, for the engine's own modules and the test harness.
    pub(crate) fn store(&self) -> &Store<'a> {
        &self.store
    }

    /// Opens the database of an object that may never have held a thread, without writing to
    /// it: `NotFound` when no schema exists (so probing unknown ids costs no storage).
    pub fn open_existing(sql: &'a dyn Sql) -> Result<Self, ThreadError> {
        if !crate::engine::schema::exists(sql)? {
            return Err(ThreadError::NotFound);
        }
        Self::open(sql)
    }

    /// Creates the thread row.
    pub fn create(
        &mut self,
        now: i64,
        thread_id: &str,
        agent_id: &str,
        tags: &[String],
    ) -> Result<ThreadSummary, ThreadError> {
        if self.store.thread()?.is_some() {
            return Err(ThreadError::AlreadyExists);
        }
        self.store.create_thread(now, thread_id, agent_id, tags)?;
        self.summary()
    }

    /// The client-token generation in force (tokens minted in an older one are revoked).
    pub fn token_generation(&self) -> Result<i64, ThreadError> {
        self.summary()?;
        Ok(self.store.token_generation()?)
    }

    /// Revokes every client token of this thread; the new generation.
    pub fn revoke_tokens(&self) -> Result<i64, ThreadError> {
        self.summary()?;
        Ok(self.store.next_token_generation()?)
    }

    /// The thread row and counters.
    pub fn summary(&self) -> Result<ThreadSummary, ThreadError> {
        self.store.thread()?.ok_or(ThreadError::NotFound)
    }

    /// The page a client asked for: top-level messages, or with `depth` > 0 the messages of
    /// sub-prompts at that depth.
    pub fn messages_query(
        &mut self,
        q: &crate::values::page::PageQuery,
    ) -> Result<MessagePage, ThreadError> {
        if q.depth == 0 {
            return self.messages(q.limit, q.offset, q.order, q.include_silent);
        }
        self.summary()?;
        Ok(self
            .store
            .messages_at_depth(q.depth, q.limit, q.offset, q.order)?)
    }

    /// A page of top-level messages (silent ones only with `include_silent`).
    pub fn messages(
        &mut self,
        limit: u32,
        offset: u32,
        order: Order,
        include_silent: bool,
    ) -> Result<MessagePage, ThreadError> {
        self.summary()?;
        let mut page = self
            .store
            .messages_page(limit, offset, order, include_silent)?;
        if let Some((hooks, ctx)) = self.hooks(0) {
            let (messages, failures) = hooks.filter_messages(&ctx, page.messages);
            self.hook_failures.extend(failures);
            page.messages = messages;
        }
        Ok(page)
    }

    /// The frame describing the current state (sent on connect and after changes).
    pub fn status_frame(&self) -> Result<ServerFrame, ThreadError> {
        let t = self.summary()?;
        Ok(ServerFrame::status(t.status, t.turn_count, t.current_side))
    }

    /// Whether frames wait to be broadcast ([`Thread::poll_frame`]).
    pub fn has_frames(&self) -> bool {
        !self.frames.is_empty()
    }

    /// The next frame to broadcast to every socket of this thread.
    pub fn poll_frame(&mut self) -> Option<ServerFrame> {
        self.frames.pop_front()
    }

    fn reply_message(&self, call: &ModelCall, status: MessageStatus, with_calls: bool) -> Message {
        Message {
            tool_calls: if with_calls {
                call.completion.tool_calls.clone()
            } else {
                Vec::new()
            },
            status,
            side: Some(call.side),
            structured: call
                .structured
                .clone()
                .filter(|_| status == MessageStatus::Completed),
            ..Message::with_id(
                call.message_id.clone(),
                Role::Assistant,
                call.completion.text.clone(),
                call.created_at,
            )
        }
    }

    fn push_status(&mut self) -> Result<(), ThreadError> {
        let frame = self.status_frame()?;
        self.frames.push_back(frame);
        Ok(())
    }

    /// The status frame of the row a write returned (status, turn count, side), or of the
    /// row as read when it returned none.
    pub(super) fn push_status_of(
        &mut self,
        row: Option<&ThreadSummary>,
    ) -> Result<(), ThreadError> {
        match row {
            Some(t) => {
                self.frames
                    .push_back(ServerFrame::status(t.status, t.turn_count, t.current_side));
                Ok(())
            }
            None => self.push_status(),
        }
    }
}
