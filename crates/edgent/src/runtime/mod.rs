//! The thread runtime: the async loop that feeds the engine its inputs and performs its
//! actions, written once against a [`Platform`] (the I/O a host gives it), so the Worker driver
//! only implements the platform and routes requests.
//!
//! This is the layer `quinn` is to `quinn-proto`: the engine ([`crate::engine`]) decides and
//! does no I/O; the runtime awaits what the engine asks for (model streams, tool runs, the
//! deployment limiter, child threads, the alarm) through the platform, and hands each outcome
//! back to the engine. Nothing here decides what a thread's state becomes.
//!
//! Work starts in the invocation that stored it (`ThreadRuntime::start_work`): the watchdog
//! alarm is armed first, then the thread is driven until it is idle, without waiting for the
//! alarm to fire. The watchdog stays armed while a turn runs, so if the host dies mid-turn the
//! alarm resumes the loop from what SQLite says; the alarm also wakes parked calls when due.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use serde_json::Value;

use crate::api::ApiError;
use crate::config::{AgentConfig, ModelConfig};
use crate::engine::store::{Side, ThreadCache};
use crate::engine::thread::{Thread, ThreadError};
use crate::engine::wake::{watchdog_due, KnownAlarm};
use crate::llm::stream::{ProviderError, StreamEvent};
use crate::tool::{BoxFuture, FlowHost};

mod access;
pub mod admin;
pub mod agents;
mod chain;
mod compaction;
mod config_check;
mod delegate;
mod mcp;
mod ops;
pub mod recommend;
pub mod selection;
mod stream_sink;
pub mod thread_index;
mod tools;
mod turn;

pub use delegate::ChildError;
pub use selection::Embedder;
pub use stream_sink::CHUNK_WINDOW_MS;

/// The I/O of the host a thread lives in (the Worker driver's Durable Object, or a test
/// host): what tools see ([`FlowHost`]), the embedding requests of tool selection
/// ([`Embedder`]) and what the runtime itself needs.
pub trait Platform: FlowHost + Embedder {
    /// Arms the thread's one alarm to fire `in_ms` from now.
    fn set_alarm(&self, in_ms: i64) -> BoxFuture<'static, Result<(), String>>;
    /// Removes the thread's alarm.
    fn delete_alarm(&self) -> BoxFuture<'static, Result<(), String>>;
    /// Runs `work` in the background, after the current handler has answered.
    fn spawn(&self, work: BoxFuture<'static, ()>);
    /// The database holding the deployment's thread index (D1 in the Worker), written in the
    /// background after the thread changes (see [`thread_index`]).
    fn index_db(&self) -> Rc<dyn ConfigDb>;
    /// Logs a fault for the operator (never shown to clients).
    fn log_error(&self, message: &str);
    /// A random number in 0..1 for the retry backoff's jitter (tests fix it).
    fn jitter(&self) -> f64 {
        crate::values::ids::random_unit()
    }
    /// The agent's configuration for `side` when the host holds a fresh copy: no I/O, so a
    /// caller that gets one has not yielded.
    fn fresh_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>>;
    /// The agent's configuration for `side` as the host last loaded it, however old (no
    /// I/O): the turn loop plans a step with it while [`Platform::load_agent`] confirms it,
    /// and a model request waits for that answer only before it reads the reply (see
    /// `runtime::config_check`). When `load_agent` finds the same configuration it answers this
    /// same `Rc`.
    fn cached_agent(&self, agent_id: &str, side: Side) -> Option<Rc<AgentConfig>>;
    /// `config` in a form the thread keeps (text in the host's own encoding), with the
    /// version stamp it was read at, while it is the host's configuration of its agent and
    /// side (none otherwise).
    fn agent_copy(&self, config: &Rc<AgentConfig>) -> Option<(i64, Rc<str>)>;
    /// Gives the host a copy the thread kept ([`Platform::agent_copy`]'s, read at `version`)
    /// when it holds none: the configuration it resolves to, which is then
    /// [`Platform::cached_agent`]'s, past its freshness. `None` when it does not resolve.
    fn adopt_agent_copy(
        &self,
        agent_id: &str,
        side: Side,
        version: i64,
        copy: &str,
    ) -> Option<Rc<AgentConfig>>;
    /// Loads the agent's configuration for `side`. The outer error is a storage fault, the
    /// inner one what the configuration lacks; both are shown as the turn's failure.
    fn load_agent(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<Result<Rc<AgentConfig>, String>, String>>;
    /// Whether an agent with this id exists (it may exist with a configuration that does not
    /// resolve). When it resolves, its side A is left where [`Platform::load_agent`] finds it
    /// without another round trip.
    fn agent_exists(&self, agent_id: &str) -> BoxFuture<'static, Result<bool, String>>;
    /// Whether the agent configures a prompt for `side`.
    fn agent_has_side(
        &self,
        agent_id: &str,
        side: Side,
    ) -> BoxFuture<'static, Result<bool, String>>;
    /// Sends one model attempt (the provider's request `body`, JSON text) and opens its
    /// reply.
    fn open_model(
        &self,
        model: &ModelConfig,
        body: String,
    ) -> BoxFuture<'static, Result<Box<dyn ModelReply>, ProviderError>>;
    /// A request to another thread's object (a child conversation): its status and JSON
    /// answer. The error is the client-facing text (the cause is logged by the platform).
    fn ask_thread(
        &self,
        thread_id: &str,
        method: &'static str,
        path: &str,
        body: Option<Value>,
    ) -> BoxFuture<'static, Result<(u16, Value), String>>;
}

/// The configuration database (D1 in the Worker): parameterised statements run as one batch
/// (one round trip, one transaction), each answering its rows as JSON objects.
pub trait ConfigDb {
    /// Runs `statements` in order, atomically; the rows of each.
    fn batch(
        &self,
        statements: Vec<(String, Vec<crate::values::sql::SqlValue>)>,
    ) -> BoxFuture<'static, Result<Vec<Vec<Value>>, String>>;
    /// Logs a fault for the operator (never shown to clients).
    fn log_error(&self, message: &str);
}

/// An open model reply: stream events as they arrive.
pub trait ModelReply {
    /// The next batch of events; `Ok(None)` once the reply has ended properly.
    fn next_events(&mut self) -> BoxFuture<'_, Result<Option<Vec<StreamEvent>>, ProviderError>>;
    /// Stops reading (on stop or timeout) so the connection is not left open.
    fn cancel(&mut self);
}

/// A reply that arrived whole (a platform binding that does not stream, a scripted reply):
/// its events in one batch.
#[derive(Debug)]
pub struct WholeReply(Option<Vec<StreamEvent>>);

impl WholeReply {
    /// The reply made of `events`.
    pub fn new(events: Vec<StreamEvent>) -> Self {
        WholeReply(Some(events))
    }
}

impl ModelReply for WholeReply {
    fn next_events(&mut self) -> BoxFuture<'_, Result<Option<Vec<StreamEvent>>, ProviderError>> {
        let events = self.0.take();
        Box::pin(async move { Ok(events) })
    }

    fn cancel(&mut self) {}
}

/// One thread's runtime: what a host keeps per thread object between invocations.
pub struct ThreadRuntime {
    /// This runtime, for the background work it spawns itself (the index writes).
    this: Weak<ThreadRuntime>,
    platform: Rc<dyn Platform>,
    /// The same platform, as tools see it.
    tool_host: Rc<dyn FlowHost>,
    /// True while this instance runs the turn loop (a second alarm must not start another).
    driving: Cell<bool>,
    /// Set by `start_work` when it left stored work to the running loop, which checks it
    /// (instead of reading storage) before it stops driving.
    work_arrived: Cell<bool>,
    /// What this instance remembers between its views of the thread: the model history it
    /// read last, the hook config, whether a reply may be pending, whether it stopped the
    /// thread (see [`ThreadCache`]). Replaced when the thread is deleted.
    cache: RefCell<Rc<ThreadCache>>,
    /// The prompt and hook names this instance last recorded in the thread row (a write
    /// skipped when they did not change).
    hooks_recorded: RefCell<Option<(String, Vec<String>)>>,
    /// The configuration copies this instance knows the thread keeps (agent, side, version,
    /// when kept): a write skipped while it did not change (see `config_check`).
    copy_kept: RefCell<Vec<(String, Side, i64, i64)>>,
    /// What this instance knows of the thread's alarm: neither the loop nor the next handler
    /// sets the watchdog again while more than half of it is left, and an alarm that fired
    /// is not deleted.
    alarm: Cell<KnownAlarm>,
    /// How many changes of the alarm this instance has issued (see `arm_watchdog`).
    alarm_change: Cell<u64>,
    /// Set by `stop` so a streaming model call is cut short.
    stop_requested: Cell<bool>,
    /// The schema was checked (and migrated) by this instance: later views skip the check.
    schema_ready: Cell<bool>,
    /// This instance has looked for work left by a previous one (see
    /// [`ThreadRuntime::on_contact`]).
    contacted: Cell<bool>,
    /// What this instance knows of the thread's row in the thread index.
    index: thread_index::IndexMirror,
    /// The thread row as the operation that stored work left it (a user message), for the
    /// turn that work starts: its first step then reads no row. Every other view of the
    /// thread drops it (`open`), and it is only kept while no loop drives (a running loop
    /// writes through its own view), so it is never older than the last write.
    handed_row: Cell<Option<(crate::engine::store::ThreadSummary, i64)>>,
}

impl ThreadRuntime {
    /// A runtime over `platform` (one per thread object instance).
    pub fn new<P: Platform + 'static>(platform: Rc<P>) -> Rc<Self> {
        Rc::new_cyclic(|this| ThreadRuntime {
            this: this.clone(),
            tool_host: platform.clone(),
            platform,
            driving: Cell::new(false),
            work_arrived: Cell::new(false),
            cache: RefCell::default(),
            hooks_recorded: RefCell::new(None),
            copy_kept: RefCell::default(),
            alarm: Cell::new(KnownAlarm::Unknown),
            alarm_change: Cell::new(0),
            stop_requested: Cell::new(false),
            schema_ready: Cell::new(false),
            contacted: Cell::new(false),
            index: thread_index::IndexMirror::default(),
            handed_row: Cell::new(None),
        })
    }

    /// Any request or socket message reached this instance. The first one of an instance looks
    /// for work a previous instance left (a turn cut short by an eviction, a deploy or a
    /// crash: a running thread owed a model call, an interrupted tool call) and resumes it at
    /// once, instead of when the watchdog alarm fires. One check per instance; an instance
    /// already driving needs none.
    pub fn on_contact(self: &Rc<Self>) {
        if self.contacted.replace(true) || self.driving.get() {
            return;
        }
        let Ok(thread) = self.open(self.platform.sql(), false) else {
            return; // no thread here (or storage fails: the next request reports it)
        };
        if thread.has_work(self.now()).unwrap_or(false) {
            let this = Rc::clone(self);
            self.platform
                .spawn(Box::pin(async move { this.start_work().await }));
        }
        drop(thread);
        self.retry_dirty_index();
    }

    /// The alarm fired: drives the thread until it is idle or waiting.
    pub async fn alarm(&self) {
        // A fired alarm is gone (the platform removes it once this returns): the loop arms
        // the watchdog again before a step, and deletes nothing. An arming still on its way
        // is not taken for a watchdog (it may be the alarm that fired).
        self.alarm_changes();
        self.alarm.set(KnownAlarm::Unset);
        self.drive().await;
    }

    /// What a socket is sent when it connects: the thread's id and its status frame.
    pub fn greeting(&self) -> Result<(String, crate::values::protocol::ServerFrame), ApiError> {
        let sql = self.platform.sql();
        self.open(sql, false)
            .and_then(|t| Ok((t.summary()?.thread_id, t.status_frame()?)))
            .map_err(|e| self.thread_error(&e))
    }

    /// What a socket that saw every frame up to `after` is sent when it (re)connects or asks
    /// with the rpc `resume`: the newest seq and the logged frames after `after`, or a reset
    /// (`None`: a fresh socket, sent nothing). Synchronous: the caller sends the frames before
    /// anything else can be broadcast.
    pub fn replay(&self, after: Option<i64>) -> Result<crate::engine::frame_log::Replay, ApiError> {
        crate::engine::frame_log::replay(self.tool_host.live_chunks(), self.platform.sql(), after)
            .map_err(|e| self.logged("could not read the frame log", e))
    }

    /// Whether the thread is writing an answer (a turn is running, parked calls included).
    pub fn answer_in_progress(&self) -> Result<bool, ApiError> {
        let status = self.with_thread(|t| Ok(t.summary()?.status))?;
        Ok(status == crate::engine::store::ThreadStatus::Running)
    }

    /// The frames of the answer in progress, from its start (the AI SDK's resume replays the
    /// whole answer), or `None` when no answer is being written.
    pub fn answer_replay(&self) -> Result<Option<crate::engine::frame_log::Replay>, ApiError> {
        if !self.answer_in_progress()? {
            return Ok(None);
        }
        let sql = self.platform.sql();
        let start = crate::engine::frame_log::answer_start(sql)
            .map_err(|e| self.logged("could not read the frame log", e))?;
        self.replay(Some(start.map_or(0, |seq| seq - 1))).map(Some)
    }

    fn now(&self) -> i64 {
        self.platform.now_ms()
    }

    /// The API error for a thread error (a storage fault is logged, not shown).
    fn thread_error(&self, e: &ThreadError) -> ApiError {
        match e {
            ThreadError::NotFound => ApiError::not_found("thread not found"),
            ThreadError::AlreadyExists => ApiError::new(409, "conflict", "thread already exists"),
            ThreadError::Stopped => ApiError::new(409, "thread_stopped", "the thread is stopped"),
            ThreadError::UnknownTool(why) => ApiError::new(400, "unknown_tool", why.clone()),
            ThreadError::InvalidArguments(why) => {
                ApiError::new(400, "invalid_arguments", why.clone())
            }
            ThreadError::Invalid(why) => ApiError::invalid(why.clone()),
            ThreadError::Conflict(why) => ApiError::new(409, "conflict", why.clone()),
            ThreadError::Missing(why) => ApiError::not_found(why.clone()),
            ThreadError::Sql(e) => {
                self.platform
                    .log_error(&format!("thread storage error: {e}"));
                ApiError::internal("thread storage error")
            }
        }
    }

    /// A 500 whose cause goes to the log only.
    fn logged(&self, what: &str, cause: impl std::fmt::Display) -> ApiError {
        self.platform.log_error(&format!("{what}: {cause}"));
        ApiError::internal(what)
    }

    /// Runs `f` against the thread (404 if this object holds none) and broadcasts the frames
    /// it produced.
    fn with_thread<T>(
        &self,
        f: impl FnOnce(&mut Thread<'_>) -> Result<T, ThreadError>,
    ) -> Result<T, ApiError> {
        self.with_opened(false, f)
    }

    fn with_opened<T>(
        &self,
        create_schema: bool,
        f: impl FnOnce(&mut Thread<'_>) -> Result<T, ThreadError>,
    ) -> Result<T, ApiError> {
        let mut thread = self
            .open(self.platform.sql(), create_schema)
            .map_err(|e| self.thread_error(&e))?;
        let out = f(&mut thread).map_err(|e| self.thread_error(&e));
        self.flush(&mut thread);
        out
    }

    /// A thread view. Only the first open of this instance checks the schema: with
    /// `create_schema` it creates or migrates it, without it an object that never held a
    /// thread answers `NotFound` and stays untouched.
    fn open<'s>(
        &self,
        sql: &'s dyn crate::values::sql::Sql,
        create_schema: bool,
    ) -> Result<Thread<'s>, ThreadError> {
        // Another view may write: a row handed to the next turn is no longer known to hold.
        self.handed_row.take();
        let thread = if self.schema_ready.get() {
            Thread::open_migrated(sql)
        } else if create_schema {
            Thread::open(sql)?
        } else {
            Thread::open_existing(sql)?
        };
        self.schema_ready.set(true);
        Ok(thread.with_cache(self.cache.borrow().clone()))
    }

    /// Keeps the row `thread`'s last write returned for the turn the stored work starts
    /// (see `handed_row`), unless a loop is driving.
    fn hand_row_to_turn(&self, thread: &Thread<'_>) {
        let row = thread.take_work_row();
        if !self.driving.get() {
            self.handed_row.set(row);
        }
    }

    /// Broadcasts the frames the engine produced (numbered and logged first, in one insert);
    /// a failing hook is skipped (its input is used) and logged, never shown to users.
    fn flush(&self, thread: &mut Thread<'_>) {
        let frames: Vec<_> = std::iter::from_fn(|| thread.poll_frame()).collect();
        let now = self.now();
        let index_changed = frames.iter().fold(false, |changed, frame| {
            self.index.note(frame, now) | changed
        });
        if let Err(e) = crate::tool::broadcast(&*self.tool_host, frames) {
            self.platform
                .log_error(&format!("frames sent without seq, not logged: {e}"));
        }
        if let Some(e) = self.tool_host.live_chunks().take_refusal() {
            self.platform.log_error(&format!(
                "reserving seqs for streamed chunks failed, so this instance logs every chunk: {e}"
            ));
        }
        if index_changed {
            self.schedule_index_write();
        }
        for failure in thread.take_hook_failures() {
            self.platform.log_error(&failure.to_string());
        }
    }

    /// Starts the work a handler just stored, in this invocation: makes sure the watchdog is
    /// armed first (so a crash from here on is resumed by the alarm), then drives the thread
    /// once the handler has answered. A watchdog the last turn left with more than half of it
    /// to run is already there: a turn that follows another at once writes no alarm. A loop
    /// already running in this instance sees the work itself (it reads storage before every
    /// step and again before it stops).
    async fn start_work(self: &Rc<Self>) {
        if watchdog_due(self.alarm.get(), self.now()) {
            if let Err(e) = self.arm_watchdog().await {
                self.platform
                    .log_error(&format!("could not arm the watchdog: {e}"));
            }
        }
        if self.driving.get() {
            self.work_arrived.set(true);
            return;
        }
        let this = Rc::clone(self);
        self.platform
            .spawn(Box::pin(async move { this.drive().await }));
    }
}
