//! [`FlowState`]: the execution context a tool receives, and [`FlowHost`], the seam through
//! which it reaches the thread's SQLite, its sockets and the platform (secrets, fetch, D1).

use std::rc::Rc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::ToolError;
use super::{BoxFuture, HostError, HttpRequest, HttpResponse, Registry};
use crate::config::AgentConfig;
use crate::engine::durable::Window;
use crate::engine::store::{MessagePage, Order, Side, Store, StoredToolCall, ThreadSummary};
use crate::values::protocol::ServerFrame;
use crate::values::sql::{Row, Sql, SqlValue};

/// What a flow needs from whoever runs it: the Durable Object in the Worker, a test harness on
/// the host. Everything here is called synchronously from a single thread.
pub trait FlowHost {
    /// The thread's SQLite (already migrated).
    fn sql(&self) -> &dyn Sql;
    /// The tools of this Worker (for `queue_tool` validation).
    fn registry(&self) -> &Registry;
    /// The current time, ms since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Sends one frame to every socket of this thread. `text` is what goes on the wire: the
    /// frame serialised once, with its `seq` when the framework logged it (see
    /// [`crate::engine::frame_log`]); `frame` is the same frame as a value, for hosts that look
    /// into it (the test host). A host only sends: numbering and logging happened before.
    fn send_to_sockets(&self, text: &str, frame: &ServerFrame);
    /// The chunks of replies still streaming, kept by this instance of the thread object (see
    /// [`crate::engine::frame_log::LiveChunks`]): one per instance, never shared between
    /// instances, gone when the object restarts.
    fn live_chunks(&self) -> &crate::engine::frame_log::LiveChunks;
    /// A secret binding's value (never log or return it).
    fn secret(&self, name: &str) -> Option<String>;
    /// A plain-text variable binding.
    fn var(&self, name: &str) -> Option<String>;
    /// Resolves after `ms` milliseconds (a tool's timeout; never a durable sleep).
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()>;
    /// Asks the deployment's rate limiter of `tool` for a slot (see [`Window`]): the top-level
    /// runtime and calls nested in another tool both count against it.
    fn acquire_limit(
        &self,
        tool: &str,
        per_minute: u32,
    ) -> BoxFuture<'static, Result<Window, String>>;
    /// Performs an outbound HTTP request.
    fn fetch(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, HostError>>;
    /// Runs a parameterised query on a D1 binding; rows come back as JSON objects.
    fn d1_query(
        &self,
        binding: &str,
        sql: &str,
        params: Vec<SqlValue>,
    ) -> BoxFuture<'static, Result<Vec<Map<String, Value>>, HostError>>;
    /// The platform's environment, for bindings edgent does not wrap (the Worker driver gives
    /// its `worker::Env`; hosts without one give `None`).
    fn env(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// What a tool sees of the agent that called it: a view, not the stored configuration (which
/// holds model settings a tool has no business reading).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentView {
    /// The agent id.
    pub id: String,
    /// The side that is acting.
    pub side: Side,
    /// The name of that side's prompt (for a sub-prompt: the sub-prompt's).
    pub prompt: String,
    /// The tool names the prompt offers the model.
    pub tools: Vec<String>,
    /// The estimated tokens of history its model is sent (`max_history_tokens`).
    pub history_budget: u64,
}

impl AgentView {
    pub(crate) fn of(config: &AgentConfig) -> Self {
        AgentView {
            id: config.agent.id.clone(),
            side: config.side,
            prompt: config.prompt.name.clone(),
            tools: config.prompt.tools.clone(),
            history_budget: u64::from(
                config
                    .model()
                    .and_then(|m| m.max_history_tokens)
                    .unwrap_or(crate::config::DEFAULT_MAX_HISTORY_TOKENS),
            ),
        }
    }
}

/// The execution context of a tool call: who is calling, the thread's state and handles to
/// its storage, queue and event stream.
///
/// Cheap to clone (handles share one host). Fields are a snapshot taken when the call
/// started; the handles read and write live state.
#[derive(Clone)]
pub struct FlowState {
    /// The thread (= Durable Object) id.
    pub thread_id: String,
    /// The thread a client created at the top of this one's chain of agent tools: this
    /// thread's id, unless it is a child thread (an agent called as a tool).
    pub root_thread_id: String,
    /// This execution's id, unique per call (`<thread>:<call>`, and `/<call>` for each level
    /// of a call made inside a sub-prompt), the same for every attempt and wake-up of it.
    pub flow_id: String,
    /// The agent and side that is acting: its id, prompt and offered tools.
    pub agent: AgentView,
    /// The side whose turn it is.
    pub current_side: Side,
    /// Completed turns.
    pub turn_count: i64,
    /// Whether the thread was stopped.
    pub stopped: bool,
    /// Who stopped it.
    pub stopped_by: Option<String>,
    /// The thread's messages, paged from SQL.
    pub message_history: MessageHistory,
    /// The thread's key/value context (JSON values in SQLite).
    pub context: Context,
    /// The thread's SQLite, for the tool's own tables (parameterised statements only).
    pub storage: Storage,
    /// The tool queue.
    pub queue: ToolQueue,
    /// Events to every socket of the thread.
    pub stream: EventStream,
    /// 0 for the top-level flow.
    pub depth: u32,
    /// The message that opened this flow (sub-flows), if any.
    pub parent_message_id: Option<String>,
    /// The tool call being executed.
    pub tool_call_id: String,
    /// When the call started, ms since the Unix epoch.
    pub now_ms: i64,
    /// Runtime context from the caller (which account or connection to use): a JSON object
    /// kept apart from the model-visible arguments. Empty unless the prompt's
    /// `tool_bindings` or the `queue_tool` caller set it.
    pub bindings: Map<String, Value>,
    pub(crate) run: Rc<super::RunState>,
    /// How many `call_tool`s deep this flow runs (0: the call the engine started).
    pub(crate) call_nesting: u32,
    root: Option<Rc<FlowState>>,
    host: Rc<dyn FlowHost>,
}

impl std::fmt::Debug for FlowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowState")
            .field("thread_id", &self.thread_id)
            .field("flow_id", &self.flow_id)
            .field("agent", &self.agent.id)
            .field("current_side", &self.current_side)
            .field("turn_count", &self.turn_count)
            .field("depth", &self.depth)
            .field("tool_call_id", &self.tool_call_id)
            .finish_non_exhaustive()
    }
}

impl FlowState {
    /// The top-level flow of a thread, for running `tool_call_id`.
    pub fn top_level(
        host: Rc<dyn FlowHost>,
        thread: &ThreadSummary,
        agent: &AgentConfig,
        tool_call_id: &str,
    ) -> Self {
        FlowState {
            thread_id: thread.thread_id.clone(),
            root_thread_id: thread
                .root_thread_id
                .clone()
                .unwrap_or_else(|| thread.thread_id.clone()),
            flow_id: format!("{}:{tool_call_id}", thread.thread_id),
            agent: AgentView::of(agent),
            current_side: thread.current_side,
            turn_count: thread.turn_count,
            stopped: thread.stopped_by.is_some(),
            stopped_by: thread.stopped_by.clone(),
            message_history: MessageHistory(host.clone()),
            context: Context(host.clone()),
            storage: Storage(host.clone()),
            queue: ToolQueue(host.clone()),
            stream: EventStream(host.clone()),
            depth: 0,
            parent_message_id: None,
            tool_call_id: tool_call_id.to_owned(),
            now_ms: host.now_ms(),
            bindings: Map::new(),
            run: Rc::default(),
            call_nesting: 0,
            root: None,
            host,
        }
    }

    /// A flow for `tool_call_id`, made by a sub-prompt that the call `self` runs: depth one
    /// more, its `root` this flow's root, its `flow_id` under this one's.
    pub fn sub_flow(
        &self,
        tool_call_id: &str,
        parent_message_id: &str,
        agent: &AgentConfig,
    ) -> Self {
        let mut flow = self.clone();
        flow.flow_id = format!("{}/{tool_call_id}", self.flow_id);
        flow.agent = AgentView::of(agent);
        flow.depth = self.depth + 1;
        flow.parent_message_id = Some(parent_message_id.to_owned());
        flow.tool_call_id = tool_call_id.to_owned();
        flow.bindings = Map::new();
        flow.run = Rc::default();
        flow.call_nesting = 0;
        flow.root = Some(Rc::new(self.root().clone()));
        flow
    }

    /// The conversation as the model is sent it, oldest first: the newest top-level messages
    /// that fit the agent's history budget (after the summary in use when the thread
    /// compacts), calls and results paired; the seed's message context. A `dual_ai` side's
    /// view, history hooks and still-parked calls are not applied.
    pub fn model_messages(&self) -> Result<Vec<crate::values::message::Message>, ToolError> {
        self.message_history.model_view(self.agent.history_budget)
    }

    /// The same flow with the caller's runtime bindings.
    pub fn with_bindings(mut self, bindings: Map<String, Value>) -> Self {
        self.bindings = bindings;
        self
    }

    /// The state of this run (for [`super::run_until_suspended`]).
    pub fn run_state(&self) -> &Rc<super::RunState> {
        &self.run
    }

    /// The root flow (this one at the top level): where `queue_tool` queues.
    pub fn root(&self) -> &FlowState {
        self.root.as_deref().unwrap_or(self)
    }

    /// Makes a schedule on this thread: `flow.schedule(&ScheduleSpec::cron("0 18 * * *",
    /// "Write today's summary"))`. Same as [`super::schedule`].
    pub fn schedule(
        &self,
        spec: &super::ScheduleSpec,
    ) -> Result<super::Schedule, super::ToolError> {
        super::schedule(self, spec)
    }

    /// The host running this flow.
    pub fn host(&self) -> &Rc<dyn FlowHost> {
        &self.host
    }

    /// A secret's value (`wrangler secret put NAME`, `.dev.vars` locally).
    pub fn secret(&self, name: &str) -> Option<String> {
        let value = self.host.secret(name)?;
        // Remembered by this run, which removes it from its result, error and recorded step
        // values (a nested call's run does the same for its own): see `RunState::note_secret`.
        self.run.note_secret(&value);
        Some(value)
    }

    /// A plain variable (`[vars]` in wrangler.toml).
    pub fn var(&self, name: &str) -> Option<String> {
        self.host.var(name)
    }

    /// Sends an HTTP request (timeouts and network failures are errors, any status is a
    /// response).
    pub async fn fetch(&self, request: HttpRequest) -> Result<HttpResponse, ToolError> {
        self.host.fetch(request).await.map_err(ToolError::from)
    }

    /// Runs a parameterised query on the D1 database bound as `binding`.
    pub async fn d1_query(
        &self,
        binding: &str,
        sql: &str,
        params: &[SqlValue],
    ) -> Result<Vec<Map<String, Value>>, ToolError> {
        self.host
            .d1_query(binding, sql, params.to_vec())
            .await
            .map_err(ToolError::from)
    }

    /// The platform's environment, for bindings edgent does not wrap: on Cloudflare,
    /// `flow.env::<worker::Env>()` is the Worker's `Env` (the app depends on `worker` itself).
    /// `None` when the host has no environment of that type (host tests).
    pub fn env<T: 'static>(&self) -> Option<&T> {
        self.host.env()?.downcast_ref()
    }
}

/// The thread's messages, read a page at a time.
#[derive(Clone)]
pub struct MessageHistory(Rc<dyn FlowHost>);

impl MessageHistory {
    /// A page of top-level messages; silent ones only with `include_silent`. `limit` is
    /// clamped to 1..=200, as for clients.
    pub fn page(
        &self,
        limit: u32,
        offset: u32,
        order: Order,
        include_silent: bool,
    ) -> Result<MessagePage, ToolError> {
        let limit = limit.clamp(1, crate::api::MAX_PAGE);
        Ok(Store::new(self.0.sql()).messages_page(limit, offset, order, include_silent)?)
    }

    /// The newest top-level messages a model sees within `budget` estimated tokens (after the
    /// summary in use, when there is one), calls and results paired, oldest first.
    pub fn model_view(
        &self,
        budget: u64,
    ) -> Result<Vec<crate::values::message::Message>, ToolError> {
        let history = Store::new(self.0.sql()).summarised_history(budget)?;
        Ok(crate::engine::thread::repair_history(history))
    }
}

/// The thread's key/value context: JSON values by key, stored in the thread's SQLite.
#[derive(Clone)]
pub struct Context(Rc<dyn FlowHost>);

impl Context {
    /// One value.
    pub fn get(&self, key: &str) -> Result<Option<Value>, ToolError> {
        Ok(Store::new(self.0.sql()).context_get(key)?)
    }

    /// Sets a value.
    pub fn set(&self, key: &str, value: &impl Serialize) -> Result<(), ToolError> {
        let value = serde_json::to_value(value)?;
        Ok(Store::new(self.0.sql()).context_set(self.0.now_ms(), key, &value)?)
    }

    /// Removes a value (no error if absent).
    pub fn remove(&self, key: &str) -> Result<(), ToolError> {
        Ok(Store::new(self.0.sql()).context_remove(key)?)
    }

    /// Every key and value.
    pub fn all(&self) -> Result<Map<String, Value>, ToolError> {
        Ok(Store::new(self.0.sql()).context_all()?)
    }
}

/// The thread's SQLite, for a tool's own tables. Name them with a prefix of your own (not
/// `thread`, `messages`, `tool_calls`, `context` or `edgent_*`) and always bind values.
#[derive(Clone)]
pub struct Storage(Rc<dyn FlowHost>);

impl Storage {
    /// Runs one statement with `?` placeholders bound to `params`.
    pub fn exec(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Row>, ToolError> {
        Ok(self.0.sql().exec(statement, params)?)
    }
}

/// The thread's tool queue.
#[derive(Clone)]
pub struct ToolQueue(Rc<dyn FlowHost>);

impl ToolQueue {
    /// Calls waiting to run (and the one running), in run order.
    pub fn pending(&self) -> Result<Vec<StoredToolCall>, ToolError> {
        Ok(Store::new(self.0.sql()).pending_tool_calls()?)
    }

    /// Whether a tool call is running now.
    pub fn is_handling(&self) -> Result<bool, ToolError> {
        Ok(self
            .pending()?
            .iter()
            .any(|c| c.status == crate::values::CallStatus::Running))
    }
}

/// Events to every socket of the thread (never part of the conversation).
#[derive(Clone)]
pub struct EventStream(Rc<dyn FlowHost>);

impl EventStream {
    /// Sends an `event` frame, logged with its `seq` so a socket that reconnects gets it again;
    /// same as [`super::emit_thread_event`].
    pub fn emit(&self, event: &str, data: &impl Serialize) -> Result<(), ToolError> {
        let frame = self.frame(event, data)?;
        // A frame that could not be logged is still sent (without `seq`); the tool goes on.
        let _ = broadcast(&*self.0, vec![frame]);
        Ok(())
    }

    /// Sends an `event` frame to the sockets open now only: not logged, no `seq`, never
    /// replayed (progress ticks, typing indicators: what is stale by the time anyone
    /// reconnects). Same as [`super::emit_ephemeral_event`].
    pub fn emit_ephemeral(&self, event: &str, data: &impl Serialize) -> Result<(), ToolError> {
        let frame = self.frame(event, data)?;
        self.0.send_to_sockets(&frame.to_json(), &frame);
        Ok(())
    }

    fn frame(&self, event: &str, data: &impl Serialize) -> Result<ServerFrame, ToolError> {
        ServerFrame::event(event, serde_json::to_value(data)?, self.0.now_ms())
            .map_err(|why| ToolError::new(why.to_string()))
    }
}

/// Sends `frames` to every socket of the thread the way every host does: numbered and written
/// to the frame log first (one insert), then sent as the logged text. Frames that could not be
/// logged are sent all the same, without `seq`; the error says why.
pub(crate) fn broadcast(
    host: &dyn FlowHost,
    frames: Vec<ServerFrame>,
) -> Result<(), crate::values::sql::SqlError> {
    if frames.is_empty() {
        return Ok(());
    }
    let logged = crate::engine::frame_log::append(host.live_chunks(), host.sql(), &frames);
    for (text, frame) in logged.texts.iter().zip(&frames) {
        host.send_to_sockets(text, frame);
    }
    logged.error.map_or(Ok(()), Err)
}
