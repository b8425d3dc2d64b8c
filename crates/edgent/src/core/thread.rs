//! The thread state machine.
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

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use super::config::{AgentConfig, AgentKind, DEFAULT_MAX_HISTORY_TOKENS, DEFAULT_MAX_TURNS};
use super::durable::{CallStatus, Suspension};
use super::message::{Message, MessageStatus, Role, ToolCall};
use super::protocol::ServerFrame;
use super::schema::migrate;
use super::sql::{Sql, SqlError};
use super::store::{
    CallOrigin, MessagePage, Order, Side, Store, StoredToolCall, ThreadStatus, ThreadSummary,
};
use super::stream::{Completion, ProviderError, StreamEvent};
use crate::hook::{HookContext, HookFailure, Hooks};
use crate::tool::{CallToolResult, Registry};
use std::rc::Rc;

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
    /// An id that must be new is already taken.
    Conflict(String),
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
            | ThreadError::Conflict(why) => f.write_str(why),
            ThreadError::Sql(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ThreadError {}

/// Interruptions (the Worker stopped while the call ran) after which a call is abandoned with
/// an error result.
pub const MAX_TOOL_INTERRUPTIONS: i64 = 3;

/// A message stored by `inject_message` (from a tool or a client).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectMessage {
    /// The text.
    pub content: String,
    /// Author; `user` unless given.
    #[serde(default = "user_role")]
    pub role: Role,
    /// Your own id for the message (1-128 of `A-Z a-z 0-9 _ - . :`); a fresh UUID if absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Insert just before this message instead of at the end.
    #[serde(default)]
    pub before_message_id: Option<String>,
    /// For `tool` messages: the call this answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(default)]
    pub name: Option<String>,
    /// Kept and shown to clients that ask, never sent to a model.
    #[serde(default)]
    pub silent: bool,
    /// Store at depth 0 even when injected from a sub-flow.
    #[serde(default)]
    pub force_top_level: bool,
}

fn user_role() -> Role {
    Role::User
}

impl InjectMessage {
    /// A message with this role and text and every option at its default.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        InjectMessage {
            content: content.into(),
            role,
            id: None,
            before_message_id: None,
            tool_call_id: None,
            name: None,
            silent: false,
            force_top_level: false,
        }
    }

    /// Marks the message silent (builder style).
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self
    }

    fn check(&self) -> Result<(), ThreadError> {
        let invalid = |why: String| Err(ThreadError::Invalid(why));
        if self.content.is_empty() && self.role != Role::Tool {
            return invalid("content must not be empty".into());
        }
        if self.content.len() > super::api::MAX_CONTENT_BYTES {
            return invalid(format!(
                "content is {} bytes; the limit is {}",
                self.content.len(),
                super::api::MAX_CONTENT_BYTES
            ));
        }
        if let Some(id) = &self.id {
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
            if id.is_empty() || id.len() > 128 || !id.chars().all(ok_char) {
                return invalid(format!(
                    "id {id:?} must be 1-128 characters of A-Z a-z 0-9 _ - . :"
                ));
            }
        }
        match (self.role, &self.tool_call_id) {
            (Role::Tool, None) => return invalid("a tool message needs tool_call_id".into()),
            (Role::Tool, Some(_)) | (_, None) => {}
            (_, Some(_)) => return invalid("tool_call_id is only for role \"tool\"".into()),
        }
        if self
            .name
            .as_ref()
            .is_some_and(|n| n.is_empty() || n.len() > 64)
        {
            return invalid("name must be 1-64 characters".into());
        }
        Ok(())
    }
}

/// The rules a side's turn runs under, from the agent's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRules {
    /// Who talks: a human and side A, or sides A and B.
    pub kind: AgentKind,
    /// Turns before the conversation ends.
    pub max_turns: u32,
    /// An answer without tool calls ends the side's turn.
    pub stop_on_response: bool,
    /// Calling this tool ends the turn (ai_human) or the conversation (dual_ai).
    pub stop_tool: Option<String>,
    /// Which property of the stop tool's result (or arguments) is the final answer.
    pub stop_tool_response_property: Option<String>,
    /// Several tool calls of one reply run concurrently.
    pub parallel_tool_calls: bool,
    /// Estimated tokens of history sent to the model.
    pub max_history_tokens: u32,
    /// How the other side is named when its words are shown as user messages.
    pub other_label: Option<String>,
}

impl Default for TurnRules {
    fn default() -> Self {
        TurnRules {
            kind: AgentKind::AiHuman,
            max_turns: DEFAULT_MAX_TURNS,
            stop_on_response: true,
            stop_tool: None,
            stop_tool_response_property: None,
            parallel_tool_calls: false,
            max_history_tokens: DEFAULT_MAX_HISTORY_TOKENS,
            other_label: None,
        }
    }
}

impl TurnRules {
    /// The rules of the side `config` runs.
    pub fn from_config(config: &AgentConfig) -> Self {
        let side = config.side_config();
        let other = match config.side {
            Side::A => config.agent.side_b.as_ref(),
            Side::B => Some(&config.agent.side_a),
        };
        TurnRules {
            kind: config.agent.kind,
            max_turns: config.agent.max_turns,
            stop_on_response: side.stop_on_response,
            stop_tool: side.stop_tool.clone(),
            stop_tool_response_property: side.stop_tool_response_property.clone(),
            parallel_tool_calls: config.prompt.parallel_tool_calls,
            max_history_tokens: config
                .model()
                .and_then(|m| m.max_history_tokens)
                .unwrap_or(DEFAULT_MAX_HISTORY_TOKENS),
            other_label: other.and_then(|o| o.label.clone()),
        }
    }
}

/// What the driver must do next.
#[derive(Debug)]
pub enum Action {
    /// Nothing to do until new input arrives.
    Idle,
    /// The turn moved on (the other side's turn began): reload the configuration for the
    /// current side and ask again.
    Continue,
    /// Call the model with this history; stream the reply into [`Thread::on_model_event`].
    CallModel(ModelCall),
    /// Run this tool call, then report with [`Thread::finish_tool`].
    RunTool(StoredToolCall),
    /// Run these calls of one reply concurrently; report each with [`Thread::finish_tool`],
    /// in this order.
    RunTools(Vec<StoredToolCall>),
    /// The turn waits for parked tool calls (sleeping, waiting, retrying, rate limited):
    /// nothing to do before [`Store::next_wake`] or an outside event (webhook, approval).
    Wait,
}

/// An in-flight model call: the pending assistant message and the reply assembled so far.
///
/// Lives only in the driver's memory; if the process dies, the pending message is marked
/// failed on the next [`Thread::next_action`] and the call is made again.
#[derive(Debug)]
pub struct ModelCall {
    /// The pending assistant message receiving the reply.
    pub message_id: String,
    /// The model-ready history (repaired: every tool call has a result).
    pub history: Vec<Message>,
    /// The reply so far.
    pub completion: Completion,
    created_at: i64,
    side: Side,
}

/// A view of one thread over its SQLite, plus the frames produced while handling an event.
pub struct Thread<'a> {
    store: Store<'a>,
    frames: VecDeque<ServerFrame>,
    rules: TurnRules,
    /// The running prompt's hooks, resolved on first use from the stored hook config.
    hooks: Option<(Rc<Hooks>, String)>,
    hook_failures: Vec<HookFailure>,
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
        }
    }

    /// Records the running prompt and its hooks (agent hooks first) for this and later views.
    pub fn set_hook_config<'n>(
        &mut self,
        prompt: &str,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<(), ThreadError> {
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        self.store.set_hook_config(prompt, &names)?;
        self.hooks = None;
        Ok(())
    }

    /// Failures of hooks since the last call, for the driver to log.
    pub fn take_hook_failures(&mut self) -> Vec<HookFailure> {
        std::mem::take(&mut self.hook_failures)
    }

    /// The hooks in force and the context they see (`None` when there are none).
    fn hooks(&mut self, depth: u32) -> Option<(Rc<Hooks>, HookContext)> {
        if self.hooks.is_none() {
            let (prompt, names) = self.store.hook_config().ok().flatten().unwrap_or_default();
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

    /// The storage, for the driver's own records (request log, sub-prompt messages).
    pub fn store(&self) -> &Store<'a> {
        &self.store
    }

    /// Opens the database of an object that may never have held a thread, without writing to
    /// it: `NotFound` when no schema exists (so probing unknown ids costs no storage).
    pub fn open_existing(sql: &'a dyn Sql) -> Result<Self, ThreadError> {
        if !super::schema::exists(sql)? {
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

    /// The thread row and counters.
    pub fn summary(&self) -> Result<ThreadSummary, ThreadError> {
        self.store.thread()?.ok_or(ThreadError::NotFound)
    }

    /// The page a client asked for: top-level messages, or with `depth` > 0 the messages of
    /// sub-prompts at that depth.
    pub fn messages_query(
        &mut self,
        q: &super::api::PageQuery,
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
        Ok(ServerFrame::Status {
            state: t.status.as_str().to_owned(),
            turn: t.turn_count,
            side: t.current_side.as_str().to_owned(),
        })
    }

    /// Stores a user message and starts a turn if none is running. The driver should then
    /// schedule work (an alarm) and loop on [`Thread::next_action`].
    pub fn post_user_message(&mut self, now: i64, content: &str) -> Result<Message, ThreadError> {
        let t = self.summary()?;
        if t.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        let message = self.before_create(Message::new(Role::User, content, now));
        self.store.append_message(&message)?;
        self.after_create(&message);
        if t.status == ThreadStatus::Idle {
            self.store.begin_turn(now)?;
        }
        self.store.set_needs_model(true)?;
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        self.push_status()?;
        Ok(message)
    }

    /// Stops the thread: no further model calls or tools; new messages are refused.
    pub fn stop(&mut self, now: i64, by: &str) -> Result<(), ThreadError> {
        let t = self.summary()?;
        if t.status != ThreadStatus::Stopped {
            self.conclude(now, by)?;
        }
        Ok(())
    }

    /// Queues a call of `name` (from a tool or a client, not the model): it runs after the
    /// calls already queued and before the next model call. An idle thread starts a turn that
    /// runs the queue (and calls the model only if something else asks for it, such as
    /// [`Thread::force_turn`]). Stored as an assistant message holding the call, so the
    /// history stays valid for every provider. Returns the call id.
    pub fn queue_tool(
        &mut self,
        now: i64,
        registry: &Registry,
        name: &str,
        arguments: Value,
    ) -> Result<String, ThreadError> {
        self.queue_tool_with_bindings(now, registry, name, arguments, None)
    }

    /// [`Thread::queue_tool`] with runtime bindings for the call (`flow.bindings`), kept
    /// apart from the arguments.
    pub fn queue_tool_with_bindings(
        &mut self,
        now: i64,
        registry: &Registry,
        name: &str,
        arguments: Value,
        bindings: Option<&serde_json::Map<String, Value>>,
    ) -> Result<String, ThreadError> {
        let t = self.summary()?;
        if t.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        let Some(tool) = registry.get(name) else {
            let known: Vec<&str> = registry.names().collect();
            return Err(ThreadError::UnknownTool(format!(
                "unknown tool {name:?}; registered tools: {}",
                known.join(", ")
            )));
        };
        tool.validate(arguments.clone()).map_err(|why| {
            ThreadError::InvalidArguments(format!("invalid arguments for `{name}`: {why}"))
        })?;
        let call = ToolCall {
            id: format!("queued_{}", super::ids::new_id().replace('-', "")),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        };
        let message = Message {
            tool_calls: vec![call.clone()],
            // Its result is stored with the running side, so both belong to that side.
            side: Some(t.current_side),
            ..Message::new(Role::Assistant, "", now)
        };
        self.store.append_message(&message)?;
        self.store.queue_tool_calls(
            now,
            &message.id,
            std::slice::from_ref(&call),
            CallOrigin::Queue,
        )?;
        if let Some(b) = bindings.filter(|b| !b.is_empty()) {
            self.store
                .set_tool_call_bindings(&call.id, &Value::Object(b.clone()))?;
        }
        self.frames.push_back(ServerFrame::Message { message });
        self.frames
            .push_back(ServerFrame::tool(&call.id, &call.name, "queued"));
        if t.status == ThreadStatus::Idle {
            self.store.begin_turn(now)?;
            self.push_status()?;
        }
        Ok(call.id)
    }

    /// Stores a message without starting any work. Silent messages are kept for clients that
    /// ask for them and never shown to a model; `before_message_id` puts the message just
    /// before that one in history order.
    pub fn inject_message(
        &mut self,
        now: i64,
        inject: InjectMessage,
        depth: u32,
    ) -> Result<Message, ThreadError> {
        self.summary()?;
        inject.check()?;
        let id = match inject.id {
            Some(id) if self.store.message_exists(&id)? => {
                return Err(ThreadError::Conflict(format!(
                    "a message with id {id:?} already exists"
                )))
            }
            Some(id) => id,
            None => super::ids::new_id(),
        };
        let message = self.before_create(Message {
            name: inject.name,
            tool_call_id: inject.tool_call_id,
            silent: inject.silent,
            depth,
            ..Message::with_id(id, inject.role, inject.content, now)
        });
        match &inject.before_message_id {
            Some(before) => {
                if !self.store.insert_message_before(&message, before)? {
                    return Err(ThreadError::Invalid(format!(
                        "before_message_id {before:?} is not a message of this thread"
                    )));
                }
            }
            None => self.store.append_message(&message)?,
        }
        self.after_create(&message);
        if !message.silent {
            self.frames.push_back(ServerFrame::Message {
                message: message.clone(),
            });
        }
        Ok(message)
    }

    /// Makes `side` take the next turn once queued tools have run: its model is called even
    /// without a new message. Starts a turn on an idle thread.
    pub fn force_turn(&mut self, now: i64, side: Side) -> Result<(), ThreadError> {
        let t = self.summary()?;
        if t.status == ThreadStatus::Stopped {
            return Err(ThreadError::Stopped);
        }
        self.store.set_side(now, side)?;
        if t.status == ThreadStatus::Idle {
            self.store.begin_turn(now)?;
        }
        self.store.set_needs_model(true)?;
        self.push_status()
    }

    /// Decides the next step from stored state. Recovers from an interrupted step first.
    ///
    /// Order: queued tool calls first (model calls, then calls queued by tools and clients,
    /// in queue order), then the model if it is owed a call, else the turn ends.
    pub fn next_action(&mut self, now: i64, max_steps: u32) -> Result<Action, ThreadError> {
        let Some(mut t) = self.store.thread()? else {
            return Ok(Action::Idle);
        };
        if t.status == ThreadStatus::Idle && self.store.next_tool_call(now)?.is_some() {
            // A parked call (a queued workflow's sleep, a webhook) is due on an idle thread:
            // it runs in a turn of its own, as a freshly queued call would.
            self.store.begin_turn(now)?;
            self.push_status()?;
            t.status = ThreadStatus::Running;
        }
        if t.status != ThreadStatus::Running {
            return Ok(Action::Idle);
        }
        // A model call cut short by eviction or a crash left its message pending: it is
        // marked failed and the call is owed again.
        let interrupted = self.store.pending_messages()?;
        let recovered = !interrupted.is_empty();
        for mut m in interrupted {
            m.status = MessageStatus::Failed;
            self.store.update_message(&m)?;
            self.frames.push_back(ServerFrame::Message { message: m });
        }
        if recovered {
            self.store.set_needs_model(true)?;
        }
        if let Some(action) = self.next_tools(now)? {
            return Ok(action);
        }
        if !(t.needs_model || recovered) {
            return self.end_turn(now, &t);
        }
        if t.steps >= i64::from(max_steps) {
            let why = format!("the turn used its {max_steps} model calls without finishing");
            self.frames
                .push_back(ServerFrame::error("max_steps", why.clone(), None));
            let action = self.end_turn(now, &t)?;
            if self.summary()?.status == ThreadStatus::Idle {
                self.store.set_status(now, ThreadStatus::Idle, Some(&why))?;
            }
            return Ok(action);
        }
        self.store.add_step(now)?;
        // Cleared now, set again by a reply with tool calls, a user message or a forced turn
        // arriving while the model streams.
        self.store.set_needs_model(false)?;
        let history = self
            .store
            .model_history_within(u64::from(self.rules.max_history_tokens))?;
        let history = match self.rules.kind {
            AgentKind::DualAi => {
                view_for_side(history, t.current_side, self.rules.other_label.as_deref())
            }
            AgentKind::AiHuman => history,
        };
        // Calls still parked (queued workflows that sleep or wait) have no result yet: the
        // model does not see them until they finish.
        let parked = self.store.pending_tool_call_ids()?;
        let history = without_calls(history, &parked);
        let mut history = repair_history(history);
        if let Some((hooks, ctx)) = self.hooks(0) {
            let (filtered, failures) = hooks.prefilter_llm_history(&ctx, history);
            self.hook_failures.extend(failures);
            // A hook may drop a call or its result; the model still gets valid pairs.
            history = repair_history(filtered);
        }
        let message = Message {
            status: MessageStatus::Pending,
            side: Some(t.current_side),
            ..Message::new(Role::Assistant, "", now)
        };
        self.store.append_message(&message)?;
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        Ok(Action::CallModel(ModelCall {
            message_id: message.id,
            history,
            completion: Completion::default(),
            created_at: now,
            side: t.current_side,
        }))
    }

    /// The next tool call(s) to run, abandoning calls that keep killing the Worker. With
    /// parallel tool calls, every due call of the same model reply runs together. A parked
    /// call holds nothing but its own reply: when the only calls left of a model reply are
    /// parked, the turn waits ([`Action::Wait`]) for the earliest wake time.
    fn next_tools(&mut self, now: i64) -> Result<Option<Action>, ThreadError> {
        loop {
            let Some(call) = self.store.next_tool_call(now)? else {
                return Ok(self
                    .store
                    .has_pending_model_calls()?
                    .then_some(Action::Wait));
            };
            let mut call = call;
            if call.status == CallStatus::Running.as_str() {
                // It was running when the Worker stopped (a crash, an eviction, a deploy).
                self.store.count_interruption(&call.call.id)?;
                self.store
                    .end_attempt(now, &call.call.id, "interrupted", None)?;
                call.interruptions += 1;
                if worn_out(&call) {
                    // Cut short this often: the tool itself kills the Worker (a panic, an
                    // exceeded limit). Record that instead of crashing in a loop.
                    let why = format!(
                        "this tool call was interrupted {} times (the Worker stopped while it ran) and was abandoned",
                        call.interruptions
                    );
                    self.finish_tool(now, &call, &CallToolResult::error(why))?;
                    continue;
                }
            }
            if !(self.rules.parallel_tool_calls && call.origin == CallOrigin::Model) {
                return Ok(Some(Action::RunTool(call)));
            }
            let mut batch = vec![call.clone()];
            for other in self.store.pending_tool_calls()? {
                let due = matches!(other.status.as_str(), "queued")
                    || other.wake_at.is_some_and(|w| w <= now);
                if other.call.id != call.call.id
                    && other.message_id == call.message_id
                    && other.origin == CallOrigin::Model
                    && due
                {
                    batch.push(other);
                }
            }
            return Ok(Some(if batch.len() > 1 {
                Action::RunTools(batch)
            } else {
                Action::RunTool(call)
            }));
        }
    }

    /// Closes the running side's turn and applies the stop rules: a pending end (a stop
    /// tool) or `max_turns` ends the conversation; in a dual-AI thread the other side goes
    /// next; otherwise the thread waits for a message.
    fn end_turn(&mut self, now: i64, t: &ThreadSummary) -> Result<Action, ThreadError> {
        let turns = self.store.finish_turn(now)?;
        if let Some(reason) = &t.ending {
            self.conclude(now, reason)?;
            return Ok(Action::Idle);
        }
        if turns >= i64::from(self.rules.max_turns) {
            self.conclude(now, "max_turns")?;
            return Ok(Action::Idle);
        }
        if self.rules.kind == AgentKind::DualAi && t.steps > 0 {
            self.store.set_side(now, t.current_side.other())?;
            self.store.begin_turn(now)?;
            self.store.set_needs_model(true)?;
            self.push_status()?;
            return Ok(Action::Continue);
        }
        self.push_status()?;
        Ok(Action::Idle)
    }

    /// Ends the conversation: the final answer is kept (the last assistant text unless a stop
    /// tool gave one) and the thread is stopped by `reason`.
    fn conclude(&mut self, now: i64, reason: &str) -> Result<(), ThreadError> {
        if self.summary()?.result.is_none() {
            if let Some(text) = self.store.last_assistant_text()? {
                self.store.set_result(&text)?;
            }
        }
        self.store.set_stopped(now, reason)?;
        // Parked and queued calls will not run on a stopped thread: each gets its error result
        // now, so the history stays whole and no alarm wakes them. A running call finishes
        // normally (and is not parked again: see `cancel_if_stopped`).
        for call in self.store.pending_tool_calls()? {
            if call.status != CallStatus::Running.as_str() {
                let why = format!("cancelled: the thread was stopped (by {reason})");
                self.finish_tool(now, &call, &CallToolResult::error(why))?;
            }
        }
        self.push_status()
    }

    /// The result for a call whose run ended after the thread stopped and would otherwise be
    /// parked (retry, sleep, wait): a stopped thread parks nothing.
    pub fn cancel_if_stopped(&self) -> Result<Option<CallToolResult>, ThreadError> {
        let t = self.summary()?;
        Ok((t.status == ThreadStatus::Stopped).then(|| {
            CallToolResult::error(format!(
                "cancelled: the thread was stopped (by {})",
                t.stopped_by.as_deref().unwrap_or("user")
            ))
        }))
    }

    /// Feeds one stream event; text becomes a `message_chunk` frame.
    pub fn on_model_event(
        &mut self,
        call: &mut ModelCall,
        event: StreamEvent,
    ) -> Result<(), ProviderError> {
        call.completion.apply(&event)?;
        if let StreamEvent::TextDelta(delta) = event {
            self.frames.push_back(ServerFrame::MessageChunk {
                message_id: call.message_id.clone(),
                delta,
            });
        }
        Ok(())
    }

    /// Tells clients a model attempt failed and what happens next (a retry or a fallback);
    /// the turn goes on.
    pub fn report_retry(&mut self, error: &ProviderError, model: &str, plan: &str) {
        self.frames.push_back(ServerFrame::error(
            "model_retry",
            format!("model {model:?}: {error}; {plan}"),
            None,
        ));
    }

    /// Forgets the partial reply of a failed attempt before the next one, and tells clients
    /// (a `message` frame with the pending message emptied) so streamed text is not doubled.
    pub fn reset_model_call(&mut self, call: &mut ModelCall) {
        call.completion = Completion::default();
        let message = self.reply_message(call, MessageStatus::Pending, false);
        self.frames.push_back(ServerFrame::Message { message });
    }

    /// Completes a model call: stores the reply and queues its tool calls. An incomplete
    /// reply (no finish, no end marker) is handled as [`Thread::fail_model_call`].
    pub fn finish_model_call(&mut self, now: i64, mut call: ModelCall) -> Result<(), ThreadError> {
        if self.summary()?.status == ThreadStatus::Stopped {
            // Stopped while streaming: keep what was said (clients saw it), run nothing.
            let status = if call.completion.text.is_empty() {
                MessageStatus::Failed
            } else {
                MessageStatus::Completed
            };
            let message = self.reply_message(&call, status, false);
            self.store.update_message(&message)?;
            self.frames.push_back(ServerFrame::Message { message });
            return Ok(());
        }
        if let Err(e) = call.completion.validate() {
            return self.fail_model_call(now, call, &e);
        }
        let message = self.reply_message(&call, MessageStatus::Completed, true);
        let message = self.before_create(message);
        self.store.update_message(&message)?;
        self.after_create(&message);
        self.store
            .queue_tool_calls(now, &message.id, &message.tool_calls, CallOrigin::Model)?;
        if !message.tool_calls.is_empty() || !self.rules.stop_on_response {
            // The model reacts to the results (or, without stop_on_response, keeps going
            // until its stop tool or max_steps).
            self.store.set_needs_model(true)?;
        }
        // The message first, so clients know a call before they hear about its status.
        let queued: Vec<ServerFrame> = message
            .tool_calls
            .iter()
            .map(|c| ServerFrame::tool(&c.id, &c.name, "queued"))
            .collect();
        self.frames.push_back(ServerFrame::Message { message });
        self.frames.extend(queued);
        Ok(())
    }

    /// Abandons a model call: the message is kept as `failed`, the thread goes idle with the
    /// error recorded and reported, and stays usable for the next message.
    pub fn fail_model_call(
        &mut self,
        now: i64,
        call: ModelCall,
        error: &ProviderError,
    ) -> Result<(), ThreadError> {
        let message = self.reply_message(&call, MessageStatus::Failed, false);
        self.store.update_message(&message)?;
        self.frames.push_back(ServerFrame::Message { message });
        if self.summary()?.status == ThreadStatus::Stopped {
            // Cut short by a stop: that is what the user asked for, not an error.
            return Ok(());
        }
        self.fail_turn(now, error)
    }

    /// Ends the running turn with an error (reported to clients, kept as `last_error`); the
    /// thread goes idle and the next message starts a new turn.
    pub fn fail_turn(&mut self, now: i64, error: &ProviderError) -> Result<(), ThreadError> {
        let text = error.to_string();
        if self.summary()?.status == ThreadStatus::Running {
            self.store
                .set_status(now, ThreadStatus::Idle, Some(&text))?;
        }
        self.frames
            .push_back(ServerFrame::error(error.code(), text, None));
        self.push_status()?;
        Ok(())
    }

    /// Marks a tool call running; `new_attempt` is false when a parked workflow resumes.
    pub fn start_tool(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        new_attempt: bool,
    ) -> Result<(), ThreadError> {
        self.store.start_tool_call(now, call, new_attempt)?;
        let attempt = call.attempts + i64::from(new_attempt);
        self.frames.push_back(ServerFrame::Tool {
            tool_call_id: call.call.id.clone(),
            name: call.call.name.clone(),
            status: CallStatus::Running.as_str().into(),
            wake_at: None,
            waiting_for: None,
            attempt: Some(attempt.max(1)),
            error: None,
        });
        Ok(())
    }

    /// Parks a call (retrying, sleeping, waiting or rate limited) until its wake time.
    /// `failure` is why the attempt that just ran failed (for `retrying`).
    pub fn suspend_tool(
        &mut self,
        call: &StoredToolCall,
        suspension: &Suspension,
        failure: Option<(i64, &str, &str)>,
    ) -> Result<(), ThreadError> {
        let detail = (!suspension.detail.is_null()).then_some(&suspension.detail);
        let error = failure.map(|(_, _, e)| e);
        self.store.suspend_tool_call(
            &call.call.id,
            suspension.status.as_str(),
            suspension.wake_at,
            detail,
            error,
        )?;
        if let Some((now, outcome, error)) = failure {
            self.store
                .end_attempt(now, &call.call.id, outcome, Some(error))?;
        }
        self.frames.push_back(ServerFrame::Tool {
            tool_call_id: call.call.id.clone(),
            name: call.call.name.clone(),
            status: suspension.status.as_str().into(),
            wake_at: suspension.wake_at,
            waiting_for: detail.cloned(),
            attempt: Some(call.attempts),
            error: error.map(str::to_owned),
        });
        Ok(())
    }

    /// Stores a tool result as a `tool` message and closes the call, atomically.
    pub fn finish_tool(
        &mut self,
        now: i64,
        call: &StoredToolCall,
        result: &CallToolResult,
    ) -> Result<Message, ThreadError> {
        let hooked;
        let result = match self.hooks(0) {
            Some((hooks, ctx)) => {
                let (r, failures) = hooks.after_tool_call(&ctx, &call.call, result.clone());
                self.hook_failures.extend(failures);
                hooked = r;
                &hooked
            }
            None => result,
        };
        let message = Message {
            parts: if result.has_media() {
                result.content.clone()
            } else {
                Vec::new()
            },
            side: Some(self.summary()?.current_side),
            ..Message::tool_result(&call.call, result.to_model_text(), now)
        };
        let message = self.before_create(message);
        self.store.append_message(&message)?;
        self.after_create(&message);
        let status = if result.is_error() {
            CallStatus::Error
        } else {
            CallStatus::Success
        };
        self.store
            .finish_tool_call(now, &call.call.id, status.as_str(), &message.id)?;
        self.store.end_attempt(
            now,
            &call.call.id,
            status.as_str(),
            result.is_error().then_some(message.content.as_str()),
        )?;
        let is_stop_tool = call.origin == CallOrigin::Model
            && self.rules.stop_tool.as_deref() == Some(call.call.name.as_str());
        if is_stop_tool && !result.is_error() {
            let answer = stop_answer(
                &message.content,
                &call.call.arguments,
                self.rules.stop_tool_response_property.as_deref(),
            );
            match self.rules.kind {
                AgentKind::DualAi => self.store.set_ending("stop_tool", Some(&answer))?,
                AgentKind::AiHuman => self.store.set_result(&answer)?,
            }
            // No model call after this; the reply's other calls still run.
            self.store.set_needs_model(false)?;
        }
        self.frames.push_back(ServerFrame::tool(
            &call.call.id,
            &call.call.name,
            status.as_str(),
        ));
        self.frames.push_back(ServerFrame::Message {
            message: message.clone(),
        });
        Ok(message)
    }

    /// A client's decision on a call waiting for approval: approved calls run, rejected ones
    /// get an error result (with `reason`) the model sees. Both happen on the next drive.
    pub fn decide_approval(
        &mut self,
        now: i64,
        call_id: &str,
        approved: bool,
        reason: Option<&str>,
    ) -> Result<(), ThreadError> {
        self.summary()?;
        let Some(call) = self.store.tool_call(call_id)? else {
            return Err(ThreadError::Invalid(format!(
                "no tool call {call_id:?} in this thread"
            )));
        };
        // A pending approval of a finished call (cancelled by a stop) is no longer open.
        let finished = matches!(
            CallStatus::parse(&call.status),
            CallStatus::Success | CallStatus::Error
        );
        if finished || call.approval.as_deref() != Some("pending") {
            return Err(ThreadError::Conflict(format!(
                "tool call {call_id:?} is not waiting for approval (status {})",
                call.status
            )));
        }
        self.store
            .set_approval(call_id, if approved { "approved" } else { "rejected" })?;
        if let Some(reason) = reason.filter(|r| !approved && !r.trim().is_empty()) {
            self.store.set_tool_call_error(call_id, reason)?;
        }
        self.store.wake_tool_call(now, call_id)?;
        Ok(())
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
}

/// Makes a history valid for every provider: each assistant tool call is followed by exactly
/// its result (a missing one becomes an error result saying so), and results whose call is
/// not in the history are dropped.
pub fn repair_history(history: Vec<Message>) -> Vec<Message> {
    let mut results: HashMap<String, Message> = HashMap::new();
    let mut rest = Vec::with_capacity(history.len());
    for m in history {
        match (&m.role, &m.tool_call_id) {
            (Role::Tool, Some(id)) => {
                results.insert(id.clone(), m);
            }
            (Role::Tool, None) => {}
            _ => rest.push(m),
        }
    }
    let mut out = Vec::with_capacity(rest.len() + results.len());
    for m in rest {
        let calls: Vec<ToolCall> = m.tool_calls.clone();
        let created_at = m.created_at;
        out.push(m);
        for c in calls {
            out.push(results.remove(&c.id).unwrap_or_else(|| {
                Message::tool_result(
                    &c,
                    "Error: this tool call was interrupted and has no result.",
                    created_at,
                )
            }));
        }
    }
    out
}

/// The history without the tool calls in `ids` (and without assistant messages left empty).
fn without_calls(history: Vec<Message>, ids: &[String]) -> Vec<Message> {
    if ids.is_empty() {
        return history;
    }
    history
        .into_iter()
        .filter_map(|mut m| {
            if m.tool_calls.is_empty() {
                return Some(m);
            }
            m.tool_calls.retain(|c| !ids.contains(&c.id));
            (m.role != Role::Assistant || !m.tool_calls.is_empty() || !m.content.is_empty())
                .then_some(m)
        })
        .collect()
}

/// A call cut short [`MAX_TOOL_INTERRUPTIONS`] times: it is abandoned, not run again.
fn worn_out(call: &StoredToolCall) -> bool {
    call.interruptions >= MAX_TOOL_INTERRUPTIONS
}

/// The final answer of a stop tool: `property` of its result (when the result is a JSON
/// object holding it), else of its arguments, else the whole result text.
fn stop_answer(result_text: &str, arguments: &str, property: Option<&str>) -> String {
    let pick = |json: &str| -> Option<String> {
        let value = serde_json::from_str::<Value>(json).ok()?;
        match value.get(property?)? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    pick(result_text)
        .or_else(|| pick(arguments))
        .unwrap_or_else(|| result_text.to_owned())
}

/// Shows a dual-AI history from `side`'s seat: its own messages stay `assistant`; the other
/// side's words become `user` messages (named by its label), and the other side's tool calls
/// and results are its own business and are left out.
pub fn view_for_side(history: Vec<Message>, side: Side, other_label: Option<&str>) -> Vec<Message> {
    history
        .into_iter()
        .filter_map(|m| {
            let theirs = m.side.is_some_and(|s| s != side);
            match m.role {
                Role::Assistant if theirs => (!m.content.is_empty()).then(|| Message {
                    role: Role::User,
                    tool_calls: Vec::new(),
                    name: other_label.map(str::to_owned),
                    ..m
                }),
                Role::Tool if theirs => None,
                _ => Some(m),
            }
        })
        .collect()
}
